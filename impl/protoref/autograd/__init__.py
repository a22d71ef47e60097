"""Distributed autograd (the Reference variant of spec/autograd/DistAutograd.tla), shaped like
``torch.distributed.autograd``: ``context``, ``backward``, ``get_gradients``, torch's private
helpers and ``is_available``; and the scalar tensors it differentiates (``tensor``).

The protocol core is :mod:`protoref.autograd.core.machine` (pure transitions, one per spec action);
the simulator is :mod:`protoref.autograd.sim.simulator` (not imported here, so that ``python -m
protoref.autograd.sim.simulator`` runs it as a fresh module); one worker's driver is
:mod:`protoref.autograd.runtime.node`.
"""

from protoref.autograd.runtime.api import (
    DistAutogradContext,
    _current_context,
    _get_debug_info,
    _get_max_id,
    _init,
    _is_valid_context,
    _new_context,
    _release_context,
    _retrieve_context,
    backward,
    context,
    get_gradients,
    is_available,
)
from protoref.autograd.runtime.engine import Tensor, tensor

__all__ = [
    "DistAutogradContext",
    "Tensor",
    "_current_context",
    "_get_debug_info",
    "_get_max_id",
    "_init",
    "_is_valid_context",
    "_new_context",
    "_release_context",
    "_retrieve_context",
    "backward",
    "context",
    "get_gradients",
    "is_available",
    "tensor",
]
