"""One worker process of :func:`protoref.torch.rpc_repro.run_program` (``python -m``).

Reads its rank, world, port, program and :class:`~protoref.torch.rpc_repro.FaultPlan` from the
``PROTOREF_RPC_WORKER`` environment variable, joins the world on FAULTY_TENSORPIPE with its own
row of the plan, and on rank 0 runs the program and prints one ``OBSERVED {json}`` line. It
leaves with ``os._exit``: a program that left torch hung (the symptom under test) would make a
graceful exit wait for ever; the parent kills the other ranks.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from typing import Any

from protoref.torch.autograd_replay_programs import PROGRAMS as AUTOGRAD_REPLAYS
from protoref.torch.rpc_programs import PROGRAMS
from protoref.torch.rpc_repro import FaultPlan
from protoref.torch.rref_replay_programs import PROGRAMS as RREF_REPLAYS

SERVE_SECONDS = 600.0  # a serving rank outlives any program; the parent kills it


def main() -> int:
    cfg = json.loads(os.environ["PROTOREF_RPC_WORKER"])
    rank, plan = int(cfg["rank"]), FaultPlan.model_validate(cfg["plan"])
    # torch is the optional [torch] extra, untyped here (Any)
    rpc: Any = importlib.import_module("torch.distributed.rpc")
    testing: Any = importlib.import_module("torch.distributed.rpc._testing")
    options = testing.FaultyTensorPipeRpcBackendOptions(
        # the program's timing: a callee with one RPC thread handles its requests one by one
        num_worker_threads=int(plan.knobs.get("callee_threads", 8)) if rank else 8,
        rpc_timeout=plan.knobs.get("rpc_default_timeout", 30.0),
        init_method=f"tcp://127.0.0.1:{cfg['port']}",
        messages_to_fail=plan.fails.get(rank, []),
        messages_to_delay=plan.delays.get(rank, {}),
        num_fail_sends=plan.num_fail_sends,
    )
    rpc.init_rpc(
        f"w{rank}",
        rank=rank,
        world_size=int(cfg["world"]),
        backend=rpc.backend_registry.BackendType.FAULTY_TENSORPIPE,
        rpc_backend_options=options,
    )
    if rank != 0:
        time.sleep(SERVE_SECONDS)
        os._exit(0)
    facts = (PROGRAMS | RREF_REPLAYS | AUTOGRAD_REPLAYS)[cfg["program"]](dict(plan.knobs))
    print("OBSERVED " + json.dumps(facts), flush=True)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
