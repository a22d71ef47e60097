"""Long traces checked in windows (tracecheck.replay.stream) and the doubling probe: the same
verdicts and first rejected events as checked whole, and a rejection at event k found in about
log2(k / probe) TLC runs."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from support.ledger import LEDGER, SPEC_ROOT, event, header
from support.streaming import same_verdict, stream_windows
from tracecheck.protocols.autograd import AUTOGRAD
from tracecheck.protocols.mapping import ProtocolMap
from tracecheck.protocols.rendezvous import RENDEZVOUS
from tracecheck.protocols.rref import RREF
from tracecheck.replay.validate import validate_files, validate_traces
from tracecheck.replay.verdicts import TraceVerdict
from tracecheck.traces.load import TracePeek, load_trace, peek_trace

ROOT = Path(__file__).resolve().parents[2]


def _ledger_events(count: int) -> list[dict[str, Any]]:
    """a deposits 1, then the coin goes a -> b -> a -> ... (balances stay within Max)."""
    events = [event("Deposit", "a", 1, 1, a=1)]
    seqs = {"a": 1, "b": 0}
    holder, other = "a", "b"
    while len(events) < count:
        seqs[holder] += 1
        events.append(event("Transfer", holder, seqs[holder], 0, to=other, a=1))
        seqs[other] += 1
        events.append(event("Receive", other, seqs[other], 1, a=1))
        holder, other = other, holder
    return events[:count]


def _write(path: Path, events: list[dict[str, Any]]) -> Path:
    lines = [json.dumps(header(schema_version=2)), *(json.dumps(e) for e in events)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _streamed(
    path: Path, mapping: ProtocolMap, spec_root: Path, window: int, *, walk: bool = True
) -> TraceVerdict:
    got = stream_windows(path, mapping, spec_root, window, walk=walk)
    assert got.runs >= 1
    return got.verdict


def _whole(path: Path, mapping: ProtocolMap, spec_root: Path) -> TraceVerdict:
    (verdict,) = validate_traces(
        [load_trace(path)], mapping, spec_root, explain=False, simulate=False
    ).verdicts
    return verdict


def _mutated(path: Path, tmp: Path, at: int) -> Path:
    """The trace with one post value of an event at or after index ``at`` changed: an integer
    or a flag if one is logged, else a set that loses an element (the implementation's schema
    still holds: the spec is what rejects it)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for kinds in ((int, bool), (dict,)):
        for number in range(at, len(lines)):
            raw = json.loads(lines[number])
            post = raw.get("post") or {}
            for key, value in post.items():
                if type(value) not in kinds:
                    continue
                if type(value) is int:
                    post[key] = value + 7
                elif type(value) is bool:
                    post[key] = not value
                elif value.get("#set"):
                    post[key] = {"#set": value["#set"][:-1]}
                else:
                    continue
                lines[number] = json.dumps(raw)
                out = tmp / f"bad-{path.name}"
                out.write_text("\n".join(lines) + "\n", encoding="utf-8")
                return out
    raise AssertionError(f"{path}: nothing to mutate after line {at}")


GOLDEN = [
    (RREF, ROOT / "tests/rref/golden/user_to_user.ndjson"),
    (AUTOGRAD, ROOT / "tests/autograd/golden/crash.ndjson"),
    (RENDEZVOUS, ROOT / "tests/rendezvous/golden/last_call.ndjson"),
]


@pytest.mark.parametrize(("mapping", "path"), GOLDEN, ids=lambda p: getattr(p, "name", ""))
def test_golden_traces_in_windows_get_the_whole_verdict(
    mapping: ProtocolMap, path: Path, tmp_path: Path
) -> None:
    events = len(load_trace(path).events)
    window = events // 2 + 1  # two windows: the second starts from the first one's states
    spec_root = ROOT / "spec"
    whole = _whole(path, mapping, spec_root)
    assert whole.accepted
    same_verdict(_streamed(path, mapping, spec_root, window), whole)  # simulation, window by window
    # and the breadth-first chain, from every state each window ended in
    same_verdict(_streamed(path, mapping, spec_root, window, walk=False), whole)
    # a post value broken in the second window: rejected at the same event, both ways
    bad = _mutated(path, tmp_path, window + 2)
    whole = _whole(bad, mapping, spec_root)
    assert not whole.accepted
    assert whole.rejection is not None
    assert whole.rejection.index > window
    same_verdict(_streamed(bad, mapping, spec_root, window), whole)


