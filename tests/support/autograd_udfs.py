"""UDFs of the distributed autograd runtime tests (importable by name, as remote functions
must be), written as a torch program's would be."""

from __future__ import annotations

import threading

from protoref import rpc
from protoref.autograd import Tensor

#: Opened by a test to let :func:`gated_square` answer (a call left in flight).
GATE = threading.Event()


def mul3(x: Tensor) -> Tensor:
    return x * 3


def square(x: Tensor) -> Tensor:
    return x * x


def nested(x: Tensor, y: Tensor, via: str) -> Tensor:
    """Calls on (a nested call under the caller's context), then uses the answer."""
    return rpc.rpc_sync(via, mul3, (x,)) + y


def log_value(x: Tensor) -> None:
    """A logging call: the request carries grad, the answer none (hangs torch 2.13's FAST
    mode backward)."""
    del x


def gated_square(x: Tensor) -> Tensor:
    if not GATE.wait(timeout=60):
        raise TimeoutError("the gate was never opened")
    return x * x


def param(value: float) -> Tensor:
    """A parameter created on the callee (held there in an RRef)."""
    return Tensor(value, requires_grad=True)
