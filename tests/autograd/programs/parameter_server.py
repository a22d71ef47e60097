"""The shape of pytorch/examples' distributed/rpc/parameter_server, shrunk to a tiny model on
the CPU: a parameter server holds the model, trainers run forward through it with rpc_sync
and a method passed as a value, backward with distributed autograd, and step the server's
parameters with DistributedOptimizer(torch.optim.SGD) over their RRefs.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python parameter_server.py RANK   # RANK 0, 1, 2

Rank 0 is the parameter server and drives the trainers (ranks 1 and 2, one after the other so
that the output is deterministic). The import block is the only text that differs on torch.
``STEPS`` in the environment sets the steps per trainer; ``PROTOREF_BENCH`` makes rank 0 print
the time per step instead (benches/training_step.py).
"""

import json
import os
import sys
import threading
import time

import torch
import torch.nn.functional as F  # noqa: N812 - torch's spelling
from torch import nn, optim

import protoref.autograd as dist_autograd
import protoref.rpc as rpc
from protoref.optim import DistributedOptimizer

STEPS = int(os.environ.get("STEPS", "3"))


class ParameterServer(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))

    def forward(self, x):
        return F.log_softmax(self.model(x), dim=1)

    def param_rrefs(self):
        return [rpc.RRef(p) for p in self.model.parameters()]


SERVER = None
SERVER_LOCK = threading.Lock()


def get_parameter_server():
    global SERVER  # noqa: PLW0603 - the examples keep the server in a global
    with SERVER_LOCK:
        if SERVER is None:
            SERVER = ParameterServer()
        return SERVER


def call_method(method, rref, *args, **kwargs):
    return method(rref.local_value(), *args, **kwargs)


def remote_method(method, rref, *args, **kwargs):
    return rpc.rpc_sync(rref.owner(), call_method, args=[method, rref, *args], kwargs=kwargs)


class TrainerNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.server_rref = rpc.remote("ps", get_parameter_server)

    def forward(self, x):
        return remote_method(ParameterServer.forward, self.server_rref, x)

    def global_param_rrefs(self):
        return remote_method(ParameterServer.param_rrefs, self.server_rref)


def run_trainer(rank):
    net = TrainerNet()
    opt = DistributedOptimizer(optim.SGD, net.global_param_rrefs(), lr=0.1)
    gen = torch.Generator().manual_seed(rank)
    losses = []
    started = time.perf_counter()
    for step in range(STEPS):
        if step == 1:  # the first step warms up (connections, torch's first calls)
            started = time.perf_counter()
        x = torch.randn(6, 4, generator=gen)
        y = torch.randint(0, 3, (6,), generator=gen)
        with dist_autograd.context() as cid:
            loss = F.nll_loss(net(x), y)
            dist_autograd.backward(cid, [loss])
            opt.step(cid)
        losses.append(round(loss.item(), 4))
    return losses, (time.perf_counter() - started) / max(STEPS - 1, 1)


def main(rank):
    name = "ps" if rank == 0 else f"trainer{rank}"
    rpc.init_rpc(name, rank=rank, world_size=3)
    out = {}
    if rank == 0:
        per_step = []
        for trainer in (1, 2):
            losses, seconds = rpc.rpc_sync(f"trainer{trainer}", run_trainer, args=(trainer,))
            out[f"trainer{trainer}"] = losses
            per_step.append(seconds)
        server = get_parameter_server()
        out["parameters"] = [
            [round(v, 4) for v in p.detach().reshape(-1).tolist()[:4]]
            for p in server.model.parameters()
        ]
        out["grad_untouched"] = all(p.grad is None for p in server.model.parameters())
        if os.environ.get("PROTOREF_BENCH"):
            out = {"seconds_per_step": sum(per_step) / len(per_step)}
    rpc.shutdown()
    if rank == 0:
        print(json.dumps(out, sort_keys=True), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
