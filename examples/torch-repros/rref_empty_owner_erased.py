"""torch RRef: an OwnerRRef is erased while its creator is alive (no fault; a slow call).

Standalone (torch only): ``python rref_empty_owner_erased.py``. Three RPC workers on loopback.
w0 calls ``rpc.remote("w1", identity, (arg,))`` where unpickling ``arg`` on w1 takes 3 s (a
slow request; one TensorPipe pipe is FIFO, so later messages on other threads overtake it).
Meanwhile w0 passes the RRef to a UDF on the owner w1 (``getOrCreateOwnerRRef`` makes an
empty OwnerRRef there) and to w2, which drops it: w2's RREF_USER_DELETE empties ``forks_`` and
``delForkOfOwner`` erases the OwnerRRef while w0's PYTHON_REMOTE_CALL is still in flight. The
late call then creates a second OwnerRRef: w0's ``to_here`` returns, but the owner's UDF waits
on the first OwnerRRef for ever. Exit status 0 when that shows.
"""

import gc
import os
import socket
import subprocess
import sys
import threading
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


HELD = []


def keep(rref):
    HELD.append(rref)


def drop():
    HELD.clear()
    gc.collect()


def wait_local_value(rref, grace):
    seen = {}
    t = threading.Thread(target=lambda: seen.update(v=rref.local_value()), daemon=True)
    t.start()
    t.join(grace)
    return "returned" if "v" in seen else f"still waiting after {grace} s"


def worker(rank, port):
    opts = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{port}", rpc_timeout=30)
    rpc.init_rpc(f"w{rank}", rank=rank, world_size=3, rpc_backend_options=opts)
    if rank != 0:
        time.sleep(600)
    rref = rpc.remote("w1", identity, args=(SlowToUnpickle(3.0),))
    time.sleep(0.2)
    owner_udf = rpc.rpc_async("w1", wait_local_value, (rref, 4.0))
    time.sleep(0.3)
    print("w1 with the empty OwnerRRef:", rpc.rpc_sync("w1", info), flush=True)
    rpc.rpc_sync("w2", keep, (rref,))
    rpc.rpc_sync("w2", drop)
    time.sleep(0.3)
    erased = rpc.rpc_sync("w1", info)
    print("w1 after w2's delete:       ", erased, "(the creating call in flight)", flush=True)
    udf = owner_udf.wait()
    print("torch", __import__("torch").__version__, flush=True)
    print("w0 to_here:", rref.to_here(), flush=True)
    print("w1 at the end:", rpc.rpc_sync("w1", info), flush=True)
    print("w1's UDF on the first OwnerRRef: local_value", udf, flush=True)
    shown = erased["num_owner_rrefs"] == 0 and udf.startswith("still waiting")
    print("DEFECT: the OwnerRRef was erased while its creator was alive" if shown else "no defect")
    sys.stdout.flush()
    os._exit(0 if shown else 1)


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
    finally:
        for p in procs:
            p.kill()
    sys.exit(code)
