"""A torch-style RPC program in which one worker is killed (SIGKILL) while another waits on it.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 VICTIM=1 python dead_peer.py RANK   # RANK 0, 1, 2

The victim (rank VICTIM) blocks in a UDF; the driver (rank 2 if the victim is the master,
else rank 0) calls the other survivor, has a call and an rpc.remote pending on the victim,
prints READY and reads a line from stdin: the test kills the victim, then writes that line.
The driver then records how each call fails and how long it took, the other survivor only
shuts down, and each survivor prints one JSON line with what ``rpc.shutdown()`` reported.
"""

import json
import os
import sys
import time

import protoref.rpc as rpc


def block():
    time.sleep(600)  # the victim never returns: it is killed


def add(a, b):
    return a + b


def outcome(call):
    try:
        return ["ok", call()]
    except Exception as err:
        return [type(err).__name__, str(err).splitlines()[0]]


def drive(victim, survivor):
    out = {"survivor": rpc.rpc_sync(survivor, add, args=(2, 2))}
    pending = rpc.rpc_async(victim, block)
    creation = rpc.remote(victim, block)
    print("READY", flush=True)
    sys.stdin.readline()  # the victim has been killed
    killed = time.monotonic()
    out["pending"] = outcome(pending.wait)
    out["pending_failed_after_s"] = round(time.monotonic() - killed, 3)
    out["creation"] = outcome(creation.to_here)
    started = time.monotonic()
    out["later_call"] = outcome(lambda: rpc.rpc_sync(victim, add, args=(1, 1)))
    out["later_call_failed_after_s"] = round(time.monotonic() - started, 3)
    return out


def main(rank):
    victim = int(os.environ["VICTIM"])
    driver = 2 if victim == 0 else 0
    options = rpc.TensorPipeRpcBackendOptions(rpc_timeout=60)
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=3, rpc_backend_options=options)
    if rank == victim:
        time.sleep(600)
    survivor = next(r for r in range(3) if r not in (victim, driver))
    out = drive(f"worker{victim}", f"worker{survivor}") if rank == driver else {}
    report = rpc.shutdown()
    out["report"] = {
        "dead_peers": list(report.dead_peers),
        "problems": list(report.problems),
        "leaks": report.leaks,
    }
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
