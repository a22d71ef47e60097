"""Planted bugs: broken variants of the Reference RRef implementation, for proving the checker.

Each :class:`Fault` is a real protocol bug of the kind PyTorch's RRef protocol has had or guards
against. :func:`inject` applies one for the duration of a ``with`` block by wrapping the core's
transition function as the simulator calls it (``protoref.rref.sim.base.core_step``) and, for
the refcount bugs, :meth:`RRefContext.referenced` (and ``destructible``, which reads it). Nothing
in :mod:`protoref.rref.core.machine` or the simulator changes: outside the block the implementation
is the correct one.

A broken run usually ends in a runtime error of its own (a :class:`ProtocolError` on a state the
bug made impossible, or a :class:`LeakError` at quiescence); :func:`run_with_fault` stops there
and keeps the trace written so far, which is what the checker is then given.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from types import SimpleNamespace
from typing import Final

from protoref.errors import ProtorefError
from protoref.ids import GloballyUniqueId
from protoref.rref.core import events as ev
from protoref.rref.core import machine
from protoref.rref.core.machine import Step
from protoref.rref.core.state import RRefContext
from protoref.rref.sim import SimConfig, Simulator
from protoref.rref.sim import base as sim_module
from protoref.rref.sim import system as sim_system
from protoref.tracing import TraceSink

__all__ = ["FAULTS", "SHUTDOWN_FAULTS", "Fault", "ShutdownFault", "inject", "run_with_fault"]


class Fault(enum.Enum):
    """A planted bug. The value is its name on the command line and in test ids."""

    #: The refcount ignores pendingUsers_: a UserRRef the application dropped is deleted (its
    #: RREF_USER_DELETE sent) before the owner confirmed it (REMOTE_RET / RREF_ACK). Breaks G2.
    DELETE_BEFORE_ACK = "delete-before-ack"
    #: The refcount ignores pendingChildren_: a parent UserRRef is deleted while a child forked
    #: from it is not yet accepted by the owner. Breaks G2 (R2, ParentHeldInv).
    PARENT_BEFORE_CHILD = "parent-before-child"
    #: prepareChildFork forgets addPendingChild: the parent is not kept alive for its child.
    FORGET_PENDING_CHILD = "forget-pending-child"
    #: The destructor does not wait for the copies of its RREF_FORK_REQUEST (RRef.tla
    #: AwaitForkCopies) and addForkOfOwnerIfNotPresent has no tombstone check: a late duplicate
    #: re-inserts a fork whose RREF_USER_DELETE was already processed (#26759, R7).
    RESURRECT_DELETED_FORK = "resurrect-deleted-fork"
    #: delForkOfOwner erases owners_[r] on any USER_DELETE, although other forks remain (R1).
    OWNER_DELETED_WHILE_FORKED = "owner-deleted-while-forked"
    #: confirmPendingUser removes the fork from pendingUsers_ but forgets confirmedUsers_.
    CONFIRM_FORGETS_USER = "confirm-forgets-user"
    #: rpc.remote draws the ForkId but advances nextLocalId_ by one only: the next RRefId
    #: reuses the ForkId (R6, UniqueIdsInv).
    REUSE_IDS = "reuse-ids"


FAULTS: Final = tuple(Fault)


class ShutdownFault(enum.Enum):
    """A planted bug in graceful shutdown (runs with ``SimConfig(shutdown=True)``)."""

    #: The sweep treats UserRRefs the application still holds as in use and sends no
    #: RREF_USER_DELETE for them, so their owners wait for ever ("Timed out waiting for pending
    #: OwnerRRefs to be deleted") and never destroy their contexts. Breaks the forced G1 of
    #: DelAllUsersAndUnforkedOwners and ShutdownCompletesProp (RL5).
    SWEEP_SPARES_HELD_USERS = "sweep-spares-held-users"


SHUTDOWN_FAULTS: Final = tuple(ShutdownFault)
AnyFault = Fault | ShutdownFault

Transition = Callable[[RRefContext, ev.RRefInput], Step]


def _spare_held(ctx: RRefContext, result: Step) -> Step:
    """The sweep's result without the deletes of UserRRefs the application holds."""
    spared = ctx.held - ctx.deleted
    sent = tuple(m for m in result.sent if m.fork not in spared)
    state = replace(result.state, deleted=result.state.deleted - spared)
    return result._replace(state=state, sent=sent)


def _broken(fault: AnyFault, ctx: RRefContext, inp: ev.RRefInput, result: Step) -> Step:
    """The correct step's result, changed the way ``fault`` breaks it."""
    state = result.state
    if fault is ShutdownFault.SWEEP_SPARES_HELD_USERS:
        if isinstance(inp, ev.DelAllUsersAndUnforkedOwners):
            return _spare_held(ctx, result)
    elif fault is Fault.FORGET_PENDING_CHILD and isinstance(inp, ev.PrepareChildFork):
        state = replace(state, pending_children=ctx.pending_children)
    elif fault is Fault.RESURRECT_DELETED_FORK and isinstance(inp, ev.ForkRequest):
        state = replace(state, forks=ctx.forks | {(inp.rref, inp.fork)})
    elif fault is Fault.OWNER_DELETED_WHILE_FORKED and isinstance(inp, ev.UserDelete):
        state = replace(state, owners=state.owners - {inp.rref})
    elif (
        fault is Fault.CONFIRM_FORGETS_USER
        and isinstance(inp, ev.RemoteRet)
        and inp.fork != inp.rref
    ):
        state = replace(state, confirmed_users=ctx.confirmed_users)
    elif fault is Fault.REUSE_IDS and isinstance(inp, ev.Remote) and inp.dst != ctx.me:
        state = replace(state, next_id=ctx.next_id + 1)
    return result if state is result.state else result._replace(state=state)


