"""Which worker's distributed autograd the calling thread acts for.

torch has one ``DistAutogradContainer`` per process; protoref may run several workers in one process
(tests, the in-process world), each thread acting for one. A thread is bound to a worker's
:class:`~protoref.autograd.runtime.node.AutogradNode` by :func:`bound` (the RPC layer binds its
request threads; an application binds its own), or by a resolver the RPC runtime registers
(:func:`set_resolver`: e.g. "the worker this thread's ``init_rpc`` made"); otherwise the process's
default (the last ``_init``) serves.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from protoref.autograd.runtime.node import AutogradNode

__all__ = ["bound", "current_node", "maybe_node", "set_default", "set_resolver"]

_local = threading.local()
_state: dict[str, object] = {"default": None, "resolver": None}
_lock = threading.Lock()


@contextmanager
def bound(node: AutogradNode) -> Iterator[AutogradNode]:
    """The calling thread acts for ``node`` inside the block."""
    stack: list[AutogradNode] = getattr(_local, "nodes", None) or []
    _local.nodes = stack
    stack.append(node)
    try:
        yield node
    finally:
        stack.pop()


def set_default(node: AutogradNode | None) -> None:
    """The node threads bound to none act for (``_init`` sets it)."""
    with _lock:
        _state["default"] = node


def set_resolver(resolver: Callable[[], AutogradNode | None] | None) -> None:
    """A function giving the calling thread's node, asked before the default."""
    with _lock:
        _state["resolver"] = resolver


def maybe_node() -> AutogradNode | None:
    stack: list[AutogradNode] = getattr(_local, "nodes", None) or []
    if stack:
        return stack[-1]
    resolver = _state["resolver"]
    if resolver is not None:
        found = resolver()  # type: ignore[operator]
        if found is not None:
            return found  # type: ignore[no-any-return]
    return _state["default"]  # type: ignore[return-value]


def current_node() -> AutogradNode:
    """The calling thread's node; torch's error when distributed autograd is not set up."""
    node = maybe_node()
    if node is None:
        raise RuntimeError(
            "Need to initialize distributed autograd using torch.distributed.autograd.init()"
        )
    return node
