"""torch's RemoteModule in a torch RPC program (issue 26 §3), run unchanged on both.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python remote_module.py RANK   # RANK 0, 1, 2

The two lines that differ are the imports below (``torch.distributed.rpc`` and
``torch.distributed.nn.RemoteModule`` on torch). Worker 0 prints one JSON line.
"""

import json
import sys

import torch
from torch import nn

import protoref.rpc as rpc
from protoref.nn import RemoteModule


class Affine(nn.Module):
    def __init__(self, k, bias=1.0):
        super().__init__()
        self.w = nn.Parameter(torch.full((2,), float(k)))
        self.b = nn.Parameter(torch.tensor(bias))

    def forward(self, x, scale=1.0):
        return ((x * self.w).sum() + self.b) * scale


def run_calls():
    out = {}
    module = RemoteModule("worker1/cpu", Affine, args=(3,), kwargs={"bias": 0.5})
    x = torch.tensor([1.0, 2.0])
    out["forward"] = [module(x).item(), module.forward(x, scale=2.0).item()]
    out["forward_async"] = module.forward_async(x).wait().item()
    params = module.remote_parameters()
    out["parameters"] = [[p.owner().name, p.to_here().tolist()] for p in params]
    out["module_rref"] = module.get_module_rref().owner().name
    by_rank = RemoteModule("rank:2/cpu", Affine, args=(1,))
    out["by_rank"] = [by_rank(x).item(), by_rank.get_module_rref().owner().name]
    return out


def main(rank):
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=3)
    out = run_calls() if rank == 0 else {}
    rpc.shutdown()
    if rank == 0:
        print(json.dumps(out, sort_keys=True), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
