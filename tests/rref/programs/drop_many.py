"""A torch RPC program: 200 RRefs made, shared and dropped, then a graceful shutdown.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python drop_many.py RANK   # RANK 0, 1

Each worker prints one JSON line: the number of values it saw and what ``rpc.shutdown()``
reported (protoref returns a ShutdownReport; torch returns None).
"""

import gc
import json
import sys

import protoref.rpc as rpc


def square(x):
    return x * x


def total(rrefs):
    return sum(r.to_here() for r in rrefs)


def main(rank):
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2)
    out = {}
    if rank == 0:
        rrefs = [rpc.remote("worker1", square, args=(i,)) for i in range(150)]
        rrefs += [rpc.RRef(i) for i in range(50)]
        out["values"] = sum(r.to_here() for r in rrefs)
        out["shared_sum"] = rpc.rpc_sync("worker1", total, args=(rrefs[140:160],))
        out["rrefs"] = len(rrefs)
        del rrefs
        gc.collect()
    report = rpc.shutdown()
    out["report"] = (
        None
        if report is None
        else {
            "leak_free": report.leak_free,
            "leaks": report.leaks,
            "problems": list(report.problems),
        }
    )
    print(json.dumps(out, sort_keys=True), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
