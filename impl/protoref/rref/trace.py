"""Trace events of the RRef protocol: one model per RRef.tla action, one discriminated union.

Each event is ``{"kind": "event", "event": <action>, "node", "seq", "lamport", "args", "post"}``.
``args`` holds the action's parameters under their TLA+ names (``w``, ``dst``, ``r``, ``f``,
``c``, ``parent``, ``m``). ``post`` holds the acting node's post-state of every spec variable the
action may touch (``net`` excepted: the messages follow from the action and its arguments; the
history variables ``removedForks``/``erasedOwners`` are not protocol state). For the spec's
global sets about UserRRefs (``held``, ``fetching``) ``post`` holds the part about UserRRefs
living on the acting node, i.e. ``{f \\in held' : UserOn(node, f) # {}}``.

Five variables only grow (RRef.tla ``HistoryGrowsProp``, model-checked): ``users``,
``fetched``, ``deleted``, ``timedOut`` and the owner's ``tombstones``. For them ``post`` holds
what the step added, under ``<variable>Added`` (``usersAdded``: the UserRRef records the step
created). Every step that grows one of them logs it, so the whole value is the union of what the
events logged; written out whole, those slices made a trace's size quadratic in its length
(schema version 2; version 1 logged them whole).

Every other set of ``post`` (``owners``, ``pendingOwners``, ``forks``, ``pendingUsers``,
``confirmedUsers``, ``pendingChildren``, ``ownerHeld``, ``selfCalls``, ``held``, ``fetching``:
each a per-node set) is logged as a delta, ``{"#add": [...], "#del": [...]}``
(:class:`protoref.tracing.SetDelta`): what the node's slice gained and lost since the node last
logged that variable (since the empty set, before its first event that logs it). Every step that
changes a slice logs it (``post`` holds every variable the action may touch), so that is also
the change from the step's pre-state, which is how :func:`make_event` computes it. The sets grow
along a trace and were logged again at every event of the node, about 31 elements per event of
which about one was new: as deltas a trace's size is linear in its length, a checker no longer
diffs whole sets to find what changed (about half of its Python time per event), and a tracer no
longer re-joins every set's JSON at each step (schema version 3). A reader takes a whole
``{"#set": [...]}`` there too, as the node's new value: the models accept both forms.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Final, Literal, Self, TypeAlias, TypeVar

from pydantic import BeforeValidator, ConfigDict, Field, TypeAdapter, WrapSerializer
from pydantic.alias_generators import to_camel

from protoref.ids import GloballyUniqueId, WorkerId
from protoref.rref.events import Message, MessageBase
from protoref.rref.state import Pair, Parked, RRefContext, UserRRef
from protoref.tracing import (
    DELTA,
    DELTA_OR_WHOLE,
    WHOLE,
    FrozenModel,
    SetDelta,
    TraceEventBase,
    delta_model,
    sort_key,
    tla_set_in,
    trusted,
)

Gid: TypeAlias = GloballyUniqueId
T = TypeVar("T")

__all__ = [
    "ACTION_ARGS",
    "EVENT_ADAPTER",
    "EVENT_MODELS",
    "ActionArgs",
    "EventEncoder",
    "RRefTraceEvent",
    "make_event",
]


# --------------------------------------------------------------------------- args


class ActionArgs(FrozenModel):
    """Parameters of one TLA+ action; ``action`` is its name (the trace ``event``).

    The core builds them with the unvalidated, statically typed ``of`` factories
    (:func:`protoref.tracing.trusted`); validated construction is for parsed traces and tests.
    """

    action: ClassVar[str]


class _W(ActionArgs):
    w: WorkerId

    @classmethod
    def of(cls, w: WorkerId) -> Self:
        return trusted(cls, {"w": w})


class CreateLocalRRefArgs(_W):
    action: ClassVar[str] = "CreateLocalRRef"


class RemoteArgs(ActionArgs):
    action: ClassVar[str] = "Remote"
    w: WorkerId
    dst: WorkerId

    @classmethod
    def of(cls, w: WorkerId, dst: WorkerId) -> Self:
        return trusted(cls, {"w": w, "dst": dst})


class PrepareChildForkArgs(ActionArgs):
    action: ClassVar[str] = "PrepareChildFork"
    w: WorkerId
    dst: WorkerId
    r: Gid
    parent: Gid

    @classmethod
    def of(cls, w: WorkerId, dst: WorkerId, r: Gid, parent: Gid) -> Self:
        return trusted(cls, {"w": w, "dst": dst, "r": r, "parent": parent})


class _WF(ActionArgs):
    w: WorkerId
    f: Gid

    @classmethod
    def of(cls, w: WorkerId, f: Gid) -> Self:
        return trusted(cls, {"w": w, "f": f})


class _WR(ActionArgs):
    w: WorkerId
    r: Gid

    @classmethod
    def of(cls, w: WorkerId, r: Gid) -> Self:
        return trusted(cls, {"w": w, "r": r})


class _WRF(ActionArgs):
    w: WorkerId
    r: Gid
    f: Gid

    @classmethod
    def of(cls, w: WorkerId, r: Gid, f: Gid) -> Self:
        return trusted(cls, {"w": w, "r": r, "f": f})


class _WRC(ActionArgs):
    w: WorkerId
    r: Gid
    c: Gid

    @classmethod
    def of(cls, w: WorkerId, r: Gid, c: Gid) -> Self:
        return trusted(cls, {"w": w, "r": r, "c": c})


class ToHereArgs(_WF):
    action: ClassVar[str] = "ToHere"


class DropRRefArgs(_WF):
    action: ClassVar[str] = "DropRRef"


class DropOwnerRRefArgs(_WR):
    action: ClassVar[str] = "DropOwnerRRef"


class _M(ActionArgs):
    """The network's steps on one message ``m``."""

    m: Message

    @classmethod
    def of(cls, m: Message) -> Self:
        return trusted(cls, {"m": m})


