"""The UDFs and the victim's frame filter shared by the two mid-backward death programs
(dead_in_backward.py, dead_traced.py): importable by module name on every worker, since each
worker runs its program from this folder."""

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
