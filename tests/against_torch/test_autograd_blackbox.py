"""Black-box distributed-autograd traces of torch (spec/autograd/TraceDistAutogradTorch.tla): a
real torch trace is accepted, and planted wrong observations are rejected at the planted event
by the full bounded search, not explained away by unobserved steps.

The golden trace is a real session of torch 2.13 (scenarios nested_calls and
release_in_flight, seed 5: the agent fails the first attempt of every
CLEANUP_AUTOGRAD_CONTEXT_REQ, so torch re-sends each a second later, and delays it 50 ms).
In the first block w2 calls w1, whose UDF calls w0; one backward pass; get_gradients; the
exit's cleanup cascades. In the second w0's block exits while its call to w2 runs; the
cleanup (its first attempt failed) reaches w2 after the UDF answered, so the late answer
re-creates w0's released context (#38513) and a late get_gradients finds it; w2's cascade
(it knows w0 from wrapping the answer) erases it again before the quiet point. These tests
need Java and TLC, not torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.blackbox_records import event_index, find_record, golden_records, renumber
from tracecheck.campaigns.torch_autograd import (
    BACKWARD_HANG,
    RESURRECTION,
    check_autograd_trace,
    known_defects,
)
from tracecheck.protocols.autograd_torch import AUTOGRAD_OPS, DEFAULT_HIDDEN, trace_constants
from tracecheck.protocols.blackbox import load_blackbox, parse_blackbox

ROOT = Path(__file__).resolve().parents[2]
SPEC_ROOT = ROOT / "spec"
GOLDEN = Path(__file__).parent / "golden" / "autograd_nested_release.jsonl"


def _insert_late(records: list[dict[str, Any]], event: dict[str, Any], after: int) -> None:
    """Insert ``event`` with clock ``after + 1``; every later clock moves up by one, and each
    node's seq counts 1, 2, ... again."""
    for r in records[1:]:
        if r["lamport"] > after:
            r["lamport"] += 1
    records.append({"kind": "event", "lamport": after + 1, "seq": 0, **event})
    records[1:] = sorted(records[1:], key=lambda r: (r["node"], r["lamport"]))
    renumber(records)


def _rejected_at(records: list[dict[str, Any]], **match: object) -> None:
    lines = [json.dumps(r) for r in records]
    verdict = check_autograd_trace(parse_blackbox(lines, AUTOGRAD_OPS), SPEC_ROOT)
    assert not verdict.accepted
    assert verdict.full_search  # the full search decided, not an observed-first one
    assert verdict.first_unexplained == event_index(lines, AUTOGRAD_OPS, **match), verdict.detail


def test_the_real_torch_trace_is_accepted() -> None:
    verdict = check_autograd_trace(GOLDEN, SPEC_ROOT)
    assert verdict.accepted, verdict.detail
    # the accepting behaviour ran torch's protocol: the nested call, the FAST-mode backward,
    # the cleanup cascade, the context erased under the running UDF
    assert {
        "NestedSendMessageWithAutograd",
        "ProcessBackwardAutogradReq",
        "CleanupBackwardPass",
        "ProcessCleanupAutogradContextReq",
        "RetrieveContext",
    } <= set(verdict.actions)
    # the late get_gradients found the released context: #38513's resurrection
    assert known_defects(load_blackbox(GOLDEN, AUTOGRAD_OPS)) == [RESURRECTION]


def test_the_bound_is_needed() -> None:
    """With no unobserved step the trace cannot be explained (torch's own messages must run
    between the observed events): the bound is part of the explanation, not decoration."""
    verdict = check_autograd_trace(GOLDEN, SPEC_ROOT, hidden=0)
    assert not verdict.accepted


def test_a_gradient_torch_never_produced_is_rejected() -> None:
    """get_gradients said 2 (the root and the one send function of the pass); 3 has no
    explanation: no unobserved step adds a contribution to a pass that is over."""
    records = golden_records(GOLDEN)
    at = find_record(records, op="Gradients")
    records[at]["grad"] += 1
    _rejected_at(records, op="Gradients")


