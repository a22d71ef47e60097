"""Hostile trace paths (issue #28 item 8), through the real command line: a FIFO nobody writes
to, ``/dev/zero`` and ``/dev/urandom`` end in a typed error in bounded time; a valid trace
through a pipe (``validate <(cat t)``) is validated, not reported empty; a header with 10,000
nodes is refused before TLC starts; a trace is read line by line, so a rejection at line 3 of a
long file reads three lines."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tracecheck.traces.load import (
    TraceFormatError,
    load_trace,
    parse_trace_lines,
)
from tracecheck.traces.source import trace_lines

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "rref" / "golden" / "user_to_user.ndjson"


class _Counting:
    """The lines of an iterator, counting those taken."""

    def __init__(self, lines: Iterator[str]) -> None:
        self.lines, self.taken = lines, 0

    def __iter__(self) -> _Counting:
        return self

    def __next__(self) -> str:
        line = next(self.lines)
        self.taken += 1
        return line


def test_a_rejection_at_line_3_reads_three_lines(tmp_path: Path) -> None:
    golden = GOLDEN.read_text(encoding="utf-8").splitlines(keepends=True)
    # a long file whose line 3 repeats line 2 (a repeated seq: a format error at line 3)
    long = tmp_path / "long.ndjson"
    with long.open("w", encoding="utf-8") as out:
        out.write(golden[0] + golden[1] + golden[1])
        for _ in range(20_000):
            out.write(golden[2])
    size = long.stat().st_size
    with long.open("rb") as file:
        counted = _Counting(trace_lines(file, str(long)))
        with pytest.raises(TraceFormatError) as caught:
            parse_trace_lines(counted, str(long))
        read = file.tell()
    assert caught.value.line == 3
    assert counted.taken == 3
    assert read < size // 10  # (a buffer's worth, not the file)
    with pytest.raises(TraceFormatError) as again:
        load_trace(long)
    assert again.value.line == 3
