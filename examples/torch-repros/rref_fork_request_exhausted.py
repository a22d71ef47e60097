"""torch RRef: a child whose RREF_FORK_REQUEST never gets through aborts its process.

Standalone (torch only): ``python rref_fork_request_exhausted.py``. Three RPC workers on
loopback on the FAULTY_TENSORPIPE agent of ``torch.distributed.rpc._testing``; w2's agent fails
every send of RREF_FORK_REQUEST (10 failures per message, more than ``sendWithRetries``' 6
attempts). w0 creates an RRef owned by w1 and passes it to a UDF on w2. w2 unpickles it as a
pending user and asks the owner for the fork; every attempt fails (about 13 s of retries), the
UDF the pending user gates never runs, and when the last retry fails the error is rethrown in
a callback: ``terminate called after throwing an instance of 'c10::Error'``, and w2 dies.
Exit status 0 when w2 is gone after the retries.
"""

import os
import socket
import subprocess
import sys
import time

import torch.distributed.rpc as rpc
from torch.distributed.rpc import _testing

HELD = []


def identity(x):
    return x


def hold(rref):
    HELD.append(rref)


def info():
    return {k: int(v) for k, v in rpc._rref_context_get_debug_info().items()}


def worker(rank, port):
    opts = _testing.FaultyTensorPipeRpcBackendOptions(
        num_worker_threads=8,
        rpc_timeout=30,
        init_method=f"tcp://127.0.0.1:{port}",
        messages_to_fail=["RREF_FORK_REQUEST"] if rank == 2 else [],
        messages_to_delay={},
        num_fail_sends=10,
    )
    rpc.init_rpc(
        f"w{rank}",
        rank=rank,
        world_size=3,
        backend=rpc.backend_registry.BackendType.FAULTY_TENSORPIPE,
        rpc_backend_options=opts,
    )
    if rank != 0:
        time.sleep(600)
    rref = rpc.remote("w1", identity, ([1.0],))
    rref.to_here()
    rpc.rpc_async("w2", hold, (rref,), timeout=0)
    time.sleep(1.0)
    print("torch", __import__("torch").__version__, flush=True)
    print("w2 after 1 s:", rpc.rpc_sync("w2", info), flush=True)
    time.sleep(16.0)
    try:
        print("w2 after the retries:", rpc.rpc_sync("w2", info), flush=True)
    except RuntimeError as err:
        print("w2 after the retries: unreachable:", str(err).splitlines()[0], flush=True)
        os._exit(0)
    os._exit(1)


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
        for r in (0, 1, 2)
    ]
    try:
        code = procs[0].wait(timeout=120)
        print("w2 exit status:", procs[2].poll(), flush=True)
    finally:
        for p in procs:
            p.kill()
    sys.exit(code)
