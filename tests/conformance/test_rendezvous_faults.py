"""Planted bugs in the rendezvous implementation are caught by the checker, one test per bug.

Each :class:`~protoref.rendezvous.sim.faults.Fault` runs a seeded workload of the simulator with the
bug planted. Where the bug first shows is decided from the trace alone, by the bug's own
definition (:func:`first_symptom`); the seeds below were found by a bounded search over seeds
1..60 (:func:`find_seed`) and are fixed so the test is deterministic. All broken traces, and the
correct implementation's traces for the same seeds, go to TLC in one batch; each rejection is
then explained. The checker must reject each broken trace exactly at the first symptom, with
an explanation that points at the broken post-state field or guard, and accept the correct runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from protoref.rendezvous.sim.faults import CONFIG, FAULTS, Fault, run_with_fault
from tracecheck.protocols.rendezvous import RENDEZVOUS
from tracecheck.replay.artifacts import failure_note
from tracecheck.replay.explain import Explanation
from tracecheck.replay.validate import validate_traces
from tracecheck.replay.verdicts import ValidationReport
from tracecheck.traces.load import load_trace

ROOT = Path(__file__).resolve().parent.parent.parent
SPEC_ROOT = ROOT / "spec"
STEPS = 150

#: fault -> (seed, 1-based index of the event where the bug first shows).
SEEDS: dict[Fault, tuple[int, int]] = {
    Fault.IGNORE_TOKEN: (1, 48),
    Fault.RANK_BY_ARRIVAL: (1, 43),
    Fault.COMPLETE_BELOW_MIN: (1, 8),
    Fault.FORGET_ROUND_BUMP: (1, 86),
    Fault.TORCH_EPILOGUE: (1, 86),
    Fault.KEEP_DEAD_NODE: (1, 86),
}

_SYNCS = {"SyncRead", "SyncWriteWon", "SyncWriteLost"}
_EXPIRY = CONFIG.keep_alive_interval * CONFIG.keep_alive_max_attempt


def _fn(value: Any) -> dict[str, int]:
    """A logged function (``{"#map": ...}`` or ``[]``) as a dict."""
    return {} if value == [] else dict(value["#map"])


def _symptom(
    fault: Fault, event: dict[str, Any], nodes: Sequence[str], seen: dict[str, Any]
) -> bool:
    """``event`` shows ``fault``; ``seen`` holds what earlier events logged (updated here)."""
    name, node, post = event["event"], event["node"], event["post"]
    local = post.get("local")
    store = post.get("store")
    pre = seen.setdefault("local", {}).get(node)
    found = False
    match fault:
        case Fault.IGNORE_TOKEN:
            # a write lands although another write landed since this node's last sync
            writes = seen.setdefault("writes", 0)
            stale = seen.setdefault("synced", {}).get(node, 0) < writes
            last = seen.get("store")
            changed = store is not None and last is not None and _shape(store) != _shape(last)
            # (a stale write of exactly the stored value wins in 2.13 too: set_state compares
            # bytes; the shape ignores the ages a tick changes)
            found = name == "SyncWriteWon" and stale and changed
            if name == "SyncWriteWon" and store != last:  # a write of equal bytes changes nothing
                seen["writes"] = writes + 1
            if name in _SYNCS:
                seen["synced"][node] = seen["writes"]
        case Fault.RANK_BY_ARRIVAL:
            if local is not None and local["complete"]:
                ranks = _fn(local["participants"])
                order = [ranks[m] for m in sorted(ranks, key=nodes.index)]
                found = order != sorted(order)  # ranks follow the node order (with gaps)
        case Fault.COMPLETE_BELOW_MIN:
            found = (
                name == "MarkRendezvousComplete"
                and len(_fn(local["participants"])) < CONFIG.min_nodes
            )
        case Fault.FORGET_ROUND_BUMP:
            own = name in ("RemoveFromParticipants", "SyncWriteWon")  # applied to its own copy
            source = pre if own else seen.get("store")
            found = (
                (name == "RemoveFromParticipants" or name in _SYNCS)
                and source is not None
                and source["complete"]
                and not local["complete"]
                and local["round"] == source["round"]
            )
        case Fault.TORCH_EPILOGUE:
            # a copy in which a complete round lost some participants and stayed complete
            source = pre if name == "RemoveFromParticipants" else store or seen.get("store")
            found = (
                (name == "RemoveFromParticipants" or name in _SYNCS)
                and source is not None
                and source["complete"]
                and local["complete"]
                and local["round"] == source["round"]
                and set(_fn(local["participants"])) < set(_fn(source["participants"]))
            )
        case Fault.KEEP_DEAD_NODE:
            ages = _fn(local["lastHeartbeats"]) if name in _SYNCS else {}
            found = any(age > _EXPIRY for age in ages.values())
    if local is not None:
        seen["local"][node] = local
    if store is not None:
        seen["store"] = store
    return found


def _shape(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in state.items() if k not in ("lastHeartbeats", "deadline")}


def first_symptom(fault: Fault, path: Path) -> int | None:
    """The 1-based index of the first event of the trace at ``path`` that shows ``fault``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    nodes = json.loads(lines[0])["nodes"]
    seen: dict[str, Any] = {}
    for index, line in enumerate(lines[1:], start=1):
        if _symptom(fault, json.loads(line), nodes, seen):
            return index
    return None


