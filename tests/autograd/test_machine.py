"""Table tests of the Reference autograd transitions (protoref.autograd.core.machine): each legal
case changes what the spec's action changes, and each illegal one raises and leaves the state
as it was (the container is immutable, so "unchanged" is identity and equality)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoref.autograd.core import machine as mc
from protoref.autograd.core.events import Msg
from protoref.autograd.core.ids import ROOT_FN, AutogradId, from_int
from protoref.autograd.core.state import Container, Handler, RecvFn, SendFn
from protoref.autograd.core.transition import NotYetError
from protoref.autograd.trace.args import ACTION_NAMES
from protoref.errors import ProtocolError
from tracecheck.protocols.mapping import spec_actions

SPEC = Path(__file__).resolve().parents[2] / "spec" / "autograd" / "DistAutograd.tla"
C = AutogradId(0, 0)  # worker 0's first context
M0 = AutogradId(0, 0)  # worker 0's first message id
M1 = AutogradId(1, 0)  # worker 1's first message id


def ctn(me: int, **fields: Any) -> Container:
    return replace(Container(me=me), **fields)


def fwd_req(grad: bool = True, src: int = 0, dst: int = 1, ctx: AutogradId = C) -> Msg:
    return Msg.make("FWD_REQ", ctx, M0, M0, src, dst, grad)


def test_action_table_is_the_specs_list_of_actions() -> None:
    names = set(spec_actions(SPEC.read_text(encoding="utf-8")))
    assert {r.action for r in mc.ACTION_TABLE} == names == set(ACTION_NAMES)
    # every row but the PyTorch-only action names a real function of the core
    missing = [r.action for r in mc.ACTION_TABLE if r.function is None]
    assert missing == ["LoseCleanupMsg"]


def test_ids_are_torchs_integers() -> None:
    assert AutogradId(3, 5).to_int() == (3 << 48) | 5
    assert from_int((2 << 48) | 7) == AutogradId(2, 7)
    with pytest.raises(ValueError, match="never negative"):
        from_int(-1)


def test_new_context_then_nesting_raises_torchs_message() -> None:
    step = mc.new_context(ctn(0))
    assert step.state.cur == C
    assert step.state.ctxs == {C}
    assert step.state.next_ctx == 1
    with pytest.raises(ProtocolError, match=re.escape("Already have an autograd context id")):
        mc.new_context(step.state)
    # another thread of the same worker may open its own
    other = mc.new_context(step.state, t=1).state
    assert other.threads == {0: C, 1: AutogradId(0, 1)}


def test_send_records_send_function_known_worker_and_future() -> None:
    start = mc.new_context(ctn(0)).state
    step = mc.send_message_with_autograd(start, 1, True)
    assert step.sent == (fwd_req(),)
    assert step.state.sends == {SendFn.of(C, M0, 1, frozenset())}
    assert step.state.known == {(C, 1)}
    assert step.state.pending == {(C, M0)}
    no_grad = mc.send_message_with_autograd(start, 1, False).state
    assert no_grad.sends == frozenset()
    assert no_grad.known == {(C, 1)}


def test_app_inputs_feed_later_sends() -> None:
    r = RecvFn.of(C, M1, 1, True)
    start = ctn(0, ctxs=frozenset({C}), threads={0: C}, recvs=frozenset({r}), next_msg=1)
    step = mc.send_message_with_autograd(start, 1, True)
    assert step.state.sends == {SendFn.of(C, AutogradId(0, 1), 1, frozenset({M1}))}


def test_callee_creates_context_and_tombstone_refuses_late_request() -> None:
    step = mc.process_forward_autograd_req(ctn(1), fwd_req())
    h = Handler.start(1, C, M0, 0, True)
    assert step.state.ctxs == {C}
    assert step.state.handlers == {h}
    assert step.state.recvs == {RecvFn.of(C, M0, 0, False)}
    late = mc.process_forward_autograd_req(ctn(1, tomb=frozenset({C})), fwd_req())
    assert late.state == ctn(1, tomb=frozenset({C}))
    assert late.sent == (Msg.make("RESP", C, None, M0, 1, 0, False),)


def test_finish_wraps_the_answer_only_with_grad() -> None:
    h = Handler.start(1, C, M0, 0, True)
    running = ctn(1, ctxs=frozenset({C}), handlers=frozenset({h}))
    wrapped = mc.finish_forward_autograd_req(running, h, True)
    assert wrapped.sent == (Msg.make("FWD_RESP", C, M1, M0, 1, 0, True),)
    assert wrapped.state.sends == {SendFn.of(C, M1, 0, frozenset({M0}))}
    assert wrapped.state.known == {(C, 0)}
    assert not wrapped.state.handlers
    plain = mc.finish_forward_autograd_req(running, h, False)
    assert plain.sent == (Msg.make("RESP", C, None, M0, 1, 0, True),)
    raised = mc.finish_forward_autograd_req(running, h, True, raised=True)
    assert raised.sent == (Msg.make("RESP", C, None, M0, 1, 0, False),)


def test_late_answer_is_dropped_on_a_released_context() -> None:
    answer = Msg.make("FWD_RESP", C, M1, M0, 1, 0, True)
    released = ctn(0, tomb=frozenset({C}), pending=frozenset({(C, M0)}))
    step = mc.deserialize_forward_autograd_resp(released, answer, True)
    assert step.state.ctxs == frozenset()
    assert step.state.recvs == frozenset()
    assert step.state.pending == frozenset()


def test_cleanup_waits_for_handlers_cascades_and_skips_the_sender() -> None:
    h = Handler.start(1, C, M0, 0, False)
    holder = ctn(1, ctxs=frozenset({C}), known=frozenset({(C, 0), (C, 2)}))
    cleanup = Msg.cleanup(C, 0, 1, 0, (1, frozenset()))
    with pytest.raises(NotYetError):
        mc.process_cleanup_autograd_context_req(holder.evolve(handlers=frozenset({h})), cleanup)
    step = mc.process_cleanup_autograd_context_req(holder, cleanup)
    # not back to 0 (#32497); the cascade passes the creator's horizon on
    assert step.sent == (Msg.cleanup(C, 1, 2, 0, (1, frozenset())),)
    assert step.state.ctxs == frozenset()
    # the horizon covers C: refused, and no tombstone kept for it (issue 28 section 7)
    assert step.state.tomb == frozenset()
    assert step.state.horizon == {0: (1, frozenset())}
    assert step.state.refused(C)
    absent = mc.process_cleanup_autograd_context_req(
        ctn(2), Msg.cleanup(C, 1, 2, 0, (1, frozenset()))
    )
    assert absent.sent == ()
    assert (absent.state.tomb, absent.state.refused(C)) == (frozenset(), True)
    # a cleanup without a horizon (an orphan release's, whose creator died) keeps a tombstone
    bare = mc.process_cleanup_autograd_context_req(ctn(2), Msg.cleanup(C, 1, 2, 0))
    assert (bare.state.tomb, bare.state.refused(C)) == (frozenset({C}), True)


def test_release_snapshots_known_and_resets_thread() -> None:
    started = ctn(
        0, next_ctx=1, ctxs=frozenset({C}), threads={0: C}, known=frozenset({(C, 1), (C, 2)})
    )
    step = mc.release_context(started)
    hz: tuple[int, frozenset[AutogradId]] = (1, frozenset())
    assert step.sent == (Msg.cleanup(C, 0, 1, 0, hz), Msg.cleanup(C, 0, 2, 0, hz))
    assert step.state.threads == {}
    assert step.state.ctxs == frozenset()
    assert step.state.tomb == frozenset()
    assert step.state.horizon == {0: hz}
    assert step.state.refused(C)


def test_a_horizon_names_the_other_threads_open_context() -> None:
    """Two threads: releasing the later context must not make the earlier, still open one
    refused (a watermark would: MCDistAutograd_refWatermark); the horizon names it open."""
    c1 = AutogradId(0, 1)
    two = ctn(0, next_ctx=2, ctxs=frozenset({C, c1}), threads={0: C, 1: c1})
    step = mc.release_context(two, c1, 1)
    assert step.state.horizon == {0: (2, frozenset({C}))}
    assert step.state.refused(c1)
    assert not step.state.refused(C)
    cleanup = Msg.cleanup(c1, 0, 1, 0, (2, frozenset({C})))
    callee = mc.process_cleanup_autograd_context_req(ctn(1, ctxs=frozenset({C})), cleanup)
    assert callee.state.refused(c1)
    assert not callee.state.refused(C)
    assert callee.state.ctxs == {C}


def test_echo_backward_on_two_workers() -> None:
    """The root runs, its recv function fires, the callee's send function runs, the callee's
    recv function nothing consumes fires a zero, the flood is acknowledged, backward returns."""
    r0 = RecvFn.of(C, M1, 1, True)
    root = ctn(
        0,
        ctxs=frozenset({C}),
        threads={0: C},
        known=frozenset({(C, 1)}),
        sends=frozenset({SendFn.of(C, M0, 1, frozenset())}),
        recvs=frozenset({r0}),
    )
    callee = ctn(
        1,
        ctxs=frozenset({C}),
        known=frozenset({(C, 0)}),
        sends=frozenset({SendFn.of(C, M1, 0, frozenset())}),
        recvs=frozenset({RecvFn.of(C, M0, 0, False)}),
    )
    s = mc.dist_engine_execute(root, C)
    (start,) = s.sent
    root = s.state
    assert root.is_root(C)
    assert (C, 1, ROOT_FN) in root.grads
    s = mc.recv_rpc_backward_apply(root, C, r0)
    (req,) = s.sent
    root = s.state
    assert req == Msg.bwd("BWD_REQ", C, M1, 1, 0, 1, True)
    callee = mc.process_backward_start(callee, start).state
    callee = mc.process_backward_autograd_req(callee, req).state
    assert (C, 1, M1) in callee.grads
    (zero_recv,) = mc.ready_recvs(callee, C)
    s = mc.recv_rpc_backward_apply(callee, C, zero_recv)
    callee = s.state
    assert s.sent[0].flag is False  # a recv function nothing consumes: a zero gradient
    root = mc.process_backward_autograd_req(root, s.sent[0]).state
    assert (C, 1, M0) not in root.grads
    assert (C, M0) in root.execd
    s = mc.cleanup_backward_pass(callee, C)
    (ack,) = s.sent
    assert ack.type == "BWD_ACK"
    with pytest.raises(ProtocolError, match="not complete"):
        mc.cleanup_backward_pass(root, C)  # the flood child has not acknowledged yet
    root = mc.process_backward_ack(root, ack).state
    root = mc.cleanup_backward_pass(root, C).state
    assert (C, 1, "done") in root.bstate
    assert (C, 1, "done") in root.results


def test_a_second_pass_over_a_freed_graph_fails_and_adds_nothing() -> None:
    """retain_graph=True keeps the graph for pass 2; pass 2 frees it; pass 3 fails at once."""
    root = ctn(0, ctxs=frozenset({C}), threads={0: C})
    for p, retain in ((1, True), (2, False)):
        root = mc.dist_engine_execute(root, C, 0, retain).state
        assert (C, p, ROOT_FN) in root.grads
        root = mc.cleanup_backward_pass(root, C).state
    s = mc.dist_engine_execute(root, C, 0, False)
    assert s.sent == ()
    assert (C, 3, "fail") in s.state.results
    assert s.state.grads == root.grads


def test_a_backward_error_drains_and_fails_the_root() -> None:
    """A failed task still fires its recv functions (zeros) and acknowledges with the error;
    the root's pass then fails."""
    root = ctn(0, ctxs=frozenset({C}), threads={0: C}, known=frozenset({(C, 1)}))
    callee = ctn(
        1,
        ctxs=frozenset({C}),
        known=frozenset({(C, 0)}),
        recvs=frozenset({RecvFn.of(C, M0, 0, False)}),
    )
    s = mc.dist_engine_execute(root, C, 0, False)
    (start,) = s.sent
    root = s.state
    callee = mc.process_backward_start(callee, start).state
    callee = mc.backward_error(callee, C).state
    (recv,) = mc.ready_recvs(callee, C)
    s = mc.recv_rpc_backward_apply(callee, C, recv)
    assert s.sent[0].flag is False
    s = mc.cleanup_backward_pass(s.state, C)
    (ack,) = s.sent
    assert ack.flag is False
    root = mc.process_backward_ack(root, ack).state
    root = mc.cleanup_backward_pass(root, C).state
    assert (C, 1, "fail") in root.results


