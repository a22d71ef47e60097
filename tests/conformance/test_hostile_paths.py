"""Hostile trace paths (issue #28 item 8), through the real command line: a FIFO nobody writes
to, ``/dev/zero`` and ``/dev/urandom`` end in a typed error in bounded time; a valid trace
through a pipe (``validate <(cat t)``) is validated, not reported empty; a header with 10,000
nodes is refused before TLC starts; a trace is read line by line, so a rejection at line 3 of a
long file reads three lines."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tracecheck.traces.load import (
    MAX_NODES,
    TraceFormatError,
    load_trace,
    parse_trace_lines,
    peek_trace,
)
from tracecheck.traces.source import trace_lines

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "rref" / "golden" / "user_to_user.ndjson"
#: Generous: each case ends in well under a second of reading (plus interpreter start).
BOUND = 60


def _validate(*args: str, shell: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tracecheck.cli", "validate", *args]
    if shell is not None:  # a bash process substitution, as a user would type it
        command = ["bash", "-c", f"{' '.join(command)} {shell}"]
    return subprocess.run(
        command, capture_output=True, text=True, check=False, timeout=BOUND, cwd=ROOT
    )


def test_a_fifo_without_a_writer_is_a_typed_error(tmp_path: Path) -> None:
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    proc = _validate(str(fifo), "--idle-timeout", "1")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "nothing to read for 1 s" in proc.stderr
    assert time.monotonic() - started < BOUND


@pytest.mark.parametrize(
    ("device", "problem"),
    [("/dev/zero", "a line of more than 4,194,304 bytes"), ("/dev/urandom", "/dev/urandom:1:")],
)
def test_an_endless_device_is_a_typed_error(device: str, problem: str) -> None:
    if not Path(device).exists():
        pytest.skip(f"no {device} on this system")
    proc = _validate(device)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert problem in " ".join(proc.stderr.split())  # (rich wraps long messages)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash's <(...)")
def test_a_trace_through_a_pipe_is_validated() -> None:
    proc = _validate("--no-explain", shell=f"<(cat {GOLDEN})")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "accepted /dev/fd/" in proc.stdout
    assert "1/1 accepted; 23 events" in proc.stdout


def test_a_pipe_is_read_once_and_spooled_by_its_peek(tmp_path: Path) -> None:
    fifo = tmp_path / "t.fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["cp", str(GOLDEN), str(fifo)])
    try:
        peek = peek_trace(fifo, idle=BOUND)
    finally:
        writer.wait(timeout=BOUND)
    assert peek.trace is None  # not loaded: copied to a regular file, read from there
    assert peek.spool is not None
    assert peek.spool.done
    copied = load_trace(peek.readable, source=str(fifo))
    assert copied.events == load_trace(GOLDEN).events
    assert copied.source == str(fifo)
    assert peek.lines == len(copied.events) + 1  # (its end line too, as a file's peek counts)
    folder = peek.spool.path.parent
    assert folder.is_dir()
    peek.spool.close()
    assert not folder.exists()


def test_a_stream_s_bad_line_is_named_as_read_from_the_stream(tmp_path: Path) -> None:
    """The spool stops at the first line that is not JSON, and the loader names it."""
    fifo = tmp_path / "t.fifo"
    os.mkfifo(fifo)
    text = GOLDEN.read_bytes().splitlines(keepends=True)
    bad = tmp_path / "bad.ndjson"
    bad.write_bytes(b"".join([*text[:3], b"{not json\n", *text[3:]]))
    writer = subprocess.Popen(["cp", str(bad), str(fifo)])
    try:
        peek = peek_trace(fifo, idle=BOUND)
        assert peek.spool is not None
        assert peek.spool.done
        with pytest.raises(TraceFormatError) as caught:
            load_trace(peek.readable, source=str(fifo))
    finally:
        writer.wait(timeout=BOUND)
    assert caught.value.line == 4
    assert caught.value.source == str(fifo)
    assert peek.spool.lines == 4  # nothing copied after the bad line


def _header(nodes: int) -> bytes:
    names = [f"w{i}" for i in range(nodes)]
    header = {"kind": "header", "schema_version": 4, "protocol": "rref", "nodes": names, "seed": 1}
    return orjson.dumps(header) + b"\n"


def test_a_header_with_ten_thousand_nodes_is_refused_before_tlc(tmp_path: Path) -> None:
    path = tmp_path / "wide.ndjson"
    event = {"kind": "event", "event": "Noop", "node": "w0", "seq": 1, "lamport": 1}
    path.write_bytes(_header(10_000) + orjson.dumps(event) + b"\n")
    with pytest.raises(TraceFormatError, match=f"10,000 names \\(at most {MAX_NODES},"):
        peek_trace(path)
    proc = _validate(str(path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "10,000 names" in proc.stderr
    assert "StackOverflowError" not in proc.stdout + proc.stderr
    # the limit itself is a header TLC takes: the largest one allowed loads
    fine = tmp_path / "fine.ndjson"
    fine.write_bytes(_header(MAX_NODES) + orjson.dumps(event) + b"\n")
    assert len(load_trace(fine).header.nodes) == MAX_NODES


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


def test_a_long_file_rejected_near_its_start_is_decided_on_a_prefix(tmp_path: Path) -> None:
    from tracecheck.plugins.rref import simulate  # noqa: PLC0415 - only this test runs one
    from tracecheck.protocols.rref import RREF  # noqa: PLC0415
    from tracecheck.replay.validate import validate_files  # noqa: PLC0415

    spec_root = ROOT / "spec"
    good = tmp_path / "good.ndjson"
    simulate(7, 200, good)
    lines = good.read_text(encoding="utf-8").splitlines()
    assert len(lines) > 2 * 40 + 1
    # an early event logs a wrong post-state, and the file ends in a line that is no JSON
    at = next(i for i in range(1, 30) if "nextId" in orjson.loads(lines[i]).get("post", {}))
    event = orjson.loads(lines[at])
    event["post"]["nextId"] += 5
    bad = tmp_path / "bad.ndjson"
    bad.write_bytes(
        "\n".join([*lines[:at], orjson.dumps(event).decode(), *lines[at + 1 :]]).encode()
        + b"\n{not json\n"
    )
    traces, report = validate_files([bad], RREF, spec_root, explain=False, probe_events=40)
    (verdict,) = report.verdicts
    assert not verdict.accepted
    assert verdict.rejection is not None
    assert verdict.rejection.line == at + 1
    assert len(traces[0].events) == 40  # the prefix: the rest of the file was not read
    # checked whole (no probe), the same file is a format error at its last line
    with pytest.raises(TraceFormatError) as caught:
        validate_files([bad], RREF, spec_root, explain=False)
    assert caught.value.line == len(lines) + 1
    # and a long file the spec accepts is checked whole after its prefix
    traces, report = validate_files([good], RREF, spec_root, explain=False, probe_events=40)
    assert report.all_accepted
    assert len(traces[0].events) == len(lines) - 2  # (the header and the end line)
    assert report.tlc_runs >= 2


def test_a_killed_checker_s_spool_is_swept_by_the_next(tmp_path: Path) -> None:
    from tracecheck.runner.tlc import sweep_stale  # noqa: PLC0415
    from tracecheck.traces.spool import SPOOL_PREFIX  # noqa: PLC0415

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=BOUND)
    stale = tmp_path / f"{SPOOL_PREFIX}{gone.pid}-x"
    stale.mkdir()
    (stale / "trace.ndjson").write_text("{}\n", encoding="utf-8")
    mine = tmp_path / f"{SPOOL_PREFIX}{os.getpid()}-y"
    mine.mkdir()
    assert sweep_stale(tmp_path) == [stale]
    assert mine.is_dir()