class RetrySendArgs(_M):
    action: ClassVar[str] = "RetrySend"


class LoseFirstAttemptArgs(_M):
    action: ClassVar[str] = "LoseFirstAttempt"


class TimeOutRemoteArgs(_WRF):
    action: ClassVar[str] = "TimeOutRemote"


class DelUserArgs(_WF):
    action: ClassVar[str] = "DelUser"


class AssignOwnerRRefArgs(_WRF):
    action: ClassVar[str] = "AssignOwnerRRef"


class ConfirmPendingUserArgs(_WRF):
    action: ClassVar[str] = "ConfirmPendingUser"


class FinishCreatingOwnerRRefArgs(_WR):
    action: ClassVar[str] = "FinishCreatingOwnerRRef"


class RetrieveOwnerRRefArgs(_WRF):
    action: ClassVar[str] = "RetrieveOwnerRRef"


class ReceiveFetchRetArgs(_WRF):
    action: ClassVar[str] = "ReceiveFetchRet"


class GetOrCreateRRefArgs(_WRC):
    action: ClassVar[str] = "GetOrCreateRRef"


class AddForkOfOwnerIfNotPresentArgs(_WRC):
    action: ClassVar[str] = "AddForkOfOwnerIfNotPresent"


class FinishForkRequestArgs(_WRC):
    action: ClassVar[str] = "FinishForkRequest"


class DelPendingChildArgs(_WRC):
    action: ClassVar[str] = "DelPendingChild"


class DelForkOfOwnerArgs(_WRF):
    action: ClassVar[str] = "DelForkOfOwner"


class WaitAllWorkersArgs(ActionArgs):
    """The barrier has no parameter; it is logged by the header's environment actor."""

    action: ClassVar[str] = "WaitAllWorkers"

    @classmethod
    def of(cls) -> Self:
        return trusted(cls, {})


class DelAllUsersAndUnforkedOwnersArgs(_W):
    action: ClassVar[str] = "DelAllUsersAndUnforkedOwners"


class DestroyInstanceArgs(_W):
    action: ClassVar[str] = "DestroyInstance"


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


