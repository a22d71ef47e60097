"""init_rpc after init_process_group("gloo") on the same MASTER_ADDR:MASTER_PORT (issue 26 §3),
as torch's DDP-plus-RPC programs start; run unchanged on torch and on protoref.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python process_group.py RANK   # RANK 0, 1, 2

Worker 0 prints one JSON line: a collective of the process group and RPCs, twice (RPC is
shut down and started again while the process group lives on).
"""

import json
import sys

import torch
import torch.distributed as dist

import protoref.rpc as rpc


def add(a, b):
    return a + b


def one_round(rank, k):
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=3)
    t = torch.tensor([float(rank + k)])
    dist.all_reduce(t)
    out = {"all_reduce": t.item()}
    if rank == 0:
        out["rpc"] = [rpc.rpc_sync("worker1", add, args=(1, k)), rpc.rpc_sync(2, add, args=(3, k))]
    rpc.shutdown()
    return out


def main(rank):
    dist.init_process_group("gloo", rank=rank, world_size=3)  # listens on MASTER_PORT
    out = [one_round(rank, 10), one_round(rank, 20)]
    dist.destroy_process_group()
    if rank == 0:
        print(json.dumps(out, sort_keys=True), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
