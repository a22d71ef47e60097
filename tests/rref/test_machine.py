"""Table tests of the Reference RRef transitions (protoref.rref.core.machine), one row per case."""

from __future__ import annotations

import importlib
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoref.errors import ProtocolError
from protoref.ids import GloballyUniqueId as G
from protoref.rref.core import events as ev
from protoref.rref.core.machine import ACTION_TABLE, step
from protoref.rref.core.state import RRefContext, UserRRef
from protoref.rref.sim.simulator import SimConfig, Simulator

A, B, C = "w0", "w1", "w2"
R = G(A, 1)  # an RRef created by A's rpc.remote to B
FA = G(A, 2)  # A's creator UserRRef
C1 = G(A, 3)  # a child fork drawn by A

CREATOR = UserRRef(fork=FA, rref=R, owner=B, on=A)
CHILD_ON_C = UserRRef(fork=C1, rref=R, owner=B, on=C, parent=FA)


def ctx(me: str, **fields: Any) -> RRefContext:
    return replace(RRefContext(me=me), **fields)


def a_pending() -> RRefContext:
    """A right after rpc.remote(B): its UserRRef is pending and held."""
    return ctx(
        A, next_id=3, users={FA: CREATOR}, held=frozenset({FA}), pending_users=frozenset({FA})
    )


def a_confirmed() -> RRefContext:
    return replace(a_pending(), pending_users=frozenset(), confirmed_users=frozenset({FA}))


def msg(
    cls: type[ev.MessageBase], src: str, dst: str, *, owner: str = B, fork: G = FA, **kw: Any
) -> Any:
    return cls(src=src, dst=dst, rref=R, owner=owner, fork=fork, **kw)


