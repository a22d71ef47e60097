"""One worker process of a session: ``python -m protoref.torch.rpc.worker ...``.

Starts torch's RPC on the FAULTY_TENSORPIPE agent with the session's fault plan, lets worker 0
conduct the scenarios, calls rpc.shutdown() (graceful) once worker 0 says it is done, logs
``ShutdownDone`` and writes its events to ``<out>/<name>.jsonl`` (and what ran, on worker 0,
to ``<out>/ran.json``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from protoref.torch.rpc.conductor import Conductor

__all__ = ["main"]

#: seconds a worker waits for the conductor before it gives up
CONDUCT_TIMEOUT = 300.0
#: seconds an autograd follower waits after the shutdown barrier before it stops its agent
#: (timing, not a handshake: 1 s sufficed at a load of 4; twice that for a loaded machine)
FOLLOWER_GRACE = 2.0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="protoref.torch.rpc.worker")
    parser.add_argument("--protocol", choices=("rref", "autograd"), required=True)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--scenarios", default="", help="comma-separated; default: all, seeded")
    args = parser.parse_args(argv)

    from torch.distributed import rpc  # noqa: PLC0415 - torch only in the worker process
    from torch.distributed.rpc import _testing  # noqa: PLC0415

    from protoref.torch.rpc.conductor import Conductor  # noqa: PLC0415
    from protoref.torch.rpc.faults import plan_for  # noqa: PLC0415
    from protoref.torch.rpc.recorder import Recorder  # noqa: PLC0415
    from protoref.torch.rpc.world import world  # noqa: PLC0415

    name = f"w{args.rank}"
    here = world()
    here.recorder = Recorder(name)
    plan = plan_for(args.protocol, args.seed)
    options = _testing.FaultyTensorPipeRpcBackendOptions(
        num_worker_threads=16,
        rpc_timeout=30,
        init_method=f"tcp://127.0.0.1:{args.port}",
        messages_to_fail=list(plan.messages_to_fail),
        messages_to_delay=dict(plan.messages_to_delay),
        num_fail_sends=plan.num_fail_sends,
    )
    rpc.init_rpc(
        name,
        rank=args.rank,
        world_size=args.world,
        backend=rpc.backend_registry.BackendType.FAULTY_TENSORPIPE,
        rpc_backend_options=options,
    )
    workers = [f"w{i}" for i in range(args.world)]
    if args.rank == 0:
        conductor = Conductor(workers, random.Random(f"{args.protocol}-roles:{args.seed}"))
        ran = _conduct(args.protocol, conductor, args.seed, args.scenarios)
        from protoref.torch.rpc import rref_steps  # noqa: PLC0415

        for w in workers:
            conductor.step(w, rref_steps.finish)
        (args.out / "ran.json").write_text(json.dumps(ran), encoding="utf-8")
    elif not here.finished.wait(CONDUCT_TIMEOUT):
        print(f"{name}: the conductor never finished", file=sys.stderr)
        return 1
    here.recorder.log("ShutdownCalled")
    try:
        if args.protocol == "autograd":
            # graceful's barrier, without its join: a FAST-mode hang leaves a gradient
            # request that is never answered, and join waits for it until the agent's 30 s
            # timeout (the conductor's last quiet point saw every worker idle otherwise)
            rpc.api._wait_all_workers()
            if args.rank != 0:
                # the barrier's leader (rank 0) may still await this worker's answer to its
                # last message: a follower that stopped at once broke it (eof)
                time.sleep(FOLLOWER_GRACE)
            rpc.shutdown(graceful=False)
        else:
            rpc.shutdown()
    except RuntimeError as err:  # torch's DistStoreError and DistNetworkError are RuntimeErrors
        # a shutdown that hangs until torch's own timeout: an outcome the checker must judge
        here.recorder.log("ShutdownFailed", error=str(err).splitlines()[0][:200])
    else:
        here.recorder.log("ShutdownDone")
    here.recorder.write(args.out / f"{name}.jsonl")
    return 0


def _conduct(protocol: str, conductor: Conductor, seed: int, chosen: str) -> list[str]:
    if protocol == "autograd":
        from protoref.torch.rpc import autograd_scenarios as grad_lib  # noqa: PLC0415

        names = chosen.split(",") if chosen else grad_lib.order(seed)
        return grad_lib.conduct(conductor, names)
    from protoref.torch.rpc import rref_scenarios as lib  # noqa: PLC0415

    names = chosen.split(",") if chosen else lib.order(seed)
    return lib.conduct(conductor, names)


if __name__ == "__main__":
    sys.exit(main())
