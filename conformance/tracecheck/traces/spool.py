"""A trace that can be read only once (a pipe, FIFO or device), copied to a temporary file as
far as it is needed, so that it is read like a regular file: probed, streamed in windows and
read again, with memory independent of its length (issue 28 §8).

A pipe used to be loaded whole to be peeked at (``validate <(cat t)``: every event in Python
before the first check). A :class:`Spool` instead copies the stream's lines into a file of its
own temporary folder **when they are asked for** (:meth:`Spool.fill`): the peek copies about
as much as a regular file's peek samples, each probe of a long trace the events it checks, and
only a trace whose prefixes are all accepted is copied to its end (then checked in windows
like a file). So a rejection at line k copies about 2k lines, and at no point is more than a
line in memory.

Each line is copied with the checks of the line reader (:func:`traceformat.lines.read_lines`:
a bound on its length) and must be JSON: the copy stops after the first line that is not
(``/dev/zero``'s endless line is cut at the bound, ``/dev/urandom``'s first line is not UTF-8
or JSON), that line copied as read, so the loader reading the copy names the same line with
the same problem it would have named reading the stream. The waits for data are the
stream's (:func:`tracecheck.traces.source.open_trace`).

The folder is named by the process id (``tracecheck-spool-<pid>-...``): it is removed when the
spool is closed or collected, at interpreter exit, and, if this process was killed, by the
next tracecheck (:func:`tracecheck.runner.tlc.sweep_stale`).
"""

from __future__ import annotations

import contextlib
import io
import shutil
import weakref
from pathlib import Path
from typing import Final

import orjson

from tracecheck.runner.tlc import temp_folder
from tracecheck.traces.errors import TraceFormatError
from tracecheck.traces.source import IDLE_SECONDS, open_trace
from traceformat.lines import MAX_LINE

__all__ = ["SPOOL_PREFIX", "Spool"]

#: The prefix of a spool's temporary folder (one of ``runner.tlc.STALE_PREFIXES``).
SPOOL_PREFIX: Final = "tracecheck-spool-"


class Spool:
    """The lines of the stream ``path`` names, copied to :attr:`path` as they are asked for."""

    def __init__(self, source: Path, idle: float = IDLE_SECONDS) -> None:
        self.source = str(source)
        folder = temp_folder(SPOOL_PREFIX)
        #: the copy, a regular file (read it once :meth:`fill` has copied what you need)
        self.path = folder / "trace.ndjson"
        try:
            self._stream: io.BufferedReader = open_trace(source, idle)
            self._copy = self.path.open("wb")
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        self._finalizer = weakref.finalize(self, _remove, folder, self._stream, self._copy)
        #: lines copied, and of them those not blank (the header and the events, end line)
        self.lines = 0
        self.records = 0
        #: bytes copied
        self.size = 0
        #: whether the stream is copied to its end (or to its first line that is not JSON)
        self.done = False

    @property
    def events(self) -> int:
        """Event lines copied so far, give or take the end line (the header not counted)."""
        return max(0, self.records - 1)

    def fill(self, events: int | None = None, *, size: int | None = None) -> None:
        """Copy lines until the copy holds ``events`` events past the header (and one more
        line, so that a reader of the copy sees whether more follow), or ``size`` bytes, or
        the whole stream (both None)."""
        while not self.done and not self._enough(events, size):
            self._copy_line()
        self._copy.flush()

    def _enough(self, events: int | None, size: int | None) -> bool:
        if events is not None and self.records >= events + 2:
            return True
        return size is not None and self.size >= size

    def _copy_line(self) -> None:
        try:
            raw = self._stream.readline(MAX_LINE + 1)
        except OSError as exc:
            raise TraceFormatError(self.source, None, f"cannot read: {exc.strerror}") from exc
        if not raw:
            self._finish()
            return
        self._copy.write(raw)
        self.lines += 1
        self.size += len(raw)
        if len(raw) > MAX_LINE and not raw.endswith(b"\n"):
            self._finish()  # the loader says the line is too long
            return
        if not raw.strip():
            return
        self.records += 1
        try:
            orjson.loads(raw)
        except orjson.JSONDecodeError:
            self._finish()  # the loader says what is wrong with the line, at its number
            return
        if not raw.endswith(b"\n"):
            self._finish()  # a last line without its newline: the loader says so

    def _finish(self) -> None:
        self.done = True
        self._copy.flush()
        self._stream.close()

    def close(self) -> None:
        """Remove the copy and its folder (the finalizer does it anyway, at the latest at
        interpreter exit)."""
        self._finalizer()


def _remove(folder: Path, stream: io.BufferedReader, copy: io.BufferedWriter) -> None:
    for file in (stream, copy):
        with contextlib.suppress(OSError):  # (a close that failed: the folder goes anyway)
            file.close()
    shutil.rmtree(folder, ignore_errors=True)
