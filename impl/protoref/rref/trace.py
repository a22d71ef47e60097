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
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Final, Literal, Self, TypeAlias, TypeVar

from pydantic import BeforeValidator, ConfigDict, Field, TypeAdapter, WrapSerializer
from pydantic.alias_generators import to_camel

from protoref.ids import GloballyUniqueId, WorkerId
from protoref.rref.events import Message, MessageBase
from protoref.rref.state import Pair, Parked, RRefContext, UserRRef
from protoref.tracing import FrozenModel, TraceEventBase, sort_key, tla_set_in, trusted

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
# values is the same order; tests/rref/test_trace.py checks the two orders agree.


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
    owners: IdSet[Gid]


class _PendingOwners(_Post):
    pending_owners: IdSet[Parked]


class _Forks(_Post):
    forks: IdSet[Pair]


class _PendingUsers(_Post):
    pending_users: IdSet[Gid]


class _ConfirmedUsers(_Post):
    confirmed_users: IdSet[Gid]


class _PendingChildren(_Post):
    pending_children: IdSet[Pair]


class _OwnerHeld(_Post):
    owner_held: IdSet[Gid]


class _SelfCalls(_Post):
    self_calls: IdSet[Gid]


class _Tombstones(_Post):
    tombstones_added: IdSet[Pair]


class _Users(_Post):
    users_added: UserSet


class _Held(_Post):
    held: IdSet[Gid]


class _Fetching(_Post):
    fetching: IdSet[Gid]


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
    ``before`` (its pre-state, for what the step added to history variables) and, for a
    message handler, the ``delivered`` message.

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
# runs, and the golden traces regenerate unchanged.

#: A JSON string literal as pydantic writes it (UTF-8 as is, the same escapes).
_json_str: Final = json.JSONEncoder(ensure_ascii=False).encode
_EMPTY_SET: Final = '{"#set":[]}'
# How a field is written: a set of ids or tuples; what a step added to a history variable (the
# UserRRef records, or a set); the delivered message; a string, an id or a tuple (cached); a
# number; a bool; an argument that is a message.
_SET, _USERS_ADDED, _ADDED, _DELIVERED, _ATOM, _INT, _BOOL, _MESSAGE = range(8)
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
        (name, _json_str(info.alias or name) + ":", _POST_KINDS.get(name, _SET))
        for name, info in post_cls.model_fields.items()
    )


def _args_layout(args_cls: type[ActionArgs]) -> Layout:
    return tuple(
        (name, _json_str(name) + ":", _ARG_KINDS.get(name, _ATOM)) for name in args_cls.model_fields
    )


class _Atoms(dict[Any, str]):
    """The JSON of strings, ids and tuples of those (id pairs, parked fetches), computed on
    first use: ``atoms[value]`` is one dictionary lookup once the value was seen."""

    def __missing__(self, value: str | tuple[Any, ...]) -> str:
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


# One node's last rendering of each set variable: [the set, its JSON, its sorted elements, their
# JSON] (EventEncoder._render updates the two lists by the element a step added or removed).
# Contexts share the sets a step does not change, so
# most sets of an event are found by identity and not written again.
_Slot: TypeAlias = list[Any]
_NOT_YET: Final = object()


def _source(name: str, args_layout: Layout, post_layout: Layout) -> str:
    """Python source of ``make(A, render, grown, message)``, which returns the function that
    renders one action's events for one encoder: one f-string holding every field of the line,
    the sets read from the node's slots when they did not change."""
    lines = ["def encode(a, node, seq, lamport, d, delivered, S, b):"]
    if any(kind == _DELIVERED for _, _, kind in post_layout):
        lines.append("    if delivered is None:")
        message = f"{name} logs the delivered message; none was given"
        lines.append(f"        raise ValueError({message!r})")
    if any(kind in (_ADDED, _USERS_ADDED) for _, _, kind in post_layout):
        lines.append("    if b is None:")
        message = f"{name} logs what it added to a history variable; no pre-state was given"
        lines.append(f"        raise ValueError({message!r})")
    arg_parts = []
    for field, key, kind in args_layout:
        value = f'message(a["{field}"])' if kind == _MESSAGE else f'A[a["{field}"]]'
        arg_parts.append(_lit(key) + "{" + value + "}")
    post_parts = []
    for i, (field, key, kind) in enumerate(post_layout):
        if kind == _SET:
            lines.append(f'    v{i} = d["{field}"]; s{i} = S["{field}"]')
            value = f"(s{i}[1] if s{i}[0] is v{i} else render(s{i}, v{i}))"
        elif kind in (_ADDED, _USERS_ADDED):
            attr = HISTORY[field]
            lines.append(f'    v{i} = d["{attr}"]; w{i} = b["{attr}"]')
            users = "True" if kind == _USERS_ADDED else "False"
            value = f"(E if v{i} is w{i} else grown(v{i}, w{i}, {users}))"
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
    return f"def make(A, render, grown, message, E={_EMPTY_SET!r}):\n{inner}    return encode\n"


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


#: Args model -> (the maker of the function rendering its events, the set variables its
#: post-state logs).
_ENCODERS: Final = {
    ACTION_ARGS[name]: (
        _compile(name, _args_layout(ACTION_ARGS[name]), layout := _post_layout(post_cls)),
        tuple(f for f, _, kind in layout if kind == _SET),
    )
    for name, (_cls, post_cls, _names) in _SHAPES.items()
}
_SET_FIELDS: Final = frozenset(f for _, fields in _ENCODERS.values() for f in fields)


