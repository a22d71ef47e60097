"""Loading implementation traces: JSON lines with a header, one event per protocol transition.

The trace contract (docs/conformance.md): line 1 is a header naming the schema version, the
protocol, the nodes, the settings and the seed; every other line is an event whose ``event`` is
the TLA+ action name, with the acting ``node``, a per-node ``seq``, a ``lamport`` clock, the
action's ``args`` and the acting node's ``post``-state (since version 3 a set in it may be
logged as a delta from the node's last logged value: :mod:`tracecheck.traces.postdelta`). Values use
the ITF conventions for what JSON lacks (``{"#set": [...]}``, ``{"#map": [[k, v], ...]}``);
:mod:`tracecheck.traces.jsonvalue` turns them into TLA+ values.

Everything malformed is a :class:`TraceFormatError` naming the file, the line and the field; a
trace is never half-loaded. Per-process logs merge into one causal order by Lamport clock.
"""

from __future__ import annotations

import heapq
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final, Literal, NamedTuple

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from tracecheck.nogc import paused_gc
from tracecheck.traces.errors import TraceFormatError
from tracecheck.traces.jsonvalue import string_problem
from tracecheck.traces.source import IDLE_SECONDS, MAX_LINE, is_stream, open_trace, trace_lines
from tracecheck.traces.spool import Spool
from traceformat import (
    SCHEMA_VERSION,
    SUPPORTED_SCHEMA_VERSIONS,
    TraceEnd,
    TraceHeader,
    trusted,
)

__all__ = [
    "LONG",
    "MAX_LINE",
    "SCHEMA_VERSION",
    "Trace",
    "TraceEnd",
    "TraceEvent",
    "TraceFormatError",
    "TraceHeader",
    "TracePeek",
    "load_trace",
    "merge_traces",
    "parse_trace_lines",
    "peek_trace",
    "spooled",
    "trace_windows",
]


class TraceEvent(BaseModel):
    """One protocol transition as the implementation logged it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["event"]
    event: str = Field(pattern=r"^[A-Z][A-Za-z0-9]*$")
    node: str
    seq: int = Field(ge=1)
    lamport: int = Field(ge=0)
    args: dict[str, Any] = Field(default_factory=dict)
    post: dict[str, Any] = Field(default_factory=dict)
    #: Schema 4, a step that takes a message from the network: the node that sent it and its
    #: Lamport clock at the send (the send is that node's event with that clock).
    sent_by: tuple[str, int] | None = None


class Trace(BaseModel):
    """A loaded trace: its header, its events in causal order, and where it came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str
    header: TraceHeader
    events: tuple[TraceEvent, ...]
    #: For each event, the file line it came from (1-based), for error messages.
    lines: tuple[int, ...]
    #: The closing line of a run that finished (schema 4): the checker then also requires the
    #: spec's quiescence at the trace's last state. None: the run did not say it finished.
    end: TraceEnd | None = None

    @property
    def finished(self) -> bool:
        return self.end is not None


_HEADER = TypeAdapter(TraceHeader)
_EVENT = TypeAdapter(TraceEvent)


def _problem(exc: ValidationError) -> str:
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "line"
    return f"field {field}: {first['msg']}"


def parse_trace_lines(
    lines: Iterable[str], source: str = "<trace>", *, max_events: int | None = None
) -> Trace:
    """Parse a whole trace; the header must come first and events must follow per-node order.
    With ``max_events``, only the trace's first that many events (as a run that did not say
    it finished): the lines after them are not read."""
    return next(_windows(lines, source, max_events, whole=True))[0]


