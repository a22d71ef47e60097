"""Reproduce on torch 2.13: an RPC whose request carries grad but whose answer does not makes
``dist_autograd.backward`` hang (docs/divergences.md, 2026-11-26; docs/autograd.md §9).

FAST mode counts every send function of the context and waits for a gradient for each. The
request's send function gets one only through the answer's recv function; an answer without
grad has none, so the send function never runs and the graph task never completes.

Not a test (it needs torch and takes seconds of wall time): run it by hand, with torch installed
(``.venv/bin/python -m pip install torch==2.13.0 numpy``)::

    .venv/bin/python spec/autograd/torch_backward_hang.py

It starts two RPC workers on loopback (a free port), and worker 0 runs three cases in their own
dist_autograd contexts, each given 8 s:

- ``baseline``: ``y = rpc_sync(w1, times3, (p,))`` then ``backward(ctx, [(y * 2).sum()])``:
  returns, and ``get_gradients`` on worker 0 gives ``p`` the gradient ``[6.0, 6.0]``;
- ``answer_none``: the same, plus ``rpc_sync(w1, log_value, (y,))`` (a UDF returning ``None``,
  as a logging call would): backward is still running after 8 s;
- ``udf_raises``: the same, plus a call to a UDF that raises after receiving ``y``, the caller
  catching the exception: backward is still running after 8 s.

Exit status 0 when the three outcomes are the ones above (the divergence reproduced), 1 otherwise.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import socket
import subprocess
import sys
import threading
import time
from typing import Any

GRACE = 8.0  # seconds a backward call is given before it counts as hanging
EXPECTED = {"baseline": "returned", "answer_none": "hangs", "udf_raises": "hangs"}


def times3(t: Any) -> Any:
    """Worker 1's UDF: its result requires grad, so the answer is wrapped."""
    return t * 3


def log_value(t: Any) -> None:
    """Worker 1's UDF: takes a tensor that requires grad and answers None (no grad)."""
    del t


def reject(t: Any) -> None:
    """Worker 1's UDF: takes a tensor that requires grad and raises."""
    raise ValueError(f"rejected a tensor of shape {tuple(t.shape)}")


def _case(name: str) -> str:
    # torch is optional: imported only in the worker processes, and untyped here (Any)
    torch: Any = importlib.import_module("torch")
    dist_autograd: Any = importlib.import_module("torch.distributed.autograd")
    rpc: Any = importlib.import_module("torch.distributed.rpc")

    param = torch.ones(2, requires_grad=True)
    outcome: dict[str, str] = {}

    def run() -> None:
        with dist_autograd.context() as ctx_id:
            y = rpc.rpc_sync("w1", times3, (param,))
            if name == "answer_none":
                rpc.rpc_sync("w1", log_value, (y,))
            elif name == "udf_raises":
                # torch re-raises the remote error as its own type (ValueError here)
                with contextlib.suppress(ValueError):  # the caller catches it
                    rpc.rpc_sync("w1", reject, (y,))
            dist_autograd.backward(ctx_id, [(y * 2).sum()])
            outcome["grad"] = str(dist_autograd.get_gradients(ctx_id)[param].tolist())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(GRACE)
    if thread.is_alive():
        return "hangs"
    if "grad" not in outcome:
        return "raised"
    print(f"{name}: get_gradients on worker 0: {outcome['grad']}", flush=True)
    return "returned"


def _worker(rank: int, port: int) -> None:
    rpc: Any = importlib.import_module("torch.distributed.rpc")
    options = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{port}")
    rpc.init_rpc(f"w{rank}", rank=rank, world_size=2, rpc_backend_options=options)
    if rank == 0:
        seen = {name: _case(name) for name in EXPECTED}
        for name, got in seen.items():
            print(f"{name}: backward {got} (expected: {EXPECTED[name]})", flush=True)
        # a hung backward keeps RPC threads busy, so shutdown could wait for ever
        os._exit(0 if seen == EXPECTED else 1)
    time.sleep(3600)  # worker 1 serves until the parent stops it


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
        for rank in (0, 1)
    ]
    try:
        status = procs[0].wait(timeout=GRACE * len(EXPECTED) + 60)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    return status


if __name__ == "__main__":
    sys.exit(main())
