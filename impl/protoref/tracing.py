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

This is the only module that imports structlog: :class:`JsonlSink` wraps a structlog logger whose
processor chain renders each record as one JSON line, written by a buffered line logger.
:class:`NullSink` reports itself disabled so drivers skip building events at all when tracing is
off.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import (
    IO,
    Annotated,
    Any,
    Final,
    Generic,
    Literal,
    Protocol,
    Self,
    TypeVar,
    get_args,
    get_origin,
)

import structlog
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    JsonValue,
    Tag,
    TypeAdapter,
    ValidationError,
    WrapSerializer,
)
from pydantic import BeforeValidator as _Before

from protoref.errors import TraceFormatError

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
#: plus what a trace claims about itself (``sent_by`` on a step that takes a message, and the
#: :class:`TraceEnd` line of a run that finished).
SCHEMA_VERSION: Final = 4
#: The versions a reader of this package's traces takes: 2 (every post-state set whole; the
#: history variables as what a step added), 3 (2, plus the delta form of a per-node set) and 4
#: (3, plus what a trace claims about itself: a step that takes a message names its send,
#: ``sent_by``, and a run that finished closes its file with a :class:`TraceEnd` line).
SUPPORTED_SCHEMA_VERSIONS: Final = (2, 3, 4)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


# --------------------------------------------------------------------------- value encoding


def sort_key(value: Any) -> tuple[Any, ...]:
    """A total order on JSON values, so sets serialize the same way on every run.

    Type-tagged so mixed elements compare; lists compare element-wise, which puts ``["w0", 9]``
    before ``["w0", 10]`` (a JSON-string order would not).
    """
    if isinstance(value, bool):
        return (0, value)
    if isinstance(value, int | float):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    if isinstance(value, list | tuple):
        return (3, tuple(sort_key(v) for v in value))
    if isinstance(value, dict):
        return (4, tuple((k, sort_key(v)) for k, v in sorted(value.items())))
    return (5, repr(value))


def tla_set(elements: Iterable[JsonValue]) -> dict[str, JsonValue]:
    """Encode already-JSON elements as a TLA+ set (for header settings and hand-built values)."""
    return {"#set": sorted(elements, key=sort_key)}


def tla_set_in(value: Any) -> Any:
    """Unwrap ``{"#set": [...]}`` for a validator (other values pass through unchanged)."""
    if isinstance(value, dict):
        if set(value) != {"#set"}:
            raise ValueError(
                f"a TLA+ set is encoded as {{'#set': [...]}}, got keys {sorted(value)}"
            )
        return value["#set"]
    return value


def _set_out(value: Any, handler: Callable[[Any], Any]) -> Any:
    return tla_set(handler(value))


#: A TLA+ set: a frozenset in Python, ``{"#set": [...]}`` in JSON.
TlaSet = Annotated[frozenset[T], _Before(tla_set_in), WrapSerializer(_set_out, when_used="json")]


# --------------------------------------------------------------------------- records


