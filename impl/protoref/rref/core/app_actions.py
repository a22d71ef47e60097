"""Transitions of the application, the rpc.remote timeout and the UserRRef destructor.

One function per RRef.tla action, following its guard and effect line by line (Reference
variant); each cites the PyTorch function it models and the guarantee it serves.
"""

from __future__ import annotations

from protoref.ids import WorkerId
from protoref.rref.core import events as ev
from protoref.rref.core.state import RRefContext, UserRRef
from protoref.rref.core.transition import (
    Gid,
    Step,
    app_guard,
    fail,
    user_of,
)
from protoref.rref.trace import args as tr

__all__ = [
    "create_local_rref",
    "del_user",
    "drop_owner_rref",
    "drop_rref",
    "prepare_child_fork",
    "remote",
    "time_out_remote",
    "to_here",
]


# --------------------------------------------------------------------------- application


def create_local_rref(ctx: RRefContext) -> Step:
    """``CreateLocalRRef(w)``: rpc.RRef(obj) -> createOwnerRRef. Not put into owners_ until it is
    first forked, so an RRef never shared never leaks."""
    app_guard(ctx, "CreateLocalRRef")
    r = ctx.new_id()
    new = ctx.evolve(next_id=ctx.next_id + 1, owner_held=ctx.owner_held | {r})
    return Step(new, (), tr.CreateLocalRRefArgs.of(w=ctx.me))


def remote(ctx: RRefContext, dst: WorkerId) -> Step:
    """``Remote(w, dst)``: rpc.remote. To another worker: a UserRRef (RRefId then ForkId) kept
    alive by addPendingUser until REMOTE_RET (G2: the OwnerRRef is the creator's child). To self:
    createOwnerRRef + addSelfAsFork, and a PYTHON_REMOTE_CALL(r, r) to self."""
    app_guard(ctx, "Remote")
    me, r = ctx.me, ctx.new_id()
    args = tr.RemoteArgs.of(w=me, dst=dst)
    if dst != me:
        f = ctx.new_id(1)
        user = UserRRef.of(fork=f, rref=r, owner=dst, on=me, parent=None)
        new = ctx.evolve(
            next_id=ctx.next_id + 2,
            users={**ctx.users, f: user},
            held=ctx.held | {f},
            pending_users=ctx.pending_users | {f},
        )
        call = ev.PythonRemoteCall.make(src=me, dst=dst, rref=r, owner=dst, fork=f)
        return Step(new, (call,), args)
    new = ctx.evolve(
        next_id=ctx.next_id + 1,
        owners=ctx.owners | {r},
        forks=ctx.forks | {(r, r)},
        owner_held=ctx.owner_held | {r},
        self_calls=ctx.self_calls | {r},
    )
    return Step(new, (ev.PythonRemoteCall.make(src=me, dst=me, rref=r, owner=me, fork=r),), args)


def prepare_child_fork(ctx: RRefContext, dst: WorkerId, r: Gid, parent: Gid) -> Step:
    """``PrepareChildFork(w, dst, r, parent)``: prepareChildFork when pickling RRef r into a user
    RPC. Owner parent (parent = r): addForkOfOwner + owners_[r] at once (Early Fork
    Registration). User parent: addPendingChild keeps the parent alive until the child is
    accepted (G2); a timed-out or deleted UserRRef cannot be forked."""
    me, c = ctx.me, ctx.new_id()
    name = "PrepareChildFork"
    app_guard(ctx, name)
    if dst == me:
        raise fail(ctx, name, "an RRef is shared only with another worker (Links has no self pair)")
    args = tr.PrepareChildForkArgs.of(w=me, dst=dst, r=r, parent=parent)
    if parent == r:
        if r not in ctx.owner_held and r not in ctx.owners:
            raise fail(ctx, name, f"this worker holds no OwnerRRef {r}")
        new = ctx.evolve(
            next_id=ctx.next_id + 1, forks=ctx.forks | {(r, c)}, owners=ctx.owners | {r}
        )
        call = ev.PythonCall.make(src=me, dst=dst, rref=r, owner=me, fork=c, parent=r)
        return Step(new, (call,), args)
    u = user_of(ctx, name, parent)
    if u.rref != r:
        raise fail(ctx, name, f"UserRRef {parent} is a fork of {u.rref}, not of {r}")
    if parent not in ctx.held:
        raise fail(ctx, name, f"UserRRef {parent} is not held by the application")
    if parent in ctx.timed_out or parent in ctx.deleted:
        raise fail(ctx, name, f"UserRRef {parent} timed out or was deleted: fork() raises")
    new = ctx.evolve(next_id=ctx.next_id + 1, pending_children=ctx.pending_children | {(c, parent)})
    call = ev.PythonCall.make(src=me, dst=dst, rref=r, owner=u.owner, fork=c, parent=parent)
    return Step(new, (call,), args)


