"""Reproduce on torch 2.13: a backward error leaves the pass running on other workers, for ever
(docs/autograd.md 6.16, 6.17; docs/divergences.md entry 54).

Not a test (it needs torch, takes seconds of wall time): run it by hand, with torch installed
(``.venv/bin/python -m pip install torch==2.13.0 numpy``)::

    .venv/bin/python spec/autograd/torch_backward_error.py

Three RPC workers on loopback. Worker 0, in one context, sends a parameter ``p`` to worker 2
(whose backward takes 1 s) and to worker 1 (whose backward raises), and runs
``backward(ctx_id, [(y1 + y2).sum()])``. It raises "Error on Node 0: Error on Node 1: ..." while
worker 2's graph task still runs. Worker 0 stays in the block 3 s: worker 2's late gradient
request reaches it, starts a new graph task there that waits for the gradient of the send
function to worker 1, which never comes, and worker 2 waits for worker 0's answer. Then the block
exits. ``_get_debug_info()`` on each worker shows ``num_current_backward_passes`` in the block and
2 s after the release.

Exit status 0 when, after the release, no worker holds a context and some worker still counts a
running backward pass (the divergence reproduced), 1 otherwise.
"""

from __future__ import annotations

import importlib
import os
import socket
import subprocess
import sys
import time
from typing import Any

torch: Any = importlib.import_module("torch")  # torch is optional: only this script needs it


class Slow(torch.autograd.Function):  # type: ignore[misc]
    """Worker 2's function: its backward takes 1 s, so the error overtakes it."""

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        del ctx
        return x * 3

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        del ctx
        time.sleep(1.0)
        return grad * 3


class Boom(torch.autograd.Function):  # type: ignore[misc]
    """Worker 1's function: its backward raises."""

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        del ctx
        return x * 2

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        del ctx, grad
        raise ValueError("a backward function raised")


def slow(t: Any) -> Any:
    return Slow.apply(t)


def boom(t: Any) -> Any:
    return Boom.apply(t)


def debug_info() -> dict[str, int]:
    dist_autograd: Any = importlib.import_module("torch.distributed.autograd")
    return {k: int(v) for k, v in dist_autograd._get_debug_info().items()}


def _snapshot(rpc: Any, label: str) -> list[dict[str, int]]:
    infos = [debug_info()] + [rpc.rpc_sync(f"w{r}", debug_info, ()) for r in (1, 2)]
    for rank, info in enumerate(infos):
        print(f"{label}, worker {rank}: {info}", flush=True)
    return infos


def _worker(rank: int, port: int) -> None:
    dist_autograd: Any = importlib.import_module("torch.distributed.autograd")
    rpc: Any = importlib.import_module("torch.distributed.rpc")
    options = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{port}")
    rpc.init_rpc(f"w{rank}", rank=rank, world_size=3, rpc_backend_options=options)
    if rank == 0:
        p = torch.ones(2, requires_grad=True)
        with dist_autograd.context() as ctx_id:
            y2 = rpc.rpc_sync("w2", slow, (p,))
            y1 = rpc.rpc_sync("w1", boom, (p,))
            try:
                dist_autograd.backward(ctx_id, [(y1 + y2).sum()])
                print("backward returned", flush=True)
            except RuntimeError as e:
                print("backward raised:", str(e).splitlines()[0], flush=True)
            time.sleep(3)
            _snapshot(rpc, "in the block, 3 s later")
        time.sleep(2)
        after = _snapshot(rpc, "2 s after the release")
        held = sum(i["num_autograd_contexts"] for i in after)
        running = sum(i["num_current_backward_passes"] for i in after)
        os._exit(0 if held == 0 and running > 0 else 1)
    time.sleep(3600)  # workers 1 and 2 serve until the parent stops them


def main() -> int:
    if "RANK" in os.environ:
        _worker(int(os.environ["RANK"]), int(os.environ["MASTER_PORT"]))
        return 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    procs = [
        subprocess.Popen([sys.executable, __file__], env=dict(env, RANK=str(rank)))
        for rank in (0, 1, 2)
    ]
    try:
        status = procs[0].wait(timeout=120)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    return status


if __name__ == "__main__":
    sys.exit(main())
