"""What a trace claims about itself is checked (issue #21, soundness): who took each step, its
Lamport clock, its arguments' domains, and, for a run that says it finished, quiescence."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from support.ledger import GOOD, LEDGER, SPEC_ROOT, event, header
from tracecheck.protocols.mapping import ActionMap
from tracecheck.protocols.rref import RREF
from tracecheck.replay.claims import Stamps, first_false_claim
from tracecheck.replay.explain import Explanation
from tracecheck.replay.validate import validate_traces
from tracecheck.traces.load import Trace, parse_trace_lines

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "rref" / "golden" / "user_to_owner_return.ndjson"

Row = dict[str, Any]


def _rows() -> list[Row]:
    """The golden trace's header and events (without its end line: the rows are changed here,
    and checked as a run that did not say it ended)."""
    rows = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines()]
    return [row for row in rows if row.get("kind") != "end"]


def _trace(rows: list[Row], source: str = "t.ndjson") -> Trace:
    """``rows`` as a trace, per-node seq renumbered in file order."""
    seqs: dict[str, int] = {}
    lines = [json.dumps(rows[0])]
    for row in rows[1:]:
        line = row
        if row.get("kind") == "event":
            seqs[row["node"]] = seqs.get(row["node"], 0) + 1
            line = row | {"seq": seqs[row["node"]]}
        lines.append(json.dumps(line))
    return parse_trace_lines(lines, source)


def _first(rows: list[Row], name: str) -> int:
    """The 1-based event index of the first event called ``name``."""
    return next(i for i, row in enumerate(rows[1:], start=1) if row["event"] == name)


# --- who -------------------------------------------------------------------------------------


def test_a_retry_logged_by_a_node_that_did_not_send_is_rejected_there() -> None:
    rows = _rows()
    at = _first(rows, "RetrySend")
    sender = rows[at]["args"]["m"]["src"]
    other = next(n for n in rows[0]["nodes"] if n != sender)
    rows[at] = rows[at] | {"node": other}
    report = validate_traces([_trace(rows)], RREF, ROOT / "spec", explain=False)
    (verdict,) = report.verdicts
    assert verdict.rejection is not None
    assert (verdict.rejection.index, verdict.rejection.kind) == (at, "actor")
    assert verdict.rejection.reason == (
        f"RetrySend is taken by {sender!r} (args.m.src), but the event was logged by {other!r}"
    )


def test_a_worker_step_logged_by_another_worker_is_rejected_at_that_step() -> None:
    rows = _rows()
    at = _first(rows, "DropRRef")
    rows[at] = rows[at] | {"node": "w2"}  # args.w stays w0: w2 did not drop it
    claim = first_false_claim(_trace(rows), RREF)
    assert claim is not None
    assert (claim.index, claim.kind) == (at, "actor")


def test_the_barrier_logged_by_a_worker_is_rejected() -> None:
    rows = _rows()
    rows[0]["environment"] = ["barrier"]
    barrier = {
        "kind": "event",
        "event": "WaitAllWorkers",
        "node": "w1",  # not the environment actor "barrier"
        "seq": 1,
        "lamport": 100,
        "args": {},
        "post": {"stopping": True},
    }
    claim = first_false_claim(_trace([*rows, barrier]), RREF)
    assert claim is not None
    assert claim.index == len(rows)
    assert "taken by 'barrier'" in claim.reason


# --- when ------------------------------------------------------------------------------------


def test_a_lamport_clock_that_goes_back_on_a_node_is_rejected() -> None:
    rows = _rows()
    at = _first(rows, "ToHere")
    rows[at] = rows[at] | {"lamport": 1}
    report = validate_traces([_trace(rows)], RREF, ROOT / "spec", explain=False)
    (verdict,) = report.verdicts
    assert verdict.rejection is not None
    assert (verdict.rejection.index, verdict.rejection.kind) == (at, "clock")
    assert "does not grow" in (verdict.rejection.reason or "")


V4_LEDGER = LEDGER.model_copy(
    update={
        "actions": tuple(
            a.model_copy(update={"receives": True}) if a.event == "Receive" else a
            for a in LEDGER.actions
        ),
        "quiescence": {
            "nothing in flight": "inbox = {}",
            "nobody rich": "\\A n \\in Nodes : balance[n] < 3",
        },
    }
)


def _ledger(rows: list[Row], source: str) -> Trace:
    lines = [json.dumps(header(schema_version=4)), *(json.dumps(r) for r in rows)]
    return parse_trace_lines(lines, source)


def test_a_receive_names_its_send_and_comes_after_it() -> None:
    deposit, transfer = GOOD[0], GOOD[1]  # a: lamports 1 and 2
    receive = GOOD[2] | {"lamport": 3, "sent_by": ["a", 2]}
    good = _ledger([deposit, transfer, receive], "good")
    assert first_false_claim(good, V4_LEDGER) is None
    cases = {
        "missing": (receive | {"sent_by": None}, "must name its send"),
        "before": (receive | {"lamport": 2}, "is not after the send's (a at 2)"),
        "no such send": (receive | {"sent_by": ["a", 7], "lamport": 9}, "no earlier event of a"),
        "stranger": (receive | {"sent_by": ["zz", 2]}, "'zz', which is not among"),
    }
    for name, (bad, problem) in cases.items():
        claim = first_false_claim(_ledger([deposit, transfer, bad], name), V4_LEDGER)
        assert claim is not None, name
        assert (claim.index, claim.kind) == (3, "clock"), name
        assert problem in claim.reason, (name, claim.reason)
    # a step that takes no message names no send
    wrong = _ledger([deposit | {"sent_by": ["b", 1]}, transfer, receive], "wrong")
    claim = first_false_claim(wrong, V4_LEDGER)
    assert claim is not None
    assert claim.index == 1


# --- domains and hostile values ----------------------------------------------------------------


def test_an_argument_outside_the_header_nodes_is_rejected_and_the_batch_goes_on() -> None:
    # "w": "zz" made TLC fail to evaluate the step, which stopped the whole batch.
    rows = _rows()
    at = _first(rows, "ToHere")
    rows[at] = rows[at] | {"args": {**rows[at]["args"], "w": "zz"}}
    bad = _trace(rows, "bad")
    good = _trace(_rows(), "good")
    report = validate_traces([good, bad], RREF, ROOT / "spec", explain=False)
    assert [v.accepted for v in report.verdicts] == [True, False]
    rejection = report.verdicts[1].rejection
    assert rejection is not None
    assert (rejection.index, rejection.kind) == (at, "argument")
    assert rejection.reason == "args.w: 'zz' is not a node"
    for field, value, problem in (
        ("f", ["zz", 1], "is not an id"),
        ("f", ["w0", 0], "is not an id"),
        ("f", "w0", "is not an id"),
    ):
        rows = _rows()
        rows[at] = rows[at] | {"args": {**rows[at]["args"], field: value}}
        claim = first_false_claim(_trace(rows), RREF)
        assert claim is not None
        assert problem in claim.reason
    rows = _rows()
    retry = _first(rows, "RetrySend")
    message = rows[retry]["args"]["m"]
    rows[retry] = rows[retry] | {"args": {"m": message | {"dst": "nowhere"}}}
    claim = first_false_claim(_trace(rows), RREF)
    assert claim is not None
    assert claim.reason == "args.m: field dst: 'nowhere' is not a node"


@pytest.mark.parametrize("name", ['w"1', "w\\1", 'w1\\" /\\ FALSE \\* "'])
def test_node_names_that_are_tla_syntax_never_reach_the_module_unescaped(name: str) -> None:
    # The whole trace with worker w1 renamed: every place a node name is rendered (header
    # constants, derived constants, arguments, messages, the set deltas) must escape it.
    text = GOLDEN.read_text(encoding="utf-8").replace('"w1"', json.dumps(name))
    trace = parse_trace_lines(text.splitlines(), "renamed")
    report = validate_traces([trace], RREF, ROOT / "spec", explain=False)
    assert report.all_accepted, report.verdicts


# --- the end of a run --------------------------------------------------------------------------


def test_a_finished_run_must_end_quiescent() -> None:
    receive = GOOD[2] | {"lamport": 3, "sent_by": ["a", 2]}
    end = {"kind": "end", "seqs": {"a": 2, "b": 1}}
    done = _ledger([GOOD[0], GOOD[1], receive, end], "done")
    # the same run cut before the receive: the transfer is still in flight
    cut = _ledger([GOOD[0], GOOD[1], {"kind": "end", "seqs": {"a": 2}}], "stuck")
    unfinished = _ledger([GOOD[0], GOOD[1]], "unfinished")  # no end line: nothing required
    report = validate_traces([done, cut, unfinished], V4_LEDGER, SPEC_ROOT)
    assert [v.accepted for v in report.verdicts] == [True, False, True]
    verdict = report.verdicts[1]
    assert verdict.rejection is not None
    assert (verdict.rejection.index, verdict.rejection.kind) == (3, "end")
    assert verdict.rejection.event is None
    assert verdict.matched == 2
    explanation = verdict.explanation
    assert isinstance(explanation, Explanation)
    (state,) = explanation.frontier
    assert state.reason() == "not quiescent: nothing in flight is false"
    assert state.state["inbox"] == '{<<"b", 2>>}'
    assert "not quiescent" in explanation.summary
    # the same finished runs through breadth-first search alone: the same verdicts
    bfs = validate_traces([done, cut, unfinished], V4_LEDGER, SPEC_ROOT, simulate=False)
    assert [v.rejection for v in bfs.verdicts] == [v.rejection for v in report.verdicts]


def test_every_mapped_action_says_who_takes_it() -> None:
    for action in RREF.actions:
        assert action.actor is not None
    with pytest.raises(ValueError, match="say who takes the step"):
        ActionMap(event="Orphan", params=("x",))
    with pytest.raises(ValueError, match="names no argument"):
        ActionMap(event="Orphan", params=("x",), actor="y")
    assert event("Deposit", "a", 1, 3, a=3)["node"] == "a"


def test_an_actor_may_be_one_of_two_fields() -> None:
    # autograd's Discard: the receiver's agent, or the sender's when the receiver is dead
    action = ActionMap(event="Drop", params=("msg",), actor="msg.dst|msg.src")
    assert action.actor == "msg.dst|msg.src"
    with pytest.raises(ValueError, match="names no argument"):
        ActionMap(event="Drop", params=("msg",), actor="msg.dst|x.src")


def test_a_node_s_clocks_are_kept_as_runs_and_answer_as_a_set() -> None:
    """The sends a receive may name (every clock of every node) cost a run per jump of the
    clock, not an entry per event; membership is a set's."""
    import random  # noqa: PLC0415 - only this test draws

    draw = random.Random(28)
    clocks: list[int] = []
    clock = 0
    for _ in range(5_000):
        clock += 1 if draw.random() < 0.9 else draw.randint(2, 9)
        clocks.append(clock)
    stamps = Stamps()
    for c in clocks:
        stamps.add(c)
    jumps = sum(1 for a, b in itertools.pairwise(clocks) if b != a + 1)
    assert stamps.runs == jumps + 1
    known = set(clocks)
    for probe in range(-2, clock + 3):
        assert (probe in stamps) == (probe in known), probe
    assert "3" not in stamps
    # a node whose every step adds one to its clock: one run however long its trace
    steady = Stamps()
    for c in range(1, 100_001):
        steady.add(c)
    assert steady.runs == 1
    assert 100_000 in steady
    assert 100_001 not in steady
