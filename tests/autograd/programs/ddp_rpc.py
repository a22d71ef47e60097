"""The shape of pytorch/examples' distributed/rpc/ddp_rpc, tiny, on the CPU: an EmbeddingBag
in a RemoteModule on the parameter server (worker0), a Linear wrapped in
DistributedDataParallel on each of two trainers (a gloo process group of the two, on its own
port), distributed backward through both, DistributedOptimizer over the remote module's
parameter RRefs and the trainers' own.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python ddp_rpc.py RANK   # RANK 0, 1, 2

The import block is the only text that differs on torch. Worker 0 prints one JSON line.
"""

import json
import os
import sys

import torch
import torch.distributed as dist
from torch import nn, optim
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: N817 - the examples' name

import protoref.autograd as dist_autograd
import protoref.rpc as rpc
from protoref.nn import RemoteModule
from protoref.optim import DistributedOptimizer


class HybridModel(nn.Module):
    def __init__(self, remote_emb_module):
        super().__init__()
        self.remote_emb_module = remote_emb_module
        torch.manual_seed(0)
        self.fc = DDP(nn.Linear(4, 2))

    def forward(self, indices, offsets):
        emb = self.remote_emb_module.forward(indices, offsets)
        return self.fc(emb)


def run_trainer(remote_emb_module, rank):
    model = HybridModel(remote_emb_module)
    params = remote_emb_module.remote_parameters()
    params.extend(rpc.RRef(p) for p in model.fc.parameters())
    opt = DistributedOptimizer(optim.SGD, params, lr=0.05)
    criterion = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(rank)
    losses = []
    for _ in range(3):
        indices = torch.randint(0, 10, (6,), generator=gen)
        offsets = torch.tensor([0, 2, 4])
        target = torch.randint(0, 2, (3,), generator=gen)
        with dist_autograd.context() as cid:
            loss = criterion(model(indices, offsets), target)
            dist_autograd.backward(cid, [loss])
            opt.step(cid)
        dist.barrier()  # both trainers' steps of the embedding before either's next forward
        losses.append(round(loss.item(), 4))
    weight = [round(v, 4) for v in model.fc.module.weight.reshape(-1).tolist()[:4]]
    return losses, weight


def main(rank):
    if rank != 0:
        port = int(os.environ["MASTER_PORT"]) + 1
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank - 1, world_size=2
        )
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=3)
    out = {}
    if rank == 0:
        torch.manual_seed(1)
        emb = RemoteModule("worker0/cpu", nn.EmbeddingBag, args=(10, 4), kwargs={"mode": "sum"})
        futs = [rpc.rpc_async(f"worker{t}", run_trainer, args=(emb, t)) for t in (1, 2)]
        out["trainers"] = [f.wait() for f in futs]
    rpc.shutdown()
    if rank != 0:
        dist.destroy_process_group()
    if rank == 0:
        print(json.dumps(out, sort_keys=True), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
