"""Trace events of distributed autograd: one model per DistAutograd.tla action, one union.

Each event is ``{"kind": "event", "event": <action>, "node", "seq", "lamport", "args", "post"}``.
``node`` is the acting worker's rank as a string (the header's ``nodes``; the spec's workers are
naturals, a trace's nodes are strings). ``args`` holds the action's parameters under their TLA+
names (:mod:`protoref.autograd.trace.args`). ``post`` holds the acting worker's post-state of every
spec variable the action may touch, under the spec's names: the counters ``nextCtx`` and ``nextMsg``
and ``alive`` whole; ``cur`` (the worker's function from threads to their current context) as the
set of ``<<t, c>>`` of the threads that have one; every per-worker set (``ctxs``, ``known``,
``sends``, ``recvs``, ``handlers`` (those on the worker), ``pending``, ``detached``, ``tomb``,
``execd``, ``fired``, ``grads``, ``bstate``, ``outst``, ``awaiting``, ``parent``, ``echoWait``) and
``cur`` as a delta, ``{"#add": [...], "#del": [...]}``: what the worker's slice gained and lost
since it last logged that variable (trace schema 3, as the RRef traces do), except ``sends`` and
``handlers``, whose records hold sets, logged whole (:data:`WHOLE_FIELDS`). ``net`` and the
histories ``released``, ``late``, ``results`` and ``freed`` are not logged: the parameters pin every
step down, so the checker computes them. Steps that change only those (``RetryCleanup``,
``Discard``, ``RetrieveContext``, ``NewContextRefused``) log nothing in ``post``; ``RetryCleanup``
is logged by the message's sender, ``Discard`` by the agent that disposes of it.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal, TypeAlias, TypeVar, Union

from pydantic import BeforeValidator, Field, TypeAdapter, WrapSerializer, create_model

from protoref.autograd.core.ids import AutogradId
from protoref.autograd.core.state import Container, Handler, RecvFn, SendFn
from protoref.autograd.trace import args as a
from protoref.tracing import (
    DELTA,
    DELTA_OR_WHOLE,
    WHOLE,
    PostModel,
    SetDelta,
    TraceEventBase,
    delta_model,
    sort_key,
    tla_set_in,
    trusted,
)

__all__ = [
    "EVENT_ADAPTER",
    "EVENT_MODELS",
    "POST_FIELDS",
    "AutogradTraceEvent",
    "make_event",
]

Id: TypeAlias = AutogradId
T = TypeVar("T")


def _whole_out(value: Any, handler: Any) -> Any:
    items = handler(value)
    return {"#set": items if len(items) < 2 else sorted(items, key=sort_key)}


#: A whole set, ``{"#set": [...]}`` (elements in the contract's order).
Whole = Annotated[
    frozenset[T], BeforeValidator(tla_set_in), WrapSerializer(_whole_out, when_used="json")
]

# One alias per element type (pydantic substitutes no generic alias through another).
IdDelta: TypeAlias = Annotated[
    Annotated[SetDelta[Id], DELTA] | Annotated[Whole[Id], WHOLE], DELTA_OR_WHOLE
]
IdWorkerDelta: TypeAlias = Annotated[
    Annotated[SetDelta[tuple[Id, int]], DELTA] | Annotated[Whole[tuple[Id, int]], WHOLE],
    DELTA_OR_WHOLE,
]
IdIdDelta: TypeAlias = Annotated[
    Annotated[SetDelta[tuple[Id, Id]], DELTA] | Annotated[Whole[tuple[Id, Id]], WHOLE],
    DELTA_OR_WHOLE,
]
TaskRec: TypeAlias = tuple[Id, int, Literal["run", "err", "done", "fail"]]
StateDelta: TypeAlias = Annotated[
    Annotated[SetDelta[TaskRec], DELTA] | Annotated[Whole[TaskRec], WHOLE],
    DELTA_OR_WHOLE,
]
GradDelta: TypeAlias = Annotated[
    Annotated[SetDelta[tuple[Id, int, Id]], DELTA] | Annotated[Whole[tuple[Id, int, Id]], WHOLE],
    DELTA_OR_WHOLE,
]
ThreadDelta: TypeAlias = Annotated[
    Annotated[SetDelta[tuple[int, Id]], DELTA] | Annotated[Whole[tuple[int, Id]], WHOLE],
    DELTA_OR_WHOLE,
]
AwaitDelta: TypeAlias = Annotated[
    Annotated[SetDelta[tuple[Id, int, Id]], DELTA] | Annotated[Whole[tuple[Id, int, Id]], WHOLE],
    DELTA_OR_WHOLE,
]
SendDelta: TypeAlias = Annotated[
    Annotated[SetDelta[SendFn], DELTA] | Annotated[Whole[SendFn], WHOLE], DELTA_OR_WHOLE
]
RecvDelta: TypeAlias = Annotated[
    Annotated[SetDelta[RecvFn], DELTA] | Annotated[Whole[RecvFn], WHOLE], DELTA_OR_WHOLE
]
HandlerDelta: TypeAlias = Annotated[
    Annotated[SetDelta[Handler], DELTA] | Annotated[Whole[Handler], WHOLE], DELTA_OR_WHOLE
]


class _Post(PostModel):
    """A post-state, logged under the spec's variable names."""