def _windows(
    lines: Iterable[str], source: str, size: int | None, *, whole: bool = False
) -> Iterator[tuple[Trace, bool]]:
    """The trace's events in windows of ``size`` (all of them: None), each a :class:`Trace`
    of the same header and source whose lines are the file's, and whether it is the last;
    only the last carries the end line. ``whole``: stop after the first window
    (:func:`parse_trace_lines`)."""
    header: TraceHeader | None = None
    events: list[TraceEvent] = []
    numbers: list[int] = []
    last_seq: dict[str, int] = {}
    last_line = 0
    end: TraceEnd | None = None
    held = False  # a full window waits for the next event (then it is not the last)
    for number, text in enumerate(lines, start=1):
        last_line = number
        if not text.strip():
            continue
        if end is not None:
            raise TraceFormatError(source, number, "a line after the end line (kind=end)")
        if len(text) > MAX_LINE:
            raise TraceFormatError(
                source, number, f"a line of {len(text):,} characters (at most {MAX_LINE:,})"
            )
        try:
            # orjson: strict JSON (no NaN or Infinity, integers within 64 bits), in C
            raw = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise TraceFormatError(source, number, f"bad JSON: {exc.msg}") from exc
        if header is None:
            header = _header(raw, source, number)
            continue
        if type(raw) is dict and raw.get("kind") == "end":
            end = _end(raw, source, number, header, last_seq)
            continue
        event = _event(raw, source, number, header)
        expected = last_seq.get(event.node, 0) + 1
        if event.seq != expected:
            raise TraceFormatError(
                source,
                number,
                f"field seq: node {event.node} jumps to {event.seq}, "
                f"expected {expected} (a lost or repeated line?)",
            )
        last_seq[event.node] = event.seq
        if held:
            yield _window(source, header, events, numbers, None), False
            events, numbers, held = [], [], False
        events.append(event)
        numbers.append(number)
        if len(events) == size:
            if whole:
                break
            held = True
    if header is None:
        raise TraceFormatError(source, None, "empty trace: no header line")
    if not events:
        raise TraceFormatError(source, last_line, "trace has a header but no events")
    yield _window(source, header, events, numbers, end), True


def _window(
    source: str,
    header: TraceHeader,
    events: list[TraceEvent],
    numbers: list[int],
    end: TraceEnd | None,
) -> Trace:
    return Trace(source=source, header=header, events=tuple(events), lines=tuple(numbers), end=end)


def trace_windows(
    path: Path, size: int, *, idle: float = IDLE_SECONDS, source: str | None = None
) -> Iterator[tuple[Trace, bool]]:
    """The trace file's events in windows of ``size`` events, read as they are asked for (one
    window and the next event in memory at a time): each window is a :class:`Trace` of the
    file's header and source, its lines the file's, with whether it is the last (only the
    last holds the end line).
    Every line is checked as :func:`load_trace` checks it (the per-node ``seq`` across
    windows too); a malformed line is its TraceFormatError when its window is asked for.
    ``source``: the name the windows and errors give (a spool's copy is named as its stream)."""
    source = source or str(path)
    with open_trace(path, idle) as file:
        try:
            yield from _windows(trace_lines(file, source), source, size)
        except OSError as exc:
            raise TraceFormatError(source, None, f"cannot read: {exc.strerror}") from exc


#: The longest node name a header may give.
MAX_NODE_NAME = 256

#: The most nodes (and, apart, environment actors) a header may name. A spec's constants are
#: built from them (a node set, per-node functions): a header of 10,000 nodes ended in TLC's
#: StackOverflowError after the JVM had started, and one of 256 (a 23-event RRef trace) did
#: not finish in 300 s, while 64 was validated in 2.4 s. A header past this is refused first.
MAX_NODES = 64


_END_MODEL = TypeAdapter(TraceEnd)


def _end(
    raw: dict[str, Any], source: str, number: int, header: TraceHeader, seqs: dict[str, int]
) -> TraceEnd:
    """The closing line: only in schema 4, and its ``seqs`` must be what the file logged."""
    if header.schema_version < _END_VERSION:
        raise TraceFormatError(
            source,
            number,
            f"an end line (kind=end) needs schema_version {_END_VERSION}, "
            f"not {header.schema_version}",
        )
    try:
        end = _END_MODEL.validate_python(raw)
    except ValidationError as exc:
        raise TraceFormatError(source, number, _problem(exc)) from exc
    if end.seqs != seqs:
        lost = {n: (s, seqs.get(n, 0)) for n, s in end.seqs.items() if seqs.get(n, 0) != s}
        extra = sorted(set(seqs) - set(end.seqs))
        raise TraceFormatError(
            source,
            number,
            "field seqs: the end line's last seq per node differs from the events read "
            + "; ".join(f"{n}: {want} said, {got} read" for n, (want, got) in sorted(lost.items()))
            + (f"; nodes logged but not named: {extra}" if extra else "")
            + " (lost lines?)",
        )
    return end


