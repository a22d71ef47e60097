"""The note's scenarios across 3 OS processes on loopback; their merged traces through TLC."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from examples.rref_runtime_demo import run_workers

from protoref.rref.runtime.scenarios import NAMES, SCENARIOS
from tracecheck.protocols.rref import RREF
from tracecheck.replay.validate import validate_traces
from tracecheck.traces.load import load_trace, merge_traces

ROOT = Path(__file__).resolve().parent.parent.parent


def test_three_processes_run_every_scenario_and_tlc_accepts_the_merged_traces(
    tmp_path: Path,
) -> None:
    reports = run_workers(tmp_path, list(SCENARIOS), timeout=180)
    assert [r["worker"] for r in reports] == list(NAMES)
    assert all(r["leaks"] == {} and r["problems"] == [] for r in reports), reports
    traces = [load_trace(tmp_path / f"{name}.ndjson") for name in NAMES]
    merged = merge_traces(traces)
    events = Counter(e.event for e in merged.events)
    # Each scenario's distinctive steps happened, on the workers the note says.
    assert events["Remote"] == 4  # S1, S2, S4 from A and the self remote on B
    assert events["AddForkOfOwnerIfNotPresent"] >= 1  # S4: C asks B (fork request)
    assert events["FinishForkRequest"] >= 1
    assert events["DelPendingChild"] >= 2  # S2 (owner accepts) and S4 (C accepts)
    assert events["CreateLocalRRef"] == 1  # S3
    assert events["FinishCreatingOwnerRRef"] == 1  # self remote
    assert events["WaitAllWorkers"] == 1
    assert events["DestroyInstance"] == 3
    assert {e.node for e in merged.events} == {*NAMES, "barrier"}
    report = validate_traces([merged], RREF, ROOT / "spec")
    assert report.all_accepted, [v.rejection for v in report.verdicts]
    assert report.events == len(merged.events)
