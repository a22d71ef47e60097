"""Issue 26's two bugs without torch tensors, as a torch program: run unchanged on both.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python shared.py RANK   # RANK 0, 1, 2

Only the import block differs between the two runs (tests/support/autograd_programs.py swaps
it). Worker 0 prints one JSON line:
- "one_value_two_answers": a value a worker computed once and returned from two separate RPCs
  (a cached intermediate result) gets the gradient of both uses;
- "local_and_sent": a value used by the loss here and sent in an RPC whose answer the loss uses
  too (one graph node reached by the root's pass and by a gradient request);
- "optimizer_with_own_params": DistributedOptimizer over parameter RRefs of which some are
  owned by the worker that builds it.
"""

import json
import sys

import protoref.autograd as dist_autograd
import protoref.rpc as rpc
from protoref.autograd import tensor
from protoref.optim import SGD, DistributedOptimizer

# end of imports

W = tensor(3.0, requires_grad=True)  # worker1's parameter (every worker has one)
CACHE = {}


def cached_square():
    """W squared, computed by the first call and kept: every call returns that same value."""
    if "y" not in CACHE:
        CACHE["y"] = W * W
    return CACHE["y"]


def grad_of_w(context_id):
    return float(dist_autograd.get_gradients(context_id)[W])


def mul3(x):
    return x * 3


def make_param(value):
    return tensor(value, requires_grad=True)


def read_param(rref):
    return float(rref.local_value())


def one_value_two_answers():
    with dist_autograd.context() as context_id:
        a = rpc.rpc_sync("worker1", cached_square)
        b = rpc.rpc_sync("worker1", cached_square)  # the same value again
        loss = (a * 2 + b).sum()  # 3 W^2: d/dW = 6 W
        dist_autograd.backward(context_id, [loss])
        return [float(loss), rpc.rpc_sync("worker1", grad_of_w, args=(context_id,))]


def local_and_sent():
    x = tensor(2.0, requires_grad=True)
    with dist_autograd.context() as context_id:
        y = x * x
        loss = (rpc.rpc_sync("worker2", mul3, args=(y,)) + y).sum()  # 4 x^2: 8 x
        dist_autograd.backward(context_id, [loss])
        return [float(loss), float(dist_autograd.get_gradients(context_id)[x])]


def optimizer_with_own_params():
    mine = rpc.RRef(tensor(2.0, requires_grad=True))  # owned by this worker, the builder
    theirs = rpc.remote("worker1", make_param, args=(3.0,))
    also_mine = rpc.RRef(tensor(5.0, requires_grad=True))
    with dist_autograd.context() as context_id:
        loss = (mine.local_value() * theirs.to_here() + also_mine.local_value()).sum()
        dist_autograd.backward(context_id, [loss])
        optimizer = DistributedOptimizer(SGD, [mine, theirs, also_mine], lr=0.1)
        optimizer.step(context_id)
    return [
        round(float(mine.local_value()), 6),  # 2 - 0.1 * 3
        round(rpc.rpc_sync("worker1", read_param, args=(theirs,)), 6),  # 3 - 0.1 * 2
        round(float(also_mine.local_value()), 6),  # 5 - 0.1 * 1
    ]


def attempt(shape):
    """The shape's result, or the first line of the error it raised (torch raises none)."""
    try:
        return shape()
    except Exception as err:
        return f"{type(err).__name__}: {str(err).splitlines()[0][:120]}"


def main(rank):
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=3)
    out = {}
    if rank == 0:
        for shape in (one_value_two_answers, local_and_sent, optimizer_with_own_params):
            out[shape.__name__] = attempt(shape)
    rpc.shutdown()
    if rank == 0:
        print(json.dumps(out, sort_keys=True), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
