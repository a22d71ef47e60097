"""The torch RPC example of torch's own docs, with tensors, run unchanged on both.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python tensors.py RANK   # RANK 0, 1

Worker 0 prints one JSON line (tensors as lists, with their dtypes).
"""

import json
import sys

import torch

import protoref.rpc as rpc


def scaled(t, k):
    return t * k


def mean_of(rref):
    return rref.to_here().mean()


def show(t):
    return [str(t.dtype), t.tolist()]


def main(rank):
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2)
    out = {}
    if rank == 0:
        out["rpc_sync"] = show(rpc.rpc_sync("worker1", torch.add, args=(torch.ones(2), 3)))
        out["rpc_async"] = show(
            rpc.rpc_async("worker1", scaled, args=(torch.arange(4), 2))
            .then(lambda fut: fut.wait() + 1)
            .wait()
        )
        rref = rpc.remote("worker1", torch.add, args=(torch.ones(2, 2), torch.eye(2)))
        out["remote"] = show(rref.to_here())
        out["rref_argument"] = show(rpc.rpc_sync("worker1", mean_of, args=(rref,)))
        out["bool_and_empty"] = [
            show(rpc.rpc_sync("worker1", torch.logical_not, args=(torch.tensor([True, False]),))),
            show(rpc.rpc_sync("worker1", scaled, args=(torch.zeros(0, 3), 5))),
        ]
        del rref
    rpc.shutdown()
    if rank == 0:
        print(json.dumps(out, sort_keys=True), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