# (case, context, input, expected field changes, expected sent (type, dst) pairs)
LEGAL: list[tuple[str, RRefContext, Any, dict[str, Any], list[tuple[str, str]]]] = [
    (
        "CreateLocalRRef is held, not registered",
        ctx(A),
        ev.CreateLocalRRef(),
        {"next_id": 2, "owner_held": frozenset({G(A, 1)})},
        [],
    ),
    (
        "Remote to another worker: pending creator UserRRef",
        ctx(A),
        ev.Remote(dst=B),
        {"next_id": 3, "users": {FA: CREATOR}, "held": {FA}, "pending_users": {FA}},
        [("PYTHON_REMOTE_CALL", B)],
    ),
    (
        "Remote to self: owner and self fork at once",
        ctx(A),
        ev.Remote(dst=A),
        {"next_id": 2, "owners": {R}, "forks": {(R, R)}, "owner_held": {R}, "self_calls": {R}},
        [("PYTHON_REMOTE_CALL", A)],
    ),
    (
        "PrepareChildFork of a user: pending child (G2)",
        a_pending(),
        ev.PrepareChildFork(dst=C, r=R, parent=FA),
        {"next_id": 4, "pending_children": {(C1, FA)}},
        [("PYTHON_CALL", C)],
    ),
    (
        "PrepareChildFork of the owner: early fork registration",
        ctx(B, next_id=5, owner_held=frozenset({G(B, 4)})),
        ev.PrepareChildFork(dst=C, r=G(B, 4), parent=G(B, 4)),
        {"next_id": 6, "forks": {(G(B, 4), G(B, 5))}, "owners": {G(B, 4)}},
        [("PYTHON_CALL", C)],
    ),
    (
        "ToHere pins the UserRRef",
        a_pending(),
        ev.ToHere(f=FA),
        {"fetching": {FA}, "fetched": {FA}},
        [("PYTHON_RREF_FETCH_CALL", B)],
    ),
    ("DropRRef", a_pending(), ev.DropRRef(f=FA), {"held": frozenset()}, []),
    (
        "DropOwnerRRef leaves owners_ alone",
        ctx(B, owner_held=frozenset({R}), owners=frozenset({R})),
        ev.DropOwnerRRef(r=R),
        {"owner_held": frozenset()},
        [],
    ),
    (
        "TimeOutRemote marks the creator timed out and keeps it pending (PinTimedOut)",
        a_pending(),
        ev.TimeOutRemote(r=R, f=FA),
        {"timed_out": {FA}},
        [],
    ),
    (
        "a late REMOTE_RET confirms a timed-out creator",
        replace(a_pending(), timed_out=frozenset({FA})),
        msg(ev.RemoteRet, B, A),
        {"pending_users": frozenset(), "confirmed_users": {FA}},
        [],
    ),
    (
        "TimeOutRemote of a self remote keeps the self fork (Reference)",
        ctx(
            A,
            next_id=2,
            owners=frozenset({R}),
            forks=frozenset({(R, R)}),
            self_calls=frozenset({R}),
        ),
        ev.TimeOutRemote(r=R, f=R),
        {"self_calls": frozenset()},
        [],
    ),
    (
        "DelUser sends RREF_USER_DELETE (G1)",
        replace(a_confirmed(), held=frozenset()),
        ev.DelUser(f=FA),
        {"deleted": {FA}, "confirmed_users": frozenset()},
        [("RREF_USER_DELETE", B)],
    ),
    (
        "AssignOwnerRRef creates the owner and the creator fork",
        ctx(B),
        msg(ev.PythonRemoteCall, A, B),
        {"owners": {R}, "forks": {(R, FA)}},
        [("REMOTE_RET", A)],
    ),
    (
        "AssignOwnerRRef answers parked fetches",
        ctx(B, pending_owners=frozenset({(R, C1, C)})),
        msg(ev.PythonRemoteCall, A, B),
        {"owners": {R}, "forks": {(R, FA)}, "pending_owners": frozenset()},
        [("PYTHON_RREF_FETCH_RET", C), ("REMOTE_RET", A)],
    ),
    (
        "AssignOwnerRRef after the creator's delete: tombstone, no owner (#41217)",
        ctx(B, tombstones=frozenset({(R, FA)})),
        msg(ev.PythonRemoteCall, A, B),
        {},
        [("REMOTE_RET", A)],
    ),
    (
        "AssignOwnerRRef after the creator's delete, another fork alive: owner created",
        ctx(B, tombstones=frozenset({(R, FA)}), forks=frozenset({(R, C1)})),
        msg(ev.PythonRemoteCall, A, B),
        {"owners": {R}},
        [("REMOTE_RET", A)],
    ),
    (
        "AssignOwnerRRef of a self remote removes the self fork (Reference)",
        ctx(A, owners=frozenset({R}), forks=frozenset({(R, R)}), self_calls=frozenset({R})),
        msg(ev.PythonRemoteCall, A, A, owner=A, fork=R),
        {"owners": frozenset(), "forks": frozenset()},
        [("REMOTE_RET", A)],
    ),
    (
        "AssignOwnerRRef of a self remote whose owner is gone: no reply",
        ctx(A),
        msg(ev.PythonRemoteCall, A, A, owner=A, fork=R),
        {},
        [],
    ),
    (
        "ConfirmPendingUser",
        a_pending(),
        msg(ev.RemoteRet, B, A),
        {"pending_users": frozenset(), "confirmed_users": {FA}},
        [],
    ),
    (
        "ConfirmPendingUser after a timeout is dropped",
        a_confirmed(),
        msg(ev.RemoteRet, B, A),
        {},
        [],
    ),
    (
        "FinishCreatingOwnerRRef",
        ctx(A, self_calls=frozenset({R})),
        msg(ev.RemoteRet, A, A, owner=A, fork=R),
        {"self_calls": frozenset()},
        [],
    ),
    (
        "RetrieveOwnerRRef replies when the owner exists",
        ctx(B, owners=frozenset({R})),
        msg(ev.RRefFetchCall, A, B),
        {},
        [("PYTHON_RREF_FETCH_RET", A)],
    ),
    (
        "RetrieveOwnerRRef parks before the owner exists",
        ctx(B),
        msg(ev.RRefFetchCall, A, B),
        {"pending_owners": {(R, FA, A)}},
        [],
    ),
    (
        "ReceiveFetchRet unpins",
        replace(a_confirmed(), fetching=frozenset({FA}), fetched=frozenset({FA})),
        msg(ev.RRefFetchRet, B, A),
        {"fetching": frozenset()},
        [],
    ),
    (
        "GetOrCreateRRef user -> user: fork request, pending user",
        ctx(C),
        msg(ev.PythonCall, A, C, fork=C1, parent=FA),
        {"users": {C1: CHILD_ON_C}, "held": {C1}, "pending_users": {C1}},
        [("RREF_FORK_REQUEST", B)],
    ),
    (
        "GetOrCreateRRef owner -> user: confirmed at once",
        ctx(C),
        ev.PythonCall(src=B, dst=C, rref=G(B, 4), owner=B, fork=G(B, 5), parent=G(B, 4)),
        {
            "users": {G(B, 5): UserRRef(fork=G(B, 5), rref=G(B, 4), owner=B, on=C, parent=G(B, 4))},
            "held": {G(B, 5)},
            "confirmed_users": {G(B, 5)},
        },
        [],
    ),
    (
        "GetOrCreateRRef user -> owner: child accept, phantom fork, no empty owner (Reference)",
        ctx(B),
        msg(ev.PythonCall, A, B, fork=C1, parent=FA),
        {},
        [("RREF_CHILD_ACCEPT", A)],
    ),
    (
        "AddForkOfOwnerIfNotPresent registers without an owner",
        ctx(B),
        msg(ev.ForkRequest, C, B, fork=C1),
        {"forks": {(R, C1)}},
        [("RREF_ACK", C)],
    ),
    (
        "AddForkOfOwnerIfNotPresent ignores a tombstoned fork (#26759)",
        ctx(B, tombstones=frozenset({(R, C1)})),
        msg(ev.ForkRequest, C, B, fork=C1, dup=2),
        {},
        [("RREF_ACK", C)],
    ),
    (
        "FinishForkRequest confirms and accepts to the parent",
        ctx(C, users={C1: CHILD_ON_C}, held=frozenset({C1}), pending_users=frozenset({C1})),
        msg(ev.RRefAck, B, C, fork=C1),
        {"pending_users": frozenset(), "confirmed_users": {C1}},
        [("RREF_CHILD_ACCEPT", A)],
    ),
    (
        "FinishForkRequest: a second ack is dropped",
        ctx(C, users={C1: CHILD_ON_C}, confirmed_users=frozenset({C1})),
        msg(ev.RRefAck, B, C, fork=C1, dup=2),
        {},
        [],
    ),
    (
        "DelPendingChild",
        replace(a_confirmed(), pending_children=frozenset({(C1, FA)})),
        msg(ev.ChildAccept, C, A, fork=C1),
        {"pending_children": frozenset()},
        [],
    ),
    ("DelPendingChild is idempotent", a_confirmed(), msg(ev.ChildAccept, C, A, fork=C1), {}, []),
    (
        "DelForkOfOwner: last fork erases the owner, no tombstone (DeleteLast)",
        ctx(B, owners=frozenset({R}), forks=frozenset({(R, FA)})),
        msg(ev.UserDelete, A, B),
        {"owners": frozenset(), "forks": frozenset()},
        [],
    ),
    (
        "DelForkOfOwner of an unknown fork (a second copy) changes nothing",
        ctx(B, owners=frozenset({R}), forks=frozenset({(R, C1)})),
        msg(ev.UserDelete, A, B),
        {},
        [],
    ),
]