def find_seed(fault: Fault, folder: Path, seeds: range = range(1, 61)) -> tuple[int, int] | None:
    """The first seed whose broken run shows ``fault`` (not used by the tests: how SEEDS was
    found)."""
    for seed in seeds:
        path = folder / f"{fault.value}-{seed}.ndjson"
        run_with_fault(fault, seed, STEPS, path)
        index = first_symptom(fault, path)
        if index is not None:
            return seed, index
    return None


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Path], ValidationReport]:
    """Every broken run and the correct runs of the same seeds, checked in one TLC batch."""
    folder = tmp_path_factory.mktemp("faults")
    paths: dict[str, Path] = {}
    for fault, (seed, _) in SEEDS.items():
        paths[fault.value] = folder / f"{fault.value}.ndjson"
        run_with_fault(fault, seed, STEPS, paths[fault.value])
    for seed in sorted({s for s, _ in SEEDS.values()}):
        paths[f"correct-{seed}"] = folder / f"correct-{seed}.ndjson"
        run_with_fault(None, seed, STEPS, paths[f"correct-{seed}"])
    traces = [load_trace(p) for p in paths.values()]
    return paths, validate_traces(traces, RENDEZVOUS, SPEC_ROOT)


def test_seeds_are_the_first_symptoms(checked: tuple[dict[str, Path], ValidationReport]) -> None:
    paths, _ = checked
    for fault, (seed, index) in SEEDS.items():
        assert first_symptom(fault, paths[fault.value]) == index, fault
        assert first_symptom(fault, paths[f"correct-{seed}"]) is None, fault


def test_correct_runs_are_accepted(checked: tuple[dict[str, Path], ValidationReport]) -> None:
    paths, report = checked
    verdicts = {v.source: v for v in report.verdicts}
    for name, path in paths.items():
        if name.startswith("correct-"):
            note = failure_note([load_trace(path)], report, RENDEZVOUS, SPEC_ROOT)
            assert verdicts[str(path)].accepted, note


#: fault -> a phrase the explanation of its rejection must contain.
EXPLAINED: dict[Fault, str] = {
    Fault.IGNORE_TOKEN: "conjunct 2 is false",
    # only the ranks that differ, not two whole states
    Fault.RANK_BY_ARRIVAL: (
        'post.local: .participants: ["10.0.0.11_101_3"]: logged 2, the spec\'s 0'
    ),
    # what the spec would have done instead of completing the round
    Fault.COMPLETE_BELOW_MIN: (
        'not enabled with the logged parameters; the spec would take Delay (pc = "sleep")'
    ),
    Fault.FORGET_ROUND_BUMP: "post.local: .round: logged 0, the spec's 1",
    Fault.KEEP_DEAD_NODE: ".lastHeartbeats: keys logged but not in the spec's",
    Fault.TORCH_EPILOGUE: "post.local",
}


@pytest.mark.parametrize("fault", FAULTS, ids=[f.value for f in FAULTS])
def test_each_fault_is_rejected_where_it_first_shows(
    fault: Fault, checked: tuple[dict[str, Path], ValidationReport]
) -> None:
    paths, report = checked
    verdict = next(v for v in report.verdicts if v.source == str(paths[fault.value]))
    assert not verdict.accepted
    assert verdict.rejection is not None
    assert verdict.rejection.index == SEEDS[fault][1]
    assert isinstance(verdict.explanation, Explanation)
    text = verdict.explanation.summary
    print(fault.value, verdict.rejection.event.event, text)
    assert EXPLAINED[fault] in text, text
