"""torch RRef: a fetch that reaches the owner after the delete parks for ever (pytorch#40141).

Standalone (torch only): ``python rref_fetch_after_delete.py``. Two RPC workers on loopback on
the FAULTY_TENSORPIPE agent of ``torch.distributed.rpc._testing``, w1's fetch messages delayed
1 s in their sending thread. w0 owns ``rpc.RRef([1.0, 1.0])`` and passes it to a UDF on w1,
which starts ``rref.to_here()`` in a thread (the fetch is held by the delay) and runs torch's
own shutdown sweep (``_delete_all_user_and_unforked_owner_rrefs``, what ``rpc.shutdown()`` does):
its RREF_USER_DELETE reaches w0 first, w0 deletes the last fork and erases the OwnerRRef, and
the fetch then parks in pendingOwners_ for an OwnerRRef that will never be created again. The
to_here never returns. Exit status 0 when to_here is still waiting after 6 s.
"""

import os
import socket
import subprocess
import sys
import threading
import time

import torch.distributed.rpc as rpc
from torch.distributed.rpc import _testing


def info():
    return {k: int(v) for k, v in rpc._rref_context_get_debug_info().items()}


def fetch_and_sweep(rref):
    seen = {}
    thread = threading.Thread(target=lambda: seen.update(v=rref.to_here(timeout=60)), daemon=True)
    thread.start()
    time.sleep(0.2)  # the fetch's thread sleeps in the agent's delay
    rpc.api._delete_all_user_and_unforked_owner_rrefs()
    thread.join(6)
    return "returned" if "v" in seen else "still waiting after 6 s"


def worker(rank, port):
    delay = {"PYTHON_RREF_FETCH_CALL": 1.0, "SCRIPT_RREF_FETCH_CALL": 1.0}
    opts = _testing.FaultyTensorPipeRpcBackendOptions(
        num_worker_threads=8,
        rpc_timeout=30,
        init_method=f"tcp://127.0.0.1:{port}",
        messages_to_fail=[],
        messages_to_delay=delay if rank == 1 else {},
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
    rref = rpc.RRef([1.0, 1.0])
    fut = rpc.rpc_async("w1", fetch_and_sweep, (rref,))
    time.sleep(0.6)
    print("torch", __import__("torch").__version__, flush=True)
    print("w0 (owner) after the delete, before the fetch:", info(), flush=True)
    outcome = fut.wait()
    print("w1: to_here", outcome, flush=True)
    print("w0 (owner) at the end:", info(), flush=True)
    os._exit(0 if outcome.startswith("still waiting") else 1)


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
