"""How the checker reaches an implementation: one plug-in per implementation of a protocol.

tracecheck checks traces against the specs; it needs nothing of an implementation to do that
(the trace format is :mod:`traceformat`, which both sides import). Two things are the
implementation's own, and the checker gets them only from its :class:`Plugin`: the pydantic
schema of its events (validated before TLC runs, when the plug-in is there) and its seeded
simulator (what a campaign runs). Plug-ins are registered by entry point in the group
:data:`GROUP` (``[project.entry-points."tracecheck.plugins"]``, name -> ``module:PLUGIN``);
this project's three are the modules of this package, the only modules of tracecheck that
import ``protoref`` (tests/test_imports.py holds it to that). Another implementation registers
its own under its protocol's name, or none at all: without a plug-in, or with protoref not
installed, ``tracecheck validate`` still checks a trace against the spec, the trace contract
and every claim the trace makes; it only skips the implementation's own event schema.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Final

from pydantic import TypeAdapter

from tracecheck.errors import TracecheckError

__all__ = [
    "BUILTIN",
    "GROUP",
    "Plugin",
    "PluginUnavailableError",
    "Simulate",
    "event_schema",
    "load_plugin",
    "plugin_refs",
]

#: The entry-point group plug-ins are registered in.
GROUP: Final = "tracecheck.plugins"
#: This project's plug-ins, by name: what the group holds once the project is installed, and
#: what is used when its metadata is not (a source checkout on the path, an older install).
BUILTIN: Final = {
    "rref": "tracecheck.plugins.rref:PLUGIN",
    "rendezvous": "tracecheck.plugins.rendezvous:PLUGIN",
    "autograd": "tracecheck.plugins.autograd:PLUGIN",
}

#: ``simulate(seed, steps, out_path)``: one seeded run, its trace written to ``out_path``.
Simulate = Callable[[int, int, Path], None]


@dataclass(frozen=True)
class Plugin:
    """What the checker may ask of one implementation of ``protocol``."""

    protocol: str
    #: Who implements it (for messages): e.g. ``"protoref"``.
    implementation: str
    #: The implementation's own event schema, a pydantic ``TypeAdapter`` every event of its
    #: traces is validated against before TLC runs (:mod:`tracecheck.traces.schema`).
    event_schema: Callable[[], TypeAdapter[Any]] | None = None
    #: Its seeded simulator, for ``tracecheck campaign``.
    simulate: Simulate | None = None


class PluginUnavailableError(TracecheckError):
    """A plug-in is registered, but the implementation it reaches is not installed."""


def plugin_refs() -> dict[str, str]:
    """Plug-in name -> ``module:attribute``: the entry points of :data:`GROUP` over
    :data:`BUILTIN`."""
    refs = dict(BUILTIN)
    refs |= {ep.name: ep.value for ep in entry_points(group=GROUP)}
    return refs


def load_plugin(name: str) -> Plugin:
    """The plug-in registered as ``name`` (a protocol name, for the project's own)."""
    refs = plugin_refs()
    ref = refs.get(name)
    if ref is None:
        known = ", ".join(sorted(refs)) or "none"
        raise TracecheckError(f"no plug-in {name!r} in {GROUP} (installed: {known})")
    module_name, _, attribute = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if exc.name is not None and "." not in exc.name:
            # a whole package is missing (the implementation is not installed): the plug-in
            # is unavailable, which validation may go on without
            raise PluginUnavailableError(
                f"plug-in {name!r} ({ref}) cannot be loaded: {exc} (its implementation is "
                "not installed?)"
            ) from exc
        # the implementation is there, but not what the plug-in imports: a broken install,
        # never skipped quietly
        raise TracecheckError(f"plug-in {name!r} ({ref}) is broken: {exc}") from exc
    plugin = getattr(module, attribute, None)
    if not isinstance(plugin, Plugin):
        raise TracecheckError(f"plug-in {name!r}: {ref} is not a tracecheck.plugins.Plugin")
    return plugin


def event_schema(protocol: str) -> TypeAdapter[Any] | None:
    """The event schema of ``protocol``'s plug-in, or None when there is no plug-in of that
    name, it has no schema, or its implementation is not installed (the trace is then checked
    without it: by the trace contract, its claims and the spec)."""
    if protocol not in plugin_refs():
        return None
    try:
        plugin = load_plugin(protocol)
    except PluginUnavailableError:
        return None
    if plugin.event_schema is None:
        return None
    adapter = plugin.event_schema()
    if not isinstance(adapter, TypeAdapter):
        raise TracecheckError(f"plug-in {protocol!r}: its event schema is not a TypeAdapter")
    return adapter
