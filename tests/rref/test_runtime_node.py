"""The driver without sockets: retries after a lost link, at-most-once application of a
control id, refusals that leave the state intact, trace events as the simulator emits them."""

from __future__ import annotations

import concurrent.futures as cf
from typing import Any

from protoref.ids import GloballyUniqueId as G
from protoref.rpc import frames as fr
from protoref.rref.core import events as ev
from protoref.rref.runtime import frames as rf
from protoref.rref.runtime.node import PENDING, Node
from protoref.rref.trace import EVENT_ADAPTER
from protoref.tracing import MemorySink, SetDelta, encode_line


class FakeLinks:
    """Records frames; ``generation`` is what the transport would report."""

    def __init__(self) -> None:
        self.frames: list[tuple[str, Any, dict[str, Any]]] = []
        self.generation = 1

    def send(self, peer: str, cls: Any, **fields: Any) -> int:
        self.frames.append((peer, cls, fields))
        return self.generation


def no_udfs(fn: Any) -> cf.Future[Any]:
    raise AssertionError("no UDF runs in these tests")


def node(me: str) -> tuple[Node, FakeLinks, MemorySink]:
    links, sink = FakeLinks(), MemorySink()
    return Node(me=me, send_frame=links.send, run_udf=no_udfs, sink=sink), links, sink


def user_with_delete_unacked() -> tuple[Node, FakeLinks, MemorySink, ev.Message]:
    """w0 holds a confirmed UserRRef of w1's OwnerRRef, then drops it: USER_DELETE unacked."""
    w0, links, sink = node("w0")
    r, f = G("w0", 1), G("w0", 2)
    w0.apply(ev.PythonCall(src="w1", dst="w0", rref=r, owner="w1", fork=f, parent=r), stamp=1)
    w0.drop_user(f)  # DropRRef, then DelUser at once: nothing else references it (G1)
    (ctl, (msg, gen)) = next(iter(w0.unacked.items()))
    assert msg.type == "RREF_USER_DELETE"
    assert gen == 1
    assert links.frames[-1][2]["ctl"] == ctl
    return w0, links, sink, msg


def test_a_control_message_lost_with_its_link_is_retried_once_as_retry_send() -> None:
    w0, links, sink, msg = user_with_delete_unacked()
    links.generation = 2  # a new link: the old one broke before the ack came
    w0.on_link_ready("w1", fr.Welcome(mac="m", lamport=40, processed=()), generation=2)
    retry, lost = sink.records[-2:]
    assert retry.event == "RetrySend"  # type: ignore[attr-defined]
    assert retry.args.m == msg  # type: ignore[attr-defined]
    assert retry.lamport > 40  # type: ignore[attr-defined]  # after what the acceptor saw
    # the first attempt went with the old link: RRef.tla LoseFirstAttempt takes it (dup 1)
    assert lost.event == "LoseFirstAttempt"  # type: ignore[attr-defined]
    assert lost.args.m == msg.model_copy(update={"dup": 1})  # type: ignore[attr-defined]
    assert lost.lamport > retry.lamport  # type: ignore[attr-defined]
    peer, cls, fields = links.frames[-1]
    assert (peer, cls) == ("w1", rf.Proto)
    assert fields["msg"] == msg.model_copy(update={"dup": 2})
    assert [m for m, _ in w0.unacked.values()] == [fields["msg"]]
    for record in sink.records:  # every event is a valid trace line
        EVENT_ADAPTER.validate_json(encode_line(record))


def test_a_message_the_acceptor_already_applied_is_not_retried() -> None:
    w0, links, sink, _ = user_with_delete_unacked()
    ctl = next(iter(w0.unacked))
    sent, events = len(links.frames), len(sink.records)
    w0.on_link_ready("w1", fr.Welcome(mac="m", lamport=5, processed=(ctl,)), generation=2)
    assert w0.unacked == {}
    assert len(links.frames) == sent
    assert len(sink.records) == events


def test_frames_queued_for_the_new_link_are_not_retried() -> None:
    w0, _links, sink, _ = user_with_delete_unacked()
    ctl = next(iter(w0.unacked))
    w0.unacked[ctl] = (w0.unacked[ctl][0], 2)  # written on the link being opened
    w0.on_link_ready("w1", fr.Welcome(mac="m", lamport=5, processed=()), generation=2)
    assert ctl in w0.unacked
    assert sink.records[-1].event != "RetrySend"  # type: ignore[attr-defined]


def test_a_frame_the_loop_has_yet_to_write_is_not_retried_until_written() -> None:
    # An application thread found the link down and handed the frame to the loop (PENDING):
    # the new link must not re-send it, or the first attempt would arrive after its retry
    # (found by test_runtime_broken_link: a dup-0 USER_DELETE delivered after RetrySend).
    w0, links, sink, msg = user_with_delete_unacked()
    ctl = next(iter(w0.unacked))
    w0.unacked[ctl] = (msg, PENDING)
    sent, events = len(links.frames), len(sink.records)
    w0.on_link_ready("w1", fr.Welcome(mac="m", lamport=5, processed=()), generation=2)
    assert w0.unacked == {ctl: (msg, PENDING)}
    assert (len(links.frames), len(sink.records)) == (sent, events)
    w0.sent_on(ctl, 2)  # the loop wrote it on link 2, which broke too
    assert w0.unacked == {ctl: (msg, 2)}
    w0.on_link_ready("w1", fr.Welcome(mac="m", lamport=6, processed=()), generation=3)
    assert [e.event for e in sink.records[-2:]] == ["RetrySend", "LoseFirstAttempt"]  # type: ignore[attr-defined]
    w0.sent_on(ctl, 3)  # a late report for an entry no longer pending changes nothing
    assert ctl not in w0.unacked