class NoPost(_Post):
    """A step that changes no per-worker variable (``net`` or a history only)."""


class NewContextPost(_Post):
    next_ctx: int
    ctxs: IdDelta
    cur: ThreadDelta


class SendMessageWithAutogradPost(_Post):
    next_msg: int
    sends: SendDelta
    known: IdWorkerDelta
    pending: IdIdDelta


class NestedSendMessageWithAutogradPost(_Post):
    next_msg: int
    sends: SendDelta
    known: IdWorkerDelta
    handlers: HandlerDelta
    detached: IdIdDelta


class _Task(_Post):
    """What a graph task's start or end may change (besides ``bstate``)."""

    execd: IdIdDelta
    fired: IdIdDelta
    bstate: StateDelta
    outst: IdIdDelta
    awaiting: AwaitDelta
    parent: IdWorkerDelta
    echo_wait: IdWorkerDelta


class _Erase(_Task):
    """What ``EraseCtx(w, c)`` may change."""

    ctxs: IdDelta
    known: IdWorkerDelta
    sends: SendDelta
    recvs: RecvDelta
    grads: GradDelta
    tomb: IdDelta


class ReleaseContextPost(_Erase):
    cur: ThreadDelta


class ProcessCleanupAutogradContextReqPost(_Erase): ...


class ReleaseOrphanedContextPost(_Erase): ...


class DistEngineExecutePost(_Task):
    grads: GradDelta


class ProcessBackwardAutogradReqPost(_Task):
    grads: GradDelta


class CrashPost(_Task):
    alive: bool
    ctxs: IdDelta
    cur: ThreadDelta
    known: IdWorkerDelta
    sends: SendDelta
    recvs: RecvDelta
    pending: IdIdDelta
    detached: IdIdDelta
    handlers: HandlerDelta
    grads: GradDelta


class HandlersPost(_Post):
    """A step of a running UDF that changes only its handler (FetchStoredValue, UdfRaises)."""

    handlers: HandlerDelta


class ProcessForwardAutogradReqPost(_Post):
    ctxs: IdDelta
    recvs: RecvDelta
    handlers: HandlerDelta


class FinishForwardAutogradReqPost(_Post):
    handlers: HandlerDelta
    next_msg: int
    sends: SendDelta
    known: IdWorkerDelta


class DeserializeForwardAutogradRespPost(_Post):
    ctxs: IdDelta
    recvs: RecvDelta
    pending: IdIdDelta
    detached: IdIdDelta
    handlers: HandlerDelta


class _Futures(_Post):
    pending: IdIdDelta
    detached: IdIdDelta
    handlers: HandlerDelta


class DeserializeResponsePost(_Futures): ...


class PollTimeoutRpcsPost(_Futures): ...


class RecvRpcBackwardApplyPost(_Post):
    fired: IdIdDelta
    outst: IdIdDelta


class _Fail(_Post):
    outst: IdIdDelta
    bstate: StateDelta
    awaiting: AwaitDelta


class ProcessBackwardAutogradRespPost(_Fail): ...


class BackwardErrorPost(_Fail): ...


class CleanupBackwardPassPost(_Post):
    bstate: StateDelta
    awaiting: AwaitDelta


class ProcessBackwardStartPost(_Post):
    execd: IdIdDelta
    fired: IdIdDelta
    bstate: StateDelta
    parent: IdWorkerDelta
    echo_wait: IdWorkerDelta


class ProcessBackwardAckPost(_Post):
    bstate: StateDelta
    echo_wait: IdWorkerDelta


