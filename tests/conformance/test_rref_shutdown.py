"""Graceful shutdown against the spec: simulated runs that end with rpc.shutdown(graceful=True)
are accepted by TLC, and a planted shutdown bug is rejected at the sweep that shows it.

The runs keep the simulator's default faults on (duplicated retried control messages, delays,
any delivery order, rpc.remote timeouts), so the barrier, the sweeps and the destroys
interleave with late retries and with the application dropping references.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from protoref.errors import LeakError
from protoref.rref.sim.faults import ShutdownFault, run_with_fault
from protoref.rref.sim.simulator import SimConfig, Simulator
from protoref.tracing import JsonlSink
from tracecheck.protocols.rref import RREF
from tracecheck.replay.explain import Explanation
from tracecheck.replay.validate import validate_traces
from tracecheck.replay.verdicts import ValidationReport
from tracecheck.traces.deltas import resolve
from tracecheck.traces.jsonvalue import from_json
from tracecheck.traces.load import Trace, load_trace

ROOT = Path(__file__).resolve().parent.parent.parent
SPEC_ROOT = ROOT / "spec"
SHUTDOWN = SimConfig(shutdown=True)
RUNS = 12  # seeded runs with shutdown, validated in one TLC batch
STEPS = 40  # workload steps per run, then the shutdown phase and the drain
#: The planted bug's seed (the first of 0..19 where the application still holds a UserRRef at
#: the sweep, found by a bounded search) and the 1-based index of that sweep's event.
BUG_SEED, BUG_AT = 1, 46

SHUTDOWN_ACTIONS = ("WaitAllWorkers", "DelAllUsersAndUnforkedOwners", "DestroyInstance")


def _spared_sweep(path: Path) -> int | None:
    """From the trace alone: the first sweep after which a UserRRef the worker's application
    held (as last logged) is not deleted. The spec's sweep deletes every confirmed UserRRef."""
    held: dict[str, frozenset[Any]] = {}
    deleted: frozenset[Any] = frozenset()  # deleted only grows: the events log what they add
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[1:]]
    events = [r for r in rows if r["kind"] == "event"]  # (not a finished run's end line)
    # the per-node sets as the checker rebuilds them from their deltas (trace schema 3)
    wholes = resolve([(e["node"], list(e["post"].items())) for e in events])
    for number, (event, whole) in enumerate(zip(events, wholes, strict=True), start=1):
        post = {k: from_json(v) for k, v in zip(event["post"], whole, strict=True)}
        deleted |= post.get("deletedAdded", frozenset())
        spared = held.get(event["node"], frozenset()) - deleted
        if event["event"] == "DelAllUsersAndUnforkedOwners" and spared:
            return number
        if "held" in post:
            held[event["node"]] = post["held"]
    return None


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Trace], ValidationReport]:
    folder = tmp_path_factory.mktemp("shutdown")
    traces: list[Trace] = []
    for seed in range(RUNS):
        path = folder / f"rref-shutdown-seed{seed}.ndjson"
        Simulator(seed, SHUTDOWN, JsonlSink(path)).run(STEPS)
        traces.append(load_trace(path))
    broken = folder / "sweep-spares-held-users.ndjson"
    error = run_with_fault(
        ShutdownFault.SWEEP_SPARES_HELD_USERS, BUG_SEED, STEPS, JsonlSink(broken), SHUTDOWN
    )
    # The runtime symptom: the owner of a spared UserRRef waits for its delete for ever.
    assert isinstance(error, LeakError)
    assert error.invariant == "ShutdownCompletesProp"
    assert _spared_sweep(broken) == BUG_AT
    traces.append(load_trace(broken))
    return traces, validate_traces(traces, RREF, SPEC_ROOT)


def test_simulated_shutdowns_are_accepted(batch: tuple[list[Trace], ValidationReport]) -> None:
    traces, report = batch
    for verdict in report.verdicts[:RUNS]:
        assert verdict.accepted, verdict.rejection
    for trace in traces[:RUNS]:
        assert trace.header.environment == ("barrier",)
        names = [e.event for e in trace.events]
        assert names.count("WaitAllWorkers") == 1
        assert names.count("DestroyInstance") == len(trace.header.nodes)
    # Shutdown interleaves with the at-least-once faults, not only with a quiet network.
    for name in (*SHUTDOWN_ACTIONS, "RetrySend", "DelForkOfOwner"):
        assert report.coverage.get(name, 0) > 0, name


def test_the_held_users_are_deleted_by_the_sweep(
    batch: tuple[list[Trace], ValidationReport],
) -> None:
    # Some accepted run swept a UserRRef its application still held (PyTorch's forced delete).
    traces, _ = batch
    sweeps_with_held = 0
    for trace in traces[:RUNS]:
        held: dict[str, Any] = {}
        wholes = resolve([(e.node, list(e.post.items())) for e in trace.events])
        for event, whole in zip(trace.events, wholes, strict=True):
            if event.event == "DelAllUsersAndUnforkedOwners" and held.get(event.node):
                sweeps_with_held += 1
            if "held" in event.post:
                held[event.node] = from_json(dict(zip(event.post, whole, strict=True))["held"])
    assert sweeps_with_held > 0


def test_a_sweep_that_spares_held_users_is_rejected_there(
    batch: tuple[list[Trace], ValidationReport],
) -> None:
    traces, report = batch
    verdict = report.verdicts[RUNS]
    assert not verdict.accepted
    assert verdict.rejection is not None
    assert verdict.rejection.index == BUG_AT
    event = traces[RUNS].events[BUG_AT - 1]
    assert event.event == "DelAllUsersAndUnforkedOwners"
    explanation = verdict.explanation
    assert isinstance(explanation, Explanation)
    assert explanation.index == BUG_AT
    assert explanation.frontier
    assert all(s.enabled for s in explanation.frontier)
    wrong = {p.field for s in explanation.frontier for p in s.post if not p.possible}
    assert wrong == {"deletedAdded"}


def test_the_same_seed_without_the_bug_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "correct.ndjson"
    Simulator(BUG_SEED, SHUTDOWN, JsonlSink(path)).run(STEPS)
    assert _spared_sweep(path) is None
    report = validate_traces([load_trace(path)], RREF, SPEC_ROOT)
    assert report.verdicts[0].accepted, report.verdicts[0].rejection
