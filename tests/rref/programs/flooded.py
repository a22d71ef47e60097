"""A torch-style RPC program whose master is flooded before its peer joins (protoref only).

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python flooded.py RANK   # RANK 0, then 1

Worker 0 prints its pid first (the test reads its memory), waits in init_rpc while the test
floods its port with unauthenticated connections, and once worker 1 has joined makes a call
and shuts down; each worker prints one JSON line.
"""

import json
import os
import sys

import protoref.rpc as rpc


def add(a, b):
    return a + b


def main(rank):
    print(json.dumps({"pid": os.getpid()}), flush=True)
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2)
    out = {"call": rpc.rpc_sync("worker1", add, args=(20, 22))} if rank == 0 else {}
    out["leak_free"] = rpc.shutdown().leak_free
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