def test_each_control_id_is_applied_at_most_once_and_acked_every_time() -> None:
    w1, _, sink = node("w1")
    r, f = G("w1", 1), G("w0", 2)
    w1.apply(ev.CreateLocalRRef())
    w1.apply(ev.PrepareChildFork(dst="w0", r=r, parent=r), send=False)
    c = next(e for e in w1.ctx.forks if e[0] == r)[1]
    delete = ev.UserDelete(src="w0", dst="w1", rref=r, owner="w1", fork=c)
    acks: list[int] = []
    frame = rf.Proto(seq=1, stamp=9, msg=delete, ctl=77)
    w1.on_frame("w0", frame, acks.append)
    after = w1.ctx
    w1.on_frame("w0", frame, acks.append)  # the same copy again (e.g. resent after a break)
    assert acks == [77, 77]
    assert w1.ctx is after
    assert [e.event for e in sink.records].count("DelForkOfOwner") == 1  # type: ignore[attr-defined]
    assert not after.tombstones  # DeleteLast: the owner keeps nothing for the deleted fork
    assert f not in after.users


def test_a_refused_message_is_recorded_and_changes_nothing() -> None:
    w1, _, sink = node("w1")
    before = w1.ctx
    stray = ev.PythonCall(src="w0", dst="w1", rref=G("w0", 1), owner="w0", fork=G("w0", 2))
    w1.on_frame("w0", rf.Proto(seq=1, stamp=1, msg=stray), lambda _c: None)
    wrong = ev.RRefAck(src="w2", dst="w1", rref=G("w1", 1), owner="w1", fork=G("w1", 2))
    w1.on_frame("w0", rf.Proto(seq=2, stamp=1, msg=wrong), lambda _c: None)
    assert len(w1.protocol_errors) == 2
    assert "arrived on w0's link" in str(w1.protocol_errors[1])
    assert w1.ctx is before
    assert sink.records == []


def _many_finished_users(w0: Node, count: int) -> None:
    for i in range(count):
        r, f = G("w1", 2 * i + 1), G("w1", 2 * i + 2)
        w0.apply(ev.PythonCall(src="w1", dst="w0", rref=r, owner="w1", fork=f, parent=r), stamp=1)
        w0.drop_user(f)  # DropRRef + DelUser: finished, referenced by nothing


def test_an_untraced_worker_forgets_finished_users_a_traced_one_keeps_the_history() -> None:
    from protoref.rref.runtime.node import COMPACT_EVERY  # noqa: PLC0415
    from protoref.tracing import NullSink  # noqa: PLC0415

    quiet = Node(me="w0", send_frame=FakeLinks().send, run_udf=no_udfs, sink=NullSink())
    _many_finished_users(quiet, COMPACT_EVERY)  # 3 steps each
    assert len(quiet.ctx.users) < COMPACT_EVERY
    assert quiet.ctx.deleted <= frozenset(quiet.ctx.users)
    traced, _, _ = node("w0")
    _many_finished_users(traced, COMPACT_EVERY)
    assert len(traced.ctx.users) == COMPACT_EVERY  # the spec's history, as the trace logs it
    assert len(traced.ctx.deleted) == COMPACT_EVERY


def test_the_runtime_logs_each_set_as_a_delta_from_what_it_logged_last() -> None:
    # make_event computes a delta from the step's pre-state: that is the contract's "since the
    # node last logged it" only if every step that changes a set is logged. Resolving the
    # node's deltas in order must give its state at every event (and at the end).
    w1, _, sink = node("w1")
    states: list[Any] = []  # w1's context when each event was emitted (after its step)
    emit = sink.emit
    sink.emit = lambda event: (states.append(w1.ctx), emit(event))  # type: ignore[method-assign]
    r = G("w1", 1)
    w1.apply(ev.CreateLocalRRef())
    w1.apply(ev.PrepareChildFork(dst="w0", r=r, parent=r), send=False)
    c = next(e for e in w1.ctx.forks if e[0] == r)[1]
    w1.apply(ev.ChildAccept(src="w0", dst="w1", rref=r, owner="w1", fork=c), stamp=3)
    w1.apply(ev.UserDelete(src="w0", dst="w1", rref=r, owner="w1", fork=c), stamp=4)
    for i in range(3):  # UserRRefs of w0's OwnerRRefs: held, then dropped and deleted
        ri, fi = G("w0", 2 * i + 1), G("w0", 2 * i + 2)
        w1.apply(ev.PythonCall(src="w0", dst="w1", rref=ri, owner="w0", fork=fi, parent=ri), 5)
        w1.drop_user(fi)
    records = [EVENT_ADAPTER.validate_json(encode_line(e)) for e in sink.records]
    assert len(records) == len(states) > 8
    slices: dict[str, frozenset[Any]] = {}
    changed = 0
    for record, state in zip(records, states, strict=True):
        for name, value in record.post.__dict__.items():
            if isinstance(value, SetDelta):
                slices[name] = value.apply(slices.get(name, frozenset()))
                assert slices[name] == getattr(state, name), (record.event, name)
                changed += bool(value.add or value.delete)
    assert changed > 8
    assert set(slices) >= {"owners", "forks", "pending_children", "owner_held", "held"}