def test_a_stale_gradient_request_is_dropped() -> None:
    """passTag: a request of a pass this worker has finished starts nothing."""
    done = ctn(
        1,
        ctxs=frozenset({C}),
        sends=frozenset({SendFn.of(C, M1, 0, frozenset())}),
        bstate=frozenset({(C, 1, "done")}),
    )
    s = mc.process_backward_autograd_req(done, Msg.bwd("BWD_REQ", C, M1, 1, 0, 1, True))
    assert s.state is done
    assert s.sent == ()


# (case, function, state, arguments): each must raise and leave the state unchanged
Case = tuple[str, Callable[..., mc.Step], Container, tuple[Any, ...]]
HELD = ctn(1, ctxs=frozenset({C}))
RUNNING = ctn(0, ctxs=frozenset({C}), bstate=frozenset({(C, 1, "run")}))
WAITING = ctn(0, ctxs=frozenset({C}), pending=frozenset({(C, M0)}))
ANSWER = Msg.make("RESP", C, None, M0, 1, 0, True)
STRANGER = Handler.start(1, C, M0, 0, True)
ILLEGAL: list[Case] = [
    ("send outside a context", mc.send_message_with_autograd, ctn(0), (1, True)),
    ("release an unknown id", mc.release_context, ctn(0), (C,)),
    ("backward on an unknown id", mc.dist_engine_execute, ctn(0), (C,)),
    ("crashed worker", mc.new_context, ctn(0, alive=False), ()),
    ("request for another worker", mc.process_forward_autograd_req, ctn(2), (fwd_req(),)),
    ("answer nobody waits for", mc.deserialize_response, ctn(0), (ANSWER,)),
    ("cleanup as a request", mc.process_forward_autograd_req, ctn(1), (Msg.cleanup(C, 0, 1, 0),)),
    ("finish an unknown handler", mc.finish_forward_autograd_req, ctn(1), (STRANGER, True)),
    ("recv apply, no task", mc.recv_rpc_backward_apply, ctn(0), (C, RecvFn.of(C, M1, 1, True))),
    ("pass cleanup without a graph task", mc.cleanup_backward_pass, ctn(0), (C,)),
    ("orphan release of a live creator", mc.release_orphaned_context, HELD, (C, False)),
    ("backward while a pass runs", mc.dist_engine_execute, RUNNING, (C,)),
    ("refusal of a thread without a context", mc.new_context_refused, ctn(0), ()),
    ("timeout of no future", mc.poll_timeout_rpcs, ctn(0), (M0,)),
    ("late call with a held id", mc.retrieve_context, HELD, (C,)),
    ("backward error without a task", mc.backward_error, HELD, (C,)),
    ("backward with calls pending", mc.dist_engine_execute, WAITING, (C,)),
]


