"""The API of ``torch.distributed.autograd``, for protoref's workers.

Names, signatures, error types and texts follow torch 2.13 (torch/distributed/autograd/
__init__.py and the C++ bindings it imports): ``context`` (a context manager whose ``__enter__``
returns the id, ``worker_id << 48 | n``, and whose ``__exit__`` releases it, also when the block
raises), ``backward(context_id, roots, retain_graph=False)``, ``get_gradients(context_id)``, the
private helpers ``_init``, ``_new_context``, ``_release_context``, ``_retrieve_context``,
``_is_valid_context``, ``_current_context``, ``_get_max_id``, ``_get_debug_info``, and
``is_available()``. A torch program runs by changing its imports
(``import protoref.autograd as dist_autograd``); the tensors are torch's (torch's local autograd,
:mod:`protoref.autograd.runtime.torch_engine`) or protoref's scalar
:func:`~protoref.autograd.runtime.engine.tensor`. Every call acts for the calling thread's worker
(:mod:`protoref.autograd.runtime.current`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from protoref.autograd.core.ids import AutogradId, from_int
from protoref.autograd.runtime import current, dispatch
from protoref.autograd.runtime.engine import Tensor
from protoref.autograd.runtime.node import AutogradNode
from protoref.autograd.runtime.torch_engine import is_tensor as is_torch_tensor

__all__ = [
    "DistAutogradContext",
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
]


def _id(context_id: int, name: str) -> AutogradId:
    if isinstance(context_id, bool) or not isinstance(context_id, int):
        raise TypeError(
            f"{name}(): incompatible function arguments. The following argument types are "
            f"supported:\n    1. (context_id: int) -> ...\n\nInvoked with: {context_id!r}"
        )
    if context_id < 0:
        raise RuntimeError(f"Could not find autograd context with id: {context_id}")
    return from_int(context_id)


class DistAutogradContext:
    """torch's ``DistAutogradContext`` handle: a context of this worker's container."""

    def __init__(self, node: AutogradNode, ctx: AutogradId) -> None:
        self._node = node
        self._ctx = ctx

    def _context_id(self) -> int:
        return self._ctx.to_int()

    def _known_worker_ids(self) -> set[int]:
        return self._node.functions(self._ctx)[2]

    def _send_functions(self) -> dict[int, dispatch.Send]:
        return self._node.functions(self._ctx)[0]

    def _recv_functions(self) -> dict[int, dispatch.Recv]:
        return self._node.functions(self._ctx)[1]

    def __repr__(self) -> str:
        return f"<DistAutogradContext {self._context_id()}>"


def is_available() -> bool:
    """Distributed autograd is always available in protoref."""
    return True


_init_lock = threading.Lock()


def _init(worker_id: int) -> None:
    """``_init(worker_id)`` (``init_rpc`` calls it): the container of this process's worker.
    Again with the same id: nothing; with another: torch's error."""
    with _init_lock:
        node = current.maybe_node()
        if node is not None:
            if node.rank != worker_id:
                raise RuntimeError(
                    f"Container is already initialized with worker_id: {node.rank}, cannot "
                    f"initialize with different worker_id: {worker_id}"
                )
            return
        current.set_default(AutogradNode(worker_id, _NoTransport()))


class _NoTransport:
    """The transport of a worker ``_init`` made alone (no RPC agent): it has no peers."""

    def send(self, dst: int, frame: Any) -> None:
        raise RuntimeError(f"worker {dst} is unreachable: no RPC agent is running")


def _new_context() -> DistAutogradContext:
    node = current.current_node()
    return DistAutogradContext(node, node.new_context())


def _release_context(context_id: int) -> None:
    node = current.current_node()
    node.release(_id(context_id, "_release_context"))


def _retrieve_context(context_id: int) -> DistAutogradContext:
    node = current.current_node()
    ctx = _id(context_id, "_retrieve_context")
    node.check_held(ctx)
    return DistAutogradContext(node, ctx)


def _is_valid_context(context_id: int) -> None:
    """Raises "Could not find autograd context with id" unless the context exists here."""
    current.current_node().check_held(_id(context_id, "_is_valid_context"))


def _current_context() -> DistAutogradContext:
    node = current.current_node()
    ctx = node.current()
    if ctx is None:
        raise RuntimeError(
            "Current thread doesn't have a valid autograd context. Please wrap your code using: "
            "`with torch.distributed.autograd.context() as context_id` to generate a valid "
            "context"
        )
    return DistAutogradContext(node, ctx)


def _get_max_id() -> int:
    return current.current_node().max_id()


def _get_debug_info() -> dict[str, int]:
    return current.current_node().debug_info()


def get_gradients(context_id: int) -> dict[Any, Any]:
    """This worker's leaves and their gradients accumulated in the context (never in
    ``.grad``): protoref's scalar tensors, or torch tensors keyed by the worker's own torch
    leaves."""
    return current.current_node().gradients(_id(context_id, "get_gradients"))


def backward(context_id: int, roots: Sequence[Any], retain_graph: bool = False) -> None:
    """Run the distributed backward pass from ``roots`` (scalar tensors: protoref's, or torch
    tensors of one element, differentiated by torch's autograd) in context ``context_id``;
    returns once every worker's part of it is over; errors are ``RuntimeError``, prefixed
    "Error on Node k:" where they arose."""
    if isinstance(roots, Tensor) or is_torch_tensor(roots) or not isinstance(roots, Sequence):
        raise TypeError(
            "backward(): incompatible function arguments. The following argument types are "
            "supported:\n    1. (contextId: int, roots: collections.abc.Sequence[Tensor], "
            f"retain_graph: bool = False) -> None\n\nInvoked with: {context_id!r}, {roots!r}"
        )
    ctx = _id(context_id, "backward")
    node = current.current_node()
    node.late_call(ctx)
    if not roots:
        raise RuntimeError("No tensors provided for gradient computation.")
    dispatch.check_roots(roots)
    node.backward(ctx, list(roots), bool(retain_graph))


class context:  # noqa: N801 - torch's name
    """``with dist_autograd.context() as context_id:`` -- a context for this thread; released
    on exit, also when the block raises."""

    def __enter__(self) -> int:
        self.autograd_context = _new_context()
        return self.autograd_context._context_id()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        _release_context(self.autograd_context._context_id())
