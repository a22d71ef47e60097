"""torch RRef: a timed-out rpc.remote leaks its OwnerRRef for ever (the hazard in PR #41217's note).

Standalone (torch only): ``python rref_late_remote_leak.py``. Two RPC workers on loopback. w1
calls ``rpc.remote("w0", identity, (arg,), timeout=0.5)`` where unpickling ``arg`` on w0 takes
2.5 s; the call times out on w1, which drops the RRef: its RREF_USER_DELETE reaches w0 while
w0 is still unpickling the PYTHON_REMOTE_CALL, and deletes nothing. The call then creates the
OwnerRRef and w1's fork on w0, which nobody will ever delete. Prints both workers' RRef
counters; exit status 0 when the leak shows (w0: 1 owner RRef, 1 fork; w1: none).
"""

import os
import socket
import subprocess
import sys
import time

import torch.distributed.rpc as rpc


def _arrive_slowly(seconds):
    time.sleep(seconds)
    return seconds


class SlowToUnpickle:
    def __init__(self, seconds):
        self.seconds = seconds

    def __reduce__(self):
        return (_arrive_slowly, (self.seconds,))


def identity(x):
    return x


def info():
    return {k: int(v) for k, v in rpc._rref_context_get_debug_info().items()}


def create_and_drop():
    rref = rpc.remote("w0", identity, args=(SlowToUnpickle(2.5),), timeout=0.5)
    time.sleep(1.0)
    try:
        rref.to_here()
    except RuntimeError as err:
        print("w1: to_here:", str(err).splitlines()[0], flush=True)
    del rref


def worker(rank, port):
    opts = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{port}", rpc_timeout=30)
    rpc.init_rpc(f"w{rank}", rank=rank, world_size=2, rpc_backend_options=opts)
    if rank == 1:
        time.sleep(600)
    rpc.rpc_sync("w1", create_and_drop)
    time.sleep(3.5)  # the late call has run
    owner, creator = info(), rpc.rpc_sync("w1", info)
    print("torch", __import__("torch").__version__, flush=True)
    print("w0 (owner):  ", owner, flush=True)
    print("w1 (creator):", creator, flush=True)
    leaked = owner["num_owner_rrefs"] == 1 and owner["num_forks"] == 1 and creator["num_forks"] == 0
    print("LEAK: the OwnerRRef and its fork stay on w0" if leaked else "no leak", flush=True)
    os._exit(0 if leaked else 1)


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
