"""The shape of pytorch/examples' distributed/rpc/rnn (RNN model parallelism), tiny, on the
CPU: the embedding table lives on worker1 and the decoder on worker2 (both created with
rpc.remote), the LSTM on the trainer; forward goes trainer -> worker1 -> trainer -> worker2;
distributed backward; DistributedOptimizer(torch.optim.SGD) over the RRefs of the remote
parameters and of the trainer's own (rpc.RRef of local parameters).

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python rnn.py RANK   # RANK 0, 1, 2

The import block is the only text that differs on torch. ``STEPS`` sets the steps;
``PROTOREF_BENCH`` makes rank 0 print the time per step (benches/training_step.py).
"""

import json
import os
import sys
import time

import torch
from torch import nn, optim

import protoref.autograd as dist_autograd
import protoref.rpc as rpc
from protoref.optim import DistributedOptimizer

STEPS = int(os.environ.get("STEPS", "3"))
NTOKEN, NINP, NHID = 10, 4, 6


def call_method(method, rref, *args, **kwargs):
    return method(rref.local_value(), *args, **kwargs)


def remote_method(method, rref, *args, **kwargs):
    return rpc.rpc_sync(rref.owner(), call_method, args=[method, rref, *args], kwargs=kwargs)


def parameter_rrefs(module):
    return [rpc.RRef(p) for p in module.parameters()]


class EmbeddingTable(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.encoder = nn.Embedding(NTOKEN, NINP)

    def forward(self, tokens):
        return self.encoder(tokens)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.decoder = nn.Linear(NHID, NTOKEN)

    def forward(self, output):
        return self.decoder(output)


class RNNModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb_table_rref = rpc.remote("worker1", EmbeddingTable)
        torch.manual_seed(3)
        self.rnn = nn.LSTM(NINP, NHID, 1)
        self.decoder_rref = rpc.remote("worker2", Decoder)

    def forward(self, tokens, hidden):
        emb = remote_method(EmbeddingTable.forward, self.emb_table_rref, tokens)
        output, hidden = self.rnn(emb, hidden)
        decoded = remote_method(Decoder.forward, self.decoder_rref, output)
        return decoded, hidden

    def parameter_rrefs(self):
        remote_params = remote_method(parameter_rrefs, self.emb_table_rref)
        remote_params.extend(parameter_rrefs(self.rnn))
        remote_params.extend(remote_method(parameter_rrefs, self.decoder_rref))
        return remote_params


def run_trainer():
    model = RNNModel()
    opt = DistributedOptimizer(optim.SGD, model.parameter_rrefs(), lr=0.05)
    criterion = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(7)
    hidden = (torch.zeros(1, 2, NHID), torch.zeros(1, 2, NHID))
    losses = []
    started = time.perf_counter()
    for step in range(STEPS):
        if step == 1:  # the first step warms up (connections, torch's first calls)
            started = time.perf_counter()
        tokens = torch.randint(0, NTOKEN, (5, 2), generator=gen)
        target = torch.randint(0, NTOKEN, (5, 2), generator=gen)
        hidden = (hidden[0].detach(), hidden[1].detach())
        with dist_autograd.context() as cid:
            output, hidden = model(tokens, hidden)
            loss = criterion(output.view(-1, NTOKEN), target.view(-1))
            dist_autograd.backward(cid, [loss])
            grads = dist_autograd.get_gradients(cid)
            opt.step(cid)
        losses.append(round(loss.item(), 4))
    seconds = (time.perf_counter() - started) / max(STEPS - 1, 1)
    local = list(model.rnn.parameters())
    return {
        "losses": losses,
        "local_leaves_with_gradients": sum(1 for p in local if p in grads),
        "lstm": [round(v, 4) for v in local[0].detach().reshape(-1).tolist()[:4]],
        "decoder": [
            round(v, 4) for v in rpc.rpc_sync("worker2", first_weights, args=(model.decoder_rref,))
        ],
        "seconds": seconds,
    }


def first_weights(rref):
    return rref.local_value().decoder.weight.detach().reshape(-1).tolist()[:4]


def main(rank):
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=3)
    out = {}
    if rank == 0:
        out = run_trainer()
        seconds = out.pop("seconds")
        if os.environ.get("PROTOREF_BENCH"):
            out = {"seconds_per_step": seconds}
    rpc.shutdown()
    if rank == 0:
        print(json.dumps(out, sort_keys=True), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
