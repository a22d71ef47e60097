"""RRef.tla's safety invariants as Python predicates over a whole simulated system.

A :class:`World` is what the spec's state is at runtime: every worker's context, the messages in
flight, and the history the driver records by diffing each step: the spec's two history
variables (``removedForks``, ``erasedOwners``) and, for the notes' R4, which the spec has no
invariant for, the RREF_USER_DELETEs sent per ForkId and the ForkIds that ever left ``deleted``.
:func:`check` raises :class:`InvariantViolationError` naming the first
violated invariant, spelled as in the spec. These are cheap self-checks for the simulator; TLC
checks the traces (conformance) and the spec itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from protoref.errors import InvariantViolationError, LeakError
from protoref.ids import GloballyUniqueId, WorkerId
from protoref.rref.core.events import MessageBase
from protoref.rref.core.state import Pair, RRefContext, UserRRef

__all__ = ["INVARIANTS", "World", "check", "check_leak_free", "quiescent"]

Gid = GloballyUniqueId


@dataclass
class World:
    """The spec state of a run: contexts by worker, ``net``, and the history variables."""

    contexts: Mapping[WorkerId, RRefContext]
    net: Sequence[MessageBase]
    removed_forks: Mapping[WorkerId, frozenset[Pair]] = field(default_factory=dict)
    erased_owners: Mapping[WorkerId, frozenset[Gid]] = field(default_factory=dict)
    stopping: bool = False
    #: R4 history: distinct RREF_USER_DELETEs sent per ForkId (retry copies not counted).
    delete_sends: Mapping[Gid, int] = field(default_factory=dict)
    #: R4 history: ForkIds some step removed from a worker's ``deleted`` (must stay empty).
    undeleted: Mapping[WorkerId, frozenset[Gid]] = field(default_factory=dict)

    @cached_property
    def all_users(self) -> tuple[UserRRef, ...]:
        """RRef.tla ``users``: every UserRRef created (computed once per check)."""
        return tuple(u for ctx in self.contexts.values() for u in ctx.users.values())

    @cached_property
    def all_deleted(self) -> frozenset[Gid]:
        """RRef.tla ``deleted`` (the union of the per-worker parts)."""
        return frozenset().union(*(ctx.deleted for ctx in self.contexts.values()))

    def users(self) -> Iterable[UserRRef]:
        return self.all_users

    def is_deleted(self, f: Gid) -> bool:
        """``f \\in deleted`` (the spec's global set, partitioned by worker)."""
        return f in self.all_deleted

    def user(self, f: Gid) -> UserRRef | None:
        for ctx in self.contexts.values():
            u = ctx.users.get(f)
            if u is not None:
                return u
        return None


def _live(world: World, u: UserRRef) -> bool:
    ctx = world.contexts[u.on]
    return u.fork not in ctx.deleted and ctx.referenced(u.fork)


def no_premature_delete(world: World) -> str | None:
    """R1 NoPrematureDeleteInv (G1 + G2): an erased OwnerRRef is needed by nobody.

    ``NeedsOwner`` skips messages of deleted forks: a late duplicate RREF_FORK_REQUEST of a fork
    that is already gone is harmless (the tombstone makes the owner ignore it).
    """
    gone = {
        (w, r)
        for w, ctx in world.contexts.items()
        for r in world.erased_owners.get(w, frozenset()) - ctx.owners
    }
    if not gone:
        return None
    for u in world.users():
        if (u.owner, u.rref) in gone and _live(world, u):
            return f"owner {u.rref} erased on {u.owner} while UserRRef {u.fork} on {u.on} is live"
    needs_owner = {"PYTHON_CALL", "RREF_FORK_REQUEST", "PYTHON_RREF_FETCH_CALL"}
    for m in world.net:
        if (m.owner, m.rref) in gone and m.type in needs_owner and not world.is_deleted(m.fork):
            return f"owner {m.rref} erased on {m.owner} while {m!r} is in flight"
    return None


def no_fetch_after_delete(world: World) -> str | None:
    """R1b NoFetchAfterDeleteInv: no fetch is parked on an erased OwnerRRef (#40141)."""
    for w, ctx in world.contexts.items():
        for r in world.erased_owners.get(w, frozenset()) - ctx.owners:
            if any(p[0] == r for p in ctx.pending_owners):
                return f"owner {r} erased on {w} with a fetch parked on it"
    return None


def parent_held(world: World) -> str | None:
    """R2 ParentHeldInv (G2): a parent keeps a pending child entry until the owner knows it."""
    for m in world.net:
        kind = m.type
        if kind == "PYTHON_CALL" and m.parent != m.rref:
            src = world.contexts[m.src]
            if m.parent is None or (m.fork, m.parent) not in src.pending_children:
                return f"{m!r} in flight but its parent has no pending child entry"
            if m.parent in src.deleted:
                return f"{m!r} in flight but its parent {m.parent} was deleted"
        if kind == "RREF_CHILD_ACCEPT" and m.src != m.owner:
            known = world.contexts[m.owner].forks | world.contexts[m.owner].tombstones
            known |= world.removed_forks.get(m.owner, frozenset())
            if (m.rref, m.fork) not in known:
                return f"{m!r} accepts a fork the owner never registered"
    for u in world.users():
        if u.parent not in (None, u.rref) and u.fork in world.contexts[u.on].pending_users:
            parent_ctx = world.contexts[u.fork.worker]
            assert u.parent is not None
            if (u.fork, u.parent) not in parent_ctx.pending_children:
                return f"pending child {u.fork} but no pending child entry on {u.fork.worker}"
            if u.parent in parent_ctx.deleted:
                return f"pending child {u.fork} but its parent {u.parent} was deleted"
    return None


def safe_delete(world: World) -> str | None:
    """R3 SafeDeleteInv: RREF_USER_DELETE only for an unreferenced, unpending UserRRef."""
    for m in world.net:
        if m.type != "RREF_USER_DELETE":
            continue
        src, f = world.contexts[m.src], m.fork
        if f in src.pending_users or any(e[1] == f for e in src.pending_children):
            return f"delete of {f} sent while it is pending or has a pending child"
        if f in src.fetching or (not world.stopping and f in src.held):
            return f"delete of {f} sent while it is fetching or held"
    return None


def at_most_one_delete(world: World) -> str | None:
    """R4 (notes §4.1; no spec invariant, the spec's ``deleted`` set makes it structural): each
    ForkId is the subject of at most one distinct RREF_USER_DELETE, and ``deletedOnOwner_`` is
    monotone (no step takes a ForkId out of ``deleted``)."""
    twice = sorted(f for f, n in world.delete_sends.items() if n > 1)
    if twice:
        return f"more than one RREF_USER_DELETE sent for {twice}"
    for w, forks in world.undeleted.items():
        if forks:
            return f"{w}: deletedOnOwner_ was reset for {sorted(forks)}"
    for m in world.net:
        if m.type == "RREF_USER_DELETE" and m.fork not in world.contexts[m.src].deleted:
            return f"{m!r} in flight but {m.fork} is not marked deleted on {m.src}"
    return None


def disjoint_maps(world: World) -> str | None:
    """R5 DisjointMapsInv: the context's maps are disjoint and well typed."""
    for w, ctx in world.contexts.items():
        if ctx.pending_users & ctx.confirmed_users:
            return f"{w}: pending and confirmed users overlap"
        for f in ctx.pending_users | ctx.confirmed_users:
            u = ctx.users.get(f)
            if u is None or u.owner == w:
                return f"{w}: pending/confirmed {f} is not a UserRRef of another owner"
        for _, parent in ctx.pending_children:
            u = ctx.users.get(parent)
            if u is None or u.owner == w:
                return f"{w}: pending child's parent {parent} is not a UserRRef here"
        if any(p[0] in ctx.owners for p in ctx.pending_owners):
            return f"{w}: a fetch is parked on an existing OwnerRRef"
    return None


def unique_ids(world: World) -> str | None:
    """R6 UniqueIdsInv: ids come from one counter per worker and are never shared."""
    forks: set[Gid] = set()
    rrefs: set[Gid] = set()
    for u in world.users():
        for gid in (u.fork, u.rref):
            if gid.local_id >= world.contexts[gid.worker].next_id:
                return f"{gid} was not drawn yet"
        if u.fork in forks:
            return f"two UserRRefs share ForkId {u.fork}"
        forks.add(u.fork)
        rrefs.add(u.rref)
    shared = forks & rrefs
    return f"ForkIds used as RRefIds: {sorted(shared)}" if shared else None


def no_fork_resurrection(world: World) -> str | None:
    """R7 NoForkResurrectionInv: a fork removed from forks_ never re-enters it."""
    for w, ctx in world.contexts.items():
        back = world.removed_forks.get(w, frozenset()) & ctx.forks
        if back:
            return f"{w}: removed forks re-entered forks_: {sorted(back)}"
    return None


def fork_tree(world: World) -> str | None:
    """R8 ForkTreeInv: each RRef's forks form a tree rooted at the creator or the OwnerRRef."""
    by_fork = {u.fork: u for u in world.users()}
    for u in by_fork.values():
        if u.parent is None and u.fork.worker != u.on:
            return f"root UserRRef {u.fork} not created on {u.on}"
        if u.parent == u.rref and u.fork.worker != u.owner:
            return f"child {u.fork} of the OwnerRRef not forked by the owner"
        if u.parent not in (None, u.rref):
            p = by_fork.get(u.parent)
            if p is None or p.rref != u.rref or p.on != u.fork.worker:
                return f"UserRRef {u.fork}'s parent {u.parent} is not a fork of it on its sender"
        seen: set[Gid] = set()
        cur: UserRRef | None = u
        while cur is not None and cur.parent not in (None, cur.rref):
            if cur.fork in seen:
                return f"fork cycle through {cur.fork}"
            seen.add(cur.fork)
            cur = by_fork.get(cur.parent)
    return None


def self_remote_owner(world: World) -> str | None:
    """R10 SelfRemoteOwnerInv: a self PYTHON_REMOTE_CALL(r, r) finds owners_[r]."""
    for m in world.net:
        self_call = m.type == "PYTHON_REMOTE_CALL" and m.fork == m.rref
        if self_call and m.rref not in world.contexts[m.dst].owners:
            return f"self remote {m.rref} in flight but owners_ lost it"
    return None


def shutdown_order(world: World) -> str | None:
    """R11 ShutdownOrderInv: nothing in flight to or from a destroyed context, and no fetch of
    one of its UserRRefs parked anywhere (it would never complete)."""
    destroyed = {w for w, ctx in world.contexts.items() if ctx.phase == "destroyed"}
    if not destroyed:
        return None
    for m in world.net:
        if m.src in destroyed or m.dst in destroyed:
            return f"{m!r} in flight to or from a destroyed context"
    for w, ctx in world.contexts.items():
        for p in ctx.pending_owners:
            if p[2] in destroyed:
                return f"{w}: fetch {p} of destroyed {p[2]} still parked"
    return None


def quiescent(world: World) -> bool:
    """RRef.tla ``Quiescent``: nothing in flight, nothing held, no destructor pending."""
    if world.net:
        return False
    for ctx in world.contexts.values():
        if ctx.held or ctx.owner_held:
            return False
        if any(f not in ctx.deleted and not ctx.referenced(f) for f in ctx.users):
            return False
    return True


def leak_free_quiescence(world: World) -> str | None:
    """R9 LeakFreeQuiescenceInv: at quiescence every context is empty."""
    if not quiescent(world):
        return None
    for w, ctx in world.contexts.items():
        if not ctx.is_empty():
            return f"{w} leaks: {_leftovers(ctx)}"
    return None


def _leftovers(ctx: RRefContext) -> str:
    names = ("owners", "forks", "pending_owners", "pending_users", "pending_children")
    parts = [f"{n}={sorted(getattr(ctx, n))}" for n in names if getattr(ctx, n)]
    if ctx.confirmed_users:
        parts.append(f"confirmed_users={sorted(ctx.confirmed_users)}")
    return ", ".join(parts)


#: Spec invariant name -> runtime predicate (None = holds, else what is wrong).
INVARIANTS: dict[str, Callable[[World], str | None]] = {
    "NoPrematureDeleteInv": no_premature_delete,
    "NoFetchAfterDeleteInv": no_fetch_after_delete,
    "ParentHeldInv": parent_held,
    "SafeDeleteInv": safe_delete,
    "AtMostOneDeleteR4": at_most_one_delete,
    "DisjointMapsInv": disjoint_maps,
    "UniqueIdsInv": unique_ids,
    "NoForkResurrectionInv": no_fork_resurrection,
    "ForkTreeInv": fork_tree,
    "LeakFreeQuiescenceInv": leak_free_quiescence,
    "SelfRemoteOwnerInv": self_remote_owner,
    "ShutdownOrderInv": shutdown_order,
}


def check(world: World, *, seed: int | None = None) -> None:
    """Raise :class:`InvariantViolationError` for the first invariant that does not hold."""
    for name, predicate in INVARIANTS.items():
        problem = predicate(world)
        if problem is not None:
            raise InvariantViolationError(name, problem, seed=seed)


def check_leak_free(world: World, *, seed: int | None = None) -> None:
    """At the end of a run: the system must be quiescent and leak-free (R9)."""
    if not quiescent(world):
        raise LeakError("LeakFreeQuiescenceInv", "run ended without reaching quiescence", seed=seed)
    problem = leak_free_quiescence(world)
    if problem is not None:
        raise LeakError("LeakFreeQuiescenceInv", problem, seed=seed)
