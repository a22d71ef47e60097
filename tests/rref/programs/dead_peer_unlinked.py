"""A torch-style RPC program in which the master never talks to a worker before shutdown.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python dead_peer_unlinked.py RANK   # RANK 0, 1, 2

Worker 2 has a call pending on worker 1, prints READY and reads a line from stdin: the test kills
worker 1 (SIGKILL), then writes that line; the master calls nobody and shuts down at once. The
master learns of the death and passes the shutdown barrier without worker 1, naming it dead to
worker 2, to which it has no link of its own yet (issue 28 s2). Each survivor prints one JSON
line with what ``rpc.shutdown()`` reported.
"""

import contextlib
import json
import sys
import time

import protoref.rpc as rpc


def block():
    time.sleep(600)  # the victim never returns: it is killed


def main(rank):
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=3)
    if rank == 1:
        time.sleep(600)
    if rank == 2:
        pending = rpc.rpc_async("worker1", block)
        print("READY", flush=True)
        sys.stdin.readline()  # worker 1 has been killed
        with contextlib.suppress(Exception):  # it fails: its callee is dead
            pending.wait()
    report = rpc.shutdown()
    print(json.dumps({"dead_peers": list(report.dead_peers)}), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
