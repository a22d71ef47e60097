"""The shapes real programs take beyond the autograd spec's first rounds (issue 26 s4,
docs/divergences.md 64): protoref programs of each shape run on three (or two) workers over
TCP, their per-process autograd traces merge and TLC accepts them; one wrong observation of
each new shape is rejected at its event; and the shape kept out on purpose (an unawaited
``rpc_async``) is rejected at its event naming the shape."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import protoref.autograd as dist_autograd
from protoref import optim, rpc
from protoref.autograd import tensor
from protoref.optim import DistributedOptimizer
from protoref.rpc.agent import Agent
from support import autograd_shapes as shapes
from support import autograd_udfs as udfs
from support.rref_runtime import SPEC_ROOT, eventually, start_world, stop_world
from tracecheck.protocols.autograd import AUTOGRAD
from tracecheck.replay.validate import validate_traces
from tracecheck.replay.verdicts import TraceVerdict
from tracecheck.traces.load import load_trace, merge_traces


def start(n: int, folder: Path) -> list[Agent]:
    """``n`` workers, each writing its autograd trace ``ag<rank>.ndjson`` to ``folder``."""
    return start_world(n, autograd_dir=folder)


def run(folder: Path, n: int, program: Callable[[], None]) -> None:
    """``program`` on worker 0 of ``n`` traced workers, until every context is released."""
    agents = start(n, folder)
    try:
        with agents[0].use():
            program()
        eventually(
            lambda: all(not a.plugin("autograd").autograd.container.ctxs for a in agents),
            "every worker released the context",
        )
    finally:
        stop_world(agents)


def verdict(folder: Path, n: int) -> tuple[TraceVerdict, dict[str, int]]:
    trace = merge_traces([load_trace(folder / f"ag{r}.ndjson") for r in range(n)])
    report = validate_traces([trace], AUTOGRAD, SPEC_ROOT)
    (one,) = report.verdicts
    return one, dict(report.coverage)


def tamper(folder: Path, n: int, event: str, change: Callable[[dict[str, Any]], None]) -> None:
    """Apply ``change`` to the first event named ``event`` in the workers' logs (a wrong
    observation of one step; every other line as the run logged it)."""
    for r in range(n):
        path = folder / f"ag{r}.ndjson"
        lines = path.read_text("utf-8").splitlines()
        for i, line in enumerate(lines):
            record = json.loads(line)
            if record.get("event") == event:
                change(record)
                lines[i] = json.dumps(record)
                path.write_text("\n".join(lines) + "\n", "utf-8")
                return
    raise AssertionError(f"no {event} event logged")


def rejected_at(one: TraceVerdict, event: str) -> str:
    assert not one.accepted
    assert one.rejection is not None
    assert one.rejection.event is not None
    assert one.rejection.event.event == event, one.rejection
    return one.rejection.reason or ""


@pytest.fixture(autouse=True)
def _open_gate() -> None:
    udfs.GATE.set()


def _optimizer_step_in_the_block() -> None:
    q = tensor(5.0, requires_grad=True)
    w = rpc.remote("w1", udfs.param, (2.0,))
    opt = DistributedOptimizer(optim.SGD, [w], lr=0.5)
    with dist_autograd.context() as cid:
        y = rpc.rpc_sync("w1", shapes.scale, (w, q))
        dist_autograd.backward(cid, [y])
        assert float(dist_autograd.get_gradients(cid)[q]) == 2.0
        opt.step(cid)  # calls after the pass (ForwardAfterPass)
        after = rpc.rpc_sync("w1", udfs.mul3, (q,))  # a wrapped answer after the pass
        assert float(after) == 15.0
    assert float(w.to_here()) == 2.0 - 0.5 * 5.0


def test_an_optimizer_step_inside_the_block_is_in_the_spec(tmp_path: Path) -> None:
    """(a) The parameter-server shape: backward, then ``DistributedOptimizer.step`` and one
    more call inside the ``with`` block; the answer after the pass misses its loss."""
    run(tmp_path, 2, _optimizer_step_in_the_block)
    one, coverage = verdict(tmp_path, 2)
    assert one.accepted, one.rejection
    assert coverage["DistEngineExecute"] == 1
    # the scale call, the step, the call after it (the optimizer's creation is outside a block)
    assert coverage["SendMessageWithAutograd"] == 3

    def used_by_the_loss(record: dict[str, Any]) -> None:
        assert record["args"]["loss"] is False  # the runtime's: after the pass
        record["args"]["loss"] = True

    # the second wrapped answer on worker 0 is the one after the pass
    tamper_nth(tmp_path, "DeserializeForwardAutogradResp", 2, used_by_the_loss)
    rejected_at(verdict(tmp_path, 2)[0], "DeserializeForwardAutogradResp")


def tamper_nth(
    folder: Path, event: str, nth: int, change: Callable[[dict[str, Any]], None]
) -> None:
    """``tamper`` on worker 0's ``nth`` event named ``event``."""
    path = folder / "ag0.ndjson"
    lines = path.read_text("utf-8").splitlines()
    seen = 0
    for i, line in enumerate(lines):
        record = json.loads(line)
        if record.get("event") == event:
            seen += 1
            if seen == nth:
                change(record)
                lines[i] = json.dumps(record)
                path.write_text("\n".join(lines) + "\n", "utf-8")
                return
    raise AssertionError(f"worker 0 logged {seen} {event} events, not {nth}")