def test_a_counter_off_by_one_is_rejected() -> None:
    """At the first quiet point every context is gone everywhere; one worker claiming one
    context left cannot be explained (nothing re-creates it: nothing is in flight)."""
    records = golden_records(GOLDEN)
    first = min(r["lamport"] for r in records[1:] if r["op"] == "Counters")
    at = find_record(records, op="Counters", lamport=first)
    records[at]["contexts"] += 1
    _rejected_at(records, op="Counters", lamport=first)


def test_a_backward_after_the_release_everywhere_is_rejected() -> None:
    """After the last quiet point (no context anywhere, nothing in flight) w2 calls backward
    on its first block's context and it runs: retrieveContext cannot find the id, and no
    unobserved step re-creates it."""
    records = golden_records(GOLDEN)
    last = max(r["lamport"] for r in records[1:] if r["op"] == "Counters")
    late = {"op": "LateBackward", "node": "w2", "cw": 2, "cn": 0, "outcome": "ok"}
    _insert_late(records, late, last)
    _rejected_at(records, op="LateBackward")


def test_the_same_late_backward_raising_is_accepted() -> None:
    """The control: the same late backward raising, as torch's does, is explained."""
    records = golden_records(GOLDEN)
    last = max(r["lamport"] for r in records[1:] if r["op"] == "Counters")
    late = {"op": "LateBackward", "node": "w2", "cw": 2, "cn": 0, "outcome": "error"}
    _insert_late(records, late, last)
    lines = [json.dumps(r) for r in records]
    verdict = check_autograd_trace(parse_blackbox(lines, AUTOGRAD_OPS), SPEC_ROOT)
    assert verdict.accepted, verdict.detail


def test_the_trace_fixes_the_bounds() -> None:
    constants = trace_constants(load_blackbox(GOLDEN, AUTOGRAD_OPS))
    assert constants["MaxPasses"] == "1"
    assert constants["MaxNested"] == "1"
    assert constants["ErrorWorkers"] == "{}"
    assert DEFAULT_HIDDEN >= 1


def test_the_defect_verdicts_read_the_quiet_points() -> None:
    trace = load_blackbox(GOLDEN, AUTOGRAD_OPS)
    records = golden_records(GOLDEN)
    last = max(r["lamport"] for r in records[1:] if r["op"] == "Counters")
    at = find_record(records, op="Counters", lamport=last)
    records[at] |= {"passes": 1}
    records[find_record(records, op="LateGradients")]["outcome"] = "error"
    planted = parse_blackbox([json.dumps(r) for r in records], AUTOGRAD_OPS)
    assert known_defects(trace) == [RESURRECTION]
    assert known_defects(planted) == [BACKWARD_HANG]


HANG = Path(__file__).parent / "golden" / "autograd_backward_hang.jsonl"


def test_fast_mode_s_hang_on_torch_is_explained() -> None:
    """A real torch session (scenarios backward_error and nested_calls, seed 3): w1's backward
    function raises, w0's backward raises; w2's slow backward function sends its gradient
    request to w0 after w0's pass failed, w0 starts a graph task for it that never answers,
    and w2's never ends: num_current_backward_passes reads 1 on w0 and w2 at both quiet
    points, with no context anywhere. The PyTorch variant explains it (only the full search
    finds it: the request must be handled before w0 leaves its block, where the observed-first
    search takes the exit at once): the known-defect verdict of
    MCDistAutograd_pytorchBackwardErrorHang."""
    trace = load_blackbox(HANG, AUTOGRAD_OPS)
    verdict = check_autograd_trace(trace, SPEC_ROOT)
    assert verdict.accepted, verdict.detail
    assert verdict.actions.get("BackwardError") == 1
    assert known_defects(trace) == [BACKWARD_HANG]


def test_a_running_task_on_the_worker_that_raised_is_rejected() -> None:
    """The worker whose backward function raised ended its graph task (failed): a counter
    saying it still runs one has no explanation."""
    records = golden_records(HANG)
    first = min(r["lamport"] for r in records[1:] if r["op"] == "Counters" and r["node"] == "w1")
    at = find_record(records, op="Counters", node="w1", lamport=first)
    assert records[at]["passes"] == 0
    records[at]["passes"] = 1
    _rejected_at(records, op="Counters", node="w1", lamport=first)
