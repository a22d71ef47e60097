"""The runtime invariant checks catch what they are named after."""

from __future__ import annotations

from dataclasses import replace

import pytest

from protoref.errors import InvariantViolationError, LeakError
from protoref.ids import GloballyUniqueId as G
from protoref.rref.core import events as ev
from protoref.rref.core.invariants import World, check, check_leak_free, quiescent
from protoref.rref.core.state import RRefContext, UserRRef
from protoref.rref.sim.faults import Fault, ShutdownFault, inject
from protoref.rref.sim.simulator import SimConfig, Simulator

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


def test_second_delete_and_reset_deleted_break_r4() -> None:
    world = World(contexts=contexts(), net=[], delete_sends={FA: 2})
    with pytest.raises(InvariantViolationError, match="AtMostOneDeleteR4"):
        check(world)
    world = World(contexts=contexts(), net=[], undeleted={A: frozenset({FA})})
    with pytest.raises(InvariantViolationError, match="deletedOnOwner_"):
        check(world)
    user = UserRRef(fork=FA, rref=R, owner=B, on=A)
    a = RRefContext(me=A, next_id=4, users={FA: user})
    delete = ev.UserDelete(src=A, dst=B, rref=R, owner=B, fork=FA)
    with pytest.raises(InvariantViolationError, match="not marked deleted"):
        check(World(contexts=contexts(w0=a), net=[delete]))


def test_message_to_a_destroyed_context_breaks_shutdown_order() -> None:
    b = RRefContext(me=B, phase="destroyed", stopping=True)
    delete = ev.UserDelete(src=A, dst=B, rref=R, owner=B, fork=FA)
    user = UserRRef(fork=FA, rref=R, owner=B, on=A)
    a = RRefContext(me=A, next_id=4, users={FA: user}, deleted=frozenset({FA}))
    with pytest.raises(InvariantViolationError, match="ShutdownOrderInv"):
        check(World(contexts=contexts(w0=a, w1=b), net=[delete]))


#: Planted bug -> (first seed whose checked run catches it, the invariants that may name it).
CAUGHT: dict[Fault | ShutdownFault, tuple[int, set[str]]] = {
    Fault.DELETE_BEFORE_ACK: (0, {"SafeDeleteInv"}),
    Fault.PARENT_BEFORE_CHILD: (0, {"ParentHeldInv", "SafeDeleteInv"}),
    Fault.FORGET_PENDING_CHILD: (0, {"ParentHeldInv"}),
    Fault.RESURRECT_DELETED_FORK: (43, {"NoForkResurrectionInv"}),
    Fault.OWNER_DELETED_WHILE_FORKED: (0, {"NoPrematureDeleteInv"}),
    Fault.CONFIRM_FORGETS_USER: (7, {"LeakFreeQuiescenceInv"}),
    Fault.REUSE_IDS: (0, {"UniqueIdsInv"}),
    ShutdownFault.SWEEP_SPARES_HELD_USERS: (2, {"LeakFreeQuiescenceInv", "ShutdownCompletesProp"}),
}


@pytest.mark.parametrize("fault", list(CAUGHT), ids=[f.value for f in CAUGHT])
def test_the_checked_sweep_catches_every_planted_bug(fault: Fault | ShutdownFault) -> None:
    # The sweep in test_simulator.py can fail: with a bug planted, the same checked runs stop
    # at a violation of the invariant the bug breaks (seeds before the first one pass).
    seed, names = CAUGHT[fault]
    config = SimConfig(check_invariants=True, shutdown=True)
    with inject(fault):
        for passing in range(seed):
            Simulator(passing, config).run(25)
        with pytest.raises(InvariantViolationError) as caught:
            Simulator(seed, config).run(25)
    assert caught.value.invariant in names