def to_here(ctx: RRefContext, f: Gid) -> Step:
    """``ToHere(w, f)``: UserRRef.to_here sends PYTHON_RREF_FETCH_CALL; the call keeps the
    UserRRef alive until the value arrives. The spec bounds it to one call per UserRRef."""
    app_guard(ctx, "ToHere")
    u = user_of(ctx, "ToHere", f)
    if f not in ctx.held:
        raise fail(ctx, "ToHere", f"UserRRef {f} is not held by the application")
    if f in ctx.fetched or f in ctx.timed_out or f in ctx.deleted:
        raise fail(ctx, "ToHere", f"UserRRef {f} already fetched, timed out or deleted")
    new = ctx.evolve(fetching=ctx.fetching | {f}, fetched=ctx.fetched | {f})
    call = ev.RRefFetchCall.make(src=ctx.me, dst=u.owner, rref=u.rref, owner=u.owner, fork=f)
    return Step(new, (call,), tr.ToHereArgs.of(w=ctx.me, f=f))


def drop_rref(ctx: RRefContext, f: Gid) -> Step:
    """``DropRRef(w, f)``: Python drops its last reference to the UserRRef."""
    user_of(ctx, "DropRRef", f)
    if f not in ctx.held:
        raise fail(ctx, "DropRRef", f"UserRRef {f} is not held by the application")
    return Step(ctx.evolve(held=ctx.held - {f}), (), tr.DropRRefArgs.of(w=ctx.me, f=f))


def drop_owner_rref(ctx: RRefContext, r: Gid) -> Step:
    """``DropOwnerRRef(w, r)``: the application drops an OwnerRRef; owners_ never depends on it."""
    if r not in ctx.owner_held:
        raise fail(ctx, "DropOwnerRRef", f"the application holds no OwnerRRef {r}")
    new = ctx.evolve(owner_held=ctx.owner_held - {r})
    return Step(new, (), tr.DropOwnerRRefArgs.of(w=ctx.me, r=r))


# --------------------------------------------------------------------------- timers, destructor


def time_out_remote(ctx: RRefContext, r: Gid, f: Gid) -> Step:
    """``TimeOutRemote(w, r, f)``: the rpc.remote future fails with TIMEOUT. f # r: the
    UserRRef is marked timed out and stays pending until the late REMOTE_RET confirms it
    (RRef.tla ``PinTimedOut``, DeleteLast: its delete then follows the owner's AssignOwnerRRef,
    so the owner needs no tombstone, #41217). f = r (self remote): the Reference keeps the self
    fork until the call is processed (#71029, #73294)."""
    name, args = "TimeOutRemote", tr.TimeOutRemoteArgs.of(w=ctx.me, r=r, f=f)
    if f != r:
        u = user_of(ctx, name, f)
        if u.rref != r or u.parent is not None:
            raise fail(ctx, name, f"UserRRef {f} is not the creator of {r}")
        if f not in ctx.pending_users:
            raise fail(ctx, name, f"the rpc.remote future of {f} already completed")
        if f in ctx.timed_out:
            raise fail(ctx, name, f"the rpc.remote future of {f} already timed out")
        return Step(ctx.evolve(timed_out=ctx.timed_out | {f}), (), args)
    if r not in ctx.self_calls:
        raise fail(ctx, name, f"no self rpc.remote of {r} in progress")
    return Step(ctx.evolve(self_calls=ctx.self_calls - {r}), (), args)


def del_user(ctx: RRefContext, f: Gid) -> Step:
    """``DelUser(w, f)``: the refcount reached zero -> UserRRef::tryDel -> delUser. G1: send
    RREF_USER_DELETE to the owner, at most once; erase confirmedUsers_[f]. A destroyed context
    sends nothing (``destroyed_``)."""
    u = user_of(ctx, "DelUser", f)
    if f in ctx.deleted:
        raise fail(ctx, "DelUser", f"UserRRef {f} was already deleted")
    if ctx.referenced(f):
        raise fail(ctx, "DelUser", f"UserRRef {f} is still referenced (G2 holds it)")
    new = ctx.evolve(deleted=ctx.deleted | {f}, confirmed_users=ctx.confirmed_users - {f})
    args = tr.DelUserArgs.of(w=ctx.me, f=f)
    if ctx.phase == "destroyed":
        return Step(new, (), args)
    msg = ev.UserDelete.make(src=ctx.me, dst=u.owner, rref=u.rref, owner=u.owner, fork=f)
    return Step(new, (msg,), args)
