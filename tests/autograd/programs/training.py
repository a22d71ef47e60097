"""A torch distributed-autograd program, run unchanged on protoref and on torch 2.13.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python training.py RANK   # RANK 0, 1, 2

Only the import block differs between the two runs (tests/support/autograd_programs.py swaps
it). Worker 0 trains; it prints one JSON line: every shape's gradients and values.
"""

import json
import sys
import threading
import time

import protoref.autograd as dist_autograd
import protoref.rpc as rpc
from protoref.autograd import tensor
from protoref.optim import SGD, DistributedOptimizer

# end of imports


def mul3(x):
    return x * 3


def square(x):
    return x * x


def nested(x, y):
    return rpc.rpc_sync("worker2", mul3, args=(x,)) + y


def make_param(value):
    return tensor(value, requires_grad=True)


def read_param(rref):
    return float(rref.local_value())


def context_gone(context_id):
    try:
        dist_autograd._retrieve_context(context_id)
    except RuntimeError as err:
        return str(err).splitlines()[0]
    return "still there"


def error_line(call):
    try:
        call()
    except RuntimeError as err:
        return str(err).splitlines()[0][:80]
    return "no error"


def shapes():
    out = first_shapes()
    out.update(more_shapes())
    return out


def first_shapes():
    out = {}
    p = tensor(2.0, requires_grad=True)
    q = tensor(5.0, requires_grad=True)
    with dist_autograd.context() as context_id:
        a = rpc.rpc_sync("worker1", nested, args=(p * p, q))  # 3 p^2 + q, via worker2
        b = rpc.remote("worker1", mul3, args=(q,)).to_here()  # 3 q
        loss = (a * b).sum()
        dist_autograd.backward(context_id, [loss])
        grads = dist_autograd.get_gradients(context_id)
        out["three_workers"] = [float(loss), float(grads[p]), float(grads[q]), p.grad is None]
        out["worker_bits"] = context_id >> 48
    out["after_exit"] = [
        error_line(lambda: dist_autograd.get_gradients(context_id)),
        error_line(lambda: dist_autograd.backward(context_id, [loss])),
    ]
    time.sleep(1.0)  # the cleanups travel asynchronously
    out["gone_everywhere"] = [
        rpc.rpc_sync(f"worker{r}", context_gone, args=(context_id,))[:40] for r in range(3)
    ]

    x = tensor(3.0, requires_grad=True)
    with dist_autograd.context() as context_id:
        y1 = rpc.rpc_sync("worker1", mul3, args=(x,))
        y2 = rpc.rpc_sync("worker2", square, args=(x,))
        dist_autograd.backward(context_id, [(y1 + y2 + x).sum()])
        out["two_paths"] = float(dist_autograd.get_gradients(context_id)[x])
    return out


def more_shapes():
    out = {}
    x = tensor(2.0, requires_grad=True)
    with dist_autograd.context() as context_id:
        y = (rpc.rpc_sync("worker1", square, args=(x,)) * x).sum()
        dist_autograd.backward(context_id, [y], retain_graph=True)
        first = float(dist_autograd.get_gradients(context_id)[x])
        dist_autograd.backward(context_id, [y])
        second = float(dist_autograd.get_gradients(context_id)[x])
        freed = error_line(lambda: dist_autograd.backward(context_id, [y]))
        third = float(dist_autograd.get_gradients(context_id)[x])
        out["retain_graph"] = [first, second, freed[:60], third]

    results = {}

    def train(k):
        x = tensor(float(k), requires_grad=True)
        with dist_autograd.context() as context_id:
            y = rpc.rpc_sync(f"worker{1 + k % 2}", square, args=(x,))
            for _ in range(k % 3):
                y = rpc.rpc_sync("worker2", mul3, args=(y,))
            dist_autograd.backward(context_id, [y.sum()])
            results[k] = float(dist_autograd.get_gradients(context_id)[x])

    threads = [threading.Thread(target=train, args=(k,)) for k in range(1, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out["threads"] = [results[k] for k in range(1, 7)]

    p1 = rpc.remote("worker1", make_param, args=(2.0,))
    p2 = rpc.remote("worker2", make_param, args=(3.0,))
    x = tensor(1.5)
    with dist_autograd.context() as context_id:
        loss = (x * p1.to_here() * p2.to_here()).sum()
        dist_autograd.backward(context_id, [loss])
        optimizer = DistributedOptimizer(SGD, [p1, p2], lr=0.1)
        optimizer.step(context_id)
    out["optimizer"] = [
        round(rpc.rpc_sync("worker1", read_param, args=(p1,)), 6),
        round(rpc.rpc_sync("worker2", read_param, args=(p2,)), 6),
    ]
    return out


def main(rank):
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=3)
    out = shapes() if rank == 0 else {}
    rpc.shutdown()
    if rank == 0:
        print(json.dumps(out, sort_keys=True), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
