"""A distributed autograd program in which a worker is killed (SIGKILL) mid-backward.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python dead_in_backward.py RANK   # RANK 0, 1, 2

Worker 0 calls worker 1 under a context; worker 1's UDF makes a nested call to worker 2, the
victim, which never takes part in a backward pass (it drops every backward message, so the
pass waits on it). Worker 0 starts ``backward``, prints READY once the pass is running and
reads a line from stdin: the test kills worker 2, then writes the kill's time. Worker 0 then
records how backward failed and how long after the kill, that the release completed and left
nothing on worker 0 and worker 1, and that its thread opens a new context and runs a backward
pass through worker 1. Each survivor prints one JSON line.
"""

import sys
import threading
import time

from dead_udfs import after_the_death, nested, run_worker

import protoref.autograd as dist_autograd
import protoref.rpc as rpc
from protoref.autograd import tensor

# end of imports


def drive():
    out = {}
    x = tensor(2.0, requires_grad=True)
    failed = {}

    def run_backward(context_id, loss):
        try:
            dist_autograd.backward(context_id, [loss])
            failed["error"] = None
        except RuntimeError as err:
            failed["error"] = str(err).splitlines()[0]
        failed["at"] = time.time()

    with dist_autograd.context() as context_id:
        loss = rpc.rpc_sync("worker1", nested, args=(x, x))
        thread = threading.Thread(target=run_backward, args=(context_id, loss))
        thread.start()
        while dist_autograd._get_debug_info()["num_current_backward_passes"] == 0:
            time.sleep(0.01)
        print("READY", flush=True)
        killed = float(sys.stdin.readline())
        thread.join()
        out["backward_error"] = failed["error"]
        out["failed_after_kill_s"] = round(failed["at"] - killed, 3)
    return after_the_death(out, x)


if __name__ == "__main__":
    run_worker(int(sys.argv[1]), drive)
