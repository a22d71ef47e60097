"""A torchrun worker to try the backend with (README): gloo, one all-reduce, one line printed.

    torchrun --rdzv-backend=protoref --rdzv-endpoint=file:rdzv-job --rdzv-id=job \\
        --nnodes=1:2 --nproc-per-node=2 --rdzv-conf=last_call_timeout=5 -m protoref.torch.demo

Every worker prints its rank, the world size, the round's master address and the all-reduced sum
of ``rank + 1`` over the world (``world * (world + 1) / 2`` when every rank took part).
"""

from __future__ import annotations

import importlib
import os
from typing import Any


def main() -> int:
    torch: Any = importlib.import_module("torch")
    dist: Any = importlib.import_module("torch.distributed")
    dist.init_process_group("gloo")
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        value = torch.tensor([float(rank + 1)])
        dist.all_reduce(value)
        print(
            f"rank {rank} of {world} (node rank {os.environ.get('GROUP_RANK', '?')}, "
            f"master {os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}): "
            f"all-reduced sum {int(value.item())}, expected {world * (world + 1) // 2}",
            flush=True,
        )
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
