"""Graceful shutdown in the core (wait_all_workers, del_all_users_and_unforked_owners,
destroy_instance) and in the simulator: guards, effects, leak reports, illegal input."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from protoref.errors import ProtocolError
from protoref.ids import GloballyUniqueId as G
from protoref.rref.core import events as ev
from protoref.rref.core.machine import (
    del_all_users_and_unforked_owners,
    destroy_instance,
    step,
    wait_all_workers,
)
from protoref.rref.core.state import Leak, RRefContext, UserRRef
from protoref.rref.sim.simulator import SimConfig, Simulator
from protoref.tracing import MemorySink, TraceEventBase, TraceHeader

A, B = "w0", "w1"
R, FA = G(A, 1), G(A, 2)  # A's rpc.remote to B: RRefId, A's creator UserRRef
L = G(B, 1)  # an OwnerRRef of B with no fork
CREATOR = UserRRef(fork=FA, rref=R, owner=B, on=A)


def ctx(me: str, **fields: Any) -> RRefContext:
    return replace(RRefContext(me=me), **fields)


def a_confirmed(**fields: Any) -> RRefContext:
    """A holds its confirmed UserRRef of R; the barrier has passed."""
    base = ctx(
        A,
        next_id=3,
        users={FA: CREATOR},
        held=frozenset({FA}),
        confirmed_users=frozenset({FA}),
        stopping=True,
    )
    return replace(base, **fields)


def test_barrier_sets_stopping_and_blocks_application_calls() -> None:
    s = wait_all_workers(ctx(A))
    assert s.state.stopping
    assert s.sent == ()
    assert s.action.action == "WaitAllWorkers"
    for inp in (ev.CreateLocalRRef(), ev.Remote(dst=B)):
        with pytest.raises(ProtocolError, match="shutdown in progress"):
            step(s.state, inp)


@pytest.mark.parametrize(
    ("context", "calls", "reason"),
    [
        (ctx(A), 1, "user call"),
        (ctx(A, stopping=True), 0, "already passed"),
        (ctx(A), -1, ">= 0"),
    ],
)
def test_barrier_refusals(context: RRefContext, calls: int, reason: str) -> None:
    with pytest.raises(ProtocolError, match=reason):
        wait_all_workers(context, calls)


def test_sweep_deletes_held_users_erases_unforked_owners_and_reports() -> None:
    before = a_confirmed(owners=frozenset({G(A, 5)}), forks=frozenset())
    s = del_all_users_and_unforked_owners(before)
    assert s.state.phase == "swept"
    assert s.state.deleted == {FA}
    assert s.state.confirmed_users == frozenset()
    assert s.state.owners == frozenset()
    (delete,) = s.sent
    assert (delete.type, delete.dst, delete.rref, delete.fork) == ("RREF_USER_DELETE", B, R, FA)
    assert s.leaks == (Leak("held_user", R, FA),)
    assert str(s.leaks[0]) == "held_user: RRef w0:1 fork w0:2"


def test_sweep_keeps_forked_owners_and_skips_deleted_users() -> None:
    b = ctx(B, owners=frozenset({L}), forks=frozenset({(L, G(B, 2))}), stopping=True)
    s = del_all_users_and_unforked_owners(b)
    assert s.state.owners == {L}
    assert s.sent == ()
    assert s.leaks == ()
    gone = a_confirmed(held=frozenset(), deleted=frozenset({FA}))
    assert del_all_users_and_unforked_owners(gone).sent == ()


@pytest.mark.parametrize(
    ("context", "reason"),
    [
        (a_confirmed(stopping=False), "barrier passed"),
        (a_confirmed(phase="swept"), "phase running"),
        (a_confirmed(pending_users=frozenset({FA}), confirmed_users=frozenset()), "pending_user"),
        (a_confirmed(pending_children=frozenset({(G(A, 3), FA)})), "pending_child"),
        (a_confirmed(fetching=frozenset({FA})), "fetching_user"),
    ],
)
def test_sweep_waits_and_leaves_the_state_unchanged(context: RRefContext, reason: str) -> None:
    snapshot = replace(context)
    with pytest.raises(ProtocolError, match=reason):
        del_all_users_and_unforked_owners(context)
    assert context == snapshot


def test_forced_sweep_reports_what_it_gave_up_waiting_for() -> None:
    stuck = a_confirmed(pending_children=frozenset({(G(A, 3), FA)}))
    s = del_all_users_and_unforked_owners(stuck, force=True)
    assert s.state.phase == "swept"
    assert [leak.kind for leak in s.leaks] == ["pending_child", "held_user"]


def test_destroy_clears_parked_fetches_and_reports_leaked_forks() -> None:
    parked = (G(A, 7), G(A, 8), A)
    leftover = (G(A, 9), G(B, 4))
    b = ctx(
        B, phase="swept", stopping=True, pending_owners=frozenset({parked}),
        forks=frozenset({leftover}),
    )  # fmt: skip
    s = destroy_instance(b)
    assert s.state.phase == "destroyed"
    assert s.state.pending_owners == frozenset()
    assert [str(x) for x in s.leaks] == [
        "Leaking RRef w0:9 with fork Id w1:4",
        "parked_fetch: RRef w0:7 fork w0:8",
    ]


@pytest.mark.parametrize(
    ("context", "kwargs", "reason"),
    [
        (ctx(B, stopping=True), {}, "swept first"),
        (ctx(B, phase="swept", owners=frozenset({L})), {}, "waiting for OwnerRRefs"),
        (ctx(B, phase="swept"), {"active_calls": 2}, "in flight"),
        (ctx(B, phase="swept"), {"peers_swept": False}, "not swept"),
        (ctx(B, phase="swept"), {"active_calls": -1}, ">= 0"),
        (
            replace(a_confirmed(phase="swept"), fetching=frozenset({FA})),
            {},
            "fetches outstanding",
        ),
        (ctx(B, phase="destroyed"), {}, "swept first"),
    ],
)
def test_destroy_refusals(context: RRefContext, kwargs: dict[str, Any], reason: str) -> None:
    with pytest.raises(ProtocolError, match=reason):
        destroy_instance(context, **kwargs)


def test_forced_destroy_reports_owners_left() -> None:
    b = ctx(B, owners=frozenset({L}), forks=frozenset({(L, G(B, 2))}))
    s = destroy_instance(b, force=True)
    assert s.state.phase == "destroyed"
    assert [leak.kind for leak in s.leaks] == ["owner", "fork"]


def test_destroyed_context_refuses_messages_and_its_destructor_sends_nothing() -> None:
    dead = a_confirmed(phase="destroyed", held=frozenset(), confirmed_users=frozenset())
    ret = ev.RemoteRet(src=B, dst=A, rref=R, owner=B, fork=FA)
    with pytest.raises(ProtocolError, match="after destroyInstance"):
        step(dead, ret)
    s = step(dead, ev.DelUser(f=FA))
    assert s.sent == ()
    assert FA in s.state.deleted


def test_inputs_dispatch_to_the_shutdown_functions() -> None:
    s = step(ctx(A), ev.WaitAllWorkers())
    s = step(s.state, ev.DelAllUsersAndUnforkedOwners())
    s = step(s.state, ev.DestroyInstance(active_calls=0, peers_swept=True))
    assert s.state.phase == "destroyed"
    with pytest.raises(ProtocolError):
        step(ctx(A), ev.WaitAllWorkers(user_calls_in_flight=3))


@pytest.mark.parametrize("seed", range(40))
def test_simulated_shutdown_completes_leak_free(seed: int) -> None:
    config = SimConfig(check_invariants=True, shutdown=True)
    summary = Simulator(seed, config).run(60)
    assert summary.counts["WaitAllWorkers"] == 1
    assert summary.counts["DelAllUsersAndUnforkedOwners"] == config.workers
    assert summary.counts["DestroyInstance"] == config.workers
    # Only UserRRefs the application still held are reported: nothing left in forks_ or parked.
    assert {leak.kind for _, leak in summary.leaks} <= {"held_user"}


def test_barrier_is_logged_once_by_the_environment_actor() -> None:
    sink = MemorySink()
    Simulator(3, SimConfig(shutdown=True), sink).run(40)
    header = sink.records[0]
    assert isinstance(header, TraceHeader)
    assert header.environment == ("barrier",)
    assert header.settings["Shutdown"] is True
    events = [e for e in sink.records[1:] if isinstance(e, TraceEventBase)]
    barrier = [e for e in events if e.event == "WaitAllWorkers"]
    assert len(barrier) == 1
    assert barrier[0].node == "barrier"
    # Causality: every worker event after the barrier has a larger Lamport clock.
    at = events.index(barrier[0])
    assert all(e.lamport > barrier[0].lamport for e in events[at + 1 :])


def test_some_seed_reports_a_held_user() -> None:
    reported = [
        leak
        for seed in range(10)
        for _, leak in Simulator(seed, SimConfig(shutdown=True)).run(60).leaks
    ]
    assert any(leak.kind == "held_user" for leak in reported)
