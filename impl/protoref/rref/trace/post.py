"""A trace event's ``post``: the acting node's post-state of the variables its action touches,
with the set encodings the trace contract asks for (whole sets, deltas, history growth)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeAlias, TypeVar

from pydantic import BeforeValidator, WrapSerializer

from protoref.ids import GloballyUniqueId
from protoref.rref.core.events import Message
from protoref.rref.core.state import Pair, Parked, UserRRef
from protoref.tracing import (
    DELTA,
    DELTA_OR_WHOLE,
    WHOLE,
    PostModel,
    SetDelta,
    sort_key,
    tla_set_in,
)

__all__ = [
    "AddForkOfOwnerIfNotPresentPost",
    "AssignOwnerRRefPost",
    "ConfirmPendingUserPost",
    "CreateLocalRRefPost",
    "DelAllUsersAndUnforkedOwnersPost",
    "DelForkOfOwnerPost",
    "DelPendingChildPost",
    "DelUserPost",
    "DestroyInstancePost",
    "DropOwnerRRefPost",
    "DropRRefPost",
    "FinishCreatingOwnerRRefPost",
    "FinishForkRequestPost",
    "GetOrCreateRRefPost",
    "GidDelta",
    "IdSet",
    "MessageSet",
    "NoPost",
    "PairDelta",
    "ParkedDelta",
    "PrepareChildForkPost",
    "ReceiveFetchRetPost",
    "RemotePost",
    "RetrieveOwnerRRefPost",
    "TimeOutRemotePost",
    "ToHerePost",
    "UserSet",
    "WaitAllWorkersPost",
]

Gid: TypeAlias = GloballyUniqueId
T = TypeVar("T")


# --------------------------------------------------------------------------- set encodings
# The trace contract's TLA+ set, ``{"#set": [...]}`` with its elements in the order of
# protoref.tracing.sort_key. The generic ``TlaSet`` computes that type-tagged key recursively for
# every element, which made it most of the cost of tracing. The post-state sets hold elements of
# one shape (ids, id pairs, parked fetches: JSON lists of strings and ints at fixed positions;
# UserRRef records: dicts with a unique ``fork``), for which Python's own order on the JSON
# values is the same order; tests/rref/test_trace.py checks the two orders agree. A delta's
# lists (SetDelta) are short, mostly one element or none: they are sorted by sort_key itself,
# and the direct encoder below sorts the Python tuples (the same order again).


def _ids_out(value: Any, handler: Callable[[Any], Any]) -> Any:
    return {"#set": sorted(handler(value))}


def _by_fork(record: dict[str, Any]) -> Any:
    return record["fork"]


def _users_out(value: Any, handler: Callable[[Any], Any]) -> Any:
    return {"#set": sorted(handler(value), key=_by_fork)}


def _messages_out(value: Any, handler: Callable[[Any], Any]) -> Any:
    items = handler(value)
    return {"#set": items if len(items) < 2 else sorted(items, key=sort_key)}


#: A set of messages (``delivered`` holds one: nothing to order).
MessageSet = Annotated[
    frozenset[Message], BeforeValidator(tla_set_in), WrapSerializer(_messages_out, when_used="json")
]
#: A set of ids, id pairs or parked fetches (elements of one tuple shape).
IdSet = Annotated[
    frozenset[T], BeforeValidator(tla_set_in), WrapSerializer(_ids_out, when_used="json")
]
#: A set of UserRRef records (ordered by their unique ForkId).
UserSet = Annotated[
    frozenset[UserRRef], BeforeValidator(tla_set_in), WrapSerializer(_users_out, when_used="json")
]
#: A per-node set logged as a delta (``{"#add": [...], "#del": [...]}``, what the node's slice
#: gained and lost since the node last logged it) or whole (``{"#set": [...]}``, the new slice),
#: one alias per element type: pydantic's generic models are not substituted through a generic
#: alias.
GidDelta: TypeAlias = Annotated[
    Annotated[SetDelta[Gid], DELTA] | Annotated[IdSet[Gid], WHOLE], DELTA_OR_WHOLE
]
PairDelta: TypeAlias = Annotated[
    Annotated[SetDelta[Pair], DELTA] | Annotated[IdSet[Pair], WHOLE], DELTA_OR_WHOLE
]
ParkedDelta: TypeAlias = Annotated[
    Annotated[SetDelta[Parked], DELTA] | Annotated[IdSet[Parked], WHOLE], DELTA_OR_WHOLE
]


# --------------------------------------------------------------------------- post-states
# One mixin per spec variable; a post model is the union of the variables its action touches.
# Python field names are RRefContext attribute names; JSON keys are the TLA+ variable names.


class _Post(PostModel):
    """A post-state, logged under the spec's variable names."""


