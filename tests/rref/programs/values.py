"""torch's value semantics in a torch RPC program (issue 26 §2), run unchanged on both.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python values.py RANK   # RANK 0, 1, 2

Functions and classes as arguments (the tutorials' ``call_method`` helper), numpy arrays, an
``nn.Module`` returned, sets, the program's own exception type, RRefs inside any value in both
directions (an argument, a result, a value fetched with ``to_here``), and rpc_async's futures
handed to ``torch.futures.wait_all``/``collect_all``. Worker 0 prints one JSON line.
"""

import json
import sys

import numpy as np
import torch
from torch import nn

import protoref.rpc as rpc


class Counter:
    def __init__(self, start):
        self.n = start

    def add(self, k):
        self.n += k
        return self.n


class Holder:
    """A value of the program's own class, with an RRef inside."""

    def __init__(self, rref, tag):
        self.rref = rref
        self.tag = tag


class MyError(Exception):
    pass


def call_method(method, rref, *args, **kwargs):
    return method(rref.local_value(), *args, **kwargs)


def remote_method(method, rref, *args, **kwargs):
    return rpc.rpc_sync(rref.owner(), call_method, args=[method, rref, *args], kwargs=kwargs)


def build(cls, *args):
    return cls(*args).add(0)


def observe(obs):
    return obs * 2, obs.dtype.name


def make_module():
    torch.manual_seed(0)
    module = nn.Linear(2, 1)
    with torch.no_grad():
        module.weight.copy_(torch.tensor([[1.0, -1.0]]))
        module.bias.fill_(0.5)
    return module


def union(a, b):
    return a | b


def fail():
    raise MyError("a user exception")


def make_error(text):
    return MyError(text)  # returned, not raised: a value


def open_holder(holder):
    return [holder.tag, holder.rref.to_here(), holder.rref.owner().name]


def make_holder(value):
    return Holder(rpc.RRef(value), "made on " + rpc.get_worker_info().name)


def rrefs_of(values):
    return [rpc.RRef(v) for v in values]


def add(a, b):
    return a + b


def run_calls():
    out = {}
    counter = rpc.remote("worker1", Counter, args=(10,))
    out["method_as_value"] = [
        remote_method(Counter.add, counter, 5),
        rpc.rpc_sync("worker1", call_method, args=(Counter.add, counter, 1)),
    ]
    out["class_as_value"] = rpc.rpc_sync("worker2", build, args=(Counter, 7))
    doubled, dtype = rpc.rpc_sync("worker1", observe, args=(np.arange(4, dtype=np.float32),))
    out["numpy"] = [type(doubled).__name__, doubled.tolist(), dtype]
    module = rpc.rpc_sync("worker1", make_module)
    out["module"] = [type(module).__name__, module(torch.tensor([3.0, 1.0])).tolist()]
    out["sets"] = sorted(rpc.rpc_sync("worker2", union, args=({1, 2}, {2, 3})))
    error = rpc.rpc_sync("worker2", make_error, args=("as a value",))
    out["user_exception_value"] = [type(error).__name__, error.args]
    try:  # raised: torch 2.13 re-raises a user type as a RuntimeError naming it
        rpc.rpc_sync("worker1", fail)
        out["user_exception_raised"] = None
    except RuntimeError as err:
        out["user_exception_raised"] = "MyError" in str(err).splitlines()[0]
    mine = rpc.RRef([1, 2, 3])
    out["rref_in_argument"] = rpc.rpc_sync("worker2", open_holder, args=(Holder(mine, "mine"),))
    held = rpc.rpc_sync("worker1", make_holder, args=({"k": 4},))
    out["rref_in_result"] = [held.tag, held.rref.to_here(), held.rref.owner().name]
    fetched = rpc.remote("worker2", rrefs_of, args=([5, 6],)).to_here()
    out["rrefs_fetched"] = [[r.owner().name, r.to_here()] for r in fetched]
    futs = [rpc.rpc_async(f"worker{1 + i % 2}", add, args=(i, 10)) for i in range(4)]
    out["wait_all"] = torch.futures.wait_all(futs)
    out["collect_all"] = [f.wait() for f in torch.futures.collect_all(futs).wait()]
    return out


def main(rank):
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=3)
    out = run_calls() if rank == 0 else {}
    rpc.shutdown()
    if rank == 0:
        print(json.dumps(out, sort_keys=True), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