class FrozenModel(BaseModel):
    """Base of every trace record and protocol message: immutable, no unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


_set_attr: Final = object.__setattr__
_new: Final = object.__new__
# BaseModel's slots, set through their descriptors (cheaper than object.__setattr__ by name).
_set_fields_set: Final = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra: Final = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private: Final = BaseModel.__dict__["__pydantic_private__"].__set__


def trusted(cls: type[M], values: dict[str, Any]) -> M:
    """An instance of ``cls`` holding ``values`` (every field, in field order), unvalidated.

    For values that are already well typed (statically checked: the core's own messages and
    action arguments, trace records built from its state), where pydantic's validation costs
    more than the rest of a simulator step. It sets exactly the instance attributes pydantic
    documents for a model, so equality, hashing, copying and serialization behave as for a
    validated instance with the same values. Anything from outside (a wire frame, a trace line)
    is still parsed with validation.

    ``__pydantic_fields_set__`` is one set per class, shared by its trusted instances: it holds
    every field, so nothing pydantic does with it (adding a field it sets) changes it.
    """
    model = _new(cls)
    _set_attr(model, "__dict__", values)
    fields_set = _FIELDS_SET.get(cls)
    if fields_set is None or len(fields_set) != len(values):
        fields_set = _FIELDS_SET[cls] = set(values)
    _set_fields_set(model, fields_set)
    _set_extra(model, None)
    _set_private(model, None)
    return model


#: Model class -> the set of its field names (trusted instances hold every field).
_FIELDS_SET: Final[dict[type[BaseModel], set[str]]] = {}


# --------------------------------------------------------------------------- set deltas


def _elements_out(value: Any, handler: Callable[[Any], Any]) -> Any:
    items = handler(value)
    return items if len(items) < 2 else sorted(items, key=sort_key)


#: The elements of one side of a delta: a frozenset in Python, a JSON list in set order.
_Elements = Annotated[frozenset[T], WrapSerializer(_elements_out, when_used="json")]


class SetDelta(FrozenModel, Generic[T]):
    """How a node's slice of a set variable changed since the node last logged it (schema 3):
    ``{"#add": [...], "#del": [...]}``, both keys always, ``#add`` first, each list in the
    contract's set order (:func:`sort_key`) and possibly empty; an unchanged set is
    ``{"#add":[],"#del":[]}``.

    Validated by pydantic-core alone (two required aliased fields, no Python validator), so a
    checker validating every event builds only the elements a step changed. Writers keep the two
    sides disjoint; the schema does not check it (a Python call per set), and :meth:`apply` is
    defined for any delta. In Python the sides are ``add`` and ``delete`` (``del`` is a
    keyword); input is read by the aliases only.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", serialize_by_alias=True)

    add: _Elements[T] = Field(alias="#add")
    delete: _Elements[T] = Field(alias="#del")

    @classmethod
    def of(cls, add: frozenset[T], delete: frozenset[T]) -> Self:
        """The delta, unvalidated (:func:`trusted`: the writer's values are well typed)."""
        return trusted(cls, {"add": add, "delete": delete})

    @classmethod
    def between(cls, then: frozenset[T], now: frozenset[T]) -> Self:
        """The delta from ``then`` (the value the node logged last) to ``now``."""
        return cls.of(now - then, then - now)

    def apply(self, last: frozenset[T]) -> frozenset[T]:
        """The node's value after this delta, from the value it logged last."""
        return (last - self.delete) | self.add


def _delta_or_whole(value: Any) -> str | None:
    """The tag of a per-node set's form: a delta, a whole set, or None (refused) for neither or
    a mix of the two (``{"#set": ..., "#add": ...}``)."""
    if isinstance(value, dict):
        delta = "#add" in value or "#del" in value
        if delta == ("#set" in value):
            return None
        return "delta" if delta else "set"
    if isinstance(value, SetDelta):
        return "delta"
    return "set" if isinstance(value, frozenset | set) else None  # (a bare list is neither)


#: Tag of the :class:`SetDelta` member of a :data:`DELTA_OR_WHOLE` union.
DELTA: Final = Tag("delta")
#: Tag of the whole-set member (``{"#set": [...]}``) of a :data:`DELTA_OR_WHOLE` union.
WHOLE: Final = Tag("set")
#: The discriminator of a per-node set in a post-state: ``Annotated[Annotated[SetDelta[E],
#: DELTA] | Annotated[<a whole set of E>, WHOLE], DELTA_OR_WHOLE]``. One Python call per set
#: picks the member (pydantic-core then validates it alone), and anything that is neither form
#: gets one clear error. A union tried member by member would save that call (about 0.2 µs a set
#: on a checker's Python input, 0.5 µs on JSON) but report a malformed delta with both members'
#: errors, and take a bare list for a set.
DELTA_OR_WHOLE: Final = Discriminator(
    _delta_or_whole,
    custom_error_type="set_delta",
    custom_error_message=(
        'a per-node set is logged as {"#add": [...], "#del": [...]} or {"#set": [...]}'
    ),
)


def delta_model(annotation: Any) -> type[SetDelta[Any]] | None:
    """The :class:`SetDelta` model a field's annotation holds (in a :data:`DELTA_OR_WHOLE`
    union), or None: what a writer builds the field's deltas with."""
    if get_origin(annotation) is None and isinstance(annotation, type):
        return annotation if issubclass(annotation, SetDelta) else None
    for arg in get_args(annotation):
        found = delta_model(arg)
        if found is not None:
            return found
    return None


class TraceHeader(FrozenModel):
    """Line 1 of a trace file."""

    kind: Literal["header"] = "header"
    #: :data:`SUPPORTED_SCHEMA_VERSIONS`; written as :data:`SCHEMA_VERSION`.
    schema_version: Literal[2, 3, 4] = SCHEMA_VERSION
    protocol: str
    nodes: tuple[str, ...]
    settings: dict[str, JsonValue] = Field(default_factory=dict)
    seed: int
    #: Actors that take logged steps but are no spec node (e.g. ``"clock"`` for a ``Tick``,
    #: an action without an acting node): an event's ``node`` is one of ``nodes`` or of these.
    environment: tuple[str, ...] = ()


