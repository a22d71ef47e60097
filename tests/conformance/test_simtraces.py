"""Traces produced by TLC's own simulation of RRef.tla are accepted by the checker; a mutated
one is rejected at the mutated event. The producer (SimRRef.tla's ghost plus
tracecheck.campaigns.simtraces) shares no code with protoref, so this tests the checker's
completeness against what the spec allows rather than against what the implementation happens to
log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracecheck.campaigns.simtraces import (
    SimTraceError,
    behaviour_to_lines,
    to_json,
    write_sim_traces,
)
from tracecheck.protocols import load_mapping
from tracecheck.replay.validate import validate_traces
from tracecheck.tla.values import ModelValue, Record
from tracecheck.traces.load import load_trace, parse_trace_lines

SPEC_ROOT = Path(__file__).resolve().parents[2] / "spec"
DEPTH = 40


@pytest.fixture(scope="module")
def sim_paths(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write_sim_traces(SPEC_ROOT, tmp_path_factory.mktemp("sim"), seeds=(1, 2, 3), depth=DEPTH)


def test_simulated_behaviours_are_accepted(sim_paths: list[Path]) -> None:
    traces = [load_trace(p) for p in sim_paths]
    # Not vacuous: every behaviour reached the cut (or a state without successors), and
    # together they take many kinds of step.
    assert all(10 <= len(t.events) <= DEPTH for t in traces)
    kinds = {e.event for t in traces for e in t.events}
    assert len(kinds) >= 8, kinds
    report = validate_traces(traces, load_mapping("rref"), SPEC_ROOT, explain=False)
    assert [v.accepted for v in report.verdicts] == [True] * len(traces)
    assert report.tlc_runs == 1


def _mutate_first_set(lines: list[str]) -> tuple[list[str], int]:
    """Drop one element of the first non-empty logged set after event 5; its 1-based index."""
    for index in range(5, len(lines)):
        event = json.loads(lines[index])
        for field, value in event["post"].items():
            if isinstance(value, dict) and value.get("#set") and field != "delivered":
                value["#set"] = value["#set"][1:]
                lines = [*lines[:index], json.dumps(event), *lines[index + 1 :]]
                return lines, index
    raise AssertionError("no non-empty logged set to mutate")


def test_a_mutated_simulated_trace_is_rejected_at_the_mutated_event(
    sim_paths: list[Path],
) -> None:
    lines = sim_paths[0].read_text(encoding="utf-8").splitlines()
    mutated, index = _mutate_first_set(lines)
    trace = parse_trace_lines(mutated, "mutated")
    (verdict,) = validate_traces([trace], load_mapping("rref"), SPEC_ROOT).verdicts
    assert not verdict.accepted
    assert verdict.rejection is not None
    assert verdict.rejection.index == index
    assert verdict.explanation is not None
    assert "logged" in verdict.explanation.summary


def test_to_json_writes_workers_as_strings_and_sets_sorted() -> None:
    user = Record(fork=(ModelValue("w1"), 2), on=ModelValue("w1"), parent=())
    assert to_json(frozenset({user})) == {"#set": [{"fork": ["w1", 2], "on": "w1", "parent": []}]}
    assert to_json(frozenset({2, 1})) == {"#set": [1, 2]}


def test_a_behaviour_without_the_ghost_is_refused() -> None:
    from tracecheck.runner.results import CounterexampleState  # noqa: PLC0415

    plain = [CounterexampleState(index=i, action=None, header="", values={"x": i}) for i in (1, 2)]
    with pytest.raises(SimTraceError, match="no simLast ghost"):
        behaviour_to_lines(plain, load_mapping("rref"), seed=1)