def test_a_long_ledger_trace_in_windows(tmp_path: Path) -> None:
    events = _ledger_events(1_200)
    good = _write(tmp_path / "good.ndjson", events)
    same_verdict(_streamed(good, LEDGER, SPEC_ROOT, 250), _whole(good, LEDGER, SPEC_ROOT))
    # a wrong balance in the fourth window
    wrong = [dict(e) for e in events]
    wrong[900] = dict(wrong[900], post={"balance": 3})
    bad = _write(tmp_path / "bad.ndjson", wrong)
    whole = _whole(bad, LEDGER, SPEC_ROOT)
    assert whole.rejection is not None
    assert whole.rejection.index == 901
    same_verdict(_streamed(bad, LEDGER, SPEC_ROOT, 250), whole)
    # a clock that does not grow, in the third window: the claim, at the same event
    clock = [dict(e) for e in events]
    clock[600] = dict(clock[600], lamport=0)
    claimed = _write(tmp_path / "clock.ndjson", clock)
    whole = _whole(claimed, LEDGER, SPEC_ROOT)
    assert whole.rejection is not None
    assert whole.rejection.kind == "clock"
    same_verdict(_streamed(claimed, LEDGER, SPEC_ROOT, 250), whole)


def test_the_probe_doubles_a_rejection_at_k_costs_log_k_runs(tmp_path: Path) -> None:
    events = _ledger_events(4_000)
    events[899] = dict(events[899], post={"balance": 3})  # event 900 is wrong
    bad = _write(tmp_path / "bad.ndjson", events)
    traces, report = validate_files([bad], LEDGER, SPEC_ROOT, explain=False, probe_events=50)
    (verdict,) = report.verdicts
    assert verdict.rejection is not None
    assert verdict.rejection.index == 900
    assert verdict.rejection.line == 901
    # prefixes of 50, 100, 200, 400 and 800 events accepted (one simulation run each), the
    # one of 1,600 rejected (simulation, then breadth-first search): 7 runs, not 18 (one per
    # probe of 50) nor the whole file
    assert report.tlc_runs == 7
    assert len(traces[0].events) == 1_600


def test_an_accepted_long_file_is_checked_in_windows_by_validate_files(tmp_path: Path) -> None:
    good = _write(tmp_path / "good.ndjson", _ledger_events(1_000))
    traces, report = validate_files(
        [good], LEDGER, SPEC_ROOT, explain=False, probe_events=50, window=300
    )
    assert report.all_accepted
    assert report.events == 1_000
    assert report.coverage == {"Deposit": 1, "Receive": 499, "Transfer": 500}
    # probes of 50, 100 and 200 events (the next, 400, is past the window), then 4 windows
    assert report.tlc_runs == 7
    assert len(traces[0].events) == 300  # the first window


def test_windows_without_the_java_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """The data module as TLA+ constants (no javac): the start states and parameters there."""
    monkeypatch.setenv("TRACECHECK_JAVA_READER", "0")
    mapping, path = GOLDEN[0]
    spec_root = ROOT / "spec"
    window = len(load_trace(path).events) // 3 + 1
    same_verdict(_streamed(path, mapping, spec_root, window), _whole(path, mapping, spec_root))