class TraceEnd(FrozenModel):
    """The last line of a trace file whose run finished (schema 4): the run ended as it meant
    to (it was not killed, did not raise, was not cut short), so the checker also requires
    the spec's quiescence at its last state. ``seqs`` is the last ``seq`` of every node (or
    environment actor) this file logged, so a lost tail is detected too."""

    kind: Literal["end"] = "end"
    seqs: dict[str, int]


class TraceEventBase(FrozenModel):
    """Fields every event has; each protocol narrows ``event`` and adds ``args`` and ``post``.

    ``event`` is the TLA+ action name, ``node`` the acting worker, ``seq`` a per-node counter
    from 1 and ``lamport`` the node's Lamport clock after the step (merges logs causally).
    """

    kind: Literal["event"] = "event"
    event: str
    node: str
    seq: int = Field(ge=1)
    lamport: int = Field(ge=1)


@dataclass(slots=True)
class NodeClock:
    """Per-node ``seq`` and Lamport clock, advanced by drivers once per emitted event."""

    seq: int = 0
    lamport: int = 0

    def local(self) -> tuple[int, int]:
        """A step with no incoming message: returns (seq, lamport) of its event."""
        self.seq += 1
        self.lamport += 1
        return self.seq, self.lamport

    def receive(self, sent_at: int) -> tuple[int, int]:
        """A step that takes a message stamped ``sent_at`` from the inbox."""
        self.seq += 1
        self.lamport = max(self.lamport, sent_at) + 1
        return self.seq, self.lamport


def encode_line(record: BaseModel) -> str:
    """One JSON line (no newline) for a header or event, spec variable names as keys."""
    return record.model_dump_json(by_alias=True)


# --------------------------------------------------------------------------- sinks


class TraceSink(Protocol):
    """Where a driver's trace goes. Drivers test ``enabled`` before building an event."""

    @property
    def enabled(self) -> bool: ...

    def header(self, header: TraceHeader) -> None: ...

    def emit(self, event: TraceEventBase) -> None: ...

    def end(self, record: TraceEnd) -> None: ...

    def close(self) -> None: ...


class NullSink:
    """Tracing off: drivers see ``enabled is False`` and build nothing."""

    enabled: Final = False

    def header(self, header: TraceHeader) -> None:
        del header

    def emit(self, event: TraceEventBase) -> None:
        del event

    def end(self, record: TraceEnd) -> None:
        del record

    def close(self) -> None:
        return None


@dataclass
class MemorySink:
    """Keeps the records (for tests); :meth:`lines` renders them as a trace file would."""

    records: list[BaseModel] = field(default_factory=list)
    enabled: bool = True

    def header(self, header: TraceHeader) -> None:
        self.records.append(header)

    def emit(self, event: TraceEventBase) -> None:
        self.records.append(event)

    def end(self, record: TraceEnd) -> None:
        self.records.append(record)

    def close(self) -> None:
        return None

    def lines(self) -> list[str]:
        return [encode_line(r) for r in self.records]


