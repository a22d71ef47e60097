"""Trace events of the RRef protocol: one model per RRef.tla action, one discriminated union.

Each event is ``{"kind": "event", "event": <action>, "node", "seq", "lamport", "args", "post"}``.
``args`` holds the action's parameters under their TLA+ names (``w``, ``dst``, ``r``, ``f``,
``c``, ``parent``, ``m``). ``post`` holds the acting node's post-state of every spec variable the
action may touch (``net`` excepted: the messages follow from the action and its arguments; the
history variables ``removedForks``/``erasedOwners`` are not protocol state). For the spec's
global sets about UserRRefs (``users``, ``held``, ``fetching``, ``fetched``, ``deleted``,
``timedOut``) ``post`` holds the part about UserRRefs living on the acting node, i.e.
``{f \\in held' : UserOn(node, f) # {}}``.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final, Literal, TypeAlias

from pydantic import ConfigDict, Field, TypeAdapter
from pydantic.alias_generators import to_camel

from protoref.ids import GloballyUniqueId, WorkerId
from protoref.rref.events import Message
from protoref.rref.state import Pair, Parked, RRefContext, UserRRef
from protoref.tracing import FrozenModel, TlaSet, TraceEventBase

Gid: TypeAlias = GloballyUniqueId

__all__ = [
    "ACTION_ARGS",
    "EVENT_ADAPTER",
    "EVENT_MODELS",
    "ActionArgs",
    "RRefTraceEvent",
    "make_event",
]


# --------------------------------------------------------------------------- args


class ActionArgs(FrozenModel):
    """Parameters of one TLA+ action; ``action`` is its name (the trace ``event``)."""

    action: ClassVar[str]


class CreateLocalRRefArgs(ActionArgs):
    action: ClassVar[str] = "CreateLocalRRef"
    w: WorkerId


class RemoteArgs(ActionArgs):
    action: ClassVar[str] = "Remote"
    w: WorkerId
    dst: WorkerId


class PrepareChildForkArgs(ActionArgs):
    action: ClassVar[str] = "PrepareChildFork"
    w: WorkerId
    dst: WorkerId
    r: Gid
    parent: Gid


class _WF(ActionArgs):
    w: WorkerId
    f: Gid


class _WR(ActionArgs):
    w: WorkerId
    r: Gid


class _WRF(ActionArgs):
    w: WorkerId
    r: Gid
    f: Gid


class _WRC(ActionArgs):
    w: WorkerId
    r: Gid
    c: Gid


class ToHereArgs(_WF):
    action: ClassVar[str] = "ToHere"


class DropRRefArgs(_WF):
    action: ClassVar[str] = "DropRRef"


class DropOwnerRRefArgs(_WR):
    action: ClassVar[str] = "DropOwnerRRef"


class RetrySendArgs(ActionArgs):
    action: ClassVar[str] = "RetrySend"
    m: Message


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


class DelAllUsersAndUnforkedOwnersArgs(ActionArgs):
    action: ClassVar[str] = "DelAllUsersAndUnforkedOwners"
    w: WorkerId


class DestroyInstanceArgs(ActionArgs):
    action: ClassVar[str] = "DestroyInstance"
    w: WorkerId


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
    owners: TlaSet[Gid]


class _PendingOwners(_Post):
    pending_owners: TlaSet[Parked]


class _Forks(_Post):
    forks: TlaSet[Pair]


class _PendingUsers(_Post):
    pending_users: TlaSet[Gid]


class _ConfirmedUsers(_Post):
    confirmed_users: TlaSet[Gid]


class _PendingChildren(_Post):
    pending_children: TlaSet[Pair]


class _OwnerHeld(_Post):
    owner_held: TlaSet[Gid]


class _SelfCalls(_Post):
    self_calls: TlaSet[Gid]


class _Tombstones(_Post):
    tombstones: TlaSet[Pair]


class _Users(_Post):
    users: TlaSet[UserRRef]


class _Held(_Post):
    held: TlaSet[Gid]


class _Fetching(_Post):
    fetching: TlaSet[Gid]


class _Fetched(_Post):
    fetched: TlaSet[Gid]


class _Deleted(_Post):
    deleted: TlaSet[Gid]


class _TimedOut(_Post):
    timed_out: TlaSet[Gid]


class _Phase(_Post):
    phase: Literal["running", "swept", "destroyed"]


class _Stopping(_Post):
    stopping: bool


class _Delivered(_Post):
    """The message the step took from the network (RRef.tla ``net \\ net'``). Logging it pins
    down which copy of a retried message a handler consumed: with both copies in flight the spec
    may take either, and without this field trace validation branches on every such choice."""

    delivered: TlaSet[Message]


class NoPost(_Post):
    """RetrySend changes only ``net``."""


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


def _post_values(post: type[_Post], ctx: RRefContext, delivered: Message | None) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in post.model_fields:
        if name == "delivered":
            if delivered is None:
                raise ValueError(f"{post.__name__} logs the delivered message; none was given")
            values[name] = frozenset({delivered})
        else:
            values[name] = ctx.user_records() if name == "users" else getattr(ctx, name)
    return values


def make_event(
    args: ActionArgs,
    node: WorkerId,
    seq: int,
    lamport: int,
    ctx: RRefContext,
    *,
    delivered: Message | None = None,
) -> Any:
    """The trace event of ``args``'s action, with ``ctx`` (the acting node's post-state) and,
    for a message handler, the ``delivered`` message.

    Built with ``model_construct``: the values come from the core and are already well typed;
    the round-trip tests validate every emitted line through :data:`EVENT_ADAPTER`.
    """
    cls = EVENT_MODELS[args.action]
    post_cls: type[_Post] = cls.model_fields["post"].annotation  # type: ignore[assignment]
    post = post_cls.model_construct(**_post_values(post_cls, ctx, delivered))
    fields: dict[str, Any] = {
        "node": node,
        "seq": seq,
        "lamport": lamport,
        "args": args,
        "post": post,
    }
    return cls.model_construct(**fields)
