"""Distributed autograd on the RPC runtime (three workers over TCP in this process): the
per-process autograd traces merge into one causal order that TLC accepts, for a run in the
spec's shapes, a value stored by one request and fetched by another (remote, to_here)
among them."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import protoref.autograd as dist_autograd
from protoref import rpc
from protoref.autograd import tensor
from protoref.autograd.core.ids import from_int
from protoref.rpc.agent import Agent
from support import autograd_udfs as udfs
from support.rref_runtime import SPEC_ROOT, TIMEOUT, eventually, start_world, stop_world
from tracecheck.protocols.autograd import AUTOGRAD
from tracecheck.replay.validate import validate_traces
from tracecheck.replay.verdicts import ValidationReport
from tracecheck.traces.load import load_trace, merge_traces


def start(n: int, folder: Path) -> list[Agent]:
    """``n`` workers, each writing its autograd trace ``ag<rank>.ndjson`` to ``folder``."""
    return start_world(n, autograd_dir=folder)


def validate(folder: Path, n: int) -> ValidationReport:
    trace = merge_traces([load_trace(folder / f"ag{r}.ndjson") for r in range(n)])
    return validate_traces([trace], AUTOGRAD, SPEC_ROOT)


def held_nowhere(agents: list[Agent]) -> bool:
    return all(not a.plugin("autograd").autograd.container.ctxs for a in agents)


def test_runtime_traces_merge_and_are_accepted(tmp_path: Path) -> None:
    agents = start(3, tmp_path)
    try:
        with agents[0].use():
            p = tensor(2.0, requires_grad=True)
            q = tensor(5.0, requires_grad=True)
            with dist_autograd.context() as cid:
                a = rpc.rpc_sync("w1", udfs.nested, (p * p, q, "w2"))  # nested call to w2
                rpc.rpc_sync("w2", udfs.log_value, (p,))  # grad in, none out
                b = rpc.rpc_sync("w1", udfs.mul3, (q,))
                rpc.rpc_sync("w2", udfs.mul3, (q,))  # an output the loss does not use
                rpc.rpc_sync("w0", udfs.mul3, (q,))  # a self-RPC, its output unused too
                with pytest.raises(RuntimeError, match="Already have an autograd context"):
                    dist_autograd.context().__enter__()  # NewContextRefused
                loss = a * b
                dist_autograd.backward(cid, [loss], retain_graph=True)
                dist_autograd.backward(cid, [loss])  # a second pass accumulates
                grads = dist_autograd.get_gradients(cid)
                assert float(grads[p]) == 2 * 180.0
                assert float(grads[q]) == 2 * 66.0
                with pytest.raises(RuntimeError, match="second time"):
                    dist_autograd.backward(cid, [loss])  # the graph is freed: fails, adds nothing
                assert float(dist_autograd.get_gradients(cid)[p]) == 2 * 180.0
            with pytest.raises(RuntimeError, match="Could not find autograd context"):
                dist_autograd.get_gradients(cid)  # RetrieveContext (#40880)
            udfs.GATE.clear()
            with dist_autograd.context() as late_cid:
                late = rpc.rpc_async("w1", udfs.gated_square, (p,))
            node0 = agents[0].plugin("autograd").autograd
            released = from_int(late_cid)  # its horizon covers it (issue 28: no tombstone)
            eventually(lambda: node0.container.refused(released), "the release")
            udfs.GATE.set()
            assert float(late.wait()) == 4.0
        eventually(lambda: held_nowhere(agents), "every worker released both contexts")
    finally:
        udfs.GATE.set()
        stop_world(agents)
    report = validate(tmp_path, 3)
    assert report.all_accepted, [v.rejection for v in report.verdicts]
    covered = {name for name, count in report.coverage.items() if count}
    assert {
        "NestedSendMessageWithAutograd",
        "DeserializeResponse",
        "ProcessBackwardStart",
        "ProcessBackwardAck",
        "ProcessCleanupAutogradContextReq",
        "NewContextRefused",
        "RetrieveContext",
    } <= covered


def test_a_value_fetched_from_a_remote_call_is_in_the_spec(tmp_path: Path) -> None:
    """``remote`` then ``to_here``: the fetch's answer feeds on the remote call's recv
    function, which the trace says with FetchStoredValue (issue 26 s4b; before, the trace was
    rejected at the fetch's FinishForwardAutogradReq, where the spec's shapes ended)."""
    agents = start(2, tmp_path)
    try:
        with agents[0].use():
            q = tensor(5.0, requires_grad=True)
            with dist_autograd.context() as cid:
                value = rpc.remote("w1", udfs.mul3, (q,)).to_here()
                dist_autograd.backward(cid, [value * 2])
                assert float(dist_autograd.get_gradients(cid)[q]) == 6.0
        eventually(lambda: held_nowhere(agents), "every worker released the context")
    finally:
        stop_world(agents)
    report = validate(tmp_path, 2)
    assert report.all_accepted, [v.rejection for v in report.verdicts]
    assert report.coverage["FetchStoredValue"] == 1


@pytest.fixture(autouse=True)
def _open_gate() -> None:
    udfs.GATE.set()


def test_rref_backward_local_on_the_owner_and_distributed(tmp_path: Path) -> None:
    agents = start(2, tmp_path)
    try:
        with agents[0].use():
            x = tensor(3.0, requires_grad=True)
            with dist_autograd.context() as cid:
                rref = rpc.remote("w1", udfs.square, (x,))
                rref.backward(cid)  # torch's RRef.backward(dist_autograd_ctx_id)
                assert float(dist_autograd.get_gradients(cid)[x]) == 6.0
            local = rpc.RRef(x * x * 2)
            local.backward()  # a local pass on the owner: into .grad
            assert x.grad is not None
            assert float(x.grad) == 12.0
            with pytest.raises(RuntimeError, match="call it on the RRef's owner"):
                rpc.remote("w1", udfs.square, (x,)).backward()
        eventually(lambda: held_nowhere(agents), "every worker released the context")
    finally:
        stop_world(agents)


def test_a_call_to_the_worker_itself_is_wrapped(tmp_path: Path) -> None:
    agents = start(2, tmp_path)
    try:
        with agents[0].use():
            x = tensor(4.0, requires_grad=True)
            with dist_autograd.context() as cid:
                y = rpc.rpc_sync("w0", udfs.square, (x,))  # to itself, under the context
                z = rpc.rpc_sync("w1", udfs.mul3, (y,))
                dist_autograd.backward(cid, [z])
                assert float(dist_autograd.get_gradients(cid)[x]) == 3 * 2 * 4.0
        eventually(lambda: held_nowhere(agents), "every worker released the context")
    finally:
        stop_world(agents)


def test_threads_contexts_at_once_are_in_the_spec(tmp_path: Path) -> None:
    """Two application threads of one worker, each in its own context at the same time (the
    spec's Threads): gradients never mix, and TLC accepts the merged trace."""
    agents = start(2, tmp_path)
    results: dict[int, float] = {}
    errors: list[BaseException] = []
    inside = threading.Barrier(2, timeout=TIMEOUT)

    def worker(k: int) -> None:
        try:
            with agents[0].use():
                x = tensor(float(k + 1), requires_grad=True)
                with dist_autograd.context() as cid:
                    inside.wait()  # both contexts open at once
                    y = rpc.rpc_sync("w1", udfs.mul3, (x * x,))
                    dist_autograd.backward(cid, [y])
                    results[k] = float(dist_autograd.get_gradients(cid)[x])
        except BaseException as err:
            errors.append(err)

    try:
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
        assert not errors, errors
        assert results == {0: 3 * 2 * 1.0, 1: 3 * 2 * 2.0}
        eventually(lambda: held_nowhere(agents), "every worker released both contexts")
    finally:
        stop_world(agents)
    report = validate(tmp_path, 2)
    assert report.all_accepted, [v.rejection for v in report.verdicts]