def _remote_then_to_here() -> None:
    q = tensor(5.0, requires_grad=True)
    with dist_autograd.context() as cid:
        rref = rpc.remote("w1", udfs.nested, (q, q, "w2"))  # stored: 3q + q, via w2
        value = rref.to_here()
        dist_autograd.backward(cid, [value * 2])
        assert float(dist_autograd.get_gradients(cid)[q]) == 8.0


def test_a_value_stored_by_remote_and_fetched_is_in_the_spec(tmp_path: Path) -> None:
    """(b) ``remote`` then ``to_here``, the stored value made with a nested call: the fetch's
    answer feeds on the remote request's recv function and its nested answer's."""
    run(tmp_path, 3, _remote_then_to_here)
    one, coverage = verdict(tmp_path, 3)
    assert one.accepted, one.rejection
    assert coverage["FetchStoredValue"] == 2

    def another_recv(record: dict[str, Any]) -> None:
        record["args"]["r"]["mid"] = [0, 7]  # a recv function worker 1 never had

    tamper(tmp_path, 3, "FetchStoredValue", another_recv)
    rejected_at(verdict(tmp_path, 3)[0], "FetchStoredValue")


def _a_udf_raises() -> None:
    q = tensor(5.0, requires_grad=True)
    with dist_autograd.context() as cid:
        with pytest.raises(ValueError, match=r"refusing 5\.0"):
            rpc.rpc_sync("w1", shapes.fails, (q,))
        y = rpc.rpc_sync("w1", udfs.mul3, (q,))
        dist_autograd.backward(cid, [y])
        assert float(dist_autograd.get_gradients(cid)[q]) == 3.0


def test_a_udf_that_raises_by_itself_is_in_the_spec(tmp_path: Path) -> None:
    """(c) A UDF raises a user exception (no nested call failed): an error answer."""
    run(tmp_path, 2, _a_udf_raises)
    one, coverage = verdict(tmp_path, 2)
    assert one.accepted, one.rejection
    assert coverage["UdfRaises"] == 1

    def told_success(record: dict[str, Any]) -> None:
        assert record["args"]["msg"]["flag"] is False
        record["args"]["msg"]["flag"] = True

    tamper(tmp_path, 2, "DeserializeResponse", told_success)
    rejected_at(verdict(tmp_path, 2)[0], "DeserializeResponse")


def _an_unawaited_rpc_async() -> None:
    q = tensor(5.0, requires_grad=True)
    with dist_autograd.context():
        # the UDF returns with its rpc_async unanswered: the value arrives, detached
        y = rpc.rpc_sync("w1", shapes.fire_and_return, (q, "w2"))
        assert float(y) == 15.0
        assert y.grad_fn is None


def test_an_unawaited_rpc_async_is_named_where_the_spec_ends(tmp_path: Path) -> None:
    """(d) Kept out on purpose: the checker says so at the event, naming the shape (before:
    the call got no answer and timed out after 60 s)."""
    run(tmp_path, 3, _an_unawaited_rpc_async)
    one, _ = verdict(tmp_path, 3)
    reason = rejected_at(one, "UnawaitedRpcAsync")
    assert one.rejection is not None
    assert one.rejection.kind == "outside"
    assert reason.startswith("outside the spec: unawaited rpc_async")
