"""The shape of pytorch/examples' distributed/rpc/batch/parameter_server, tiny, on the CPU: a
batch-updating parameter server whose ``update_and_fetch_model`` is an
``@rpc.functions.async_execution`` static method returning a ``torch.futures.Future`` that
completes once every trainer's gradients are in; trainers train a copy of the model (an
``nn.Module`` returned by RPC) with local autograd and send ``[p.grad ...]``; the server waits
for the trainers with ``torch.futures.wait_all``.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python batch.py RANK   # RANK 0, 1, 2

The import line of rpc is the only text that differs on torch. Worker 0 prints one JSON line.
"""

import json
import sys
import threading

import torch
from torch import nn, optim

import protoref.rpc as rpc

BATCHES = 3


class BatchUpdateParameterServer:
    def __init__(self, batch_update_size):
        torch.manual_seed(0)
        self.model = nn.Linear(3, 2)
        self.lock = threading.Lock()
        self.future_model = torch.futures.Future()
        self.batch_update_size = batch_update_size
        self.curr_update_size = 0
        self.optimizer = optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9)
        for p in self.model.parameters():
            p.grad = torch.zeros_like(p)

    def get_model(self):
        return self.model

    @staticmethod
    @rpc.functions.async_execution
    def update_and_fetch_model(ps_rref, grads):
        self = ps_rref.local_value()
        with self.lock:
            for p, g in zip(self.model.parameters(), grads, strict=True):
                p.grad += g
            self.curr_update_size += 1
            fut = self.future_model
            if self.curr_update_size >= self.batch_update_size:
                for p in self.model.parameters():
                    p.grad /= self.batch_update_size
                self.curr_update_size = 0
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=False)
                fut.set_result(self.model)
                self.future_model = torch.futures.Future()
        return fut


def run_trainer(ps_rref, rank):
    model = ps_rref.rpc_sync().get_model()
    loss_fn = nn.MSELoss()
    gen = torch.Generator().manual_seed(rank)
    losses = []
    for _ in range(BATCHES):
        inputs = torch.randn(4, 3, generator=gen)
        labels = torch.randn(4, 2, generator=gen)
        loss = loss_fn(model(inputs), labels)
        loss.backward()
        losses.append(round(loss.item(), 4))
        model = rpc.rpc_sync(
            ps_rref.owner(),
            BatchUpdateParameterServer.update_and_fetch_model,
            args=(ps_rref, [p.grad for p in model.parameters()]),
        )
    return losses


def main(rank):
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=3)
    out = {}
    if rank == 0:
        ps = BatchUpdateParameterServer(2)
        ps_rref = rpc.RRef(ps)
        futs = [rpc.rpc_async(f"worker{t}", run_trainer, args=(ps_rref, t)) for t in (1, 2)]
        out["losses"] = torch.futures.wait_all(futs)
        out["weight"] = [round(v, 4) for v in ps.model.weight.detach().reshape(-1).tolist()]
    rpc.shutdown()
    if rank == 0:
        print(json.dumps(out, sort_keys=True), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