class _Renderers(dict[type[ActionArgs], Encode]):
    """Args model -> the function rendering its events for one encoder, made on first use."""

    def __init__(self, encoder: EventEncoder) -> None:
        super().__init__()
        self._encoder = encoder

    def __missing__(self, cls: type[ActionArgs]) -> Encode:
        make, _fields = _ENCODERS[cls]
        e = self._encoder
        render = self[cls] = make(e._atoms, e._render, e._grown, e._message)
        return render


class EventEncoder:
    """Renders RRef trace events as JSON lines, straight from the acting node's context.

    ``line(args, node, seq, lamport, ctx, delivered, before)`` is ``encode_line(make_event(args,
    node, seq, lamport, ctx, delivered=..., before=...))`` without building the models. Each
    action has a function generated from its event model's layout (one f-string, no loop over
    fields). One encoder per trace: it keeps the JSON of every string, id, tuple and UserRRef
    record it has written and, per node and variable, the last set it wrote with its JSON.
    """

    def __init__(self) -> None:
        self._atoms = _Atoms()
        self._records: dict[Gid, tuple[UserRRef, str]] = {}
        self._slots: dict[str, dict[str, _Slot]] = {}
        # Each action's renderer, bound to this encoder's caches, made when the action is first
        # logged (one encoder per trace, and a short run logs only some of the 22 actions).
        self._encoders = _Renderers(self)

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
        the history variables) may be passed by position (the simulator does: a keyword
        argument costs a little more on every event)."""
        slots = self._slots.get(node)
        if slots is None:
            slots = self._slots[node] = {f: [_NOT_YET, "", None, None] for f in _SET_FIELDS}
        return self._encoders[type(args)](
            args.__dict__,
            node,
            seq,
            lamport,
            ctx.__dict__,
            delivered,
            slots,
            None if before is None else before.__dict__,
        )

    def _grown(self, now: Any, then: Any, users: bool) -> str:
        """What a step added to a history variable (the UserRRef records by ForkId, or a set),
        when its object changed: usually one element."""
        new = sorted(_new(now, then))
        if users:
            record = self._record
            texts = [record(now[f]) for f in new]
        else:
            texts = list(map(self._atoms.__getitem__, new))
        return '{"#set":[' + ",".join(texts) + "]}"

    def _render(self, slot: _Slot, value: Any) -> str:
        """A set whose object changed since this node last logged this variable. A step adds
        or removes one element (38,403 of the 49,491 sets the bench workload rendered when
        the history variables were logged whole; 3,671 more were a new object equal to the
        last), so the slot keeps the last set's sorted elements and their JSON, and one
        element is inserted or deleted by bisection (in place: the lists belong to the slot)
        instead of sorting and encoding the whole set again; anything else is rendered from
        scratch."""
        last = slot[0]
        if not value:
            slot[0], slot[1], slot[2], slot[3] = value, _EMPTY_SET, [], []
            return _EMPTY_SET
        elements: list[Any] | None = slot[2]
        if elements is not None and last:
            n, m = len(value), len(last)
            texts: list[str] = slot[3]
            if n == m + 1:
                added = value - last
                if len(added) == 1:
                    (x,) = added
                    i = bisect_left(elements, x)
                    elements.insert(i, x)
                    texts.insert(i, self._atoms[x])
                    slot[0] = value
                    slot[1] = text = '{"#set":[' + ",".join(texts) + "]}"
                    return text
            elif n == m - 1:
                removed = last - value
                if len(removed) == 1:
                    (x,) = removed
                    i = bisect_left(elements, x)
                    del elements[i], texts[i]
                    slot[0] = value
                    slot[1] = text = '{"#set":[' + ",".join(texts) + "]}"
                    return text
            elif n == m and value == last:
                slot[0] = value
                same: str = slot[1]
                return same
        elements = sorted(value)
        texts = list(map(self._atoms.__getitem__, elements))
        slot[2], slot[3] = elements, texts
        return self._joined(slot, value, texts)

    @staticmethod
    def _joined(slot: _Slot, value: Any, texts: list[str]) -> str:
        text = '{"#set":[' + ",".join(texts) + "]}"
        slot[0], slot[1] = value, text
        return text

    def _record(self, u: UserRRef) -> str:
        known = self._records.get(u.fork)
        if known is not None and known[0] is u:
            return known[1]
        a = self._atoms
        parent = "[]" if u.parent is None else a[u.parent]
        text = (
            f'{{"fork":{a[u.fork]},"rref":{a[u.rref]},"owner":{a[u.owner]},'
            f'"on":{a[u.on]},"parent":{parent}}}'
        )
        self._records[u.fork] = (u, text)
        return text

    def _message(self, m: MessageBase) -> str:
        v = m.__dict__
        a = self._atoms
        parent = "[]" if v["parent"] is None else a[v["parent"]]
        return (
            f'{{"type":{a[v["type"]]},"src":{a[v["src"]]},"dst":{a[v["dst"]]},'
            f'"rref":{a[v["rref"]]},"owner":{a[v["owner"]]},"fork":{a[v["fork"]]},'
            f'"parent":{parent},"dup":{v["dup"]!s}}}'
        )


def _plain(value: int | bool) -> str:
    """A number or a bool (never cached: ``True == 1``)."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)
