"""torch's RRef helpers: ``rref.rpc_sync().f(*args)``, ``rref.rpc_async().f(...)``,
``rref.remote().f(...)`` run method ``f`` of the referenced value on its owner.

torch (``rref_proxy.py``) first asks the owner for the value's type, to learn whether the
method is an ``@rpc.functions.async_execution`` one, then calls ``_local_invoke`` or
``_local_invoke_async_execution`` there. :func:`invoke` decides on the owner instead, where the
method is at hand, so a call costs one round trip instead of two: it is always run as an async
function, returning the method's own Future when the method is async, a completed one otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protoref.rpc.futures import Future
from protoref.rpc.udf import async_execution, is_async

__all__ = ["RRefProxy", "invoke"]


@async_execution
def invoke(rref: Any, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """(On the owner) ``getattr(rref.local_value(), method)(*args, **kwargs)`` as a Future;
    ``rref`` is an RRef handle (typed Any: handle.py imports this module)."""
    bound = getattr(rref.local_value(), method)
    out = bound(*args, **kwargs)
    if is_async(bound):
        return out
    done: Future[Any] = Future()
    done.set_result(out)
    return done


class RRefProxy:
    """What ``rref.rpc_sync()`` / ``rpc_async()`` / ``remote()`` return: attribute access
    gives a function that runs that method on the owner (torch's RRefProxy)."""

    def __init__(self, call: Callable[..., Any], mode: str) -> None:
        self._call = call  # (mode, method, args, kwargs) -> the call's result
        self._mode = mode

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method.startswith("__"):
            raise AttributeError(method)

        def run(*args: Any, **kwargs: Any) -> Any:
            return self._call(self._mode, method, args, kwargs)

        return run
