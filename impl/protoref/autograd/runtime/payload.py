"""Tensors inside a call's arguments or a result, and their codec for the wire.

torch's ``getMessageWithAutograd`` registers a ``SendRpcBackward`` for the tensors of a message
that require grad, and ``addRecvRpcBackward`` makes the receiver's copies of those tensors the
outputs of a ``RecvRpcBackward``. :func:`grad_tensors` finds them in a payload (lists, tuples,
dict values, as the RPC codec walks it), in a fixed order both sides agree on (the order of
the encoded value). :class:`TensorCodec` is the opt-in codec that carries a scalar tensor as
``{"value": ..., "requires_grad": ...}``, never pickled; the autograd metadata (context id,
message id, sender) travels in the frame, not in the payload.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from pydantic import JsonValue

from protoref.autograd.runtime.engine import Tensor
from protoref.autograd.runtime.torch_engine import is_tensor

__all__ = ["TensorCodec", "grad_tensors", "tensors_in"]

#: How deep a payload is walked (the RPC codec refuses deeper values anyway).
_MAX_DEPTH = 64


def tensors_in(value: object, _depth: int = 0) -> Iterator[Any]:
    """Every :class:`Tensor` or torch tensor in ``value`` (lists, tuples, dict values), in
    encoding order."""
    if isinstance(value, Tensor) or is_tensor(value):
        yield value
    elif _depth < _MAX_DEPTH:
        if isinstance(value, list | tuple):
            for v in value:
                yield from tensors_in(v, _depth + 1)
        elif isinstance(value, dict):
            for v in value.values():
                yield from tensors_in(v, _depth + 1)


def grad_tensors(value: object) -> list[Any]:
    """The tensors of ``value`` that require grad: those a message's send function feeds."""
    return [t for t in tensors_in(value) if t.requires_grad]


class TensorCodec:
    """The RPC codec of :class:`~protoref.autograd.runtime.engine.Tensor` (name
    ``"protoref.tensor"``): its value and ``requires_grad``; the receiver's copy is a fresh leaf,
    which the autograd layer then makes an output of the message's recv function."""

    name = "protoref.tensor"

    def handles(self, value: object) -> bool:
        return isinstance(value, Tensor)

    def encode(self, value: Any) -> JsonValue:
        if not isinstance(value, Tensor):
            raise TypeError(f"not a protoref tensor: {type(value).__name__}")
        return {"value": value.value, "requires_grad": value.requires_grad}

    def decode(self, data: JsonValue) -> Any:
        if not isinstance(data, dict) or set(data) != {"value", "requires_grad"}:
            raise ValueError(f"a tensor is {{value, requires_grad}}, got {data!r}")
        value, requires = data["value"], data["requires_grad"]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise ValueError(f"a tensor's value is a finite number, got {value!r}")
        if not isinstance(requires, bool):
            raise ValueError(f"requires_grad is a bool, got {requires!r}")
        return Tensor(value, requires_grad=requires)
