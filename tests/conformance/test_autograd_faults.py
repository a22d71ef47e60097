"""Planted bugs in the autograd core are caught by the campaign, one row per bug.

Each :class:`~protoref.autograd.sim.faults.Fault` is planted while the campaign's own simulator
(``tracecheck.plugins.autograd.simulate``) runs the campaign's seeds (``make check`` runs
seeds 1..20); all broken traces go to TLC in one batch. For every bug some trace must be
rejected, at an event of the action the bug broke, never before the first event where the
broken run's trace differs from the correct run of the same seed (the correct prefix is
accepted), and exactly there when the bug shows in the logged event itself (a post-state or
a guard the simulator does not read to offer steps). The correct runs of those seeds are
accepted (tests/conformance/test_autograd_mapping.py).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import pytest

from protoref.autograd.sim.faults import FAULTS, Fault, inject, run_with_fault, target
from protoref.autograd.sim.simworld import SimConfig
from protoref.errors import ProtorefError
from protoref.tracing import JsonlSink
from tracecheck.plugins.autograd import simulate
from tracecheck.protocols.autograd import AUTOGRAD
from tracecheck.replay.validate import validate_files
from tracecheck.replay.verdicts import ValidationReport

ROOT = Path(__file__).resolve().parent.parent.parent
SEEDS = range(1, 21)
STEPS = 150
ERASE = {"ReleaseContext", "ProcessCleanupAutogradContextReq", "ReleaseOrphanedContext"}

#: fault -> (the events where it may be rejected, rejected exactly at the first difference)
EXPECTED: dict[Fault, tuple[set[str], bool]] = {
    # under horizons (issue 28) a release leaves no tombstone and the horizons are not logged:
    # a forgotten one shows at the erase (an orphan's tombstone) or where it should refuse
    Fault.FORGET_TOMBSTONE: (
        ERASE | {"ProcessForwardAutogradReq", "DeserializeForwardAutogradResp"},
        False,
    ),
    Fault.RESURRECT_LATE_ANSWER: ({"DeserializeForwardAutogradResp"}, True),
    # the redundant cleanup is rejected where a step takes it: handled, retried or discarded
    Fault.CLEANUP_BACK_TO_SENDER: (
        {"ProcessCleanupAutogradContextReq", "RetryCleanup", "Discard"},
        False,
    ),
    # the next three break a guard the simulator also reads to offer steps: the run may first
    # take another, legal step than the correct run, and the broken one later
    Fault.CLEANUP_MID_REQUEST: (ERASE, False),
    Fault.KNOWN_ONLY_ON_GRAD: ({"SendMessageWithAutograd"}, True),
    Fault.ZERO_COUNTED_AS_GRADIENT: ({"ProcessBackwardAutogradReq", "Discard"}, False),
    Fault.RECV_FIRES_EARLY: ({"RecvRpcBackwardApply"}, False),
    Fault.PASS_ENDS_BEFORE_ACKS: ({"CleanupBackwardPass"}, False),
    Fault.ANSWER_FORGETS_REQUEST: ({"FinishForwardAutogradReq"}, True),
    Fault.NESTED_REUSES_ID: ({"NestedSendMessageWithAutograd"}, True),
    Fault.FLOOD_BACK_TO_SENDER: ({"ProcessBackwardStart"}, True),
    # the hidden error shows where the acknowledgement is taken (or discarded at a dead root)
    Fault.ACK_HIDES_ERROR: ({"ProcessBackwardAck", "Discard"}, False),
    Fault.PASS_NUMBER_REUSED: ({"DistEngineExecute"}, True),
}


def test_there_are_at_least_eight_planted_bugs_each_with_a_row() -> None:
    assert len(FAULTS) >= 8
    assert set(EXPECTED) == set(FAULTS)


def test_faults_are_planted_only_inside_the_block() -> None:
    for fault in FAULTS:
        owner, name = target(fault)
        correct = getattr(owner, name)
        with inject(fault):
            assert getattr(owner, name) is not correct
        assert getattr(owner, name) is correct


@dataclass(frozen=True)
class Batch:
    report: ValidationReport
    #: (fault, seed) -> 1-based index of the first event where the broken trace differs from
    #: the correct one (None: the bug did not show in that run).
    differs: dict[tuple[Fault, int], int | None]


def _first_difference(broken: Path, correct: Path) -> int | None:
    a = broken.read_text(encoding="utf-8").splitlines()[1:]
    b = correct.read_text(encoding="utf-8").splitlines()[1:]
    for index, (x, y) in enumerate(zip(a, b, strict=False), start=1):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b)) + 1


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> Batch:
    folder = tmp_path_factory.mktemp("autograd-faults")
    paths: list[Path] = []
    differs: dict[tuple[Fault, int], int | None] = {}
    for seed in SEEDS:
        correct = folder / f"correct-{seed}.ndjson"
        simulate(seed, STEPS, correct)
        for fault in FAULTS:
            path = folder / f"{fault.value}-{seed}.ndjson"
            # a broken run may stop at its own check; the trace so far is written (closed)
            with inject(fault), contextlib.suppress(ProtorefError):
                simulate(seed, STEPS, path)
            paths.append(path)
            differs[fault, seed] = _first_difference(path, correct)
    _, report = validate_files(paths, AUTOGRAD, ROOT / "spec", explain=False)
    return Batch(report, differs)


@pytest.mark.parametrize("fault", FAULTS, ids=[f.value for f in FAULTS])
def test_the_campaign_rejects_each_planted_bug(fault: Fault, batch: Batch) -> None:
    events, exact = EXPECTED[fault]
    rejected = 0
    for verdict in batch.report.verdicts:
        name = Path(verdict.source).stem
        if not name.startswith(fault.value + "-"):
            continue
        seed = int(name.rsplit("-", 1)[1])
        first = batch.differs[fault, seed]
        if first is None:
            assert verdict.accepted, f"seed {seed}: the correct run's trace was rejected"
            continue
        if verdict.accepted:
            continue  # the bug's effect was one the spec also allows in this run
        rejected += 1
        assert verdict.rejection is not None
        assert verdict.rejection.event.event in events, (seed, verdict.rejection.event.event)
        assert verdict.rejection.index >= first, seed
        if exact:
            assert verdict.rejection.index == first, seed
    assert rejected > 0, f"no run of seeds {SEEDS} with {fault.value} was rejected"


def test_a_broken_run_keeps_its_trace_up_to_its_own_error(tmp_path: Path) -> None:
    # without tombstones a late message brings an erased context back: the run's own
    # invariant check (test mode) stops it; the trace up to there is kept for the checker.
    config = SimConfig(check_invariants=True)
    error = None
    for seed in SEEDS:
        path = tmp_path / f"run-{seed}.ndjson"
        error = run_with_fault(Fault.FORGET_TOMBSTONE, seed, STEPS, JsonlSink(path), config)
        if error is not None:
            break
    assert error is not None
    assert path.read_text(encoding="utf-8").count("\n") > 1