#: The schema version that introduced the end line and ``sent_by``.
_END_VERSION = 4


def _header(raw: object, source: str, number: int) -> TraceHeader:
    if not isinstance(raw, dict) or raw.get("kind") != "header":
        raise TraceFormatError(source, number, "the first line must be the header (kind=header)")
    for field in ("nodes", "environment"):
        names = raw.get(field)
        if isinstance(names, list) and len(names) > MAX_NODES:
            raise TraceFormatError(
                source,
                number,
                f"field {field}: {len(names):,} names (at most {MAX_NODES}, refused before "
                "TLC starts: TLC does not check a model that size)",
            )
    version = raw.get("schema_version")
    if type(version) is not int or version not in SUPPORTED_SCHEMA_VERSIONS:
        readable = " and ".join(map(str, SUPPORTED_SCHEMA_VERSIONS))
        raise TraceFormatError(
            source,
            number,
            f"field schema_version: {version!r} is not supported "
            f"(this checker reads versions {readable})",
        )
    try:
        header = _HEADER.validate_python(raw)
    except ValidationError as exc:
        raise TraceFormatError(source, number, _problem(exc)) from exc
    if not header.nodes:
        raise TraceFormatError(source, number, "field nodes: a trace needs at least one node")
    for field, names in (("nodes", header.nodes), ("environment", header.environment)):
        for name in names:
            problem = "empty" if not name else string_problem(name)
            if problem is None and len(name) > MAX_NODE_NAME:
                problem = f"{len(name):,} characters (at most {MAX_NODE_NAME})"
            if problem is not None:
                raise TraceFormatError(source, number, f"field {field}: a node name is {problem}")
    clash = sorted(set(header.nodes) & set(header.environment))
    if clash:
        raise TraceFormatError(
            source, number, f"field environment: {clash} are also spec nodes (field nodes)"
        )
    return header


#: The keys of an event line, and those without the optional ``args``, ``post``, ``sent_by``.
_EVENT_KEYS: Final = frozenset(TraceEvent.model_fields)
_REQUIRED_KEYS: Final = _EVENT_KEYS - {"args", "post", "sent_by"}


def _constraint(field: str, name: str) -> Any:
    """The constraint ``name`` (``pattern``, ``ge``) that :class:`TraceEvent` declares on
    ``field``: the fast path below checks exactly what the model declares."""
    return next(
        getattr(m, name) for m in TraceEvent.model_fields[field].metadata if hasattr(m, name)
    )


_EVENT_NAME: Final = re.compile(_constraint("event", "pattern"))
_SEQ_MIN: Final[int] = _constraint("seq", "ge")
_LAMPORT_MIN: Final[int] = _constraint("lamport", "ge")
#: Event names seen to match the pattern (a regex match per line was a tenth of loading).
_NAMES: set[str] = set()


def _event(raw: object, source: str, number: int, header: TraceHeader) -> TraceEvent:
    if isinstance(raw, dict) and raw.get("kind") == "header":
        raise TraceFormatError(source, number, "a second header inside the trace")
    event = _plain_event(raw)
    if event is None:  # not the common form: pydantic says what is wrong, or builds it
        try:
            event = _EVENT.validate_python(raw)
        except ValidationError as exc:
            raise TraceFormatError(source, number, _problem(exc)) from exc
    if event.node not in header.nodes and event.node not in header.environment:
        raise TraceFormatError(
            source, number, f"field node: {event.node!r} is not among the header's nodes"
        )
    if event.sent_by is not None and header.schema_version < _END_VERSION:
        raise TraceFormatError(
            source, number, f"field sent_by: needs schema_version {_END_VERSION}"
        )
    return event


