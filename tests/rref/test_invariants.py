"""The runtime invariant checks catch what they are named after."""

from __future__ import annotations

from dataclasses import replace

import pytest

from protoref.errors import InvariantViolationError, LeakError
from protoref.ids import GloballyUniqueId as G
from protoref.rref import events as ev
from protoref.rref.invariants import World, check, check_leak_free, quiescent
from protoref.rref.state import RRefContext, UserRRef

A, B, C = "w0", "w1", "w2"
R, FA, C1 = G(A, 1), G(A, 2), G(A, 3)


def contexts(**by_worker: RRefContext) -> dict[str, RRefContext]:
    base = {w: RRefContext(me=w, next_id=4) for w in (A, B, C)}
    return {**base, **by_worker}


def test_empty_world_is_fine_and_quiescent() -> None:
    world = World(contexts=contexts(), net=[])
    check(world)
    assert quiescent(world)
    check_leak_free(world)


def test_leak_at_quiescence() -> None:
    world = World(contexts=contexts(w1=RRefContext(me=B, owners=frozenset({R}))), net=[])
    with pytest.raises(LeakError, match="w1 leaks"):
        check_leak_free(world)


def test_missing_pending_child_breaks_parent_held() -> None:
    call = ev.PythonCall(src=A, dst=C, rref=R, owner=B, fork=C1, parent=FA)
    user = UserRRef(fork=FA, rref=R, owner=B, on=A)
    a = RRefContext(me=A, next_id=4, users={FA: user}, held=frozenset({FA}))
    with pytest.raises(InvariantViolationError, match="ParentHeldInv"):
        check(World(contexts=contexts(w0=a), net=[call]))
    ok = replace(a, pending_children=frozenset({(C1, FA)}))
    check(World(contexts=contexts(w0=ok), net=[call]))


def test_premature_owner_deletion() -> None:
    user = UserRRef(fork=FA, rref=R, owner=B, on=A)
    a = RRefContext(me=A, next_id=4, users={FA: user}, held=frozenset({FA}))
    world = World(contexts=contexts(w0=a), net=[], erased_owners={B: frozenset({R})})
    with pytest.raises(InvariantViolationError, match="NoPrematureDeleteInv"):
        check(world)


def test_fork_resurrection() -> None:
    b = RRefContext(me=B, forks=frozenset({(R, FA)}))
    world = World(contexts=contexts(w1=b), net=[], removed_forks={B: frozenset({(R, FA)})})
    with pytest.raises(InvariantViolationError, match="NoForkResurrectionInv"):
        check(world)


def test_delete_of_a_held_user() -> None:
    user = UserRRef(fork=FA, rref=R, owner=B, on=A)
    a = RRefContext(me=A, next_id=4, users={FA: user}, held=frozenset({FA}))
    delete = ev.UserDelete(src=A, dst=B, rref=R, owner=B, fork=FA)
    with pytest.raises(InvariantViolationError, match="SafeDeleteInv"):
        check(World(contexts=contexts(w0=a), net=[delete]))