def _norm(value: Any) -> Any:
    return frozenset(value) if isinstance(value, set) else value


@pytest.mark.parametrize(
    ("case", "before", "inp", "changes", "sent"), LEGAL, ids=[c[0] for c in LEGAL]
)
def test_legal_transition(
    case: str, before: RRefContext, inp: Any, changes: dict[str, Any], sent: list[tuple[str, str]]
) -> None:
    result = step(before, inp)
    assert result.state == replace(before, **{k: _norm(v) for k, v in changes.items()}), case
    assert [(m.type, m.dst) for m in result.sent] == sent
    assert all(m.src == before.me for m in result.sent)


# (case, context, illegal input)
ILLEGAL: list[tuple[str, RRefContext, Any]] = [
    ("share with self", a_pending(), ev.PrepareChildFork(dst=A, r=R, parent=FA)),
    ("share an OwnerRRef not held", ctx(B), ev.PrepareChildFork(dst=C, r=R, parent=R)),
    ("share an unknown UserRRef", ctx(A), ev.PrepareChildFork(dst=C, r=R, parent=FA)),
    ("share with the wrong RRefId", a_pending(), ev.PrepareChildFork(dst=C, r=G(A, 9), parent=FA)),
    (
        "share a dropped UserRRef",
        replace(a_pending(), held=frozenset()),
        ev.PrepareChildFork(dst=C, r=R, parent=FA),
    ),
    (
        "share a timed-out UserRRef",
        replace(a_confirmed(), timed_out=frozenset({FA})),
        ev.PrepareChildFork(dst=C, r=R, parent=FA),
    ),
    ("to_here twice", replace(a_pending(), fetched=frozenset({FA})), ev.ToHere(f=FA)),
    ("to_here on a dropped UserRRef", replace(a_pending(), held=frozenset()), ev.ToHere(f=FA)),
    ("to_here on an unknown UserRRef", ctx(A), ev.ToHere(f=FA)),
    ("drop twice", replace(a_pending(), held=frozenset()), ev.DropRRef(f=FA)),
    ("drop an OwnerRRef not held", ctx(B), ev.DropOwnerRRef(r=R)),
    ("timeout after confirmation", a_confirmed(), ev.TimeOutRemote(r=R, f=FA)),
    ("timeout twice", replace(a_pending(), timed_out=frozenset({FA})), ev.TimeOutRemote(r=R, f=FA)),
    (
        "timeout of a child",
        ctx(C, users={C1: CHILD_ON_C}, pending_users=frozenset({C1})),
        ev.TimeOutRemote(r=R, f=C1),
    ),
    ("timeout of no self call", ctx(A), ev.TimeOutRemote(r=R, f=R)),
    ("destructor while held", a_confirmed(), ev.DelUser(f=FA)),
    ("destructor while pending (G2)", replace(a_pending(), held=frozenset()), ev.DelUser(f=FA)),
    (
        "destructor with a pending child (G2)",
        replace(a_confirmed(), held=frozenset(), pending_children=frozenset({(C1, FA)})),
        ev.DelUser(f=FA),
    ),
    (
        "destructor twice",
        replace(a_confirmed(), held=frozenset(), deleted=frozenset({FA})),
        ev.DelUser(f=FA),
    ),
    ("message for another worker", ctx(C), msg(ev.PythonRemoteCall, A, B)),
    (
        "replayed user call",
        ctx(C, users={C1: CHILD_ON_C}),
        msg(ev.PythonCall, A, C, fork=C1, parent=FA),
    ),
]


