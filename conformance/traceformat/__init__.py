"""The trace format: what an implementation writes and a checker reads, imported by both.

A trace file is JSON lines (:mod:`~traceformat.lines`). Line 1 is a :class:`TraceHeader` (the
schema version, the protocol, its nodes, settings and seed); every other line is one event (a
subclass of :class:`TraceEventBase`, one per TLA+ action, defined by each implementation) and
the last line of a run that finished is a :class:`TraceEnd` (:mod:`~traceformat.records`).

TLA+ values are encoded ITF-style: strings, ints and bools as themselves; tuples, sequences and
records as JSON lists and objects; a set as ``{"#set": [...]}`` with its elements in a
deterministic order (:func:`sort_key`, :mod:`~traceformat.values`); a function as
``{"#map": [[k, v], ...]}``. Since schema version 3 a per-node set of an event's post-state may
be logged as what the acting node's slice gained and lost since the same node last logged it,
``{"#add": [...], "#del": [...]}``: :class:`SetDelta` writes and validates one,
:mod:`~traceformat.deltas` rebuilds the whole sets a trace's deltas stand for.

The package is the one-way boundary between the two sides (docs/conformance.md): ``protoref``
(the implementation) and ``tracecheck`` (the checker) both import it, it imports neither, and
neither imports the other (tracecheck reaches an implementation only through its plug-ins,
:mod:`tracecheck.plugins`). It needs pydantic and orjson, nothing else: structlog stays in
protoref's sinks.
"""

from traceformat.lines import MAX_LINE, LineError, encode_line, read_lines
from traceformat.records import (
    DELTA,
    DELTA_OR_WHOLE,
    SCHEMA_VERSION,
    SUPPORTED_SCHEMA_VERSIONS,
    WHOLE,
    FrozenModel,
    NodeClock,
    PostModel,
    SetDelta,
    TraceEnd,
    TraceEventBase,
    TraceHeader,
    delta_model,
    trusted,
)
from traceformat.values import TlaSet, sort_key, tla_set, tla_set_in

__all__ = [
    "DELTA",
    "DELTA_OR_WHOLE",
    "MAX_LINE",
    "SCHEMA_VERSION",
    "SUPPORTED_SCHEMA_VERSIONS",
    "WHOLE",
    "FrozenModel",
    "LineError",
    "NodeClock",
    "PostModel",
    "SetDelta",
    "TlaSet",
    "TraceEnd",
    "TraceEventBase",
    "TraceHeader",
    "delta_model",
    "encode_line",
    "read_lines",
    "sort_key",
    "tla_set",
    "tla_set_in",
    "trusted",
]