def _plain_event(raw: object) -> TraceEvent | None:
    """The event of a line in the form implementations write (exact JSON types, every field
    valid as :class:`TraceEvent` declares it), built without pydantic's validation (which was
    half of loading); None for anything else, which :data:`_EVENT` then validates. orjson
    gives objects string keys, so ``args`` and ``post`` are ``dict[str, Any]`` as they are."""
    if type(raw) is not dict:
        return None
    keys = raw.keys()
    if not (keys >= _REQUIRED_KEYS and keys <= _EVENT_KEYS):
        return None
    name, node, seq, lamport = raw["event"], raw["node"], raw["seq"], raw["lamport"]
    args, post = raw.get("args", {}), raw.get("post", {})
    if not (
        raw["kind"] == "event"
        and type(name) is str
        and (name in _NAMES or _named(name))
        and type(node) is str
        and type(seq) is int
        and seq >= _SEQ_MIN
        and type(lamport) is int
        and lamport >= _LAMPORT_MIN
        and type(args) is dict
        and type(post) is dict
    ):
        return None
    sent_by = raw.get("sent_by")
    if sent_by is not None:
        if not (
            type(sent_by) is list
            and len(sent_by) == 2
            and type(sent_by[0]) is str
            and type(sent_by[1]) is int
        ):
            return None
        sent_by = (sent_by[0], sent_by[1])
    values = {"kind": "event", "event": name, "node": node, "seq": seq, "lamport": lamport}
    return trusted(TraceEvent, values | {"args": args, "post": post, "sent_by": sent_by})


def _named(name: str) -> bool:
    if _EVENT_NAME.fullmatch(name) is None:  # (fullmatch: Python's $ also matches before a \n)
        return False
    _NAMES.add(name)
    return True


def load_trace(
    path: Path,
    *,
    idle: float = IDLE_SECONDS,
    max_events: int | None = None,
    source: str | None = None,
) -> Trace:
    """Read one trace file (see :func:`parse_trace_lines`, and ``max_events`` there), streamed:
    each line is parsed as it is read, so a malformed line k stops the read there (a pipe,
    FIFO or device is read as :mod:`tracecheck.traces.source` says, its waits bounded by
    ``idle`` seconds). ``source``: the name the trace and errors give (default ``path``)."""
    source = source or str(path)
    with open_trace(path, idle) as file, paused_gc(keep=True):
        try:
            lines = trace_lines(file, source)
            return parse_trace_lines(lines, source, max_events=max_events)
        except OSError as exc:
            raise TraceFormatError(source, None, f"cannot read: {exc.strerror}") from exc


class TracePeek(NamedTuple):
    """What a trace file's first line says, and about how many events follow, before it is
    loaded: enough to batch it (:func:`tracecheck.replay.validate.validate_files`)."""

    path: Path
    header: TraceHeader
    #: The lines after the header (its events, give or take blank lines).
    lines: int
    #: The trace itself when it is already loaded, else None.
    trace: Trace | None = None
    #: What the path could be read only once (a pipe, FIFO or device): its lines copied to a
    #: regular file as they are asked for (:mod:`tracecheck.traces.spool`; read it through
    #: :func:`spooled`). ``lines`` is then exact once the copy is done, else :data:`LONG`.
    spool: Spool | None = None

    @property
    def readable(self) -> Path:
        """The regular file to read the trace from (the spool's copy, for a stream)."""
        return self.path if self.spool is None else self.spool.path


#: The line count of a stream not yet copied to its end: long enough to be probed and, its
#: probes accepted, checked in windows (``validate_files``), like a long regular file.
LONG: Final = 1 << 62