@pytest.mark.parametrize(("case", "before", "inp"), ILLEGAL, ids=[c[0] for c in ILLEGAL])
def test_illegal_input_leaves_state_unchanged(case: str, before: RRefContext, inp: Any) -> None:
    snapshot = replace(before)
    with pytest.raises(ProtocolError) as info:
        step(before, inp)
    assert before == snapshot, case
    assert info.value.node == before.me
    assert info.value.reason


def test_action_table_names_real_functions() -> None:
    for row in ACTION_TABLE:
        module, _, attr = row.python.rpartition(".")
        if row.tla_action in ("RetrySend", "LoseFirstAttempt"):  # the simulator's network
            module, _, cls = module.rpartition(".")
            assert hasattr(getattr(importlib.import_module(module), cls), attr)
        else:
            assert callable(getattr(importlib.import_module(module), attr)), row


# --------------------------------------------------------------------------- (state x input) sweep

WORKERS = ("w0", "w1", "w2")
ids = st.builds(G, st.sampled_from(WORKERS), st.integers(min_value=1, max_value=12))
workers = st.sampled_from(WORKERS)
messages = st.builds(
    lambda cls, src, dst, r, owner, f, parent, dup: cls(
        src=src, dst=dst, rref=r, owner=owner, fork=f, parent=parent, dup=dup
    ),
    st.sampled_from(
        [
            ev.PythonRemoteCall,
            ev.RemoteRet,
            ev.RRefFetchCall,
            ev.RRefFetchRet,
            ev.PythonCall,
            ev.ForkRequest,
            ev.RRefAck,
            ev.ChildAccept,
            ev.UserDelete,
        ]
    ),
    workers,
    workers,
    ids,
    workers,
    ids,
    st.none() | ids,
    st.integers(min_value=0, max_value=2),
)
app_inputs = st.one_of(
    st.just(ev.CreateLocalRRef()),
    st.builds(ev.Remote, dst=workers),
    st.builds(ev.PrepareChildFork, dst=workers, r=ids, parent=ids),
    st.builds(ev.ToHere, f=ids),
    st.builds(ev.DropRRef, f=ids),
    st.builds(ev.DropOwnerRRef, r=ids),
    st.builds(ev.TimeOutRemote, r=ids, f=ids),
    st.builds(ev.DelUser, f=ids),
)


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(min_value=0, max_value=50),
    steps=st.integers(min_value=0, max_value=60),
    worker=workers,
    inp=messages | app_inputs,
)
def test_any_input_either_steps_or_raises_protocol_error(
    seed: int, steps: int, worker: str, inp: Any
) -> None:
    sim = Simulator(seed, SimConfig())
    for _ in range(steps):
        sim.step()
    before = sim.contexts[worker]
    snapshot = replace(before)
    try:
        result = step(before, inp)
    except ProtocolError:
        assert before == snapshot
        return
    assert isinstance(result.state, RRefContext)
    assert result.state.me == worker
    assert result.state.next_id >= before.next_id