def _render_record(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> str:
    # The last processor of the chain must return the string the wrapped logger writes.
    record: BaseModel = event_dict["record"]
    return encode_line(record)


#: Bytes of trace a :class:`JsonlSink` holds before writing them to its file.
BUFFER_BYTES: Final = 64 * 1024


class LineLogger:
    """structlog's wrapped logger for trace files: one message a line, written in batches.

    structlog's ``PrintLogger`` and ``WriteLogger`` flush after every message, a system call per
    trace event. This one keeps the lines in a list until they add up to ``buffer_bytes``
    characters (:data:`BUFFER_BYTES` by default) and writes them with one call, so a process
    that dies without closing its sink loses at most that much of the end of its trace;
    :meth:`JsonlSink.close` and :meth:`JsonlSink.flush` write everything, and so do a normal
    interpreter exit and the logger's garbage collection (a :class:`weakref.finalize`, as an
    open file flushes its buffer then). One write per batch
    instead of one per line: the text layer's per-call work was a tenth of tracing's cost.

    Threads may log concurrently, and their lines stay whole, each once, in the order they
    were logged. :meth:`msg` takes no lock: ``list.append`` is atomic in CPython (under the
    GIL, and under the list's own lock in the free-threaded build), and a batch is taken under
    the lock as a prefix of the list, while other threads can only append after it. Taking the
    lock for every line cost 0.27 us of the 0.38 us a line spent in :meth:`msg` (about a
    twentieth of the bench's tracing cost). The running size is the one unlocked
    read-modify-write: with threads racing, an update may be lost, which only delays the next
    write by that line.
    """

    def __init__(self, file: IO[str], buffer_bytes: int = BUFFER_BYTES) -> None:
        self._file = file
        self._write = file.write
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self._append = self._pending.append
        self._size = 0
        self._limit = buffer_bytes
        self._finalizer = weakref.finalize(self, _write_rest, self._pending, file)

    def msg(self, message: str) -> None:
        self._append(message)
        self._size += len(message)
        if self._size >= self._limit:
            with self._lock:
                self._write_pending()

    def _write_pending(self) -> None:
        # Under the lock: the lines logged so far, a prefix of the list (others may append).
        pending = self._pending
        count = len(pending)
        if count:
            batch = pending[:count]
            del pending[:count]
            self._size = 0
            self._write("\n".join(batch) + "\n")

    def flush(self) -> None:
        with self._lock:
            self._write_pending()
            self._file.flush()

    def close(self) -> None:
        """Write the pending lines and close the file."""
        with self._lock:
            self._write_pending()
            self._finalizer.detach()
            self._file.close()


def _write_rest(pending: list[str], file: IO[str]) -> None:
    # A logger collected or alive at exit without close(): write what it holds.
    if pending and not file.closed:
        file.write("\n".join(pending) + "\n")
        pending.clear()
        file.flush()


class JsonlSink:
    """Writes a JSON-lines trace file through structlog, buffered (see :class:`LineLogger`).

    ``header`` and ``emit`` pass the record through the processor chain, which renders it with
    :func:`encode_line`. ``emit_line`` takes an event its driver already rendered, byte for
    byte what :func:`encode_line` gives for it (the RRef simulator's direct encoder: tests
    compare the two on every event of many runs), and hands it to the chain's logger as it is:
    there is nothing left for a processor to do, and the chain's own overhead was about as
    large as rendering the line.
    """

    enabled: Final = True

    def __init__(self, path: Path | str, *, buffer_bytes: int = BUFFER_BYTES) -> None:
        self.path = Path(path)
        self._file: IO[str] = self.path.open("w", encoding="utf-8", buffering=buffer_bytes)
        self._lines = LineLogger(self._file, buffer_bytes)
        # The bound logger itself, not wrap_logger's lazy proxy: the proxy builds the same
        # logger on first use, about 2 us more a sink (one sink per traced run).
        self._log = structlog.BoundLogger(self._lines, processors=[_render_record], context={})
        self.emit_line: Callable[[str], None] = self._lines.msg

    def header(self, header: TraceHeader) -> None:
        self._log.msg(record=header)

    def emit(self, event: TraceEventBase) -> None:
        self._log.msg(record=event)

    def end(self, record: TraceEnd) -> None:
        self._log.msg(record=record)

    def flush(self) -> None:
        """Write what the buffer holds (the file stays open)."""
        self._lines.flush()

    def close(self) -> None:
        self._lines.close()

    def __enter__(self) -> JsonlSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class Trace:
    header: TraceHeader
    events: tuple[TraceEventBase, ...]
    #: The closing line of a run that finished (schema 4), or None.
    end: TraceEnd | None = None


_HEADER: Final = TypeAdapter(TraceHeader)
_END: Final = TypeAdapter(TraceEnd)


def read_trace(lines: Iterable[str], events: TypeAdapter[Any], *, source: str = "<trace>") -> Trace:
    """Parse a trace (header line then event lines) with a protocol's event ``TypeAdapter``.

    Raises :class:`TraceFormatError` naming the line and the field that is wrong.
    """
    header: TraceHeader | None = None
    parsed: list[TraceEventBase] = []
    end: TraceEnd | None = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if end is not None:
            raise TraceFormatError(source, number, "a line after the end line")
        try:
            if header is None:
                header = _HEADER.validate_json(line)
            elif '"kind":"end"' in line.replace(" ", ""):
                end = _END.validate_json(line)
            else:
                parsed.append(events.validate_json(line))
        except ValidationError as err:
            first = err.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise TraceFormatError(source, number, f"{loc}: {first['msg']}") from err
    if header is None:
        raise TraceFormatError(source, 1, "empty trace: no header line")
    return Trace(header, tuple(parsed), end)


def read_trace_file(path: Path | str, events: TypeAdapter[Any]) -> Trace:
    """:func:`read_trace` on a file."""
    p = Path(path)
    with p.open(encoding="utf-8") as fh:
        return read_trace(fh, events, source=str(p))
