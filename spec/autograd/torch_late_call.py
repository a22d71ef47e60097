"""Reproduce #38513 on torch 2.13: an RPC still in flight when its ``dist_autograd.context()``
block exits (docs/autograd.md 6.2, 6.5; docs/divergences.md entry 53).

Not a test (it needs torch, takes seconds of wall time, and its counts are races): run it by
hand, with torch installed (``.venv/bin/python -m pip install torch==2.13.0 numpy``)::

    .venv/bin/python spec/autograd/torch_late_call.py [DELAY]

It starts two RPC workers on loopback (a free port). Worker 0 runs ROUNDS rounds of::

    with dist_autograd.context() as ctx_id:
        fut = rpc.rpc_async("w1", times3, (p,))   # p requires grad; times3 sleeps DELAY s
    fut.wait()                                    # after the block: the release has run
    dist_autograd.get_gradients(ctx_id)           # after the block, as a callback would (#40880)

and counts the outcomes: the future failed because the cleanup erased worker 1's context under
its running handler ("Couldn't find autograd context data for current autograd context id",
``MCDistAutograd_pytorch38513_midRequest``); ``get_gradients`` found the released context, which
the late answer re-created (``MCDistAutograd_pytorch38513_lateCall``); or it threw "Could not find
autograd context" as it should. Exit status 0 when at least one round shows #38513 (a failed
future or a found context), 1 otherwise.
"""

from __future__ import annotations

import importlib
import os
import socket
import subprocess
import sys
import time
from typing import Any

ROUNDS = 20


def times3(t: Any, delay: float) -> Any:
    """Worker 1's UDF: its result requires grad, so the answer is wrapped."""
    time.sleep(delay)
    return t * 3


def _rounds(delay: float) -> dict[str, int]:
    # torch is optional: imported only in the worker processes, and untyped here (Any)
    torch: Any = importlib.import_module("torch")
    dist_autograd: Any = importlib.import_module("torch.distributed.autograd")
    rpc: Any = importlib.import_module("torch.distributed.rpc")
    seen = {"failed mid-request": 0, "found after release": 0, "not found": 0}
    for _ in range(ROUNDS):
        p = torch.ones(2, requires_grad=True)
        with dist_autograd.context() as ctx_id:
            fut = rpc.rpc_async("w1", times3, (p, delay))
        try:
            fut.wait()
        except RuntimeError:
            seen["failed mid-request"] += 1
            continue
        time.sleep(0.1)  # let a late cleanup arrive before the late call
        try:
            dist_autograd.get_gradients(ctx_id)
            seen["found after release"] += 1
        except RuntimeError:
            seen["not found"] += 1
    return seen


def _worker(rank: int, port: int, delay: float) -> None:
    rpc: Any = importlib.import_module("torch.distributed.rpc")
    options = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{port}")
    rpc.init_rpc(f"w{rank}", rank=rank, world_size=2, rpc_backend_options=options)
    if rank == 0:
        seen = _rounds(delay)
        print(f"UDF delay {delay} s, {ROUNDS} rounds: {seen}", flush=True)
        # a context left behind can keep RPC threads busy, so shutdown could wait for ever
        os._exit(0 if seen["failed mid-request"] + seen["found after release"] else 1)
    time.sleep(3600)  # worker 1 serves until the parent stops it


def main() -> int:
    delay = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
    if "RANK" in os.environ:
        _worker(int(os.environ["RANK"]), int(os.environ["MASTER_PORT"]), delay)
        return 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    procs = [
        subprocess.Popen([sys.executable, __file__, str(delay)], env=dict(env, RANK=str(rank)))
        for rank in (0, 1)
    ]
    try:
        status = procs[0].wait(timeout=120 + ROUNDS * delay)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    return status


if __name__ == "__main__":
    sys.exit(main())
