"""The trace contract shared by every protocol: header, event base, value encoding, sinks.

A trace file is JSON lines. Line 1 is a :class:`TraceHeader`; every other line is one event
(a subclass of :class:`TraceEventBase`, one per TLA+ action, defined by each protocol) emitted by
a driver after the core step it records.

TLA+ values are encoded ITF-style: strings, ints and bools as themselves; tuples, sequences and
records as JSON lists and objects; a set as ``{"#set": [...]}`` with its elements in a
deterministic order (:func:`sort_key`); a function as ``{"#map": [[k, v], ...]}`` (no RRef
variable needs one per node: every per-node variable of RRef.tla is a set or a number).

Schema version 3 adds the delta form of a per-node set in an event's post-state,
``{"#add": [...], "#del": [...]}`` (:class:`SetDelta`): what the acting node's slice of the
variable gained and lost since the same node last logged it (since the empty set, before its
first event that logs it). A node's slice changes by an element or not at all in most steps,
while it is logged at every event of the node that may touch it: written out whole, the sets
made a trace's size quadratic in its length, a checker diffed them again to find what changed,
and a tracer re-joined every set's JSON at each step. A reader of version 3 also takes a whole
``{"#set": [...]}`` where a delta may be (:data:`DELTA_OR_WHOLE`), as the node's new value, so a
tracer may keep logging whole sets; version 2 traces log only those.

The format itself (values, records, deltas, lines) is the package :mod:`traceformat`, which
tracecheck imports too; this package re-exports it, and adds where records go (``sinks``) and
reading a trace back through a protocol's event adapter (``reading``). Only ``sinks`` imports
structlog: :class:`JsonlSink` wraps a structlog logger whose processor chain renders each
record as one JSON line, written by a buffered line logger. :class:`NullSink` reports itself
disabled so drivers skip building events at all when tracing is off.
"""

from protoref.tracing.reading import Trace, read_trace, read_trace_file
from protoref.tracing.sinks import (
    BUFFER_BYTES,
    JsonlSink,
    LineLogger,
    MemorySink,
    NullSink,
    TraceSink,
)
from traceformat import (
    DELTA,
    DELTA_OR_WHOLE,
    SCHEMA_VERSION,
    SUPPORTED_SCHEMA_VERSIONS,
    WHOLE,
    FrozenModel,
    NodeClock,
    PostModel,
    SetDelta,
    TlaSet,
    TraceEnd,
    TraceEventBase,
    TraceHeader,
    delta_model,
    encode_line,
    sort_key,
    tla_set,
    tla_set_in,
    trusted,
)

__all__ = [
    "BUFFER_BYTES",
    "DELTA",
    "DELTA_OR_WHOLE",
    "SCHEMA_VERSION",
    "SUPPORTED_SCHEMA_VERSIONS",
    "WHOLE",
    "FrozenModel",
    "JsonlSink",
    "LineLogger",
    "MemorySink",
    "NodeClock",
    "NullSink",
    "PostModel",
    "SetDelta",
    "TlaSet",
    "Trace",
    "TraceEnd",
    "TraceEventBase",
    "TraceHeader",
    "TraceSink",
    "delta_model",
    "encode_line",
    "read_trace",
    "read_trace_file",
    "sort_key",
    "tla_set",
    "tla_set_in",
    "trusted",
]

#: The version this package writes: 4, version 3 (the per-node sets of a post-state as deltas)
