"""RRef traces in windows whose start states leave out the RRefs that are over
(tracecheck.protocols.rref.window_start, issue 28 §8): the whole run's verdicts and first
rejected events, an event naming a dropped id rejected at that event, and start states bounded
by the live RRefs, not by the trace's length."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from protoref.rref.sim.base import SimConfig
from protoref.rref.sim.simulator import Simulator
from protoref.tracing.sinks import JsonlSink
from support.streaming import same_verdict, stream_windows
from tracecheck.protocols import rref
from tracecheck.protocols.rref import RREF
from tracecheck.replay import stream
from tracecheck.replay.retired import Retired, common_runs
from tracecheck.replay.validate import validate_traces
from tracecheck.replay.verdicts import TraceVerdict
from tracecheck.traces.load import load_trace

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "spec"


def _drained(path: Path, rounds: int, steps: int = 150, seed: int = 3) -> Path:
    """A simulator trace of ``rounds`` rounds, each ``steps`` random workload steps and then a
    drain (the application drops everything; every message is handled): what is live stays
    bounded while the trace grows with ``rounds``."""
    sim = Simulator(seed, SimConfig(), JsonlSink(path))
    for _ in range(rounds):
        for _ in range(steps):
            if not sim.step("workload"):
                break
        sim.drain()
    sim.finish()
    return path


def _streamed(path: Path, window: int, *, walk: bool = True) -> TraceVerdict:
    return stream_windows(path, RREF, SPEC, window, walk=walk).verdict


def _whole(path: Path) -> TraceVerdict:
    (verdict,) = validate_traces(
        [load_trace(path)], RREF, SPEC, explain=False, simulate=False
    ).verdicts
    return verdict


@pytest.fixture(scope="module")
def drained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _drained(tmp_path_factory.mktemp("rref") / "drained.ndjson", rounds=4)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _mutate_post(lines: list[str], at: int) -> list[str]:
    """The first int post value at or after line ``at`` (an event) increased by 7."""
    out = list(lines)
    for number in range(at, len(out)):
        raw = json.loads(out[number])
        post = raw.get("post") or {}
        for key, value in post.items():
            if type(value) is int:
                post[key] = value + 7
                out[number] = json.dumps(raw)
                return out
    raise AssertionError("nothing to mutate")


def test_windows_that_drop_what_is_over_get_the_whole_verdict(
    drained: Path, tmp_path: Path
) -> None:
    whole = _whole(drained)
    assert whole.accepted
    events = whole.events
    window = events // 5
    same_verdict(_streamed(drained, window), whole)
    same_verdict(_streamed(drained, window, walk=False), whole)
    # a post value broken in the fourth window: rejected at the same event both ways
    lines = drained.read_text(encoding="utf-8").splitlines()
    bad = tmp_path / "bad.ndjson"
    bad.write_text("\n".join(_mutate_post(lines, 3 * window + 5)) + "\n", encoding="utf-8")
    whole = _whole(bad)
    assert not whole.accepted
    assert whole.rejection is not None
    assert whole.rejection.index > 3 * window
    same_verdict(_streamed(bad, window), whole)
    same_verdict(_streamed(bad, window, walk=False), whole)


def test_an_event_naming_a_dropped_rref_is_rejected_at_that_event(
    drained: Path, tmp_path: Path
) -> None:
    """A UserRRef deleted in the first window, named by nothing after it: its DelUser logged
    again in the fourth window, with a clock that fits, is rejected there; the whole run
    rejects it there too (the UserRRef is deleted already), the windows say why."""
    lines = drained.read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines[1:]]
    events = [r for r in records if r.get("kind") == "event"]
    tail = records[len(events) :]  # the run's end line: its seqs count the planted event
    window = len(events) // 5
    after = 3 * window + 3  # the planted event's index in the events (0-based)
    quoted = "\n".join(lines[window - 50 :])
    deleted = next(
        e
        for e in events[: window - 60]
        if e.get("event") == "DelUser" and _compact(e["args"]["f"]) not in quoted
    )
    node = deleted["node"]
    mine = [i for i, e in enumerate(events) if e["node"] == node]
    # the node's first event from ``after`` on whose clock jumped: the planted copy fits before
    later, prev = next(
        (i, p)
        for p, i in itertools.pairwise(mine)
        if i >= after and events[i]["lamport"] > events[p]["lamport"] + 1
    )
    planted = dict(
        deleted,
        lamport=events[prev]["lamport"] + 1,
        seq=events[later]["seq"],
        post=dict(deleted["post"], confirmedUsers={"#add": [], "#del": []}),
    )
    for i in mine:
        if i >= later:
            events[i] = dict(events[i], seq=events[i]["seq"] + 1)
    for end in tail:
        end["seqs"][node] += 1
    out = tmp_path / "planted.ndjson"
    body = [json.dumps(e) for e in events]
    body.insert(later, json.dumps(planted))
    out.write_text("\n".join([lines[0], *body, *map(json.dumps, tail)]) + "\n", encoding="utf-8")
    whole = _whole(out)
    assert whole.rejection is not None
    assert whole.rejection.index == later + 1
    for walk in (True, False):
        windowed = _streamed(out, window, walk=walk)
        same_verdict(windowed, whole, reason=False)
        assert windowed.rejection is not None
        assert windowed.rejection.kind == "argument"
        assert "over before this window" in windowed.rejection.reason
        assert repr(deleted["args"]["f"]) in windowed.rejection.reason


def test_start_states_are_bounded_by_the_live_rrefs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sixteen drained rounds in windows: every start state keeps fewer UserRRefs than a
    fifth of those the trace created (the whole state holds them all), the dropped ones are
    all deleted, and the record of dropped ids stays at a few runs per live id."""
    path = _drained(tmp_path / "long.ndjson", rounds=16)
    kept: list[int] = []
    seen: list[int] = []
    record: list[int] = []
    start = stream._start

    def spy(value: tuple[Any, ...], variables: Any, mapping: Any) -> Any:
        state = dict(zip(variables, value[2], strict=True))
        projected, dropped = rref.window_start(state)
        users = state["users"]
        gone = {f for f in users if f not in projected["users"]} if users else set()
        assert gone <= state["deleted"]
        kept.append(len(projected["users"]))
        seen.append(len(users))
        retired = Retired(RREF)
        retired.starts([dropped])
        record.append(retired.runs)
        assert retired.runs <= 2 * len(projected["users"]) + 3 * len(state["nextId"]) + 20
        return start(value, variables, mapping)

    monkeypatch.setattr(stream, "_start", spy)
    whole_events = len(load_trace(path).events)
    created = sum(
        len(((json.loads(line).get("post") or {}).get("usersAdded") or {}).get("#set", ()))
        for line in path.read_text(encoding="utf-8").splitlines()[1:]
    )
    verdict = _streamed(path, whole_events // 12, walk=False)
    assert verdict.accepted
    assert len(kept) >= 10
    assert created > 5 * max(kept)
    # without the projection a start state would hold every UserRRef created so far: each
    # window's start (already projected) plus what one window adds stays small
    assert max(seen) < created / 3


def test_common_runs_and_the_record() -> None:
    assert common_runs([(1, 5), (8, 9)], [(3, 8)]) == [(3, 5), (8, 8)]
    assert common_runs([(1, 2)], []) == []
    retired = Retired(RREF)
    retired.starts([{"w0": [(1, 4), (7, 7)], "w1": [(2, 3)]}, {"w0": [(2, 9)], "w1": []}])
    assert retired.runs == 2
    assert retired.holds(["w0", 2])
    assert retired.holds(["w0", 7])
    assert not retired.holds(["w0", 1])
    assert not retired.holds(["w0", 5])
    assert not retired.holds(["w1", 2])
    assert not retired.holds(["w0", "2"])
    assert not retired.holds(("w0", 2))
