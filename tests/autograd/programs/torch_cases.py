"""torch's own distributed-autograd test cases (the shapes of torch/testing/_internal/
distributed/rpc/dist_autograd_test.py: simple, nested, several passes, get_gradients of
leaves, remote), on torch tensors, run unchanged on protoref and on torch.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python torch_cases.py RANK   # RANK 0, 1, 2

The import block below is the only text that differs (torch.distributed.autograd and
torch.distributed.rpc on torch). Worker 0 prints one JSON line.
"""

import json
import sys

import torch

import protoref.autograd as dist_autograd
import protoref.rpc as rpc


def r(t):
    return [round(v, 5) for v in t.detach().reshape(-1).tolist()]


def nested_add(t1, t2, dst):
    return rpc.rpc_sync(dst, torch.add, args=(t1, t2)) * 2


def mul_then_sum(t1, t2):
    return (t1 * t2).sum()


def simple():
    with dist_autograd.context() as cid:
        t1 = torch.ones(3, 3, requires_grad=True)
        t2 = torch.zeros(3, 3, requires_grad=True)
        ret = rpc.rpc_sync("worker1", torch.add, args=(t1, t2))
        kind = [ret.requires_grad, ret.is_leaf]
        dist_autograd.backward(cid, [ret.sum()])
        grads = dist_autograd.get_gradients(cid)
        return [kind, len(grads), r(grads[t1]), r(grads[t2]), t1.grad is None]


def nested():
    with dist_autograd.context() as cid:
        t1 = torch.tensor([1.0, 2.0], requires_grad=True)
        t2 = torch.tensor([3.0, 4.0], requires_grad=True)
        ret = rpc.rpc_sync("worker1", nested_add, args=(t1, t2, "worker2"))
        loss = (ret * t1).sum()
        dist_autograd.backward(cid, [loss])
        grads = dist_autograd.get_gradients(cid)
        return [r(ret), r(grads[t1]), r(grads[t2])]


def several_passes():
    with dist_autograd.context() as cid:
        t1 = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        t2 = torch.tensor([2.0, 2.0, 2.0], requires_grad=True)
        loss = rpc.rpc_sync("worker1", mul_then_sum, args=(t1, t2))
        out = []
        for _ in range(2):
            dist_autograd.backward(cid, [loss], retain_graph=True)
            grads = dist_autograd.get_gradients(cid)
            out.append([r(grads[t1]), r(grads[t2])])
        dist_autograd.backward(cid, [loss])
        try:
            dist_autograd.backward(cid, [loss])
            out.append("no error")
        except RuntimeError as err:
            out.append("backward through the graph a second time" in str(err))
        return out


def local_and_remote_leaves():
    with dist_autograd.context() as cid:
        t1 = torch.tensor([1.0, -1.0], requires_grad=True)
        t2 = torch.tensor([0.5, 3.0], requires_grad=True)
        t3 = torch.tensor([2.0, 2.0], requires_grad=True)  # never sent
        remote = rpc.rpc_sync("worker1", torch.mul, args=(t1, t2))
        loss = (remote + t1 * t3).sum() + t1.pow(2).sum()
        dist_autograd.backward(cid, [loss])
        grads = dist_autograd.get_gradients(cid)
        return [sorted(r(g) for g in grads.values()), r(grads[t1]), r(grads[t3])]


def remote_and_to_here():
    with dist_autograd.context() as cid:
        t1 = torch.tensor([1.0, 2.0], requires_grad=True)
        rref = rpc.remote("worker2", torch.mul, args=(t1, 3.0))
        value = rref.to_here()
        loss = (value * value).sum()
        dist_autograd.backward(cid, [loss])
        return [r(value), r(dist_autograd.get_gradients(cid)[t1])]


def main(rank):
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=3)
    out = {}
    if rank == 0:
        out["simple"] = simple()
        out["nested"] = nested()
        out["several_passes"] = several_passes()
        out["local_and_remote_leaves"] = local_and_remote_leaves()
        out["remote_and_to_here"] = remote_and_to_here()
    rpc.shutdown()
    if rank == 0:
        print(json.dumps(out, sort_keys=True), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
