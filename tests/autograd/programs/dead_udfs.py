"""The UDFs, the victim's frame filter and the workers' part shared by the two mid-backward
death programs (dead_in_backward.py, dead_traced.py): importable by module name on every
worker, since each worker runs its program from this folder."""

import json
import time

import protoref.autograd as dist_autograd
import protoref.rpc as rpc
from protoref.rpc import current


def mul3(x):
    return x * 3


def nested(x, y):
    return rpc.rpc_sync("worker2", mul3, args=(x,)) + y


def held():
    return dist_autograd._get_debug_info()["num_autograd_contexts"]


def drop_backward_messages():
    """The victim: its part of every backward pass never runs (a pass waits on it)."""
    node = current.current_worker().maybe_plugin("autograd").autograd
    on_frame = node.on_frame

    def filtered(frame):
        if frame.msg.type not in ("BWD_START", "BWD_REQ"):
            on_frame(frame)

    node.on_frame = filtered


def after_the_death(out, x):
    """Worker 0 after the failed pass: nothing held on it or on worker 1, and its thread opens
    a new context and runs a backward pass through worker 1."""
    out["held_here"] = held()
    out["held_on_worker1"] = rpc.rpc_sync("worker1", held)
    with dist_autograd.context() as context_id:
        loss = rpc.rpc_sync("worker1", mul3, args=(x,))
        dist_autograd.backward(context_id, [loss])
        out["new_context_grad"] = dist_autograd.get_gradients(context_id)[x].item()
    return out


def run_worker(rank, drive):
    """Worker ``rank``: 0 runs ``drive``, 2 is the victim (killed by the test), 1 serves; each
    survivor prints one JSON line after the shutdown."""
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=3)
    if rank == 2:
        drop_backward_messages()
        time.sleep(600)  # killed by the test
    out = drive() if rank == 0 else {}
    report = rpc.shutdown()
    out["dead_peers"] = list(report.dead_peers)
    print(json.dumps(out), flush=True)
