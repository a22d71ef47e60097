"""Where trace records go: :class:`JsonlSink` (structlog, one JSON line per record, buffered),
:class:`MemorySink` for tests, :class:`NullSink` when tracing is off (drivers skip building
events). The only module that imports structlog."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import (
    IO,
    Any,
    Final,
    Protocol,
)

import structlog
from pydantic import (
    BaseModel,
)

from traceformat import TraceEnd, TraceEventBase, TraceHeader, encode_line

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
