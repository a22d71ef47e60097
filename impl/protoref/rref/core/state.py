"""The per-worker RRefContext of the Reference protocol (RRef.tla's variables at one worker).

Per-worker spec variables (``nextId``, ``owners``, ``pendingOwners``, ``forks``, ``pendingUsers``,
``confirmedUsers``, ``pendingChildren``, ``ownerHeld``, ``selfCalls``, ``tombstones``) are fields
of :class:`RRefContext` under snake-case names. The spec's global sets about UserRRefs (``users``,
``held``, ``fetching``, ``fetched``, ``deleted``, ``timedOut``) are partitioned by the worker the
UserRRef lives on (``u.on``): ForkIds are globally unique, so the partition is exact and the
union over workers is the spec's value. ``net`` belongs to the driver; the history variables
``removedForks`` and ``erasedOwners`` are kept by the invariant checker, not by the protocol.

The context is immutable: a transition returns a new one, so an input that raises leaves the
state it was applied to untouched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Final, Literal, NamedTuple, Self, TypeAlias

from protoref.ids import GloballyUniqueId, WorkerId
from protoref.rref.core.events import Parent
from protoref.tracing import FrozenModel, trusted

__all__ = ["EMPTY_USERS", "Leak", "Pair", "Parked", "Phase", "RRefContext", "UserRRef"]

Gid: TypeAlias = GloballyUniqueId
Pair: TypeAlias = tuple[GloballyUniqueId, GloballyUniqueId]
#: ``<<rrefId, forkId of the fetching UserRRef, its worker>>``: one parked fetch.
Parked: TypeAlias = tuple[GloballyUniqueId, GloballyUniqueId, WorkerId]
#: RRef.tla ``phase[w]``: shutdown progress of one context.
Phase: TypeAlias = Literal["running", "swept", "destroyed"]


class UserRRef(FrozenModel):
    """RRef.tla's UserRRef record ``[fork, rref, owner, on, parent]`` (parent None = NoId)."""

    fork: Gid
    rref: Gid
    owner: WorkerId
    on: WorkerId
    parent: Parent = None

    @classmethod
    def of(cls, fork: Gid, rref: Gid, owner: WorkerId, on: WorkerId, parent: Gid | None) -> Self:
        """The record, built without validation (the core's values are statically typed)."""
        values = {"fork": fork, "rref": rref, "owner": owner, "on": on, "parent": parent}
        return trusted(cls, values)


class Leak(NamedTuple):
    """Something graceful shutdown found left behind, reported as PyTorch reports it.

    ``kind`` is one of: ``"held_user"`` (the sweep deleted a UserRRef the application still
    holds; later use of it raises "has been deleted"), ``"pending_user"``, ``"pending_child"``,
    ``"fetching_user"`` (a forced sweep gave up waiting for them: "Timed out waiting for pending
    UserRRefs to be confirmed by owner and parent"), ``"owner"`` (a forced destroy with OwnerRRefs
    whose forks were never deleted), ``"fork"`` (destroyInstance's leak check: "Leaking RRef r
    with fork Id f"), ``"parked_fetch"`` (a fetch dropped unanswered by destroyInstance),
    ``"user"`` (a UserRRef never deleted: the runtime's shutdown could not sweep, a worker died).
    """

    kind: str
    rref: Gid
    fork: Gid | None = None

    def __str__(self) -> str:
        if self.kind == "fork":
            return f"Leaking RRef {self.rref} with fork Id {self.fork}"
        fork = "" if self.fork is None else f" fork {self.fork}"
        return f"{self.kind}: RRef {self.rref}{fork}"


EMPTY_USERS: Final[Mapping[Gid, UserRRef]] = MappingProxyType({})