_POSTS: Final[dict[str, type[_Post]]] = {
    "NewContext": NewContextPost,
    "SendMessageWithAutograd": SendMessageWithAutogradPost,
    "NestedSendMessageWithAutograd": NestedSendMessageWithAutogradPost,
    "ReleaseContext": ReleaseContextPost,
    "DistEngineExecute": DistEngineExecutePost,
    "RetrieveContext": NoPost,
    "FetchStoredValue": HandlersPost,
    "UdfRaises": HandlersPost,
    "RetryCleanup": NoPost,
    "LoseCleanupMsg": NoPost,
    "Crash": CrashPost,
    "PeerDied": NoPost,
    "BackwardError": BackwardErrorPost,
    "ProcessForwardAutogradReq": ProcessForwardAutogradReqPost,
    "FinishForwardAutogradReq": FinishForwardAutogradReqPost,
    "DeserializeForwardAutogradResp": DeserializeForwardAutogradRespPost,
    "DeserializeResponse": DeserializeResponsePost,
    "PollTimeoutRpcs": PollTimeoutRpcsPost,
    "ProcessCleanupAutogradContextReq": ProcessCleanupAutogradContextReqPost,
    "ReleaseOrphanedContext": ReleaseOrphanedContextPost,
    "Discard": NoPost,
    "RecvRpcBackwardApply": RecvRpcBackwardApplyPost,
    "ProcessBackwardAutogradReq": ProcessBackwardAutogradReqPost,
    "ProcessBackwardAutogradResp": ProcessBackwardAutogradRespPost,
    "CleanupBackwardPass": CleanupBackwardPassPost,
    "ProcessBackwardStart": ProcessBackwardStartPost,
    "ProcessBackwardAck": ProcessBackwardAckPost,
    "NewContextRefused": NoPost,
    # not a spec action: a shape the spec leaves out on purpose (the mapping's ``outside``)
    "UnawaitedRpcAsync": NoPost,
}


def _event_model(args_cls: type[a.ActionArgs]) -> type[TraceEventBase]:
    name = args_cls.action
    fields: dict[str, Any] = {
        "event": (Literal[name], name),
        "args": (args_cls, ...),
        "post": (_POSTS[name], ...),
    }
    model: type[TraceEventBase] = create_model(name, __base__=TraceEventBase, **fields)
    return model


#: Every event's args model: one per spec action, and the marker of a shape left out.
_EVENT_ARGS: Final[tuple[type[a.ActionArgs], ...]] = (*a.ARGS_MODELS, a.UnawaitedRpcAsyncArgs)
#: Event name -> event model (one per spec action, and the marker).
EVENT_MODELS: Final[dict[str, type[TraceEventBase]]] = {
    m.action: _event_model(m) for m in _EVENT_ARGS
}
#: The discriminated union of every event (built from the models: one per action).
AutogradTraceEvent: Any = Annotated[
    Union[tuple(EVENT_MODELS.values())],  # noqa: UP007 - built from the models
    Field(discriminator="event"),
]
#: Parses one event line (``EVENT_ADAPTER.validate_json(line)``).
EVENT_ADAPTER: Final[TypeAdapter[Any]] = TypeAdapter(AutogradTraceEvent)

#: Event name -> its post fields (Python names), in order.
POST_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    name: tuple(post.model_fields) for name, post in _POSTS.items()
}
#: Per-worker sets logged whole: their elements hold sets (a send function's ``in``, a
#: handler's ``nr``), and the checker matches a delta's elements by their text, which a nested
#: set's order would make ambiguous; a worker holds a few of them at a time (those of its
#: live contexts), so a whole set costs little.
WHOLE_FIELDS: Final = frozenset({"sends", "handlers"})
#: Post field -> the SetDelta model of its elements (every per-worker set).
_DELTAS: Final[dict[str, type[SetDelta[Any]]]] = {
    name: model
    for post in _POSTS.values()
    for name, info in post.model_fields.items()
    if (model := delta_model(info.annotation)) is not None
}


def _value(ctn: Container, name: str) -> Any:
    if name == "cur":
        return ctn.cur_pairs()
    return getattr(ctn, name)


def make_event(  # noqa: PLR0917 - the simulator's and the runtime's one call per step
    args: a.ActionArgs, node: str, seq: int, lamport: int, ctn: Container, before: Container
) -> TraceEventBase:
    """The event of ``args``'s action by ``node``, its post-state read off ``ctn`` and every
    per-worker set logged as its change from ``before`` (the worker's pre-state, which is the
    value it logged last: every step that changes a set logs it)."""
    name = args.action
    values: dict[str, Any] = {}
    for field in POST_FIELDS[name]:
        now = _value(ctn, field)
        model = _DELTAS.get(field)
        if model is None or field in WHOLE_FIELDS:
            values[field] = now
        else:
            then = _value(before, field)
            values[field] = model.of(now - then, then - now)
    event = {
        "kind": "event",
        "event": name,
        "node": node,
        "seq": seq,
        "lamport": lamport,
        "args": args,
        "post": trusted(_POSTS[name], values),
    }
    return trusted(EVENT_MODELS[name], event)