def spooled(peek: TracePeek, events: int | None = None) -> TracePeek:
    """``peek`` with its spool (if any) copied up to ``events`` events (all: None), its line
    count exact if the copy reached the stream's end."""
    spool = peek.spool
    if spool is None:
        return peek
    spool.fill(events)
    return peek._replace(lines=spool.events if spool.done else LONG)


#: The bytes after the header a peek counts lines in.
_SAMPLE: Final = 1 << 20


def peek_trace(path: Path, *, idle: float = IDLE_SECONDS) -> TracePeek:
    """The header of a trace file (checked as :func:`load_trace` checks it) and its line count,
    exact up to :data:`_SAMPLE` bytes after the header and estimated from the file's size
    beyond (batching needs no more, and counting read every byte of the file before a
    rejection at its line 3); the events are not parsed. What can be read only once (a pipe,
    FIFO or device) is copied to a spool, as much as a file's sample (and more when asked
    for: :func:`spooled`), and the peek holds the spool."""
    spool = None
    if is_stream(path):
        spool = Spool(path, idle)
        spool.fill(size=_SAMPLE)
    readable = path if spool is None else spool.path
    try:
        with readable.open("rb") as file:
            first = file.readline(MAX_LINE + 1)
            sample = file.read(_SAMPLE)
            rest = sample.count(b"\n")
            if spool is not None:  # exact once copied to the end, else long
                rest = spool.events if spool.done else LONG
            elif len(sample) == _SAMPLE:  # a long file: its lines estimated from its size
                size = os.fstat(file.fileno()).st_size - len(first)
                rest = max(1, round(rest * size / _SAMPLE))
    except OSError as exc:
        raise TraceFormatError(str(path), None, f"cannot read: {exc.strerror}") from exc
    if len(first) > MAX_LINE and not first.endswith(b"\n"):
        raise TraceFormatError(str(path), 1, f"a line of more than {MAX_LINE:,} bytes")
    if not first.strip() or not first.endswith(b"\n"):
        # the loader says what is wrong with it (empty, a blank or truncated first line)
        if spool is not None:
            spool.fill()
        trace = load_trace(readable, source=str(path))
        return TracePeek(path, trace.header, len(trace.events))
    try:
        raw = orjson.loads(first)
    except orjson.JSONDecodeError as exc:
        raise TraceFormatError(str(path), 1, f"bad JSON: {exc.msg}") from exc
    return TracePeek(path, _header(raw, str(path), 1), rest, spool=spool)


def merge_traces(traces: Sequence[Trace]) -> Trace:
    """Merge per-process logs of one run into a single trace in causal (Lamport) order.

    Events are ordered by ``(lamport, node, seq)``: Lamport clocks respect causality, and ties
    (concurrent events) are broken deterministically. The headers must agree.
    """
    if not traces:
        raise TraceFormatError("<merge>", None, "nothing to merge")
    first = traces[0].header
    for trace in traces[1:]:
        if trace.header != first:
            raise TraceFormatError(
                trace.source, 1, f"header differs from {traces[0].source}'s: not the same run"
            )
    streams = [
        [((e.lamport, e.node, e.seq), e, line) for e, line in zip(t.events, t.lines, strict=True)]
        for t in traces
    ]
    merged = list(heapq.merge(*streams, key=lambda item: item[0]))
    seen: set[tuple[str, int]] = set()
    for _, event, line in merged:
        if (event.node, event.seq) in seen:
            raise TraceFormatError(
                "<merge>", line, f"event {event.node}#{event.seq} appears in two logs"
            )
        seen.add((event.node, event.seq))
    # The run finished when every process's log says so; their end lines name disjoint nodes.
    end = None
    if all(t.end is not None for t in traces):
        seqs: dict[str, int] = {}
        for trace in traces:
            assert trace.end is not None
            seqs |= trace.end.seqs
        end = TraceEnd(seqs=seqs)
    return Trace(
        source="+".join(t.source for t in traces),
        header=first,
        events=tuple(e for _, e, _ in merged),
        lines=tuple(line for _, _, line in merged),
        end=end,
    )
