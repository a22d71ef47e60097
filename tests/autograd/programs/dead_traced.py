"""A distributed autograd program in which a worker is killed (SIGKILL) mid-backward, with
``backward`` on the block's own thread (as the spec's DistEngineExecute: a traced run of it is
checked, tests/autograd/test_death_traced.py).

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python dead_traced.py RANK   # RANK 0, 1, 2

Worker 0 calls worker 1 under a context; worker 1's UDF makes a nested call to worker 2, the
victim, which never takes part in a backward pass (it drops every backward message, so the
pass waits on it). Worker 0 starts ``backward``; a watcher thread prints READY once the pass
is running, and the test kills worker 2. Worker 0 records how backward failed, that nothing is
held on worker 0 and worker 1 afterwards, and that its thread opens a new context and runs a
backward pass through worker 1. Each survivor prints one JSON line.
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

    def watch():
        while dist_autograd._get_debug_info()["num_current_backward_passes"] == 0:
            time.sleep(0.01)
        print("READY", flush=True)

    with dist_autograd.context() as context_id:
        loss = rpc.rpc_sync("worker1", nested, args=(x, x))
        threading.Thread(target=watch, daemon=True).start()
        try:
            dist_autograd.backward(context_id, [loss])
            out["backward_error"] = None
        except RuntimeError as err:
            out["backward_error"] = str(err).splitlines()[0]
    return after_the_death(out, x)


if __name__ == "__main__":
    run_worker(int(sys.argv[1]), drive)
