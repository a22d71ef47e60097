"""Planted bugs in the RRef implementation are caught by the checker, one test per bug.

Each :class:`~protoref.rref.sim.faults.Fault` runs a seeded random workload of the simulator with
the bug planted. Where the bug first shows in the trace is decided from the trace alone, by the
bug's own definition (:func:`first_symptom`: e.g. "a DelUser of a fork the worker still has in
pendingUsers"); the seeds below were found by a bounded search over seeds 0..199 (:func:`find_seed`)
and are fixed so the test is deterministic. All broken traces, and the correct implementation's
traces for the same seeds, go to TLC in one batch; each rejection is then explained. The checker
must reject each broken trace exactly at the first symptom, with an explanation that points at the
broken guard or post-state field, and accept the correct runs.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from protoref.rref.core.machine import step as correct_step
from protoref.rref.core.state import RRefContext
from protoref.rref.sim import base as simulator
from protoref.rref.sim.faults import FAULTS, Fault, inject, run_with_fault
from protoref.rref.sim.simulator import Simulator
from protoref.tracing import JsonlSink
from tracecheck.protocols.rref import RREF
from tracecheck.replay.artifacts import failure_note
from tracecheck.replay.explain import Explanation
from tracecheck.replay.validate import validate_traces
from tracecheck.replay.verdicts import TraceVerdict, ValidationReport
from tracecheck.traces.jsonvalue import from_json
from tracecheck.traces.load import Trace, load_trace
from traceformat.deltas import resolve

ROOT = Path(__file__).resolve().parent.parent.parent
SPEC_ROOT = ROOT / "spec"
STEPS = 30  # workload steps per run (then the drain)

#: fault -> (seed, 1-based index of the event where the bug first shows).
SEEDS: dict[Fault, tuple[int, int]] = {
    Fault.DELETE_BEFORE_ACK: (0, 3),
    Fault.PARENT_BEFORE_CHILD: (2, 21),
    Fault.FORGET_PENDING_CHILD: (2, 2),
    Fault.RESURRECT_DELETED_FORK: (4, 52),
    Fault.OWNER_DELETED_WHILE_FORKED: (1, 9),
    Fault.CONFIRM_FORGETS_USER: (0, 5),
    Fault.REUSE_IDS: (0, 1),
}


# --------------------------------------------------------------------------- symptoms

State = dict[str, Any]


def _symptom(fault: Fault, event: dict[str, Any], pre: State, post: State) -> bool:
    """``event`` shows ``fault``: ``pre`` is its worker's state as last logged before it."""
    name = event["event"]
    a = {k: from_json(v) for k, v in event["args"].items()}
    empty: frozenset[Any] = frozenset()
    match fault:
        case Fault.DELETE_BEFORE_ACK:
            return name == "DelUser" and a["f"] in pre.get("pendingUsers", empty)
        case Fault.PARENT_BEFORE_CHILD:
            children = pre.get("pendingChildren", empty)
            return name == "DelUser" and any(parent == a["f"] for _, parent in children)
        case Fault.FORGET_PENDING_CHILD:
            child = (event["node"], post.get("nextId", 0) - 1)
            return (
                name == "PrepareChildFork"
                and a["parent"] != a["r"]
                and (child, a["parent"]) not in post["pendingChildren"]
            )
        case Fault.RESURRECT_DELETED_FORK:
            fork = (a.get("r"), a.get("c"))
            return (
                name == "AddForkOfOwnerIfNotPresent"
                and fork in pre.get("tombstones", empty)
                and fork in post["forks"]
            )
        case Fault.OWNER_DELETED_WHILE_FORKED:
            return (
                name == "DelForkOfOwner"
                and a["r"] not in post["owners"]
                and any(r == a["r"] for r, _ in post["forks"])
            )
        case Fault.CONFIRM_FORGETS_USER:
            return (
                name == "ConfirmPendingUser"
                and a["f"] in pre.get("pendingUsers", empty)
                and a["f"] not in post["confirmedUsers"]
            )
        case Fault.REUSE_IDS:
            return (
                name == "Remote"
                and a["dst"] != a["w"]
                and post["nextId"] == pre.get("nextId", 1) + 1
            )
    raise AssertionError(fault)


