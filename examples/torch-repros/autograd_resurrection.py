"""torch distributed autograd: a late answer re-creates a released context (pytorch#38513).

Standalone (torch only): ``python autograd_resurrection.py``. Two RPC workers on loopback, w1
with one RPC thread (its cleanup handler queues behind the running UDF) and, through the
FAULTY_TENSORPIPE agent of ``torch.distributed.rpc._testing``, its outgoing
CLEANUP_AUTOGRAD_CONTEXT_REQ delayed 4 s (the cascade cleanup w1 sends back to w0, #32497,
would otherwise erase the evidence). w0 runs::

    with dist_autograd.context() as ctx_id:
        fut = rpc.rpc_async("w1", times3_after, (p, 0.5))   # p requires grad
    fut.wait()                                              # answered after the release

The block's exit released the context on w0; the late FORWARD_AUTOGRAD_RESP re-creates it
(getOrCreateContext in the response's deserialization): ``_retrieve_context(ctx_id)`` finds it,
with a recv function and no send function, and ``get_gradients(ctx_id)`` returns instead of
raising "Could not find autograd context". Exit status 0 when the context came back.
"""

import os
import socket
import subprocess
import sys
import time

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch.distributed.rpc import _testing


def times3_after(t, seconds):
    time.sleep(seconds)
    return t * 3


def worker(rank, port):
    opts = _testing.FaultyTensorPipeRpcBackendOptions(
        num_worker_threads=1 if rank == 1 else 8,
        rpc_timeout=30,
        init_method=f"tcp://127.0.0.1:{port}",
        messages_to_fail=[],
        messages_to_delay={"CLEANUP_AUTOGRAD_CONTEXT_REQ": 4.0} if rank == 1 else {},
        num_fail_sends=0,
    )
    rpc.init_rpc(
        f"w{rank}",
        rank=rank,
        world_size=2,
        backend=rpc.backend_registry.BackendType.FAULTY_TENSORPIPE,
        rpc_backend_options=opts,
    )
    if rank == 1:
        time.sleep(600)
    p = torch.ones(2, requires_grad=True)
    with dist_autograd.context() as ctx_id:
        fut = rpc.rpc_async("w1", times3_after, (p, 0.5))
    fut.wait()
    time.sleep(0.3)
    print("torch", torch.__version__, flush=True)
    print("w0 after the block:", dict(dist_autograd._get_debug_info()), flush=True)
    try:
        ctx = dist_autograd._retrieve_context(ctx_id)
    except RuntimeError as err:
        print("released context not found:", err, flush=True)
        os._exit(1)
    print(
        f"RESURRECTED: context {ctx_id} exists after its block exited, "
        f"{len(ctx._send_functions())} send / {len(ctx._recv_functions())} recv functions",
        flush=True,
    )
    print("get_gradients(ctx_id) ->", dist_autograd.get_gradients(ctx_id), flush=True)
    os._exit(0)


if __name__ == "__main__":
    if "RANK" in os.environ:
        worker(int(os.environ["RANK"]), int(os.environ["PORT"]))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [
        subprocess.Popen(
            [sys.executable, __file__], env=dict(os.environ, RANK=str(r), PORT=str(port))
        )
        for r in (0, 1)
    ]
    try:
        code = procs[0].wait(timeout=120)
    finally:
        for p in procs:
            p.kill()
    sys.exit(code)
