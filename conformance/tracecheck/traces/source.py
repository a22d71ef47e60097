"""Opening what a trace path names, and reading its lines in bounded time and memory.

A trace path is usually a regular file, but a shell hands the checker whatever the user
typed: a pipe (``validate <(cat t)`` passes ``/dev/fd/63``), a named FIFO, a character device
(``/dev/zero``, ``/dev/urandom``). Each is read once, as a stream, line by line:

- a line is read with a bound (:data:`~traceformat.lines.MAX_LINE` bytes,
  :func:`traceformat.lines.read_lines`): ``/dev/zero``, one endless line of NUL
  bytes, is refused after that many, instead of being read until memory runs out;
- every line is decoded and parsed before the next is read, so ``/dev/urandom`` is refused at
  its first line (not UTF-8, or not JSON), and a rejection at line k reads k lines;
- a pipe, FIFO or device is opened without blocking (a FIFO nobody writes to would block the
  ``open`` itself forever) and each read waits at most ``idle`` seconds for data: a FIFO with
  no writer, or a writer that stalls, is a :class:`TraceFormatError` saying so.

A regular file is read through the same line reader, without the waits. To be read more than
once (peeked at, probed, checked in windows), a stream is copied to a regular file as far as it
is read (:mod:`tracecheck.traces.spool`).
"""

from __future__ import annotations

import io
import os
import select
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from tracecheck.traces.errors import TraceFormatError
from traceformat.lines import MAX_LINE, LineError, read_lines

__all__ = ["IDLE_SECONDS", "MAX_LINE", "is_stream", "open_trace", "trace_lines"]

#: How long a pipe, FIFO or device may stay silent before the read is given up.
IDLE_SECONDS: Final = 30.0
_BUFFER: Final = 1 << 16


class _WaitingReader(io.RawIOBase):
    """A non-blocking descriptor read with a bound on each wait for data."""

    def __init__(self, fd: int, source: str, idle: float) -> None:
        super().__init__()
        self._fd = fd
        self._source = source
        self._idle = idle

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        while True:
            ready, _, _ = select.select([self._fd], [], [], self._idle)
            if not ready:
                raise TraceFormatError(
                    self._source,
                    None,
                    f"nothing to read for {self._idle:g} s (a FIFO or pipe that no process "
                    "writes to?)",
                )
            try:
                return os.readv(self._fd, [buffer])
            except BlockingIOError:  # (another reader took the data: wait again)
                continue

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)
        super().close()


def is_stream(path: Path) -> bool:
    """Whether ``path`` names something that can be read only once (not a regular file)."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise TraceFormatError(str(path), None, f"cannot read: {exc.strerror}") from exc
    return not stat.S_ISREG(mode)


def open_trace(path: Path, idle: float = IDLE_SECONDS) -> io.BufferedReader:
    """``path`` opened for reading, bytes: a regular file as it is, anything else (pipe, FIFO,
    character device) through a reader whose waits are bounded by ``idle`` seconds."""
    source = str(path)
    try:
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            raise TraceFormatError(source, None, "cannot read: a directory, not a trace file")
        if stat.S_ISREG(mode):
            return path.open("rb")
        if not (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)):
            raise TraceFormatError(source, None, "cannot read: neither a file nor a stream")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise TraceFormatError(source, None, f"cannot read: {exc.strerror}") from exc
    return io.BufferedReader(_WaitingReader(fd, source, idle), _BUFFER)


def trace_lines(file: io.BufferedReader, source: str) -> Iterator[str]:
    """:func:`traceformat.lines.read_lines` of ``file``, its errors as
    :class:`TraceFormatError` naming ``source`` and the line."""
    try:
        yield from read_lines(file)
    except LineError as exc:
        raise TraceFormatError(source, exc.line, exc.problem) from exc
