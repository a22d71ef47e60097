"""Black-box RRef traces of torch (spec/rref/TraceRRefTorch.tla): a real torch trace is
accepted, and planted wrong observations are rejected at the planted event by the full
bounded search, not explained away by unobserved steps.

The golden trace is a real session of torch 2.13 (scenario to_here_timeout, seed 1): worker
w1 creates an RRef on w2 whose function sleeps 0.5 s, its to_here times out while the fetch is
parked, the future completes, w1 drops the RRef; then an RRef on w0 shared with w2 is left
held for rpc.shutdown's sweep. These tests need Java and TLC, not torch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.blackbox_records import event_index, find_record, golden_records, renumber
from tracecheck.protocols.blackbox import (
    RREF_OPS,
    BlackBoxTraceError,
    load_blackbox,
    parse_blackbox,
)
from tracecheck.protocols.rref_torch import DEFAULT_HIDDEN
from tracecheck.replay.rref_torch import check_rref_trace

ROOT = Path(__file__).resolve().parents[2]
SPEC_ROOT = ROOT / "spec"
GOLDEN = Path(__file__).parent / "golden" / "rref_to_here_timeout.jsonl"


def test_the_real_torch_trace_is_accepted() -> None:
    verdict = check_rref_trace(GOLDEN, SPEC_ROOT)
    assert verdict.accepted, verdict.detail
    assert verdict.events == 20


def test_the_bound_is_needed() -> None:
    """With no unobserved step the trace cannot be explained (torch's own messages must run
    between the observed events): the bound is part of the explanation, not decoration."""
    verdict = check_rref_trace(GOLDEN, SPEC_ROOT, hidden=0)
    assert not verdict.accepted


def test_a_delete_torch_never_sent_is_rejected() -> None:
    """The program never drops its RRef, so torch never sends RREF_USER_DELETE; the owner's
    counters still show the OwnerRRef gone. No unobserved step may delete a held UserRRef."""
    records = golden_records(GOLDEN)
    del records[find_record(records, op="DropRRef", label="0to.a")]
    lines = renumber(records)
    verdict = check_rref_trace(parse_blackbox(lines, RREF_OPS), SPEC_ROOT)
    assert not verdict.accepted
    assert verdict.searches == 2  # the full search decided, not the observed-first one
    # the first sample on the owner w2 after the (removed) drop
    assert verdict.first_unexplained == event_index(
        lines, RREF_OPS, op="Counters", node="w2", lamport=8
    )


def test_a_counter_off_by_one_is_rejected() -> None:
    records = golden_records(GOLDEN)
    at = find_record(records, op="Counters", node="w0", lamport=12)
    records[at]["forks"] = 3  # torch said 2: the creator's fork and the child's
    lines = renumber(records)
    verdict = check_rref_trace(parse_blackbox(lines, RREF_OPS), SPEC_ROOT)
    assert not verdict.accepted
    assert verdict.first_unexplained == event_index(
        lines, RREF_OPS, op="Counters", node="w0", lamport=12
    )


def test_a_to_here_that_succeeds_after_the_owner_deleted_the_value_is_rejected() -> None:
    """After the owner's counters show the OwnerRRef deleted, the timed-out to_here returns
    the value after all: torch drops a late reply, and a fetch after the delete parks."""
    records = golden_records(GOLDEN)
    # w1's last event before the owner's sample (each worker's events are a block, in order)
    at = find_record(records, op="Counters", node="w1", lamport=7)
    late = {
        "kind": "event",
        "op": "ToHereOk",
        "node": "w1",
        "lamport": 9,
        "seq": 0,
        "label": "0to.a",
    }
    for r in records[1:]:  # make room: every later clock moves up by one
        if isinstance(r["lamport"], int) and r["lamport"] >= 9:
            r["lamport"] += 1
    records.insert(at + 1, late)
    lines = renumber(records)
    verdict = check_rref_trace(parse_blackbox(lines, RREF_OPS), SPEC_ROOT)
    assert not verdict.accepted
    assert verdict.first_unexplained == event_index(
        lines, RREF_OPS, op="ToHereOk", node="w1", lamport=9
    )


def test_the_default_bound() -> None:
    assert DEFAULT_HIDDEN >= 1


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r.update(op="Teleport"), "unknown op"),
        (lambda r: r.update(node="w9"), "not a worker"),
        (lambda r: r.update(lamport=-1), "natural number"),
        (lambda r: r.update(extra=1), "has no field extra"),
    ],
)
def test_malformed_lines_are_refused(edit: object, message: str) -> None:
    records = golden_records(GOLDEN)
    edit(records[1])  # type: ignore[operator]
    with pytest.raises(BlackBoxTraceError, match=message):
        parse_blackbox([json.dumps(r) for r in records], RREF_OPS)


def test_a_clock_going_backwards_is_refused() -> None:
    records = golden_records(GOLDEN)
    records[2]["lamport"] = 1  # w1's second event, at the clock of its first
    with pytest.raises(BlackBoxTraceError, match="does not exceed"):
        parse_blackbox([json.dumps(r) for r in records], RREF_OPS)


def test_the_golden_file_loads() -> None:
    assert len(load_blackbox(GOLDEN, RREF_OPS).events) == 20


LEAK = Path(__file__).parent / "golden" / "rref_remote_timeout_leak.jsonl"


def test_the_leak_and_the_failed_shutdown_are_explained() -> None:
    """A real torch session (scenario remote_timeout, seed 5): rpc.remote times out, the
    RREF_USER_DELETE overtakes the late call, the owner keeps an OwnerRRef and a fork for
    good (its counters read 1 and 1), and rpc.shutdown fails on every worker. The PyTorch
    variant explains it: pytorch#41217's leak, whose fork keeps the shutdown from completing."""
    verdict = check_rref_trace(LEAK, SPEC_ROOT)
    assert verdict.accepted, verdict.detail
    assert verdict.actions.get("TimeOutRemote") == 1
    assert "DestroyInstance" not in verdict.actions  # no context was destroyed


def test_a_failed_shutdown_without_a_leak_is_rejected() -> None:
    """The golden to_here_timeout session leaks nothing: had its shutdown failed, no
    behaviour would explain it."""
    records = golden_records(GOLDEN)
    at = find_record(records, op="ShutdownDone", node="w0")
    records[at] = records[at] | {"op": "ShutdownFailed", "error": "x"}
    lines = renumber(records)
    verdict = check_rref_trace(parse_blackbox(lines, RREF_OPS), SPEC_ROOT)
    assert not verdict.accepted
    assert verdict.first_unexplained == event_index(lines, RREF_OPS, op="ShutdownFailed", node="w0")