def _destroyed_with_copies(event: dict[str, Any], post: State, copies: dict[Any, int]) -> bool:
    """``event`` destroys a UserRRef while a copy of its RREF_FORK_REQUEST is in flight (what
    ``resurrect-deleted-fork`` does first since the owner keeps no tombstone: RRef.tla
    ``AwaitForkCopies``); else count the copies the event sends, retries, takes or loses."""
    name, args = event["event"], event["args"]
    if name == "DelUser":
        return copies[from_json(args["f"])] > 0
    if name == "GetOrCreateRRef" and from_json(args["c"]) in post.get("pendingUsers", ()):
        copies[from_json(args["c"])] += 1  # user to user: the child sends its fork request
    elif name == "AddForkOfOwnerIfNotPresent":
        copies[from_json(args["c"])] -= 1
    elif name in {"RetrySend", "LoseFirstAttempt"} and args["m"]["type"] == "RREF_FORK_REQUEST":
        copies[from_json(args["m"]["fork"])] += 1 if name == "RetrySend" else -1
    return False


def first_symptom(fault: Fault, events: Sequence[dict[str, Any]]) -> int | None:
    """The 1-based index of the first event that shows ``fault``, from the trace alone."""
    known: defaultdict[str, State] = defaultdict(dict)
    # the per-node sets as the checker rebuilds them from their deltas (trace schema 3)
    wholes = resolve([(e["node"], list(e["post"].items())) for e in events])
    copies: defaultdict[Any, int] = defaultdict(int)  # RREF_FORK_REQUEST copies in flight
    for number, (event, whole) in enumerate(zip(events, wholes, strict=True), start=1):
        pre = known[event["node"]]
        post = {f: from_json(v) for f, v in zip(event["post"], whole, strict=True)}
        if _symptom(fault, event, pre, post):
            return number
        if fault is Fault.RESURRECT_DELETED_FORK and _destroyed_with_copies(event, post, copies):
            return number
        for field, value in post.items():
            if field.endswith("Added"):  # a variable that only grows: what the step added
                name = field.removesuffix("Added")
                pre[name] = pre.get(name, frozenset()) | value
            else:
                pre[field] = value
    return None


def _events(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[1:]]
    return [r for r in rows if r["kind"] == "event"]  # (not a finished run's end line)


def find_seed(fault: Fault, folder: Path, seeds: range = range(200)) -> tuple[int, int] | None:
    """The first seed whose broken run shows ``fault``, with the symptom's index (a bounded
    search; how :data:`SEEDS` was filled)."""
    for seed in seeds:
        path = folder / f"{fault.value}-search.ndjson"
        run_with_fault(fault, seed, STEPS, JsonlSink(path))
        found = first_symptom(fault, _events(path))
        if found is not None:
            return seed, found
    return None


# --------------------------------------------------------------------------- one batch


@dataclass(frozen=True)
class Caught:
    traces: dict[Fault, Trace]
    symptoms: dict[Fault, int | None]
    errors: dict[Fault, str | None]
    clean_symptoms: dict[Fault, int | None]
    report: ValidationReport

    def verdict(self, fault: Fault) -> TraceVerdict:
        return self.report.verdicts[FAULTS.index(fault)]

    def clean(self, fault: Fault) -> TraceVerdict:
        return self.report.verdicts[len(FAULTS) + FAULTS.index(fault)]


@pytest.fixture(scope="module")
def caught(tmp_path_factory: pytest.TempPathFactory) -> Caught:
    folder = tmp_path_factory.mktemp("faults")
    traces: dict[Fault, Trace] = {}
    symptoms: dict[Fault, int | None] = {}
    errors: dict[Fault, str | None] = {}
    clean_symptoms: dict[Fault, int | None] = {}
    clean: list[Trace] = []
    for fault in FAULTS:
        seed, _ = SEEDS[fault]
        broken = folder / f"{fault.value}.ndjson"
        error = run_with_fault(fault, seed, STEPS, JsonlSink(broken))
        errors[fault] = None if error is None else type(error).__name__
        traces[fault] = load_trace(broken)
        symptoms[fault] = first_symptom(fault, _events(broken))
        correct = folder / f"{fault.value}-correct.ndjson"
        Simulator(seed, sink=JsonlSink(correct)).run(STEPS)
        clean.append(load_trace(correct))
        clean_symptoms[fault] = first_symptom(fault, _events(correct))
    report = validate_traces([*traces.values(), *clean], RREF, SPEC_ROOT)
    return Caught(traces, symptoms, errors, clean_symptoms, report)


