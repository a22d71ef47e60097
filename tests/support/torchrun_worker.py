"""A torchrun worker for the torchrun backend's tests: gloo, one all-reduce, a result line.

Environment (set by the test on a torchrun agent, which passes it to its workers):
``PROTOREF_TEST_OUT`` a folder for one JSON line per worker run;
``PROTOREF_TEST_FAIL=1`` exit 1 at once (before importing torch) on the first attempt;
``PROTOREF_TEST_HOLD=DIR`` after the all-reduce stay up (until the agent stops the worker)
unless the job is down to one node and ``DIR/release`` exists.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

HOLD_LIMIT = 300.0  # a held worker gives up after this long (exit 3: the test then fails)


def main() -> int:
    env = os.environ
    restart = int(env["TORCHELASTIC_RESTART_COUNT"])
    if env.get("PROTOREF_TEST_FAIL") == "1" and restart == 0:
        return 1  # fails at once, before any collective
    import torch  # noqa: PLC0415 - after the quick failure above
    import torch.distributed as dist  # noqa: PLC0415

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    total = torch.tensor([rank + 1])
    dist.all_reduce(total)
    result = {
        "pid": os.getpid(),
        "rank": rank,
        "world": world,
        "env_rank": int(env["RANK"]),
        "env_world": int(env["WORLD_SIZE"]),
        "group_rank": int(env["GROUP_RANK"]),
        "group_world": int(env["GROUP_WORLD_SIZE"]),
        "restart": restart,
        "sum": int(total.item()),
        "master": f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}",
        "agent_store": env.get("TORCHELASTIC_USE_AGENT_STORE"),
        "tag": env.get("PROTOREF_TEST_TAG", ""),
    }
    out = Path(env["PROTOREF_TEST_OUT"]) / f"worker-{os.getpid()}.json"
    out.write_text(json.dumps(result) + "\n", encoding="utf-8")
    hold = env.get("PROTOREF_TEST_HOLD")
    if hold:
        end = time.monotonic() + HOLD_LIMIT
        while world > 1 or not (Path(hold) / "release").exists():
            if time.monotonic() > end:
                return 3
            time.sleep(0.1)  # the agent stops this worker when the group changes
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
