"""Where torch 2.13 misbehaves and protoref follows the Reference protocol (spec/autograd).

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python reference.py RANK   # RANK 0, 1, 2

1. An RPC still in flight when its ``with`` block exits: torch re-creates the released context
   on the caller when the answer arrives (pytorch#38513); protoref drops the answer's autograd
   part and the context stays gone everywhere.
2. Backward with an RPC output the loss does not use, and with a UDF that returns None for a
   tensor that requires grad (a logging call): torch's FAST mode waits for ever for their
   gradients; protoref's Echo backward sends them zero gradients and returns.

Worker 0 prints one JSON line. Run with torch's imports, the second part hangs (not tested).
"""

import json
import sys
import time

import protoref.autograd as dist_autograd
import protoref.rpc as rpc
from protoref.autograd import tensor
from protoref.optim import SGD, DistributedOptimizer

# end of imports

del SGD, DistributedOptimizer  # the import block is the training program's


def slow_square(x):
    time.sleep(0.5)
    return x * x


def mul3(x):
    return x * 3


def log_value(x):
    del x


def square(x):
    return x * x


def context_gone(context_id):
    try:
        dist_autograd._retrieve_context(context_id)
    except RuntimeError:
        return True
    return False


def shapes():
    out = {}
    x = tensor(2.0, requires_grad=True)
    with dist_autograd.context() as context_id:
        future = rpc.rpc_async("worker1", slow_square, args=(x,))
    value = future.wait()  # arrives after the release
    time.sleep(1.0)
    out["late_rpc"] = [
        float(value),
        value.grad_fn is None,
        [rpc.rpc_sync(f"worker{r}", context_gone, args=(context_id,)) for r in range(3)],
    ]
    x = tensor(2.0, requires_grad=True)
    with dist_autograd.context() as context_id:
        rpc.rpc_sync("worker1", mul3, args=(x,))  # an output the loss does not use
        rpc.rpc_sync("worker2", log_value, args=(x,))  # grad in, nothing out
        loss = rpc.rpc_sync("worker1", square, args=(x,)).sum()
        dist_autograd.backward(context_id, [loss])
        out["unused_outputs"] = float(dist_autograd.get_gradients(context_id)[x])
    return out


def main(rank):
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=3)
    out = shapes() if rank == 0 else {}
    rpc.shutdown()
    if rank == 0:
        print(json.dumps(out, sort_keys=True), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