# --------------------------------------------------------------------------- the tests


def test_faults_are_planted_only_inside_the_block() -> None:
    for fault in FAULTS:
        with inject(fault):
            assert simulator.core_step is not correct_step
        assert simulator.core_step is correct_step
        assert RRefContext.referenced.__qualname__ == "RRefContext.referenced"


def test_the_batch_is_two_tlc_runs_plus_one_explain_run_per_planted_bug(caught: Caught) -> None:
    # the simulation pass (it stops at the first rejected trace), breadth-first search over
    # the traces it did not accept, then one explain run per rejected trace
    assert caught.report.tlc_runs == 2 + len(FAULTS)


#: fault -> how the explanation must point at it: ("post", field) for a post-state diff of an
#: enabled step; ("state", variable) for a step that is not enabled, whose frontier states show
#: the fork in that variable and whose false guard is DelUser's ~Referenced(w, f) (G2);
#: ("guard", text) for a step that is not enabled for the guard named.
EXPECTED: dict[Fault, tuple[str, str]] = {
    Fault.DELETE_BEFORE_ACK: ("state", "pendingUsers"),
    Fault.PARENT_BEFORE_CHILD: ("state", "pendingChildren"),
    Fault.FORGET_PENDING_CHILD: ("post", "pendingChildren"),
    # the destructor ran with its fork request's copy in flight (RRef.tla AwaitForkCopies)
    Fault.RESURRECT_DELETED_FORK: ("guard", "AwaitForkCopies => ~ForkRequestOut(f)"),
    Fault.OWNER_DELETED_WHILE_FORKED: ("post", "owners"),
    Fault.CONFIRM_FORGETS_USER: ("post", "confirmedUsers"),
    Fault.REUSE_IDS: ("post", "nextId"),
}


@pytest.mark.parametrize("fault", FAULTS, ids=[f.value for f in FAULTS])
def test_planted_bug_is_rejected_where_it_first_shows(fault: Fault, caught: Caught) -> None:
    seed, where = SEEDS[fault]
    assert caught.symptoms[fault] == where, f"seed {seed} no longer shows {fault.value}"
    assert caught.clean_symptoms[fault] is None
    clean = [load_trace(Path(caught.clean(fault).source))]
    assert caught.clean(fault).accepted, failure_note(clean, caught.report, RREF, SPEC_ROOT)

    verdict = caught.verdict(fault)
    assert not verdict.accepted
    assert verdict.rejection is not None
    assert verdict.rejection.index == where
    event = caught.traces[fault].events[where - 1]
    assert verdict.rejection.event == event

    explanation = verdict.explanation
    assert isinstance(explanation, Explanation)
    assert explanation.index == where
    assert explanation.action == event.event
    assert explanation.frontier
    kind, name = EXPECTED[fault]
    if kind == "post":
        assert all(s.enabled for s in explanation.frontier)
        wrong = {p.field for s in explanation.frontier for p in s.post if not p.possible}
        assert wrong == {name}
        # only what differs: for a set, the element the bug left out or added
        assert f"post.{name}: " in explanation.summary
        assert any(
            what in explanation.summary
            for what in ("not logged: ", "not in the spec's: ", ", the spec's ")
        )
    elif kind == "guard":  # a step that is not enabled, for the guard named
        assert all(not s.enabled for s in explanation.frontier)
        assert {s.failed_guard for s in explanation.frontier} == {name}
        assert name in explanation.summary
    else:
        fork = explanation.params["f"]
        assert all(not s.enabled for s in explanation.frontier)
        assert all(fork in s.state[name] for s in explanation.frontier)
        assert {s.failed_guard for s in explanation.frontier} == {"~Referenced(w, f)"}
        assert "conjunct 1.2 is false: ~Referenced(w, f)" in explanation.summary