def _step_with(fault: AnyFault) -> Transition:
    def step(ctx: RRefContext, inp: ev.RRefInput) -> Step:
        return _broken(fault, ctx, inp, machine.step(ctx, inp))

    return step


def _machine_with(step: Transition) -> SimpleNamespace:
    """The core as the simulator calls it (``sim.base.machine``), with every transition it
    calls directly routed through ``step`` as the input record it stands for, so a fault sees
    application, timer, destructor and shutdown steps as it sees deliveries."""
    return SimpleNamespace(
        create_local_rref=lambda ctx: step(ctx, ev.CreateLocalRRef.of()),
        remote=lambda ctx, dst: step(ctx, ev.Remote.of(dst)),
        prepare_child_fork=lambda ctx, dst, r, parent: step(
            ctx, ev.PrepareChildFork.of(dst, r, parent)
        ),
        to_here=lambda ctx, f: step(ctx, ev.ToHere.of(f)),
        drop_rref=lambda ctx, f: step(ctx, ev.DropRRef.of(f)),
        drop_owner_rref=lambda ctx, r: step(ctx, ev.DropOwnerRRef.of(r)),
        time_out_remote=lambda ctx, r, f: step(ctx, ev.TimeOutRemote.of(r, f)),
        del_user=lambda ctx, f: step(ctx, ev.DelUser.of(f)),
        del_all_users_and_unforked_owners=lambda ctx: step(ctx, ev.DelAllUsersAndUnforkedOwners()),
        destroy_instance=lambda ctx, active, swept: step(
            ctx, ev.DestroyInstance(active_calls=active, peers_swept=swept)
        ),
    )


def _referenced_without(fault: Fault) -> Callable[[RRefContext, GloballyUniqueId], bool]:
    """RRefContext.referenced with one strong holder forgotten."""

    def referenced(self: RRefContext, f: GloballyUniqueId) -> bool:
        return (
            f in self.held
            or (fault is not Fault.DELETE_BEFORE_ACK and f in self.pending_users)
            or (
                fault is not Fault.PARENT_BEFORE_CHILD
                and any(parent == f for _, parent in self.pending_children)
            )
            or f in self.fetching
        )

    return referenced


def _destructible_by_referenced(self: RRefContext) -> list[GloballyUniqueId]:
    """RRefContext.destructible through :meth:`RRefContext.referenced` (the patched one)."""
    return [f for f in self.users if f not in self.deleted and not self.referenced(f)]


#: The names under which the simulator calls the core: ``step`` for deliveries and the
#: barrier (``from ... import step as core_step``), the module for every other transition.
_HOOK: Final = "core_step"
_MACHINE: Final = "machine"
_REFCOUNT: Final = frozenset({Fault.DELETE_BEFORE_ACK, Fault.PARENT_BEFORE_CHILD})


@contextmanager
def inject(fault: AnyFault) -> Iterator[None]:
    """Run the simulator with ``fault`` planted inside the ``with`` block (not thread-safe)."""
    # setattr/getattr: the simulator's module global and a method are replaced on purpose.
    saved_step: Transition = getattr(sim_module, _HOOK)
    saved_machine: object = getattr(sim_module, _MACHINE)
    broken = _step_with(fault)
    saved_referenced = RRefContext.referenced
    saved_destructible = RRefContext.destructible
    setattr(sim_module, _HOOK, broken)
    setattr(sim_module, _MACHINE, _machine_with(broken))
    if fault is Fault.RESURRECT_DELETED_FORK:
        sim_system.AWAIT_FORK_COPIES = False
    if fault in _REFCOUNT:
        setattr(RRefContext, "referenced", _referenced_without(fault))  # noqa: B010
        # destructible computes referenced() with set differences: make it ask the patched one.
        setattr(RRefContext, "destructible", _destructible_by_referenced)  # noqa: B010
    try:
        yield
    finally:
        setattr(sim_module, _HOOK, saved_step)
        setattr(sim_module, _MACHINE, saved_machine)
        setattr(RRefContext, "referenced", saved_referenced)  # noqa: B010
        setattr(RRefContext, "destructible", saved_destructible)  # noqa: B010
        sim_system.AWAIT_FORK_COPIES = True


def run_with_fault(
    fault: AnyFault,
    seed: int,
    steps: int,
    sink: TraceSink,
    config: SimConfig | None = None,
) -> ProtorefError | None:
    """A seeded random run with ``fault`` planted, traced to ``sink``; returns the runtime error
    that stopped it, if one did (the trace up to that point is in the sink, which is closed)."""
    with inject(fault):
        simulator = Simulator(seed, config, sink)
        try:
            simulator.run(steps)
        except ProtorefError as exc:
            return exc
        finally:
            sink.close()
    return None
