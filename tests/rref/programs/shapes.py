"""A torch RPC program (torch's shapes of RRef use), run unchanged on torch and on protoref.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python shapes.py RANK   # RANK 0, 1, 2

The only line that differs between the two runs is the import below (test_torch_programs.py
switches it to ``import torch.distributed.rpc as rpc``). Worker 0 prints one JSON line with
what every call returned.
"""

import json
import sys

import protoref.rpc as rpc


class Counter:
    def __init__(self, start):
        self.n = start

    def add(self, k):
        self.n += k
        return self.n

    @rpc.functions.async_execution
    def add_later(self, k):
        return rpc.rpc_async("worker2", add, args=(self.n, k))


def add(a, b):
    return a + b


def fail(message):
    raise ValueError(message)


def take(rref):
    return rref.owner_name()


def fetch(rref):
    return rref.to_here()


def make_rref(value):
    return rpc.RRef(value)


def my_name():
    return rpc.get_worker_info().name


@rpc.functions.async_execution
def add_then_double(to, a, b):
    return rpc.rpc_async(to, add, args=(a, b)).then(lambda fut: fut.wait() * 2)


def run_calls():
    out = {}
    me, w1 = rpc.get_worker_info(), rpc.get_worker_info("worker1")
    out["worker_info"] = [me.name, me.id, w1.name, w1.id]
    out["value_returned"] = [
        rpc.rpc_sync("worker1", add, args=(1, 2)),
        rpc.rpc_sync(1, add, args=(3, 4)),
        rpc.rpc_sync(w1, add, kwargs={"a": 5, "b": 6}),
        rpc.rpc_async("worker2", add, args=(7, 8)).wait(),
        rpc.remote("worker1", add, args=(9, 10)).to_here(),
    ]
    rref = rpc.remote("worker1", add, args=(2, 3))
    out["rref_argument_user_to_owner"] = rpc.rpc_sync("worker1", take, args=(rref,))
    out["user_to_user"] = rpc.rpc_sync("worker2", fetch, args=(rref,))
    local = rpc.RRef([1, 2, 3])
    out["owner_to_user"] = rpc.rpc_sync("worker2", fetch, args=(local,))
    returned = rpc.rpc_sync("worker1", make_rref, args=({"k": 1},))
    out["rref_returned"] = [returned.owner_name(), returned.is_owner(), returned.to_here()]
    chained = rpc.rpc_async("worker1", add, args=(1, 1))
    chained = chained.then(lambda fut: fut.wait() + 1).then(lambda fut: fut.value() * 10)
    out["then_chain"] = chained.wait()
    out["async_execution"] = [
        rpc.rpc_sync("worker1", add_then_double, args=("worker2", 1, 2)),
        rpc.remote("worker1", add_then_double, args=("worker0", 2, 3)).to_here(),
    ]
    counter = rpc.remote("worker1", Counter, args=(10,))
    out["rref_helpers"] = [
        counter.rpc_sync().add(1),
        counter.rpc_async().add(2).wait(),
        counter.remote().add(3).to_here(),
        counter.rpc_sync().add_later(100),
        rpc.RRef(Counter(5)).rpc_sync().add(1),
    ]
    try:
        rpc.rpc_sync("worker1", fail, args=("boom",))
        out["remote_error"] = None
    except ValueError:
        out["remote_error"] = "ValueError"
    out["called_worker_name"] = rpc.rpc_sync("worker2", my_name)
    return out


def main(rank):
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=3)
    out = run_calls() if rank == 0 else {}
    rpc.shutdown()
    if rank == 0:
        print(json.dumps(out, sort_keys=True), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
