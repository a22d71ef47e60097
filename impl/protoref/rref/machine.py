"""Pure transitions of the Reference RRef protocol: ``(context, input) -> Step``.

One function per RRef.tla action (``Variant = "Reference"``), named after it in snake case and
following its guard and effect line by line; each cites the PyTorch function it models and the
guarantee it serves. No I/O, clocks, randomness or logging. An input the spec does not enable
raises :class:`ProtocolError`; the context is immutable, so the caller's state is unchanged.
``RetrySend`` belongs to the network (the driver duplicates a message), so it has no function
here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NamedTuple

from protoref.errors import ProtocolError
from protoref.ids import GloballyUniqueId, WorkerId
from protoref.rref import events as ev
from protoref.rref import trace as tr
from protoref.rref.state import Leak, RRefContext, UserRRef

__all__ = [
    "ACTION_TABLE",
    "ActionRow",
    "Step",
    "action_table_markdown",
    "del_all_users_and_unforked_owners",
    "destroy_instance",
    "step",
    "wait_all_workers",
]

Gid = GloballyUniqueId


class Step(NamedTuple):
    """A transition's result: the new context, the messages to send, the action performed and,
    for the shutdown steps, what was found left behind (:class:`Leak`, PyTorch's warnings).
    A named tuple: built once per transition, three times cheaper than a frozen dataclass."""

    state: RRefContext
    sent: tuple[ev.Message, ...]
    action: tr.ActionArgs
    leaks: tuple[Leak, ...] = ()


def _fail(ctx: RRefContext, action: str, reason: str) -> ProtocolError:
    return ProtocolError(ctx.me, action, reason)


def _user(ctx: RRefContext, action: str, f: Gid) -> UserRRef:
    u = ctx.users.get(f)
    if u is None:
        raise _fail(ctx, action, f"no UserRRef with ForkId {f} on this worker")
    return u


def _addressed(ctx: RRefContext, action: str, m: ev.MessageBase) -> None:
    if m.dst != ctx.me:
        raise _fail(ctx, action, f"message for {m.dst} delivered to {ctx.me}")
    if ctx.phase == "destroyed":
        # R11 ShutdownOrderInv: no message reaches a destroyed context (the spec's
        # DestroyInstance waits until none is in flight), so one that does is refused.
        raise _fail(ctx, action, f"{m.type} delivered after destroyInstance")


def _app(ctx: RRefContext, action: str) -> None:
    # RRef.tla AppCanAct(w): no new user call, fork or fetch once _wait_all_workers passed.
    if not ctx.app_can_act():
        raise _fail(ctx, action, f"shutdown in progress (phase {ctx.phase}, barrier passed)")


def _del_fork_locally(ctx: RRefContext, r: Gid, f: Gid) -> RRefContext:
    """RRef.tla ``DelForkLocally`` = delForkOfOwner(r, f): a missing fork is only logged; the
    OwnerRRef is erased with its last fork."""
    if (r, f) not in ctx.forks:
        return ctx
    rest = ctx.forks - {(r, f)}
    last = not any(e[0] == r for e in rest)
    return ctx.evolve(forks=rest, owners=ctx.owners - {r} if last else ctx.owners)


# --------------------------------------------------------------------------- application


def create_local_rref(ctx: RRefContext) -> Step:
    """``CreateLocalRRef(w)``: rpc.RRef(obj) -> createOwnerRRef. Not put into owners_ until it is
    first forked, so an RRef never shared never leaks."""
    _app(ctx, "CreateLocalRRef")
    r = ctx.new_id()
    new = ctx.evolve(next_id=ctx.next_id + 1, owner_held=ctx.owner_held | {r})
    return Step(new, (), tr.CreateLocalRRefArgs.of(w=ctx.me))


def remote(ctx: RRefContext, dst: WorkerId) -> Step:
    """``Remote(w, dst)``: rpc.remote. To another worker: a UserRRef (RRefId then ForkId) kept
    alive by addPendingUser until REMOTE_RET (G2: the OwnerRRef is the creator's child). To self:
    createOwnerRRef + addSelfAsFork, and a PYTHON_REMOTE_CALL(r, r) to self."""
    _app(ctx, "Remote")
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
    _app(ctx, name)
    if dst == me:
        raise _fail(
            ctx, name, "an RRef is shared only with another worker (Links has no self pair)"
        )
    args = tr.PrepareChildForkArgs.of(w=me, dst=dst, r=r, parent=parent)
    if parent == r:
        if r not in ctx.owner_held and r not in ctx.owners:
            raise _fail(ctx, name, f"this worker holds no OwnerRRef {r}")
        new = ctx.evolve(
            next_id=ctx.next_id + 1, forks=ctx.forks | {(r, c)}, owners=ctx.owners | {r}
        )
        call = ev.PythonCall.make(src=me, dst=dst, rref=r, owner=me, fork=c, parent=r)
        return Step(new, (call,), args)
    u = _user(ctx, name, parent)
    if u.rref != r:
        raise _fail(ctx, name, f"UserRRef {parent} is a fork of {u.rref}, not of {r}")
    if parent not in ctx.held:
        raise _fail(ctx, name, f"UserRRef {parent} is not held by the application")
    if parent in ctx.timed_out or parent in ctx.deleted:
        raise _fail(ctx, name, f"UserRRef {parent} timed out or was deleted: fork() raises")
    new = ctx.evolve(next_id=ctx.next_id + 1, pending_children=ctx.pending_children | {(c, parent)})
    call = ev.PythonCall.make(src=me, dst=dst, rref=r, owner=u.owner, fork=c, parent=parent)
    return Step(new, (call,), args)


def to_here(ctx: RRefContext, f: Gid) -> Step:
    """``ToHere(w, f)``: UserRRef.to_here sends PYTHON_RREF_FETCH_CALL; the call keeps the
    UserRRef alive until the value arrives. The spec bounds it to one call per UserRRef."""
    _app(ctx, "ToHere")
    u = _user(ctx, "ToHere", f)
    if f not in ctx.held:
        raise _fail(ctx, "ToHere", f"UserRRef {f} is not held by the application")
    if f in ctx.fetched or f in ctx.timed_out or f in ctx.deleted:
        raise _fail(ctx, "ToHere", f"UserRRef {f} already fetched, timed out or deleted")
    new = ctx.evolve(fetching=ctx.fetching | {f}, fetched=ctx.fetched | {f})
    call = ev.RRefFetchCall.make(src=ctx.me, dst=u.owner, rref=u.rref, owner=u.owner, fork=f)
    return Step(new, (call,), tr.ToHereArgs.of(w=ctx.me, f=f))


def drop_rref(ctx: RRefContext, f: Gid) -> Step:
    """``DropRRef(w, f)``: Python drops its last reference to the UserRRef."""
    _user(ctx, "DropRRef", f)
    if f not in ctx.held:
        raise _fail(ctx, "DropRRef", f"UserRRef {f} is not held by the application")
    return Step(ctx.evolve(held=ctx.held - {f}), (), tr.DropRRefArgs.of(w=ctx.me, f=f))


def drop_owner_rref(ctx: RRefContext, r: Gid) -> Step:
    """``DropOwnerRRef(w, r)``: the application drops an OwnerRRef; owners_ never depends on it."""
    if r not in ctx.owner_held:
        raise _fail(ctx, "DropOwnerRRef", f"the application holds no OwnerRRef {r}")
    new = ctx.evolve(owner_held=ctx.owner_held - {r})
    return Step(new, (), tr.DropOwnerRRefArgs.of(w=ctx.me, r=r))


# --------------------------------------------------------------------------- timers, destructor


def time_out_remote(ctx: RRefContext, r: Gid, f: Gid) -> Step:
    """``TimeOutRemote(w, r, f)``: the rpc.remote future fails with TIMEOUT. f # r:
    confirmPendingUser's error path marks the UserRRef timed out and confirms it. f = r (self
    remote): the Reference keeps the self fork until the call is processed (#71029, #73294)."""
    name, args = "TimeOutRemote", tr.TimeOutRemoteArgs.of(w=ctx.me, r=r, f=f)
    if f != r:
        u = _user(ctx, name, f)
        if u.rref != r or u.parent is not None:
            raise _fail(ctx, name, f"UserRRef {f} is not the creator of {r}")
        if f not in ctx.pending_users:
            raise _fail(ctx, name, f"the rpc.remote future of {f} already completed")
        new = ctx.evolve(
            pending_users=ctx.pending_users - {f},
            confirmed_users=ctx.confirmed_users | {f},
            timed_out=ctx.timed_out | {f},
        )
        return Step(new, (), args)
    if r not in ctx.self_calls:
        raise _fail(ctx, name, f"no self rpc.remote of {r} in progress")
    return Step(ctx.evolve(self_calls=ctx.self_calls - {r}), (), args)


def del_user(ctx: RRefContext, f: Gid) -> Step:
    """``DelUser(w, f)``: the refcount reached zero -> UserRRef::tryDel -> delUser. G1: send
    RREF_USER_DELETE to the owner, at most once; erase confirmedUsers_[f]. A destroyed context
    sends nothing (``destroyed_``)."""
    u = _user(ctx, "DelUser", f)
    if f in ctx.deleted:
        raise _fail(ctx, "DelUser", f"UserRRef {f} was already deleted")
    if ctx.referenced(f):
        raise _fail(ctx, "DelUser", f"UserRRef {f} is still referenced (G2 holds it)")
    new = ctx.evolve(deleted=ctx.deleted | {f}, confirmed_users=ctx.confirmed_users - {f})
    args = tr.DelUserArgs.of(w=ctx.me, f=f)
    if ctx.phase == "destroyed":
        return Step(new, (), args)
    msg = ev.UserDelete.make(src=ctx.me, dst=u.owner, rref=u.rref, owner=u.owner, fork=f)
    return Step(new, (msg,), args)


# --------------------------------------------------------------------------- message handlers


def assign_owner_rref(ctx: RRefContext, m: ev.PythonRemoteCall) -> Step:
    """``AssignOwnerRRef(w, r, f)``: the UDF ran; assignOwnerRRef, then REMOTE_RET.
    f = r: the self fork is removed now that the value is set (Reference); a missing owner means
    the call fails and its reply is dropped. f # r: getOrCreateOwnerRRef (completing parked
    fetches) and addForkOfOwner, except that a creator fork whose RREF_USER_DELETE was already
    processed is not registered (tombstone, #41217) and the OwnerRRef is created only if a fork
    still needs it."""
    _addressed(ctx, "AssignOwnerRRef", m)
    me, r, f = ctx.me, m.rref, m.fork
    args = tr.AssignOwnerRRefArgs.of(w=me, r=r, f=f)
    if f == r:
        if r not in ctx.owners:
            return Step(ctx, (), args)
        ret = ev.RemoteRet.make(src=me, dst=me, rref=r, owner=me, fork=r)
        return Step(_del_fork_locally(ctx, r, r), (ret,), args)
    stale = (r, f) in ctx.tombstones
    needed = not stale or ctx.has_fork_of(r)
    parked = frozenset(p for p in ctx.pending_owners if p[0] == r)
    new = ctx.evolve(
        owners=ctx.owners | {r} if needed else ctx.owners,
        forks=ctx.forks if stale else ctx.forks | {(r, f)},
        pending_owners=ctx.pending_owners - parked,
    )
    replies = tuple(
        ev.RRefFetchRet.make(src=me, dst=p[2], rref=r, owner=me, fork=p[1]) for p in sorted(parked)
    )
    ret = ev.RemoteRet.make(src=me, dst=m.src, rref=r, owner=me, fork=f)
    return Step(new, (*replies, ret), args)


def confirm_pending_user(ctx: RRefContext, m: ev.RemoteRet) -> Step:
    """``ConfirmPendingUser(w, r, f)``: confirmPendingUser -> delPendingUser(f). A late reply
    (the future already timed out) is dropped."""
    _addressed(ctx, "ConfirmPendingUser", m)
    f = m.fork
    args = tr.ConfirmPendingUserArgs.of(w=ctx.me, r=m.rref, f=f)
    if f == m.rref:
        raise _fail(ctx, "ConfirmPendingUser", "REMOTE_RET(r, r) is FinishCreatingOwnerRRef's")
    if f not in ctx.pending_users:
        return Step(ctx, (), args)
    new = ctx.evolve(
        pending_users=ctx.pending_users - {f},
        confirmed_users=ctx.confirmed_users | {f},
    )
    return Step(new, (), args)


def finish_creating_owner_rref(ctx: RRefContext, m: ev.RemoteRet) -> Step:
    """``FinishCreatingOwnerRRef(w, r)``: the self-remote future completes. The Reference already
    removed the self fork in AssignOwnerRRef; a late reply is dropped."""
    _addressed(ctx, "FinishCreatingOwnerRRef", m)
    r = m.rref
    args = tr.FinishCreatingOwnerRRefArgs.of(w=ctx.me, r=r)
    if m.fork != r:
        raise _fail(ctx, "FinishCreatingOwnerRRef", "REMOTE_RET(r, f), f # r, confirms a user")
    if r not in ctx.self_calls:
        return Step(ctx, (), args)
    return Step(ctx.evolve(self_calls=ctx.self_calls - {r}), (), args)


def retrieve_owner_rref(ctx: RRefContext, m: ev.RRefFetchCall) -> Step:
    """``RetrieveOwnerRRef(w, r, f)``: retrieveOwnerRRef -> getOwnerRRef(r): reply at once, or
    park on pendingOwners_[r] until getOrCreateOwnerRRef(r) runs."""
    _addressed(ctx, "RetrieveOwnerRRef", m)
    me, r, f = ctx.me, m.rref, m.fork
    args = tr.RetrieveOwnerRRefArgs.of(w=me, r=r, f=f)
    if r in ctx.owners:
        return Step(ctx, (ev.RRefFetchRet.make(src=me, dst=m.src, rref=r, owner=me, fork=f),), args)
    return Step(ctx.evolve(pending_owners=ctx.pending_owners | {(r, f, m.src)}), (), args)


def receive_fetch_ret(ctx: RRefContext, m: ev.RRefFetchRet) -> Step:
    """``ReceiveFetchRet(w, r, f)``: the to_here future completes; the UserRRef is unpinned."""
    _addressed(ctx, "ReceiveFetchRet", m)
    new = ctx.evolve(fetching=ctx.fetching - {m.fork})
    return Step(new, (), tr.ReceiveFetchRetArgs.of(w=ctx.me, r=m.rref, f=m.fork))


def get_or_create_rref(ctx: RRefContext, m: ev.PythonCall) -> Step:
    """``GetOrCreateRRef(w, r, c)``: unpickling an RRef (getOrCreateRRef +
    notifyOwnerAndParentOfFork). At the owner: RREF_CHILD_ACCEPT to the parent, c is never added
    to forks_ (phantom fork); the Reference creates no empty OwnerRRef. From the owner:
    addConfirmedUser(c). From another user: RREF_FORK_REQUEST to the owner + addPendingUser(c)."""
    _addressed(ctx, "GetOrCreateRRef", m)
    me, r, c = ctx.me, m.rref, m.fork
    args = tr.GetOrCreateRRefArgs.of(w=me, r=r, c=c)
    if m.owner == me:
        accept = ev.ChildAccept.make(src=me, dst=m.src, rref=r, owner=me, fork=c)
        return Step(ctx, (accept,), args)
    if c in ctx.users:
        raise _fail(
            ctx, "GetOrCreateRRef", f"fork {c} already unpickled: user calls are never retried"
        )
    user = UserRRef.of(fork=c, rref=r, owner=m.owner, on=me, parent=m.parent)
    users, held = {**ctx.users, c: user}, ctx.held | {c}
    if m.src == m.owner:
        confirmed = ctx.confirmed_users | {c}
        return Step(ctx.evolve(users=users, held=held, confirmed_users=confirmed), (), args)
    request = ev.ForkRequest.make(src=me, dst=m.owner, rref=r, owner=m.owner, fork=c)
    pending = ctx.pending_users | {c}
    return Step(ctx.evolve(users=users, held=held, pending_users=pending), (request,), args)


def add_fork_of_owner_if_not_present(ctx: RRefContext, m: ev.ForkRequest) -> Step:
    """``AddForkOfOwnerIfNotPresent(w, r, c)``: register the fork (owners_[r] not required), then
    RREF_ACK. A tombstoned fork is not re-added: a late duplicate cannot resurrect it (#26759)."""
    _addressed(ctx, "AddForkOfOwnerIfNotPresent", m)
    me, r, c = ctx.me, m.rref, m.fork
    new = ctx if (r, c) in ctx.tombstones else ctx.evolve(forks=ctx.forks | {(r, c)})
    # The retry's copy (dup 2) gets an ack marked 2, so the two acks stay distinct records.
    ack = ev.RRefAck.make(src=me, dst=m.src, rref=r, owner=me, fork=c, dup=2 if m.dup == 2 else 0)
    return Step(new, (ack,), tr.AddForkOfOwnerIfNotPresentArgs.of(w=me, r=r, c=c))


def finish_fork_request(ctx: RRefContext, m: ev.RRefAck) -> Step:
    """``FinishForkRequest(w, r, c)``: finishForkRequest -> delPendingUser(c), then
    RREF_CHILD_ACCEPT to the parent's worker (c's createdOn). Later acks are dropped."""
    _addressed(ctx, "FinishForkRequest", m)
    me, r, c = ctx.me, m.rref, m.fork
    args = tr.FinishForkRequestArgs.of(w=me, r=r, c=c)
    if c not in ctx.pending_users:
        return Step(ctx, (), args)
    new = ctx.evolve(
        pending_users=ctx.pending_users - {c},
        confirmed_users=ctx.confirmed_users | {c},
    )
    accept = ev.ChildAccept.make(src=me, dst=c.worker, rref=r, owner=m.src, fork=c)
    return Step(new, (accept,), args)


def del_pending_child(ctx: RRefContext, m: ev.ChildAccept) -> Step:
    """``DelPendingChild(w, r, c)``: delPendingChild(c) drops the strong reference to the parent
    (idempotent); the parent may now be deleted (G2 satisfied)."""
    _addressed(ctx, "DelPendingChild", m)
    c = m.fork
    accepted = [e for e in ctx.pending_children if e[0] == c]
    new = (
        ctx.evolve(pending_children=ctx.pending_children.difference(accepted)) if accepted else ctx
    )
    return Step(new, (), tr.DelPendingChildArgs.of(w=ctx.me, r=m.rref, c=c))


def del_fork_of_owner(ctx: RRefContext, m: ev.UserDelete) -> Step:
    """``DelForkOfOwner(w, r, f)``: delForkOfOwner(r, f) (G1's receiving end), tolerant of
    unknown ids; the Reference records a tombstone so stale messages about (r, f) are ignored."""
    _addressed(ctx, "DelForkOfOwner", m)
    r, f = m.rref, m.fork
    tombstones = ctx.tombstones | {(r, f)}
    if (r, f) in ctx.forks:
        # DelForkLocally and the tombstone in one copy of the context.
        rest = ctx.forks - {(r, f)}
        owners = ctx.owners if any(e[0] == r for e in rest) else ctx.owners - {r}
        new = ctx.evolve(forks=rest, owners=owners, tombstones=tombstones)
    else:
        new = ctx.evolve(tombstones=tombstones)
    return Step(new, (), tr.DelForkOfOwnerArgs.of(w=ctx.me, r=r, f=f))


# --------------------------------------------------------------------------- graceful shutdown


def wait_all_workers(ctx: RRefContext, user_calls_in_flight: int = 0) -> Step:
    """``WaitAllWorkers``: this worker has passed rpc.shutdown's ``_wait_all_workers`` barrier;
    from now on it issues no user call, fork or fetch (AppCanAct).

    The spec's step is one global barrier; a driver applies this to every worker's context and
    logs one event for all of them (under an environment actor). Its precondition, stated in
    the spec rather than assumed as PyTorch does, is that no user call (PYTHON_REMOTE_CALL,
    REMOTE_RET, fetch, PYTHON_CALL) is in flight: the driver passes how many it knows of.
    """
    name = "WaitAllWorkers"
    if user_calls_in_flight < 0:
        raise _fail(ctx, name, f"user_calls_in_flight must be >= 0, got {user_calls_in_flight}")
    if ctx.stopping:
        raise _fail(ctx, name, "the barrier was already passed")
    if user_calls_in_flight:
        raise _fail(
            ctx,
            name,
            f"{user_calls_in_flight} user call(s) in flight: the application must wait for its "
            "futures before shutdown (a PYTHON_CALL delivered after the sweep leaks a UserRRef)",
        )
    return Step(ctx.evolve(stopping=True), (), tr.WaitAllWorkersArgs.of())


def del_all_users_and_unforked_owners(ctx: RRefContext, *, force: bool = False) -> Step:
    """``DelAllUsersAndUnforkedOwners(w)``: ``_delete_all_user_and_unforked_owner_rrefs``.

    Once pendingUsers_ and pendingChildren_ are empty (and, in the Reference, no fetch of a
    UserRRef here is outstanding), send RREF_USER_DELETE for every confirmed UserRRef not yet
    deleted, even one the application still holds (G1, forced; reported as a ``held_user``
    leak), erase the OwnerRRefs that have no fork, clear confirmedUsers_ and mark the context
    swept. ``force=True`` is PyTorch's path after its wait timed out: the sweep runs anyway and
    the pending users, pending children and outstanding fetches are reported as leaks (the trace
    of such a sweep is rightly rejected by the spec).
    """
    name = "DelAllUsersAndUnforkedOwners"
    if not ctx.stopping or ctx.phase != "running":
        raise _fail(ctx, name, f"needs the barrier passed and phase running (phase {ctx.phase})")
    fetching = frozenset(f for f in ctx.fetching if f in ctx.users)
    waiting = (
        [Leak("pending_user", ctx.users[f].rref, f) for f in sorted(ctx.pending_users)]
        + [Leak("pending_child", ctx.users[p].rref, c) for c, p in sorted(ctx.pending_children)]
        + [Leak("fetching_user", ctx.users[f].rref, f) for f in sorted(fetching)]
    )
    if waiting and not force:
        what = ", ".join(str(leak) for leak in waiting)
        raise _fail(ctx, name, f"still waiting for pending UserRRefs and children: {what}")
    victims = sorted(f for f in ctx.confirmed_users if f not in ctx.deleted)
    unforked = frozenset(r for r in ctx.owners if not ctx.has_fork_of(r))
    new = ctx.evolve(
        deleted=ctx.deleted | frozenset(victims),
        owners=ctx.owners - unforked,
        confirmed_users=frozenset(),
        phase="swept",
    )
    sent = tuple(
        ev.UserDelete.make(src=ctx.me, dst=u.owner, rref=u.rref, owner=u.owner, fork=u.fork)
        for u in (ctx.users[f] for f in victims)
    )
    held = [Leak("held_user", ctx.users[f].rref, f) for f in victims if f in ctx.held]
    args = tr.DelAllUsersAndUnforkedOwnersArgs.of(w=ctx.me)
    return Step(new, sent, args, tuple(waiting + held))


def destroy_instance(
    ctx: RRefContext,
    active_calls: int = 0,
    peers_swept: bool = True,
    *,
    force: bool = False,
) -> Step:
    """``DestroyInstance(w)``: ``agent.join`` then ``RRefContext::destroyInstance``.

    Enabled once this context is swept, every worker has swept (``peers_swept``), owners_ is
    empty (every other worker's deletes for our OwnerRRefs arrived), no message to or from this
    worker is in flight (``active_calls``: join waits for all client calls) and no fetch of a
    UserRRef here is outstanding. Clears pendingOwners_ (parked fetches are dropped unanswered)
    and runs the leak check: each fork left in forks_ is reported ("Leaking RRef r with fork Id
    f"). ``force=True`` (non-graceful shutdown, or a wait that timed out) skips the waits and
    reports the OwnerRRefs left as ``owner`` leaks.
    """
    name = "DestroyInstance"
    if ctx.phase != "swept" and not (force and ctx.phase == "running"):
        raise _fail(ctx, name, f"the context must be swept first (phase {ctx.phase})")
    if active_calls < 0:
        raise _fail(ctx, name, f"active_calls must be >= 0, got {active_calls}")
    fetching = sorted(f for f in ctx.fetching if f in ctx.users)
    if not force:
        if not peers_swept:
            raise _fail(ctx, name, "some worker has not swept yet (agent.join waits for all)")
        if ctx.owners:
            left = ", ".join(str(r) for r in sorted(ctx.owners))
            raise _fail(ctx, name, f"waiting for OwnerRRefs to be deleted: {left}")
        if active_calls:
            raise _fail(ctx, name, f"{active_calls} message(s) to or from this worker in flight")
        if fetching:
            raise _fail(ctx, name, f"fetches outstanding: {', '.join(map(str, fetching))}")
    leaks = (
        [Leak("owner", r) for r in sorted(ctx.owners)]
        + [Leak("fork", r, f) for r, f in sorted(ctx.forks)]
        + [Leak("parked_fetch", r, f) for r, f, _ in sorted(ctx.pending_owners)]
        + [Leak("fetching_user", ctx.users[f].rref, f) for f in fetching]
    )
    new = ctx.evolve(phase="destroyed", pending_owners=frozenset())
    return Step(new, (), tr.DestroyInstanceArgs.of(w=ctx.me), tuple(leaks))


# --------------------------------------------------------------------------- dispatch


def _on_remote_ret(ctx: RRefContext, m: ev.RemoteRet) -> Step:
    # RRef.tla Receive: REMOTE_RET(r, r) completes a self remote, REMOTE_RET(r, f) a user.
    if m.fork == m.rref:
        return finish_creating_owner_rref(ctx, m)
    return confirm_pending_user(ctx, m)


_DISPATCH: Final[dict[type[Any], Callable[[RRefContext, Any], Step]]] = {
    ev.PythonRemoteCall: assign_owner_rref,
    ev.RemoteRet: _on_remote_ret,
    ev.RRefFetchCall: retrieve_owner_rref,
    ev.RRefFetchRet: receive_fetch_ret,
    ev.PythonCall: get_or_create_rref,
    ev.ForkRequest: add_fork_of_owner_if_not_present,
    ev.RRefAck: finish_fork_request,
    ev.ChildAccept: del_pending_child,
    ev.UserDelete: del_fork_of_owner,
    ev.CreateLocalRRef: lambda ctx, _i: create_local_rref(ctx),
    ev.Remote: lambda ctx, i: remote(ctx, i.dst),
    ev.PrepareChildFork: lambda ctx, i: prepare_child_fork(ctx, i.dst, i.r, i.parent),
    ev.ToHere: lambda ctx, i: to_here(ctx, i.f),
    ev.DropRRef: lambda ctx, i: drop_rref(ctx, i.f),
    ev.DropOwnerRRef: lambda ctx, i: drop_owner_rref(ctx, i.r),
    ev.TimeOutRemote: lambda ctx, i: time_out_remote(ctx, i.r, i.f),
    ev.DelUser: lambda ctx, i: del_user(ctx, i.f),
    ev.WaitAllWorkers: lambda ctx, i: wait_all_workers(ctx, i.user_calls_in_flight),
    ev.DelAllUsersAndUnforkedOwners: lambda ctx, i: del_all_users_and_unforked_owners(
        ctx, force=i.force
    ),
    ev.DestroyInstance: lambda ctx, i: destroy_instance(
        ctx, i.active_calls, i.peers_swept, force=i.force
    ),
}


def step(ctx: RRefContext, inp: ev.RRefInput) -> Step:
    """Apply one input (a delivered message, an application call, a timer or a destructor)."""
    return _DISPATCH[type(inp)](ctx, inp)


# --------------------------------------------------------------------------- crosswalk


class ActionRow(NamedTuple):
    """One row of docs/rref.md's crosswalk."""

    tla_action: str
    python: str
    pytorch: str


_M = "protoref.rref.machine."
#: RRef.tla action -> Python transition -> PyTorch function; the trace event is the action name.
ACTION_TABLE: Final[tuple[ActionRow, ...]] = (
    ActionRow("CreateLocalRRef", _M + "create_local_rref", "rpc.RRef(obj) / createOwnerRRef"),
    ActionRow("Remote", _M + "remote", "rpc.remote / pyRemotePythonUdf"),
    ActionRow("PrepareChildFork", _M + "prepare_child_fork", "RRefContext::prepareChildFork"),
    ActionRow("ToHere", _M + "to_here", "UserRRef::toHere"),
    ActionRow("DropRRef", _M + "drop_rref", "Python GC releases a UserRRef"),
    ActionRow("DropOwnerRRef", _M + "drop_owner_rref", "Python GC releases an OwnerRRef"),
    ActionRow("RetrySend", "protoref.rref.simulator.Simulator.retry_send", "sendWithRetries"),
    ActionRow(
        "LoseFirstAttempt",
        "protoref.rref.simulator.Simulator.lose_first_attempt",
        "a retried message lost with its connection",
    ),
    ActionRow(
        "TimeOutRemote",
        _M + "time_out_remote",
        "confirmPendingUser / finishCreatingOwnerRRef error path",
    ),
    ActionRow("DelUser", _M + "del_user", "UserRRef::tryDel / RRefContext::delUser"),
    ActionRow("AssignOwnerRRef", _M + "assign_owner_rref", "assignOwnerRRef"),
    ActionRow("ConfirmPendingUser", _M + "confirm_pending_user", "confirmPendingUser"),
    ActionRow(
        "FinishCreatingOwnerRRef", _M + "finish_creating_owner_rref", "finishCreatingOwnerRRef"
    ),
    ActionRow("RetrieveOwnerRRef", _M + "retrieve_owner_rref", "retrieveOwnerRRef / getOwnerRRef"),
    ActionRow("ReceiveFetchRet", _M + "receive_fetch_ret", "to_here future completes"),
    ActionRow(
        "GetOrCreateRRef", _M + "get_or_create_rref", "getOrCreateRRef + notifyOwnerAndParentOfFork"
    ),
    ActionRow(
        "AddForkOfOwnerIfNotPresent",
        _M + "add_fork_of_owner_if_not_present",
        "addForkOfOwnerIfNotPresent",
    ),
    ActionRow("FinishForkRequest", _M + "finish_fork_request", "finishForkRequest"),
    ActionRow("DelPendingChild", _M + "del_pending_child", "delPendingChild"),
    ActionRow("DelForkOfOwner", _M + "del_fork_of_owner", "delForkOfOwner"),
    ActionRow("WaitAllWorkers", _M + "wait_all_workers", "_wait_all_workers"),
    ActionRow(
        "DelAllUsersAndUnforkedOwners",
        _M + "del_all_users_and_unforked_owners",
        "_delete_all_user_and_unforked_owner_rrefs",
    ),
    ActionRow("DestroyInstance", _M + "destroy_instance", "agent.join + destroyInstance"),
)


def action_table_markdown() -> str:
    """The crosswalk as a Markdown table (PyTorch | TLA+ action | Python | trace event)."""
    lines = [
        "| PyTorch | TLA+ action | Python function | trace event |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {r.pytorch} | `{r.tla_action}` | `{r.python}` | `{r.tla_action}` |"
        for r in ACTION_TABLE
    ]
    return "\n".join(lines)