@dataclass(frozen=True)
class RRefContext:
    """RRefContext of worker ``me`` (note §1.3), as the Reference variant of RRef.tla has it."""

    me: WorkerId
    next_id: int = 1
    owners: frozenset[Gid] = frozenset()
    pending_owners: frozenset[Parked] = frozenset()
    forks: frozenset[Pair] = frozenset()
    pending_users: frozenset[Gid] = frozenset()
    confirmed_users: frozenset[Gid] = frozenset()
    pending_children: frozenset[Pair] = frozenset()  # <<child ForkId, parent ForkId>>
    owner_held: frozenset[Gid] = frozenset()
    self_calls: frozenset[Gid] = frozenset()
    tombstones: frozenset[Pair] = frozenset()
    # The UserRRefs living on this worker, by ForkId, and the facts the spec keeps about them.
    users: Mapping[Gid, UserRRef] = field(default_factory=lambda: EMPTY_USERS)
    held: frozenset[Gid] = frozenset()
    fetching: frozenset[Gid] = frozenset()
    fetched: frozenset[Gid] = frozenset()
    deleted: frozenset[Gid] = frozenset()
    timed_out: frozenset[Gid] = frozenset()
    # Shutdown: RRef.tla ``phase[w]``, and ``stopping`` as this worker has seen it (the barrier
    # is one global step; a driver sets it on every context at once, see wait_all_workers).
    phase: Phase = "running"
    stopping: bool = False

    def evolve(self, **changes: object) -> RRefContext:
        """A copy with ``changes`` applied: ``dataclasses.replace`` without re-running
        ``__init__`` (ten times faster; the simulator's hot path). Values come from the core's
        own transitions, so there is nothing to validate beyond the field names."""
        values = {**self.__dict__, **changes}
        # Every field is in __dict__, so an unknown name, and only that, adds an entry: one
        # length test instead of a subset test per transition.
        if len(values) != _NFIELDS:
            raise TypeError(f"RRefContext has no field(s) {sorted(changes.keys() - _FIELDS)}")
        new = _new(RRefContext)
        _set_attr(new, "__dict__", values)
        return new

    def app_can_act(self) -> bool:
        """RRef.tla ``AppCanAct(w)``: before the barrier and while the context is running."""
        return not self.stopping and self.phase == "running"

    def new_id(self, offset: int = 0) -> Gid:
        """The id ``<<me, nextId + offset>>`` (drawn by the transition that bumps ``next_id``)."""
        return GloballyUniqueId(self.me, self.next_id + offset)

    def referenced(self, f: Gid) -> bool:
        """RRef.tla ``Referenced(w, f)``: something holds the UserRRef strongly."""
        return (
            f in self.held
            or f in self.pending_users
            or any(parent == f for _, parent in self.pending_children)
            or f in self.fetching
        )

    def destructible(self) -> list[Gid]:
        """The UserRRefs whose destructor may run (``DelUser`` enabled), in ``users`` order:
        not deleted and not :meth:`referenced`. Set differences in C, not a call of
        :meth:`referenced` per UserRRef: the scheduler asks after most steps."""
        candidates = self.users.keys() - self.deleted  # one new set, then in place
        if candidates:
            candidates -= self.held
            candidates -= self.pending_users
            candidates -= self.fetching
            if candidates and self.pending_children:
                candidates -= {parent for _, parent in self.pending_children}
        if len(candidates) < 2:  # no order to restore (the usual case)
            return list(candidates)
        return [f for f in self.users if f in candidates]

    def has_fork_of(self, r: Gid) -> bool:
        """Some ``<<r, _>>`` is in forks_ (the OwnerRRef r is still needed)."""
        return any(e[0] == r for e in self.forks)

    def user_records(self) -> frozenset[UserRRef]:
        return frozenset(self.users.values())

    def is_empty(self) -> bool:
        """No OwnerRRef, fork, parked fetch, pending or confirmed user, or pending child."""
        return not (
            self.owners
            or self.forks
            or self.pending_owners
            or self.pending_users
            or self.pending_children
            or self.confirmed_users
        )


_FIELDS: Final = frozenset(f.name for f in fields(RRefContext))
_NFIELDS: Final = len(_FIELDS)
_new = object.__new__
_set_attr = object.__setattr__
