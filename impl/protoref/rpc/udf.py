"""Remote functions travel by qualified name (``module:qualname``), never as code.

The callee imports ``module`` and walks ``qualname``, as pickle does for a function. A function
of the running script (``__main__``, or ``__mp_main__`` in a process multiprocessing spawned)
travels as ``__main__:name`` and is looked up in the callee's own ``__main__``: workers running
the same script, as torch RPC programs do, find the same function there (torch's pickle makes
the same assumption). A lambda or a nested function has no name to look up, so it is refused up
front with a typed error rather than failing on the callee (torch: "Can't pickle local object").

:func:`async_execution` is ``torch.distributed.rpc.functions.async_execution``: the callee
sends the reply when the Future the function returns completes.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from typing import Any, Final, TypeVar

from protoref.rpc.errors import UnresolvableFunctionError

__all__ = ["ASYNC_ATTRIBUTE", "async_execution", "is_async", "qualified_name", "resolve"]

F = TypeVar("F", bound=Callable[..., Any])
#: The attribute torch's decorator sets (so a function decorated by torch's works here too).
ASYNC_ATTRIBUTE: Final = "_wrapped_async_rpc_function"
_MAIN_ALIASES: Final = frozenset({"__main__", "__mp_main__"})


def async_execution(fn: F) -> F:
    """torch.distributed.rpc.functions.async_execution: ``fn`` returns a Future (ours, torch's
    or concurrent's) and the callee replies with its value once it completes, without holding
    an RPC thread meanwhile. With ``staticmethod``/``classmethod`` it must be the inner
    decorator, as in torch."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    setattr(wrapper, ASYNC_ATTRIBUTE, fn)
    return wrapper  # type: ignore[return-value]


def is_async(fn: object) -> bool:
    return hasattr(fn, ASYNC_ATTRIBUTE)


def qualified_name(fn: Callable[..., Any] | str) -> str:
    """``module:qualname`` of ``fn`` (a string is taken as already qualified and checked)."""
    if isinstance(fn, str):
        name = fn
    else:
        if not callable(fn):
            raise TypeError("function should be callable.")  # torch's text
        module = getattr(fn, "__module__", None)
        qual = getattr(fn, "__qualname__", None)
        if not module or not qual:
            raise UnresolvableFunctionError(f"{fn!r} has no __module__/__qualname__")
        short = getattr(fn, "__name__", None)
        if short and getattr(sys.modules.get(module), short, None) is fn:
            qual = short  # a builtin's qualname may name a class the module does not export
        if module in _MAIN_ALIASES:
            module = "__main__"
        name = f"{module}:{qual}"
    module, _, qual = name.partition(":")
    if not module or not qual or "<" in qual:
        raise UnresolvableFunctionError(
            f"{name!r} is not an importable module:qualname (lambdas and nested functions "
            "cannot be called remotely)"
        )
    return name


def resolve(name: str) -> Callable[..., Any]:
    """Import ``module`` and walk ``qualname``; a typed error says which part failed."""
    module_name, _, qual = name.partition(":")
    if not module_name or not qual:
        raise UnresolvableFunctionError(f"{name!r} is not module:qualname")
    try:
        obj: Any = (
            sys.modules["__main__"]
            if module_name == "__main__"
            else importlib.import_module(module_name)
        )
    except ImportError as err:
        raise UnresolvableFunctionError(f"cannot import {module_name!r}: {err}") from err
    for part in qual.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as err:
            where = (
                " in this worker's __main__ (a function of a script is found only on workers "
                "running that same script)"
                if module_name == "__main__"
                else ""
            )
            raise UnresolvableFunctionError(f"{name!r}: no attribute {part!r}{where}") from err
    if not callable(obj):
        raise UnresolvableFunctionError(f"{name!r} is not callable")
    return obj  # type: ignore[no-any-return]
