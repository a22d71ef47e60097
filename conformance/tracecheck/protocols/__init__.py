"""The mapping tables of the project's protocols, by protocol name (the trace header's)."""

from __future__ import annotations

import importlib

from tracecheck.errors import TracecheckError
from tracecheck.plugins import Simulate, load_plugin
from tracecheck.protocols.mapping import ProtocolMap

__all__ = ["MAPPINGS", "load_mapping", "load_simulator"]

#: protocol name -> "module:attribute" of its ProtocolMap; imported on first use.
MAPPINGS: dict[str, str] = {
    "rref": "tracecheck.protocols.rref:RREF",
    "rendezvous": "tracecheck.protocols.rendezvous:RENDEZVOUS",
    "autograd": "tracecheck.protocols.autograd:AUTOGRAD",
}


def load_simulator(protocol: str) -> Simulate:
    """The seeded simulator a campaign runs for ``protocol``: its plug-in's
    (:mod:`tracecheck.plugins`)."""
    simulate = load_plugin(protocol).simulate
    if simulate is None:
        raise TracecheckError(f"the plug-in {protocol!r} has no simulator")
    return simulate


def load_mapping(ref: str) -> ProtocolMap:
    """A protocol name from :data:`MAPPINGS`, or an explicit ``package.module:ATTRIBUTE``."""
    target = MAPPINGS.get(ref, ref)
    if ":" not in target:
        known = ", ".join(sorted(MAPPINGS)) or "none yet"
        raise TracecheckError(
            f"no mapping for protocol {ref!r} (known: {known}); pass --mapping module:NAME"
        )
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise TracecheckError(f"cannot import mapping module {module_name}: {exc}") from exc
    mapping = getattr(module, attribute, None)
    if not isinstance(mapping, ProtocolMap):
        raise TracecheckError(f"{target} is not a ProtocolMap")
    return mapping
