"""Checking one trace file in windows, as ``tracecheck validate --window`` does (the stream
tests of tests/conformance)."""

from __future__ import annotations

from pathlib import Path

from tracecheck.protocols.mapping import ProtocolMap
from tracecheck.replay.javareader import reader_classes
from tracecheck.replay.stream import Streamed, stream_file
from tracecheck.replay.tlcrun import spec_library, spec_variables
from tracecheck.replay.validate import check_schema
from tracecheck.replay.verdicts import TraceVerdict
from tracecheck.traces.load import peek_trace


def stream_windows(
    path: Path, mapping: ProtocolMap, spec_root: Path, window: int, *, walk: bool = True
) -> Streamed:
    """``path`` checked through ``mapping``'s spec in windows of ``window`` events."""
    library = spec_library(spec_root, mapping)
    return stream_file(
        path,
        peek_trace(path).header,
        mapping,
        library,
        spec_variables(library, mapping),
        None,
        reader_classes(),
        window=window,
        check_schema=check_schema,
        walk=walk,
    )


def same_verdict(windowed: TraceVerdict, whole: TraceVerdict, *, reason: bool = True) -> None:
    """The windowed verdict is the whole run's: accepted alike, the same events matched, the
    same first rejected event (and, with ``reason``, the same kind and reason)."""
    assert windowed.accepted == whole.accepted
    assert windowed.matched == whole.matched
    if whole.rejection is None:
        assert windowed.rejection is None
        return
    assert windowed.rejection is not None
    fields = ("index", "line", "event") + (("kind", "reason") if reason else ())
    for field in fields:
        assert getattr(windowed.rejection, field) == getattr(whole.rejection, field), field
