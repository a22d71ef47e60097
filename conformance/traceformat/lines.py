"""A trace file's lines: one record as one JSON line (:func:`encode_line`, what a writer
writes), and the lines of a file read back one at a time, each bounded (:func:`read_lines`,
what a reader reads), so that neither side holds more than a line it has not handled."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Final

from pydantic import BaseModel

__all__ = ["MAX_LINE", "LineError", "encode_line", "read_lines"]

#: The longest line a trace may have, in bytes: a post-state of thousands of set elements is a
#: few hundred kilobytes; a line past this is a broken or hostile writer (a 50 MB argument once
#: crashed TLC and was echoed back as 52 MB of error text).
MAX_LINE: Final = 4 * 1024 * 1024


def encode_line(record: BaseModel) -> str:
    """One JSON line (no newline) for a header or event, spec variable names as keys."""
    return record.model_dump_json(by_alias=True)


class LineError(ValueError):
    """A line that cannot be a trace line: ``line`` is its number (1-based)."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"line {line}: {problem}")
        self.line = line
        self.problem = problem


def read_lines(file: IO[bytes]) -> Iterator[str]:
    """The lines of ``file``, decoded, each read only when the one before has been taken: a
    line over :data:`MAX_LINE` bytes, a line that is not UTF-8 and a last line without its
    newline (a writer killed mid-line) are each a :class:`LineError` at their line."""
    number = 0
    while True:
        raw = file.readline(MAX_LINE + 1)
        if not raw:
            return
        number += 1
        if len(raw) > MAX_LINE and not raw.endswith(b"\n"):
            raise LineError(number, f"a line of more than {MAX_LINE:,} bytes")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LineError(number, f"not UTF-8 text: {exc.reason}") from exc
        if not text.endswith("\n"):
            raise LineError(number, "truncated: the last line has no newline")
        yield text
