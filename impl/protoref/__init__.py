"""protoref: executable reference implementations of PyTorch's distributed protocols.

Each protocol (RRef lifecycle, dynamic rendezvous, distributed autograd context) is a sans-IO
core driven by a deterministic simulator or a real runtime, emitting one trace event per
protocol transition; see docs/ for the design. Protocol packages: :mod:`protoref.rref`.
"""

from protoref.errors import (
    InvariantViolationError,
    LeakError,
    ProtocolError,
    ProtorefError,
    TraceFormatError,
)
from protoref.ids import GloballyUniqueId, WorkerId
from protoref.tracing import JsonlSink, MemorySink, NullSink, TraceHeader, TraceSink

__all__ = [
    "GloballyUniqueId",
    "InvariantViolationError",
    "JsonlSink",
    "LeakError",
    "MemorySink",
    "NullSink",
    "ProtocolError",
    "ProtorefError",
    "TraceFormatError",
    "TraceHeader",
    "TraceSink",
    "WorkerId",
]