class _Post(FrozenModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


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


# --------------------------------------------------------------------------- events


class CreateLocalRRef(TraceEventBase):
    event: Literal["CreateLocalRRef"] = "CreateLocalRRef"
    args: CreateLocalRRefArgs
    post: CreateLocalRRefPost


class Remote(TraceEventBase):
    event: Literal["Remote"] = "Remote"
    args: RemoteArgs
    post: RemotePost


class PrepareChildFork(TraceEventBase):
    event: Literal["PrepareChildFork"] = "PrepareChildFork"
    args: PrepareChildForkArgs
    post: PrepareChildForkPost


class ToHere(TraceEventBase):
    event: Literal["ToHere"] = "ToHere"
    args: ToHereArgs
    post: ToHerePost


class DropRRef(TraceEventBase):
    event: Literal["DropRRef"] = "DropRRef"
    args: DropRRefArgs
    post: DropRRefPost


class DropOwnerRRef(TraceEventBase):
    event: Literal["DropOwnerRRef"] = "DropOwnerRRef"
    args: DropOwnerRRefArgs
    post: DropOwnerRRefPost


class RetrySend(TraceEventBase):
    event: Literal["RetrySend"] = "RetrySend"
    args: RetrySendArgs
    post: NoPost


class LoseFirstAttempt(TraceEventBase):
    event: Literal["LoseFirstAttempt"] = "LoseFirstAttempt"
    args: LoseFirstAttemptArgs
    post: NoPost


class TimeOutRemote(TraceEventBase):
    event: Literal["TimeOutRemote"] = "TimeOutRemote"
    args: TimeOutRemoteArgs
    post: TimeOutRemotePost


class DelUser(TraceEventBase):
    event: Literal["DelUser"] = "DelUser"
    args: DelUserArgs
    post: DelUserPost


class AssignOwnerRRef(TraceEventBase):
    event: Literal["AssignOwnerRRef"] = "AssignOwnerRRef"
    args: AssignOwnerRRefArgs
    post: AssignOwnerRRefPost


class ConfirmPendingUser(TraceEventBase):
    event: Literal["ConfirmPendingUser"] = "ConfirmPendingUser"
    args: ConfirmPendingUserArgs
    post: ConfirmPendingUserPost


class FinishCreatingOwnerRRef(TraceEventBase):
    event: Literal["FinishCreatingOwnerRRef"] = "FinishCreatingOwnerRRef"
    args: FinishCreatingOwnerRRefArgs
    post: FinishCreatingOwnerRRefPost


class RetrieveOwnerRRef(TraceEventBase):
    event: Literal["RetrieveOwnerRRef"] = "RetrieveOwnerRRef"
    args: RetrieveOwnerRRefArgs
    post: RetrieveOwnerRRefPost


class ReceiveFetchRet(TraceEventBase):
    event: Literal["ReceiveFetchRet"] = "ReceiveFetchRet"
    args: ReceiveFetchRetArgs
    post: ReceiveFetchRetPost


class GetOrCreateRRef(TraceEventBase):
    event: Literal["GetOrCreateRRef"] = "GetOrCreateRRef"
    args: GetOrCreateRRefArgs
    post: GetOrCreateRRefPost


class AddForkOfOwnerIfNotPresent(TraceEventBase):
    event: Literal["AddForkOfOwnerIfNotPresent"] = "AddForkOfOwnerIfNotPresent"
    args: AddForkOfOwnerIfNotPresentArgs
    post: AddForkOfOwnerIfNotPresentPost


class FinishForkRequest(TraceEventBase):
    event: Literal["FinishForkRequest"] = "FinishForkRequest"
    args: FinishForkRequestArgs
    post: FinishForkRequestPost


class DelPendingChild(TraceEventBase):
    event: Literal["DelPendingChild"] = "DelPendingChild"
    args: DelPendingChildArgs
    post: DelPendingChildPost


class DelForkOfOwner(TraceEventBase):
    event: Literal["DelForkOfOwner"] = "DelForkOfOwner"
    args: DelForkOfOwnerArgs
    post: DelForkOfOwnerPost


class WaitAllWorkers(TraceEventBase):
    event: Literal["WaitAllWorkers"] = "WaitAllWorkers"
    args: WaitAllWorkersArgs
    post: WaitAllWorkersPost


class DelAllUsersAndUnforkedOwners(TraceEventBase):
    event: Literal["DelAllUsersAndUnforkedOwners"] = "DelAllUsersAndUnforkedOwners"
    args: DelAllUsersAndUnforkedOwnersArgs
    post: DelAllUsersAndUnforkedOwnersPost


class DestroyInstance(TraceEventBase):
    event: Literal["DestroyInstance"] = "DestroyInstance"
    args: DestroyInstanceArgs
    post: DestroyInstancePost


_EVENTS: Final[tuple[type[TraceEventBase], ...]] = (
    CreateLocalRRef,
    Remote,
    PrepareChildFork,
    ToHere,
    DropRRef,
    DropOwnerRRef,
    RetrySend,
    LoseFirstAttempt,
    TimeOutRemote,
    DelUser,
    AssignOwnerRRef,
    ConfirmPendingUser,
    FinishCreatingOwnerRRef,
    RetrieveOwnerRRef,
    ReceiveFetchRet,
    GetOrCreateRRef,
    AddForkOfOwnerIfNotPresent,
    FinishForkRequest,
    DelPendingChild,
    DelForkOfOwner,
    WaitAllWorkers,
    DelAllUsersAndUnforkedOwners,
    DestroyInstance,
)

RRefTraceEvent = Annotated[
    CreateLocalRRef
    | Remote
    | PrepareChildFork
    | ToHere
    | DropRRef
    | DropOwnerRRef
    | RetrySend
    | LoseFirstAttempt
    | TimeOutRemote
    | DelUser
    | AssignOwnerRRef
    | ConfirmPendingUser
    | FinishCreatingOwnerRRef
    | RetrieveOwnerRRef
    | ReceiveFetchRet
    | GetOrCreateRRef
    | AddForkOfOwnerIfNotPresent
    | FinishForkRequest
    | DelPendingChild
    | DelForkOfOwner
    | WaitAllWorkers
    | DelAllUsersAndUnforkedOwners
    | DestroyInstance,
    Field(discriminator="event"),
]
#: Parses one event line (``EVENT_ADAPTER.validate_json(line)``).
EVENT_ADAPTER: Final[TypeAdapter[RRefTraceEvent]] = TypeAdapter(RRefTraceEvent)

#: Event name -> event model: the trace schema's action names.
EVENT_MODELS: Final[dict[str, type[TraceEventBase]]] = {
    str(cls.model_fields["event"].default): cls for cls in _EVENTS
}
#: Event name -> its args model.
ACTION_ARGS: Final[dict[str, type[ActionArgs]]] = {
    name: cls.model_fields["args"].annotation  # type: ignore[misc]
    for name, cls in EVENT_MODELS.items()
}


def _shape(cls: type[TraceEventBase]) -> tuple[type[TraceEventBase], type[_Post], tuple[str, ...]]:
    post: type[_Post] = cls.model_fields["post"].annotation  # type: ignore[assignment]
    return cls, post, tuple(post.model_fields)


#: Event name -> (event model, its post model, the post model's field names in order).
_SHAPES: Final = {name: _shape(cls) for name, cls in EVENT_MODELS.items()}


#: Post fields holding what a step added to a variable that only grows -> that variable's
#: RRefContext attribute.
HISTORY: Final = {
    "users_added": "users",
    "fetched_added": "fetched",
    "deleted_added": "deleted",
    "timed_out_added": "timed_out",
    "tombstones_added": "tombstones",
}


def _new(now: Any, then: Any) -> Any:
    """The keys (``users``, a mapping by ForkId) or elements a history variable gained
    between two values of it: the one rule both renderings below follow."""
    return now.keys() - then.keys() if isinstance(now, Mapping) else now - then


#: Post fields logged as a delta (every per-node set that is not history) -> the SetDelta
#: model of their elements; each is also the RRefContext attribute of its variable.
DELTAS: Final[dict[str, type[SetDelta[Any]]]] = {
    name: model
    for _cls, post, names in _SHAPES.values()
    for name in names
    if (model := delta_model(post.model_fields[name].annotation)) is not None
}
#: SetDelta model -> its unchanged delta (both sides empty), shared.
_UNCHANGED: Final = {model: model.of(frozenset(), frozenset()) for model in DELTAS.values()}


def delta(name: str, before: RRefContext, ctx: RRefContext) -> SetDelta[Any]:
    """What the step from ``before`` to ``ctx`` changed in the per-node set ``name``: the change
    since the node last logged it, as every step that changes the set logs it."""
    now, then = getattr(ctx, name), getattr(before, name)
    model = DELTAS[name]
    return _UNCHANGED[model] if now is then else model.between(then, now)


def added(name: str, before: RRefContext, ctx: RRefContext) -> frozenset[Any]:
    """What the step from ``before`` to ``ctx`` added to the history variable ``name``
    (an RRefContext attribute): new UserRRef records, or new set elements."""
    now, then = getattr(ctx, name), getattr(before, name)
    if now is then:
        return frozenset()
    new = _new(now, then)
    return frozenset(now[f] for f in new) if name == "users" else frozenset(new)


def make_event(
    args: ActionArgs,
    node: WorkerId,
    seq: int,
    lamport: int,
    ctx: RRefContext,
    *,
    delivered: Message | None = None,
    before: RRefContext | None = None,
) -> Any:
    """The trace event of ``args``'s action, with ``ctx`` (the acting node's post-state),
    ``before`` (its pre-state, for what the step added to history variables and changed in the
    other sets: every action but the three that log no set leaves a delta) and, for a message
    handler, the ``delivered`` message.

    Built without validation (:func:`protoref.tracing.trusted`): the values come from the core
    and are already well typed; the round-trip tests validate every emitted line through
    :data:`EVENT_ADAPTER` and compare it with the record built here.
    """
    cls, post_cls, names = _SHAPES[args.action]
    values: dict[str, Any] = {}
    for name in names:
        if name == "delivered":
            if delivered is None:
                raise ValueError(f"{post_cls.__name__} logs the delivered message; none was given")
            values[name] = frozenset({delivered})
        elif name in HISTORY:
            if before is None:
                raise ValueError(f"{post_cls.__name__} logs {name}; no pre-state was given")
            values[name] = added(HISTORY[name], before, ctx)
        elif name in DELTAS:
            if before is None:
                message = f"{post_cls.__name__} logs {name} as a delta; no pre-state was given"
                raise ValueError(message)
            values[name] = delta(name, before, ctx)
        else:
            values[name] = getattr(ctx, name)
    event = {
        "kind": "event",
        "event": args.action,
        "node": node,
        "seq": seq,
        "lamport": lamport,
        "args": args,
        "post": trusted(post_cls, values),
    }
    return trusted(cls, event)


# --------------------------------------------------------------------------- direct JSON
# The fast path of tracing: an event's JSON line written straight from the core's values, the
# same bytes as ``encode_line(make_event(...))`` (pydantic's compact JSON: fields in model
# order, no spaces, non-ASCII as is), without building the models. Sets keep the contract's
# order (see "set encodings" above). Tests compare the two renderings on every event of many
# runs, and the golden traces regenerate unchanged. A delta is computed here from the value the
# encoder last wrote for the node and variable (the contract's definition), there from the step's
# pre-state: the two agree because every step that changes a node's set logs it.

#: A JSON string literal as pydantic writes it (UTF-8 as is, the same escapes).
_json_str: Final = json.JSONEncoder(ensure_ascii=False).encode
_EMPTY_SET: Final = '{"#set":[]}'
_UNCHANGED_JSON: Final = '{"#add":[],"#del":[]}'
_NOTHING: Final[frozenset[Any]] = frozenset()
# How a field is written: a per-node set as a delta; what a step added to a history variable
# (the UserRRef records, or a set); the delivered message; a string, an id or a tuple (cached);
# a number; a bool; an argument that is a message.
_DELTA, _USERS_ADDED, _ADDED, _DELIVERED, _ATOM, _INT, _BOOL, _MESSAGE = range(8)
_POST_KINDS: Final = {
    **dict.fromkeys(HISTORY, _ADDED),
    "users_added": _USERS_ADDED,
    "delivered": _DELIVERED,
    "phase": _ATOM,
    "next_id": _INT,
    "stopping": _BOOL,
}
_ARG_KINDS: Final = {"m": _MESSAGE}
Layout: TypeAlias = tuple[tuple[str, str, int], ...]


def _post_layout(post_cls: type[_Post]) -> Layout:
    """(field name, its JSON key and colon, kind) for every field of a post model, in order."""
    return tuple(
        (name, _json_str(info.alias or name) + ":", _POST_KINDS.get(name, _DELTA))
        for name, info in post_cls.model_fields.items()
    )


def _args_layout(args_cls: type[ActionArgs]) -> Layout:
    return tuple(
        (name, _json_str(name) + ":", _ARG_KINDS.get(name, _ATOM)) for name in args_cls.model_fields
    )


#: Entries the process-wide atom cache (:data:`_ATOMS`) holds before it starts over. The bench
#: workload (100 runs of 200 steps) writes 2,643 distinct atoms; a longer run's ids go past
#: any bound, and the cache's memory must not grow with them.
_ATOM_LIMIT: Final = 1 << 14


class _Atoms(dict[Any, str]):
    """The JSON of strings, ids and tuples of those (id pairs, parked fetches), computed on
    first use: ``atoms[value]`` is one dictionary lookup once the value was seen.

    One per process (:data:`_ATOMS`), shared by every encoder: an atom's JSON is a function of
    its value alone, and the same worker names and ids recur in every run. Bounded: once it
    holds ``limit`` entries it is emptied and fills again. Keys compare by equality, which is
    sound because an atom holds only strings and ints (``True == 1`` would merge a bool with an
    int: numbers and bools are never cached, see :func:`_plain`). Threads may share it: a
    lookup and an insertion are single dictionary operations, and two threads computing the same
    missing atom store the same text.
    """

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __missing__(self, value: str | tuple[Any, ...]) -> str:
        if len(self) >= self.limit:
            self.clear()
        if isinstance(value, str):
            text = _json_str(value)
        elif type(value) is GloballyUniqueId:  # the common case: (worker, int)
            text = f"[{self[value[0]]},{value[1]:d}]"
        else:
            text = (
                "[" + ",".join([_plain(v) if isinstance(v, int) else self[v] for v in value]) + "]"
            )
        self[value] = text
        return text


_ATOMS: Final = _Atoms(_ATOM_LIMIT)


# One node's slots: per-node set variable -> the value the encoder last wrote for it (the empty
# set before the first). Contexts share the sets a step does not change, so most deltas of an
# event are found unchanged by identity.
_Slots: TypeAlias = dict[str, frozenset[Any]]
# One encoder's UserRRef records: ForkId -> (the record, its JSON). By ForkId and identity, not
# by value: a frozen model hashes its fields in Python, and a record is written once or twice.
_Records: TypeAlias = dict[Gid, tuple[UserRRef, str]]


def _source(name: str, args_layout: Layout, post_layout: Layout) -> str:
    """Python source of ``make(A, delta, grown, grown_users, message)``, which returns the
    function that renders one action's events: one f-string holding every field of the line, a
    set that did not change since the node's slot written as the constant unchanged delta."""
    lines = ["def encode(a, node, seq, lamport, d, delivered, S, b, R):"]
    if any(kind == _DELIVERED for _, _, kind in post_layout):
        lines.append("    if delivered is None:")
        message = f"{name} logs the delivered message; none was given"
        lines.append(f"        raise ValueError({message!r})")
    if any(kind in (_ADDED, _USERS_ADDED, _DELTA) for _, _, kind in post_layout):
        # (a delta is computed from the slot, but the event's contract, make_event's, needs it)
        lines.append("    if b is None:")
        message = f"{name} logs what it changed in a set; no pre-state was given"
        lines.append(f"        raise ValueError({message!r})")
    arg_parts = []
    for field, key, kind in args_layout:
        value = f'message(a["{field}"])' if kind == _MESSAGE else f'A[a["{field}"]]'
        arg_parts.append(_lit(key) + "{" + value + "}")
    post_parts = []
    for i, (field, key, kind) in enumerate(post_layout):
        if kind == _DELTA:
            lines.append(f'    v{i} = d["{field}"]')
            value = f'(U if S["{field}"] is v{i} else delta(S, "{field}", v{i}))'
        elif kind in (_ADDED, _USERS_ADDED):
            attr = HISTORY[field]
            lines.append(f'    v{i} = d["{attr}"]; w{i} = b["{attr}"]')
            grow = f"grown_users(R, v{i}, w{i})" if kind == _USERS_ADDED else f"grown(v{i}, w{i})"
            value = f"(E if v{i} is w{i} else {grow})"
        elif kind == _DELIVERED:
            value = "'{\"#set\":[' + message(delivered) + ']}'"
        elif kind == _ATOM:
            value = f'A[d["{field}"]]'
        elif kind == _INT:
            value = f'd["{field}"]!s'
        else:
            value = f'("true" if d["{field}"] else "false")'
        post_parts.append(_lit(key) + "{" + value + "}")
    prefix = '{"kind":"event","event":' + _json_str(name) + ',"node":'
    body = (
        _lit(prefix)
        + '{A[node]},"seq":{seq!s},"lamport":{lamport!s},"args":{{'
        + ",".join(arg_parts)
        + '}},"post":{{'
        + ",".join(post_parts)
        + "}}}}"
    )
    lines.append(f"    return f'''{body}'''")
    inner = "".join(f"    {line}\n" for line in lines)
    constants = f"E={_EMPTY_SET!r}, U={_UNCHANGED_JSON!r}"
    return (
        f"def make(A, delta, grown, grown_users, message, {constants}):\n{inner}    return encode\n"
    )


def _lit(text: str) -> str:
    """``text`` as the literal part of a generated f-string (delimited by three quotes ')."""
    if "\\" in text or "'" in text:
        raise ValueError(f"unexpected character in a trace key: {text!r}")
    return text.replace("{", "{{").replace("}", "}}")


Encode: TypeAlias = Callable[..., str]


def _compile(name: str, args_layout: Layout, post_layout: Layout) -> Callable[..., Encode]:
    namespace: dict[str, Any] = {}
    # The source is generated above from the event models' field names, nothing from outside.
    code = compile(_source(name, args_layout, post_layout), f"<trace encoder {name}>", "exec")
    exec(code, namespace)
    make: Callable[..., Encode] = namespace["make"]
    return make


def _delta(slots: _Slots, field: str, value: frozenset[Any]) -> str:
    """A set whose object changed since this node last logged it: what it gained and lost
    since, each side sorted (the contract's order) and written from the atoms' cache. A step
    usually adds or removes one element (33,752 of the 37,872 set objects the bench workload's
    steps changed; 4,068 more were equal to the last): when the size moved by one and one set
    difference finds one element, the other side is empty and needs no second difference."""
    last = slots[field]
    slots[field] = value
    size = len(value) - len(last)
    if size == 1:
        gained = value - last
        if len(gained) == 1:
            for x in gained:
                return '{"#add":[' + _ATOMS[x] + '],"#del":[]}'
    elif size == -1:
        lost = last - value
        if len(lost) == 1:
            for x in lost:
                return '{"#add":[],"#del":[' + _ATOMS[x] + "]}"
    elif value == last:
        return _UNCHANGED_JSON
    return _changed(value - last, last - value)


def _changed(gained: frozenset[Any], lost: frozenset[Any]) -> str:
    """Any other change: both sides, each sorted."""
    atom = _ATOMS.__getitem__
    add = ",".join(map(atom, sorted(gained))) if gained else ""
    delete = ",".join(map(atom, sorted(lost))) if lost else ""
    return '{"#add":[' + add + '],"#del":[' + delete + "]}"


def _grown(now: frozenset[Any], then: frozenset[Any]) -> str:
    """What a step added to a history set, when its object changed: usually one element (then
    nothing to sort or join)."""
    new = now - then
    if len(new) == 1:
        for x in new:
            return '{"#set":[' + _ATOMS[x] + "]}"
    return '{"#set":[' + ",".join(map(_ATOMS.__getitem__, sorted(new))) + "]}"


def _grown_users(
    records: _Records, now: Mapping[Gid, UserRRef], then: Mapping[Gid, UserRRef]
) -> str:
    """The UserRRef records a step created (``users`` is a mapping by ForkId), when its object
    changed, in ForkId order."""
    new = _new(now, then)
    if len(new) == 1:
        for f in new:
            return '{"#set":[' + _record(records, now[f]) + "]}"
    return '{"#set":[' + ",".join([_record(records, now[f]) for f in sorted(new)]) + "]}"


def _record(records: _Records, u: UserRRef) -> str:
    known = records.get(u.fork)
    if known is not None and known[0] is u:
        return known[1]
    a = _ATOMS
    parent = "[]" if u.parent is None else a[u.parent]
    text = (
        f'{{"fork":{a[u.fork]},"rref":{a[u.rref]},"owner":{a[u.owner]},'
        f'"on":{a[u.on]},"parent":{parent}}}'
    )
    records[u.fork] = (u, text)
    return text


def _message(m: MessageBase) -> str:
    v = m.__dict__
    a = _ATOMS
    parent = "[]" if v["parent"] is None else a[v["parent"]]
    return (
        f'{{"type":{a[v["type"]]},"src":{a[v["src"]]},"dst":{a[v["dst"]]},'
        f'"rref":{a[v["rref"]]},"owner":{a[v["owner"]]},"fork":{a[v["fork"]]},'
        f'"parent":{parent},"dup":{v["dup"]!s}}}'
    )


#: Args model -> the function rendering its events. Made once per process and shared by every
#: encoder (the per-trace state, the slots and the records, is passed in): made per encoder,
#: each run's 22 closures with their cells and bound methods (about 240 objects) lived as long
#: as the run, and the garbage collector traced them over and over. Tracing's share of the
#: collector's time on the bench (gen-1 collections 0.55 -> 0.30 us per event) and the
#: closures' creation went with them (tracing on 16.5 -> 16.1 us per event, with a list sink).
_RENDERERS: Final[dict[type[ActionArgs], Encode]] = {
    ACTION_ARGS[name]: _compile(name, _args_layout(ACTION_ARGS[name]), _post_layout(post_cls))(
        _ATOMS, _delta, _grown, _grown_users, _message
    )
    for name, (_cls, post_cls, _names) in _SHAPES.items()
}


class EventEncoder:
    """Renders RRef trace events as JSON lines, straight from the acting node's context.

    ``line(args, node, seq, lamport, ctx, delivered, before)`` is ``encode_line(make_event(args,
    node, seq, lamport, ctx, delivered=..., before=...))`` without building the models. Each
    action has a function generated from its event model's layout (one f-string, no loop over
    fields), shared by all encoders, as is the JSON of every string, id and tuple written
    (:class:`_Atoms`). One encoder per trace: it keeps, per node and per-node set variable, the
    last value it wrote a delta to (the value the node logged last, which the next delta is
    relative to), and the JSON of the UserRRef records it has written.
    """

    def __init__(self) -> None:
        self._records: _Records = {}
        self._slots: dict[str, _Slots] = {}

    def line(  # noqa: PLR0917 - positional: the simulator calls it for every event
        self,
        args: ActionArgs,
        node: WorkerId,
        seq: int,
        lamport: int,
        ctx: RRefContext,
        delivered: Message | None = None,
        before: RRefContext | None = None,
    ) -> str:
        """The event's JSON line (no newline). ``delivered`` and ``before`` (the pre-state, for
        the history variables; required wherever :func:`make_event` requires it) may be passed
        by position (the simulator does: a keyword argument costs a little more on every
        event)."""
        slots = self._slots.get(node)
        if slots is None:
            slots = self._slots[node] = dict.fromkeys(DELTAS, _NOTHING)
        return _RENDERERS[type(args)](
            args.__dict__,
            node,
            seq,
            lamport,
            ctx.__dict__,
            delivered,
            slots,
            None if before is None else before.__dict__,
            self._records,
        )


def _plain(value: int | bool) -> str:
    """A number or a bool (never cached: ``True == 1``)."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)