def test_a_start_state_s_functions_are_merged_as_a_balanced_tree() -> None:
    """A chain ``a :> 1 @@ b :> 2 @@ ...`` of thousands of entries overflowed TLC's stack (a
    16,931-event RRef trace in windows of 4,000); the tree is log2(n) deep, an entry a line."""
    from tracecheck.replay.stream import state_text  # noqa: PLC0415
    from tracecheck.tla.values import Record, TLAFunction  # noqa: PLC0415

    users = TLAFunction({("w0", i): Record({"on": "w1", "n": i}) for i in range(5_000)})
    text = state_text((0, users, frozenset({"b", "a"})))
    depth = deepest = 0
    for char in text:
        depth += (char == "(") - (char == ")")
        deepest = max(deepest, depth)
    assert deepest <= 14  # ceil(log2(5,000)) + 1
    assert text.count("\n") == 4_999
    assert text.endswith(', {"a", "b"}>>')
    assert '(<<"w0", 0>> :> [on |-> "w1", n |-> 0])' in text


def test_a_window_that_leaves_too_many_states_open_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tracecheck.replay import stream  # noqa: PLC0415
    from tracecheck.replay.tlcrun import CheckerError  # noqa: PLC0415

    printed = ['<<"tv_state", 0, <<1, {}>>>>', '<<"tv_state", 0, <<1, {}>>>>']
    names = ["x", "y"]
    # the same state twice: one (the Ledger has no window_start: nothing dropped)
    assert stream._states(printed, "t", names, LEDGER) == (("<<0, 1, {}>>",), [])
    monkeypatch.setattr(stream, "MAX_FRONTIER", 1)
    with pytest.raises(CheckerError, match="more than 1 spec states"):
        stream._states([*printed, '<<"tv_state", 1, <<1, {}>>>>'], "t", names, LEDGER)
    with pytest.raises(CheckerError, match="no state"):
        stream._states([], "t", names, LEDGER)


class _Piped:
    """A file written into a FIFO by ``cat`` (as ``validate <(cat t)`` hands the checker a
    pipe), peeked at; the writer ends when the checker stops reading (SIGPIPE)."""

    def __init__(self, path: Path, tmp: Path) -> None:
        self.fifo = tmp / f"{path.stem}.fifo"
        os.mkfifo(self.fifo)
        # (the shell opens the FIFO: an open for writing waits for the reader)
        self.writer = subprocess.Popen(
            ["sh", "-c", 'exec cat -- "$0" > "$1"', str(path), str(self.fifo)]
        )

    def __enter__(self) -> TracePeek:
        self.peek = peek_trace(self.fifo)
        return self.peek

    def __exit__(self, *exc: object) -> None:
        assert self.peek.spool is not None
        folder = self.peek.spool.path.parent
        self.peek.spool.close()
        self.writer.wait(timeout=60)
        assert not folder.exists()  # the copy is removed with its spool


def test_a_long_trace_through_a_pipe_is_checked_in_windows(tmp_path: Path) -> None:
    good = _write(tmp_path / "good.ndjson", _ledger_events(1_000))
    with _Piped(good, tmp_path) as peek:
        traces, report = validate_files(
            [peek], LEDGER, SPEC_ROOT, explain=False, probe_events=50, window=300
        )
    # what the regular file gets (test above): probes of 50, 100, 200, then 4 windows
    assert report.all_accepted
    assert report.events == 1_000
    assert report.tlc_runs == 7
    assert len(traces[0].events) == 300  # the first window, not the whole trace
    (verdict,) = report.verdicts
    assert verdict.source == str(peek.path)


def test_a_pipe_rejected_early_is_copied_only_as_far_as_its_probes(tmp_path: Path) -> None:
    events = _ledger_events(60_000)  # about 5 MiB: more than the peek copies (1 MiB)
    events[899] = dict(events[899], post={"balance": 3})  # event 900 is wrong
    bad = _write(tmp_path / "bad.ndjson", events)
    with _Piped(bad, tmp_path) as peek:
        traces, report = validate_files(
            [peek], LEDGER, SPEC_ROOT, explain=False, probe_events=50, window=50_000
        )
        assert peek.spool is not None
        copied = peek.spool.events
    (verdict,) = report.verdicts
    assert verdict.rejection is not None
    assert verdict.rejection.index == 900
    assert verdict.source == str(peek.path)
    assert report.tlc_runs == 7  # as the regular file's probes (test above)
    assert len(traces[0].events) == 1_600
    # the peek's megabyte and the probes' 1,600 events, not the 60,000
    assert copied < 20_000
