"""Remote functions travel by importable qualified name (``module:qualname``), never as code.

Both peers import the same module; a lambda, a nested function or a function defined in a
script's ``__main__`` has no name another process can import, so it is refused up front with a
typed error rather than failing on the callee.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from protoref.rref.runtime.errors import UnresolvableFunctionError

__all__ = ["qualified_name", "resolve"]


def qualified_name(fn: Callable[..., Any] | str) -> str:
    """``module:qualname`` of ``fn`` (a string is taken as already qualified and checked)."""
    if isinstance(fn, str):
        name = fn
    else:
        module = getattr(fn, "__module__", None)
        qual = getattr(fn, "__qualname__", None)
        if not module or not qual:
            raise UnresolvableFunctionError(f"{fn!r} has no __module__/__qualname__")
        name = f"{module}:{qual}"
    module, _, qual = name.partition(":")
    if not module or not qual or "<" in qual:
        raise UnresolvableFunctionError(
            f"{name!r} is not an importable module:qualname (lambdas and nested functions "
            "cannot be called remotely)"
        )
    if module == "__main__":
        raise UnresolvableFunctionError(
            f"{name!r} lives in __main__, which other processes cannot import; move it to a module"
        )
    return name


def resolve(name: str) -> Callable[..., Any]:
    """Import ``module`` and walk ``qualname``; a typed error says which part failed."""
    module_name, _, qual = name.partition(":")
    if not module_name or not qual:
        raise UnresolvableFunctionError(f"{name!r} is not module:qualname")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as err:
        raise UnresolvableFunctionError(f"cannot import {module_name!r}: {err}") from err
    for part in qual.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as err:
            raise UnresolvableFunctionError(f"{name!r}: no attribute {part!r}") from err
    if not callable(obj):
        raise UnresolvableFunctionError(f"{name!r} is not callable")
    return obj  # type: ignore[no-any-return]