class _NextId(_Post):
    next_id: int


class _Owners(_Post):
    owners: GidDelta


class _PendingOwners(_Post):
    pending_owners: ParkedDelta


class _Forks(_Post):
    forks: PairDelta


class _PendingUsers(_Post):
    pending_users: GidDelta


class _ConfirmedUsers(_Post):
    confirmed_users: GidDelta


class _PendingChildren(_Post):
    pending_children: PairDelta


class _OwnerHeld(_Post):
    owner_held: GidDelta


class _SelfCalls(_Post):
    self_calls: GidDelta


class _Tombstones(_Post):
    tombstones_added: IdSet[Pair]


class _Users(_Post):
    users_added: UserSet


class _Held(_Post):
    held: GidDelta


class _Fetching(_Post):
    fetching: GidDelta


class _Fetched(_Post):
    fetched_added: IdSet[Gid]


class _Deleted(_Post):
    deleted_added: IdSet[Gid]


class _TimedOut(_Post):
    timed_out_added: IdSet[Gid]


class _Phase(_Post):
    phase: Literal["running", "swept", "destroyed"]


class _Stopping(_Post):
    stopping: bool


class _Delivered(_Post):
    """The message the step took from the network (RRef.tla ``net \\ net'``). Logging it pins
    down which copy of a retried message a handler consumed: with both copies in flight the spec
    may take either, and without this field trace validation branches on every such choice."""

    delivered: MessageSet


class NoPost(_Post):
    """RetrySend and LoseFirstAttempt change only ``net``."""


class CreateLocalRRefPost(_OwnerHeld, _NextId): ...


class RemotePost(
    _Held, _Users, _PendingUsers, _SelfCalls, _OwnerHeld, _Forks, _Owners, _NextId
): ...


class PrepareChildForkPost(_PendingChildren, _Owners, _Forks, _NextId): ...


class ToHerePost(_Fetched, _Fetching): ...


class DropRRefPost(_Held): ...


class DropOwnerRRefPost(_OwnerHeld): ...


class TimeOutRemotePost(_Owners, _Forks, _SelfCalls, _TimedOut, _ConfirmedUsers, _PendingUsers): ...


class DelUserPost(_ConfirmedUsers, _Deleted): ...


class AssignOwnerRRefPost(_Delivered, _PendingOwners, _Forks, _Owners): ...


class ConfirmPendingUserPost(_Delivered, _ConfirmedUsers, _PendingUsers): ...


class FinishCreatingOwnerRRefPost(_Delivered, _Owners, _Forks, _SelfCalls): ...


class RetrieveOwnerRRefPost(_Delivered, _PendingOwners): ...


class ReceiveFetchRetPost(_Delivered, _Fetching): ...


class GetOrCreateRRefPost(
    _Delivered, _ConfirmedUsers, _PendingUsers, _Held, _Users, _PendingOwners, _Owners
): ...


class AddForkOfOwnerIfNotPresentPost(_Delivered, _Forks): ...


class FinishForkRequestPost(_Delivered, _ConfirmedUsers, _PendingUsers): ...


class DelPendingChildPost(_Delivered, _PendingChildren): ...


class DelForkOfOwnerPost(_Delivered, _Tombstones, _Owners, _Forks): ...


class WaitAllWorkersPost(_Stopping): ...


class DelAllUsersAndUnforkedOwnersPost(_Phase, _Owners, _ConfirmedUsers, _Deleted): ...


class DestroyInstancePost(_PendingOwners, _Phase): ...