@pytest.mark.parametrize(("case", "fn", "state", "args"), ILLEGAL, ids=[c[0] for c in ILLEGAL])
def test_illegal_input_raises_and_leaves_state_unchanged(
    case: str, fn: Callable[..., mc.Step], state: Container, args: tuple[Any, ...]
) -> None:
    copy = replace(state)
    with pytest.raises(ProtocolError):
        fn(state, *args)
    assert state == copy, case


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["new", "send", "grad", "release", "backward"]), max_size=12))
def test_any_application_sequence_keeps_one_context_per_thread(ops: list[str]) -> None:
    """Hypothesis: whatever the application does, a step either raises (state unchanged) or
    keeps the thread's context held."""
    state = ctn(0)
    for op in ops:
        before = state
        try:
            if op == "new":
                state = mc.new_context(state).state
            elif op in ("send", "grad"):
                state = mc.send_message_with_autograd(state, 1, op == "grad").state
            elif op == "release":
                state = mc.release_context(state).state
            elif state.cur is not None:
                state = mc.dist_engine_execute(state, state.cur).state
        except ProtocolError:
            assert state is before
        if state.cur is not None:
            assert state.cur in state.ctxs


def test_the_docs_crosswalk_names_real_functions_and_every_action() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "autograd.md").read_text("utf-8")
    table = docs[docs.index("### Crosswalk") : docs.index("## 3. Invariants")]
    named = set(re.findall(r"`machine\.([a-z_]+)`", table))
    assert named
    for name in named:
        assert callable(getattr(mc, name)), name
    implemented = {r.function.__name__ for r in mc.ACTION_TABLE if r.function is not None}
    assert implemented <= named
