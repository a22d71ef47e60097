"""The shape of pytorch/examples' distributed/rpc/pipeline, tiny, on the CPU: a model in two
shards on worker1 and worker2 (rpc.remote), the input split into micro-batches; each
micro-batch goes in an RRef to shard 1 (``p1_rref.remote().forward(x_rref)``: an RRef of its
output) and that RRef to shard 2 (``p2_rref.rpc_async().forward(y_rref)``), which fetches it
with ``to_here`` (RRefs of RRefs); ``torch.futures.wait_all`` joins the micro-batches;
distributed backward; DistributedOptimizer over both shards' parameter RRefs.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python pipeline.py RANK   # RANK 0, 1, 2

The import block is the only text that differs on torch. Worker 0 prints one JSON line.
"""

import json
import sys
import threading

import torch
from torch import nn, optim

import protoref.autograd as dist_autograd
import protoref.rpc as rpc
from protoref.optim import DistributedOptimizer


class Shard1(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.seq = nn.Sequential(nn.Linear(4, 6), nn.ReLU())
        self._lock = threading.Lock()

    def forward(self, x_rref):
        x = x_rref.to_here()
        with self._lock:
            return self.seq(x)

    def parameter_rrefs(self):
        return [rpc.RRef(p) for p in self.parameters()]


class Shard2(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.fc = nn.Linear(6, 2)
        self._lock = threading.Lock()

    def forward(self, y_rref):
        y = y_rref.to_here()
        with self._lock:
            return self.fc(y)

    def parameter_rrefs(self):
        return [rpc.RRef(p) for p in self.parameters()]


class DistNet(nn.Module):
    def __init__(self, split_size):
        super().__init__()
        self.split_size = split_size
        self.p1_rref = rpc.remote("worker1", Shard1)
        self.p2_rref = rpc.remote("worker2", Shard2)

    def forward(self, xs):
        out_futures = []
        for x in iter(xs.split(self.split_size, dim=0)):
            x_rref = rpc.RRef(x)
            y_rref = self.p1_rref.remote().forward(x_rref)
            out_futures.append(self.p2_rref.rpc_async().forward(y_rref))
        return torch.cat(torch.futures.wait_all(out_futures))

    def parameter_rrefs(self):
        params = []
        params.extend(self.p1_rref.remote().parameter_rrefs().to_here())
        params.extend(self.p2_rref.remote().parameter_rrefs().to_here())
        return params


def train():
    model = DistNet(split_size=2)
    loss_fn = nn.MSELoss()
    opt = DistributedOptimizer(optim.SGD, model.parameter_rrefs(), lr=0.1)
    gen = torch.Generator().manual_seed(5)
    losses = []
    for _ in range(3):
        inputs = torch.randn(6, 4, generator=gen)
        labels = torch.randn(6, 2, generator=gen)
        with dist_autograd.context() as cid:
            outputs = model(inputs)
            loss = loss_fn(outputs, labels)
            dist_autograd.backward(cid, [loss])
            opt.step(cid)
        losses.append(round(loss.item(), 4))
    first = model.p2_rref.rpc_sync().parameter_rrefs()[0].to_here()
    weight = [round(v, 4) for v in first.reshape(-1)[:4].tolist()]
    return {"losses": losses, "shard2_weight": weight}


def main(rank):
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=3)
    out = train() if rank == 0 else {}
    rpc.shutdown()
    if rank == 0:
        print(json.dumps(out, sort_keys=True), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
