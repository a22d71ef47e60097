"""The protocol plug-ins a worker runs: those installed under the ``protoref.rpc.plugins``
entry-point group (pyproject.toml names this project's: the RRef runtime and distributed
autograd), so the RPC layer names no protocol. Loaded once per process, in their ``order``.
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib.metadata import distributions
from typing import Final

from protoref.rpc.errors import RPCError
from protoref.rpc.hooks import PluginClass

__all__ = ["GROUP", "export", "installed"]

GROUP: Final = "protoref.rpc.plugins"


@cache
def installed() -> tuple[PluginClass, ...]:
    """Every installed plug-in class, in order. Every distribution's entry points count (not
    only the first of a name: a stale ``*.egg-info`` in the working folder, which is on
    ``sys.path``, would otherwise hide the installed one's)."""
    names: dict[str, str] = {}
    for dist in distributions():
        for ep in dist.entry_points:
            if ep.group == GROUP:
                names.setdefault(ep.name, ep.value)
    found: list[PluginClass] = []
    for value in sorted(set(names.values())):
        module, _, attr = value.partition(":")
        found.append(getattr(importlib.import_module(module), attr))
    return tuple(sorted(found, key=lambda cls: cls.order))


def export(name: str) -> object:
    """What a plug-in adds to :mod:`protoref.rpc` under ``name`` (e.g. ``remote``, ``RRef``)."""
    for cls in installed():
        if name in cls.exports:
            return cls.exports[name]
    raise AttributeError(f"no installed RPC plug-in ({GROUP}) provides {name!r}")


def require(name: str) -> object:
    """:func:`export` for a call that needs it: an RPCError names the missing plug-in part."""
    try:
        return export(name)
    except AttributeError as err:
        raise RPCError(str(err)) from None
