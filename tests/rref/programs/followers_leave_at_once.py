"""A torch-style RPC program whose followers call rpc.shutdown() at once (torch's usual shape).

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 CALL_FOR=61 python followers_leave_at_once.py RANK

Workers 1 and 2 shut down right after init_rpc; the master keeps calling both for CALL_FOR
seconds (past the 60 s that used to bound graceful shutdown), then shuts down. Each worker
prints one JSON line: the master how many calls succeeded and the first failure, every worker
whether its shutdown was leak-free.
"""

import json
import os
import sys
import time

import protoref.rpc as rpc


def add(a, b):
    return a + b


def main(rank):
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=3)
    out = {}
    if rank == 0:
        ok, failed, until = 0, None, time.monotonic() + float(os.environ["CALL_FOR"])
        while time.monotonic() < until and failed is None:
            for peer in ("worker1", "worker2"):
                try:
                    ok += rpc.rpc_sync(peer, add, args=(1, 1)) == 2
                except Exception as err:
                    failed = f"{type(err).__name__}: {str(err).splitlines()[0]}"
            time.sleep(0.5)
        out = {"ok": ok, "failed": failed}
    report = rpc.shutdown()
    out["leak_free"] = report.leak_free
    out["problems"] = list(report.problems)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
