"""Transitions of the message handlers: each takes one delivered message (RRef.tla ``Receive``).

One function per RRef.tla action, following its guard and effect line by line (Reference
variant); each cites the PyTorch function it models and the guarantee it serves.
"""

from __future__ import annotations

from protoref.rref.core import events as ev
from protoref.rref.core.state import RRefContext, UserRRef
from protoref.rref.core.transition import (
    Step,
    addressed,
    del_fork_locally,
    fail,
)
from protoref.rref.trace import args as tr

__all__ = [
    "add_fork_of_owner_if_not_present",
    "assign_owner_rref",
    "confirm_pending_user",
    "del_fork_of_owner",
    "del_pending_child",
    "finish_creating_owner_rref",
    "finish_fork_request",
    "get_or_create_rref",
    "receive_fetch_ret",
    "retrieve_owner_rref",
]


# --------------------------------------------------------------------------- message handlers


def assign_owner_rref(ctx: RRefContext, m: ev.PythonRemoteCall) -> Step:
    """``AssignOwnerRRef(w, r, f)``: the UDF ran; assignOwnerRRef, then REMOTE_RET.
    f = r: the self fork is removed now that the value is set (Reference); a missing owner means
    the call fails and its reply is dropped. f # r: getOrCreateOwnerRRef (completing parked
    fetches) and addForkOfOwner, except that a creator fork whose RREF_USER_DELETE was already
    processed is not registered (tombstone, #41217) and the OwnerRRef is created only if a fork
    still needs it."""
    addressed(ctx, "AssignOwnerRRef", m)
    me, r, f = ctx.me, m.rref, m.fork
    args = tr.AssignOwnerRRefArgs.of(w=me, r=r, f=f)
    if f == r:
        if r not in ctx.owners:
            return Step(ctx, (), args)
        ret = ev.RemoteRet.make(src=me, dst=me, rref=r, owner=me, fork=r)
        return Step(del_fork_locally(ctx, r, r), (ret,), args)
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
    addressed(ctx, "ConfirmPendingUser", m)
    f = m.fork
    args = tr.ConfirmPendingUserArgs.of(w=ctx.me, r=m.rref, f=f)
    if f == m.rref:
        raise fail(ctx, "ConfirmPendingUser", "REMOTE_RET(r, r) is FinishCreatingOwnerRRef's")
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
    addressed(ctx, "FinishCreatingOwnerRRef", m)
    r = m.rref
    args = tr.FinishCreatingOwnerRRefArgs.of(w=ctx.me, r=r)
    if m.fork != r:
        raise fail(ctx, "FinishCreatingOwnerRRef", "REMOTE_RET(r, f), f # r, confirms a user")
    if r not in ctx.self_calls:
        return Step(ctx, (), args)
    return Step(ctx.evolve(self_calls=ctx.self_calls - {r}), (), args)


def retrieve_owner_rref(ctx: RRefContext, m: ev.RRefFetchCall) -> Step:
    """``RetrieveOwnerRRef(w, r, f)``: retrieveOwnerRRef -> getOwnerRRef(r): reply at once, or
    park on pendingOwners_[r] until getOrCreateOwnerRRef(r) runs."""
    addressed(ctx, "RetrieveOwnerRRef", m)
    me, r, f = ctx.me, m.rref, m.fork
    args = tr.RetrieveOwnerRRefArgs.of(w=me, r=r, f=f)
    if r in ctx.owners:
        return Step(ctx, (ev.RRefFetchRet.make(src=me, dst=m.src, rref=r, owner=me, fork=f),), args)
    return Step(ctx.evolve(pending_owners=ctx.pending_owners | {(r, f, m.src)}), (), args)


def receive_fetch_ret(ctx: RRefContext, m: ev.RRefFetchRet) -> Step:
    """``ReceiveFetchRet(w, r, f)``: the to_here future completes; the UserRRef is unpinned."""
    addressed(ctx, "ReceiveFetchRet", m)
    new = ctx.evolve(fetching=ctx.fetching - {m.fork})
    return Step(new, (), tr.ReceiveFetchRetArgs.of(w=ctx.me, r=m.rref, f=m.fork))


def get_or_create_rref(ctx: RRefContext, m: ev.PythonCall) -> Step:
    """``GetOrCreateRRef(w, r, c)``: unpickling an RRef (getOrCreateRRef +
    notifyOwnerAndParentOfFork). At the owner: RREF_CHILD_ACCEPT to the parent, c is never added
    to forks_ (phantom fork); the Reference creates no empty OwnerRRef. From the owner:
    addConfirmedUser(c). From another user: RREF_FORK_REQUEST to the owner + addPendingUser(c)."""
    addressed(ctx, "GetOrCreateRRef", m)
    me, r, c = ctx.me, m.rref, m.fork
    args = tr.GetOrCreateRRefArgs.of(w=me, r=r, c=c)
    if m.owner == me:
        accept = ev.ChildAccept.make(src=me, dst=m.src, rref=r, owner=me, fork=c)
        return Step(ctx, (accept,), args)
    if c in ctx.users:
        raise fail(
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
    addressed(ctx, "AddForkOfOwnerIfNotPresent", m)
    me, r, c = ctx.me, m.rref, m.fork
    new = ctx if (r, c) in ctx.tombstones else ctx.evolve(forks=ctx.forks | {(r, c)})
    # The retry's copy (dup 2) gets an ack marked 2, so the two acks stay distinct records.
    ack = ev.RRefAck.make(src=me, dst=m.src, rref=r, owner=me, fork=c, dup=2 if m.dup == 2 else 0)
    return Step(new, (ack,), tr.AddForkOfOwnerIfNotPresentArgs.of(w=me, r=r, c=c))


def finish_fork_request(ctx: RRefContext, m: ev.RRefAck) -> Step:
    """``FinishForkRequest(w, r, c)``: finishForkRequest -> delPendingUser(c), then
    RREF_CHILD_ACCEPT to the parent's worker (c's createdOn). Later acks are dropped."""
    addressed(ctx, "FinishForkRequest", m)
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
    addressed(ctx, "DelPendingChild", m)
    c = m.fork
    accepted = [e for e in ctx.pending_children if e[0] == c]
    new = (
        ctx.evolve(pending_children=ctx.pending_children.difference(accepted)) if accepted else ctx
    )
    return Step(new, (), tr.DelPendingChildArgs.of(w=ctx.me, r=m.rref, c=c))


def del_fork_of_owner(ctx: RRefContext, m: ev.UserDelete) -> Step:
    """``DelForkOfOwner(w, r, f)``: delForkOfOwner(r, f) (G1's receiving end), tolerant of
    unknown ids. No tombstone (RRef.tla DeleteLast, issue 28): the users make this delete the
    last message about (r, f) that can reach the owner (``DeleteIsLastInv``), so nothing can
    register the fork again and the owner keeps nothing for it (``TombstoneBoundInv``)."""
    addressed(ctx, "DelForkOfOwner", m)
    r, f = m.rref, m.fork
    args = tr.DelForkOfOwnerArgs.of(w=ctx.me, r=r, f=f)
    if (r, f) not in ctx.forks:  # a second copy, or an unknown id: nothing to do
        return Step(ctx, (), args)
    return Step(del_fork_locally(ctx, r, f), (), args)
