"""Transitions of graceful shutdown (rpc.shutdown(graceful=True)): RRef.tla's
``WaitAllWorkers``, ``DelAllUsersAndUnforkedOwners`` and ``DestroyInstance``.
"""

from __future__ import annotations

from protoref.rref.core import events as ev
from protoref.rref.core.state import Leak, RRefContext
from protoref.rref.core.transition import (
    Step,
    fail,
)
from protoref.rref.trace import args as tr

__all__ = [
    "del_all_users_and_unforked_owners",
    "destroy_instance",
    "wait_all_workers",
]


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
        raise fail(ctx, name, f"user_calls_in_flight must be >= 0, got {user_calls_in_flight}")
    if ctx.stopping:
        raise fail(ctx, name, "the barrier was already passed")
    if user_calls_in_flight:
        raise fail(
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
        raise fail(ctx, name, f"needs the barrier passed and phase running (phase {ctx.phase})")
    fetching = frozenset(f for f in ctx.fetching if f in ctx.users)
    waiting = (
        [Leak("pending_user", ctx.users[f].rref, f) for f in sorted(ctx.pending_users)]
        + [Leak("pending_child", ctx.users[p].rref, c) for c, p in sorted(ctx.pending_children)]
        + [Leak("fetching_user", ctx.users[f].rref, f) for f in sorted(fetching)]
    )
    if waiting and not force:
        what = ", ".join(str(leak) for leak in waiting)
        raise fail(ctx, name, f"still waiting for pending UserRRefs and children: {what}")
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
        raise fail(ctx, name, f"the context must be swept first (phase {ctx.phase})")
    if active_calls < 0:
        raise fail(ctx, name, f"active_calls must be >= 0, got {active_calls}")
    fetching = sorted(f for f in ctx.fetching if f in ctx.users)
    if not force:
        if not peers_swept:
            raise fail(ctx, name, "some worker has not swept yet (agent.join waits for all)")
        if ctx.owners:
            left = ", ".join(str(r) for r in sorted(ctx.owners))
            raise fail(ctx, name, f"waiting for OwnerRRefs to be deleted: {left}")
        if active_calls:
            raise fail(ctx, name, f"{active_calls} message(s) to or from this worker in flight")
        if fetching:
            raise fail(ctx, name, f"fetches outstanding: {', '.join(map(str, fetching))}")
    leaks = (
        [Leak("owner", r) for r in sorted(ctx.owners)]
        + [Leak("fork", r, f) for r, f in sorted(ctx.forks)]
        + [Leak("parked_fetch", r, f) for r, f, _ in sorted(ctx.pending_owners)]
        + [Leak("fetching_user", ctx.users[f].rref, f) for f in fetching]
    )
    new = ctx.evolve(phase="destroyed", pending_owners=frozenset())
    return Step(new, (), tr.DestroyInstanceArgs.of(w=ctx.me), tuple(leaks))
