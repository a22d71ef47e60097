"""The RRef trace events: one model per RRef.tla action, their union, and :func:`make_event`,
which builds an event from the acting node's pre- and post-state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

from pydantic import Field, TypeAdapter

from protoref.ids import WorkerId
from protoref.rref.core.events import Message
from protoref.rref.core.state import RRefContext
from protoref.rref.trace import args as a
from protoref.rref.trace import post as p
from protoref.rref.trace.args import ActionArgs
from protoref.rref.trace.post import _Post
from protoref.tracing import SetDelta, TraceEventBase, delta_model, trusted

__all__ = [
    "ACTION_ARGS",
    "DELTAS",
    "EVENT_ADAPTER",
    "EVENT_MODELS",
    "HISTORY",
    "SHAPES",
    "RRefTraceEvent",
    "added",
    "delta",
    "make_event",
    "new_keys",
]


def _absent(value: object) -> bool:
    return value is None


class ReceiveEvent(TraceEventBase):
    """An event of a step that takes a message from the network (the handlers): since trace
    schema 4 it names the message's send, ``sent_by`` = the sender and its Lamport clock at
    the send, so the checker can hold the clocks to causality (``--merge`` orders by them).
    Absent (not written) when the producer does not know it."""

    sent_by: tuple[str, int] | None = Field(default=None, exclude_if=_absent)


class CreateLocalRRef(TraceEventBase):
    event: Literal["CreateLocalRRef"] = "CreateLocalRRef"
    args: a.CreateLocalRRefArgs
    post: p.CreateLocalRRefPost


class Remote(TraceEventBase):
    event: Literal["Remote"] = "Remote"
    args: a.RemoteArgs
    post: p.RemotePost


class PrepareChildFork(TraceEventBase):
    event: Literal["PrepareChildFork"] = "PrepareChildFork"
    args: a.PrepareChildForkArgs
    post: p.PrepareChildForkPost


class ToHere(TraceEventBase):
    event: Literal["ToHere"] = "ToHere"
    args: a.ToHereArgs
    post: p.ToHerePost


class DropRRef(TraceEventBase):
    event: Literal["DropRRef"] = "DropRRef"
    args: a.DropRRefArgs
    post: p.DropRRefPost


class DropOwnerRRef(TraceEventBase):
    event: Literal["DropOwnerRRef"] = "DropOwnerRRef"
    args: a.DropOwnerRRefArgs
    post: p.DropOwnerRRefPost


class RetrySend(TraceEventBase):
    event: Literal["RetrySend"] = "RetrySend"
    args: a.RetrySendArgs
    post: p.NoPost


class LoseFirstAttempt(TraceEventBase):
    event: Literal["LoseFirstAttempt"] = "LoseFirstAttempt"
    args: a.LoseFirstAttemptArgs
    post: p.NoPost


class TimeOutRemote(TraceEventBase):
    event: Literal["TimeOutRemote"] = "TimeOutRemote"
    args: a.TimeOutRemoteArgs
    post: p.TimeOutRemotePost


class DelUser(TraceEventBase):
    event: Literal["DelUser"] = "DelUser"
    args: a.DelUserArgs
    post: p.DelUserPost


class AssignOwnerRRef(ReceiveEvent):
    event: Literal["AssignOwnerRRef"] = "AssignOwnerRRef"
    args: a.AssignOwnerRRefArgs
    post: p.AssignOwnerRRefPost


class ConfirmPendingUser(ReceiveEvent):
    event: Literal["ConfirmPendingUser"] = "ConfirmPendingUser"
    args: a.ConfirmPendingUserArgs
    post: p.ConfirmPendingUserPost


class FinishCreatingOwnerRRef(ReceiveEvent):
    event: Literal["FinishCreatingOwnerRRef"] = "FinishCreatingOwnerRRef"
    args: a.FinishCreatingOwnerRRefArgs
    post: p.FinishCreatingOwnerRRefPost


class RetrieveOwnerRRef(ReceiveEvent):
    event: Literal["RetrieveOwnerRRef"] = "RetrieveOwnerRRef"
    args: a.RetrieveOwnerRRefArgs
    post: p.RetrieveOwnerRRefPost


class ReceiveFetchRet(ReceiveEvent):
    event: Literal["ReceiveFetchRet"] = "ReceiveFetchRet"
    args: a.ReceiveFetchRetArgs
    post: p.ReceiveFetchRetPost


class GetOrCreateRRef(ReceiveEvent):
    event: Literal["GetOrCreateRRef"] = "GetOrCreateRRef"
    args: a.GetOrCreateRRefArgs
    post: p.GetOrCreateRRefPost


class AddForkOfOwnerIfNotPresent(ReceiveEvent):
    event: Literal["AddForkOfOwnerIfNotPresent"] = "AddForkOfOwnerIfNotPresent"
    args: a.AddForkOfOwnerIfNotPresentArgs
    post: p.AddForkOfOwnerIfNotPresentPost


class FinishForkRequest(ReceiveEvent):
    event: Literal["FinishForkRequest"] = "FinishForkRequest"
    args: a.FinishForkRequestArgs
    post: p.FinishForkRequestPost


class DelPendingChild(ReceiveEvent):
    event: Literal["DelPendingChild"] = "DelPendingChild"
    args: a.DelPendingChildArgs
    post: p.DelPendingChildPost


class DelForkOfOwner(ReceiveEvent):
    event: Literal["DelForkOfOwner"] = "DelForkOfOwner"
    args: a.DelForkOfOwnerArgs
    post: p.DelForkOfOwnerPost


class WaitAllWorkers(TraceEventBase):
    event: Literal["WaitAllWorkers"] = "WaitAllWorkers"
    args: a.WaitAllWorkersArgs
    post: p.WaitAllWorkersPost


class DelAllUsersAndUnforkedOwners(TraceEventBase):
    event: Literal["DelAllUsersAndUnforkedOwners"] = "DelAllUsersAndUnforkedOwners"
    args: a.DelAllUsersAndUnforkedOwnersArgs
    post: p.DelAllUsersAndUnforkedOwnersPost


class DestroyInstance(TraceEventBase):
    event: Literal["DestroyInstance"] = "DestroyInstance"
    args: a.DestroyInstanceArgs
    post: p.DestroyInstancePost


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
SHAPES: Final = {name: _shape(cls) for name, cls in EVENT_MODELS.items()}


#: Post fields holding what a step added to a variable that only grows -> that variable's
#: RRefContext attribute.
HISTORY: Final = {
    "users_added": "users",
    "fetched_added": "fetched",
    "deleted_added": "deleted",
    "timed_out_added": "timed_out",
    "tombstones_added": "tombstones",
}


def new_keys(now: Any, then: Any) -> Any:
    """The keys (``users``, a mapping by ForkId) or elements a history variable gained
    between two values of it: the one rule both renderings below follow."""
    return now.keys() - then.keys() if isinstance(now, Mapping) else now - then


#: Post fields logged as a delta (every per-node set that is not history) -> the SetDelta
#: model of their elements; each is also the RRefContext attribute of its variable.
DELTAS: Final[dict[str, type[SetDelta[Any]]]] = {
    name: model
    for _cls, post, names in SHAPES.values()
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
    new = new_keys(now, then)
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
    sent_by: tuple[str, int] | None = None,
) -> Any:
    """The trace event of ``args``'s action, with ``ctx`` (the acting node's post-state),
    ``before`` (its pre-state, for what the step added to history variables and changed in the
    other sets: every action but the three that log no set leaves a delta) and, for a message
    handler, the ``delivered`` message.

    Built without validation (:func:`protoref.tracing.trusted`): the values come from the core
    and are already well typed; the round-trip tests validate every emitted line through
    :data:`EVENT_ADAPTER` and compare it with the record built here.
    """
    cls, post_cls, names = SHAPES[args.action]
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
    event: dict[str, Any] = {
        "kind": "event",
        "event": args.action,
        "node": node,
        "seq": seq,
        "lamport": lamport,
    }
    if issubclass(cls, ReceiveEvent):  # (trusted wants every field, in field order)
        event["sent_by"] = sent_by
    event |= {"args": args, "post": trusted(post_cls, values)}
    return trusted(cls, event)
