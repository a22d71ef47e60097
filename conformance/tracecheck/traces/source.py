"""Opening a trace path, and reading its lines in bounded time and memory.

A trace is read once, as a stream, line by line:

- a line is read with a bound (:data:`MAX_LINE` bytes), instead of being read until memory
  runs out;
- every line is decoded and parsed before the next is read, so a rejection at line k reads
  k lines (a 1,000,000-line file was read whole, then split, before its line 3 was refused).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from tracecheck.traces.errors import TraceFormatError

__all__ = ["MAX_LINE", "open_trace", "trace_lines"]

#: The longest line a trace may have, in bytes: a post-state of thousands of set elements is a
#: few hundred kilobytes; a line past this is a broken or hostile writer (a 50 MB argument once
#: crashed TLC and was echoed back as 52 MB of error text).
MAX_LINE: Final = 4 * 1024 * 1024


def open_trace(path: Path) -> io.BufferedReader:
    """``path`` opened for reading, bytes."""
    try:
        return path.open("rb")
    except OSError as exc:
        raise TraceFormatError(str(path), None, f"cannot read: {exc.strerror}") from exc


def trace_lines(file: io.BufferedReader, source: str) -> Iterator[str]:
    """The lines of ``file``, decoded, each read only when the one before has been taken: a
    line over :data:`MAX_LINE` bytes, a line that is not UTF-8 and a last line without its
    newline (a writer killed mid-line) are each a :class:`TraceFormatError` at their line."""
    number = 0
    while True:
        raw = file.readline(MAX_LINE + 1)
        if not raw:
            return
        number += 1
        if len(raw) > MAX_LINE and not raw.endswith(b"\n"):
            raise TraceFormatError(source, number, f"a line of more than {MAX_LINE:,} bytes")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TraceFormatError(source, number, f"not UTF-8 text: {exc.reason}") from exc
        if not text.endswith("\n"):
            raise TraceFormatError(source, number, "truncated: the last line has no newline")
        yield text
