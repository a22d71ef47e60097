"""The parameters of DistAutograd.tla's actions, as logged in a trace event's ``args``.

One model per action, named ``<Action>Args``; ``action`` is the action's name (the event's
``event``). Fields are the spec parameters under their TLA+ names (``w``, ``t``, ``dst``, ``grad``,
``h``, ``await``, ``retain``, ``msg``, ``m``, ``respGrad``, ``loss``, ``c``, ``r``), in the
spec's order (``await`` is ``await_`` in Python, a keyword). The core
builds them with the unvalidated ``of`` factories; parsed traces validate them.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final, Self

from pydantic import ConfigDict, Field

from protoref.autograd.core.events import Msg
from protoref.autograd.core.ids import AutogradId
from protoref.autograd.core.state import Handler, RecvFn
from protoref.tracing import FrozenModel, trusted

__all__ = [
    "ACTION_NAMES",
    "ActionArgs",
    "BackwardErrorArgs",
    "CleanupBackwardPassArgs",
    "CrashArgs",
    "DeserializeForwardAutogradRespArgs",
    "DeserializeResponseArgs",
    "DiscardArgs",
    "DistEngineExecuteArgs",
    "FetchStoredValueArgs",
    "FinishForwardAutogradReqArgs",
    "LoseCleanupMsgArgs",
    "NestedSendMessageWithAutogradArgs",
    "NewContextArgs",
    "NewContextRefusedArgs",
    "PeerDiedArgs",
    "PollTimeoutRpcsArgs",
    "ProcessBackwardAckArgs",
    "ProcessBackwardAutogradReqArgs",
    "ProcessBackwardAutogradRespArgs",
    "ProcessBackwardStartArgs",
    "ProcessCleanupAutogradContextReqArgs",
    "ProcessForwardAutogradReqArgs",
    "RecvRpcBackwardApplyArgs",
    "ReleaseContextArgs",
    "ReleaseOrphanedContextArgs",
    "RetrieveContextArgs",
    "RetryCleanupArgs",
    "SendMessageWithAutogradArgs",
    "UdfRaisesArgs",
    "UnawaitedRpcAsyncArgs",
]


class ActionArgs(FrozenModel):
    """Parameters of one TLA+ action; ``action`` is its name (the trace event's name)."""

    action: ClassVar[str] = ""

    @classmethod
    def of(cls, **values: Any) -> Self:
        """The parameters, unvalidated (the core's values are statically typed)."""
        return trusted(cls, values)


class _W(ActionArgs):
    w: int


_ALIASED = ConfigDict(
    frozen=True,
    extra="forbid",
    validate_by_name=True,
    validate_by_alias=True,
    serialize_by_alias=True,
)


class _WT(ActionArgs):
    """An application thread ``t`` of worker ``w``."""

    w: int
    t: int = Field(ge=0)


class NewContextArgs(_WT):
    action: ClassVar[str] = "NewContext"


class NewContextRefusedArgs(_WT):
    action: ClassVar[str] = "NewContextRefused"


class ReleaseContextArgs(_WT):
    action: ClassVar[str] = "ReleaseContext"


class DistEngineExecuteArgs(_WT):
    action: ClassVar[str] = "DistEngineExecute"
    retain: bool


class CrashArgs(_W):
    action: ClassVar[str] = "Crash"


class PeerDiedArgs(_W):
    """Survivor ``w``'s failure detector reported worker ``x`` dead (issue 26 s4e)."""

    action: ClassVar[str] = "PeerDied"
    x: int


class SendMessageWithAutogradArgs(_WT):
    action: ClassVar[str] = "SendMessageWithAutograd"
    dst: int
    grad: bool


class NestedSendMessageWithAutogradArgs(ActionArgs):
    action: ClassVar[str] = "NestedSendMessageWithAutograd"
    model_config = _ALIASED
    w: int
    h: Handler
    dst: int
    grad: bool
    await_: bool = Field(alias="await")


class PollTimeoutRpcsArgs(ActionArgs):
    action: ClassVar[str] = "PollTimeoutRpcs"
    w: int
    m: AutogradId


class _M(ActionArgs):
    """The network's and the agents' steps on one message ``m`` (no acting worker)."""

    m: Msg


class RetryCleanupArgs(_M):
    action: ClassVar[str] = "RetryCleanup"


class LoseCleanupMsgArgs(_M):
    action: ClassVar[str] = "LoseCleanupMsg"


class DiscardArgs(ActionArgs):
    action: ClassVar[str] = "Discard"
    msg: Msg


class _WMsg(ActionArgs):
    """A handler of message ``msg`` on worker ``w``."""

    w: int
    msg: Msg


class ProcessForwardAutogradReqArgs(_WMsg):
    action: ClassVar[str] = "ProcessForwardAutogradReq"


class DeserializeResponseArgs(_WMsg):
    action: ClassVar[str] = "DeserializeResponse"


class ProcessCleanupAutogradContextReqArgs(_WMsg):
    action: ClassVar[str] = "ProcessCleanupAutogradContextReq"


class ProcessBackwardAutogradReqArgs(_WMsg):
    action: ClassVar[str] = "ProcessBackwardAutogradReq"


class ProcessBackwardAutogradRespArgs(_WMsg):
    action: ClassVar[str] = "ProcessBackwardAutogradResp"


class ProcessBackwardStartArgs(_WMsg):
    action: ClassVar[str] = "ProcessBackwardStart"


class ProcessBackwardAckArgs(_WMsg):
    action: ClassVar[str] = "ProcessBackwardAck"


class FinishForwardAutogradReqArgs(ActionArgs):
    action: ClassVar[str] = "FinishForwardAutogradReq"
    model_config = _ALIASED
    w: int
    h: Handler
    resp_grad: bool = Field(alias="respGrad")


class DeserializeForwardAutogradRespArgs(ActionArgs):
    action: ClassVar[str] = "DeserializeForwardAutogradResp"
    w: int
    msg: Msg
    loss: bool


class _WC(ActionArgs):
    w: int
    c: AutogradId


class ReleaseOrphanedContextArgs(_WC):
    action: ClassVar[str] = "ReleaseOrphanedContext"


class CleanupBackwardPassArgs(_WC):
    action: ClassVar[str] = "CleanupBackwardPass"


class RetrieveContextArgs(_WC):
    action: ClassVar[str] = "RetrieveContext"


class BackwardErrorArgs(_WC):
    action: ClassVar[str] = "BackwardError"


class FetchStoredValueArgs(ActionArgs):
    """The UDF of handler ``h`` returns (or sends on) a value an earlier request of its
    context stored on ``w``, which reached recv function ``r`` (issue 26 s4b)."""

    action: ClassVar[str] = "FetchStoredValue"
    w: int
    h: Handler
    r: RecvFn


class UdfRaisesArgs(ActionArgs):
    """The UDF of handler ``h`` raised by itself (issue 26 s4c)."""

    action: ClassVar[str] = "UdfRaises"
    w: int
    h: Handler


class UnawaitedRpcAsyncArgs(ActionArgs):
    """Not a spec action: the UDF of handler ``h`` returned, or called again, while its
    nested call ``h.wait`` was still unanswered (an ``rpc_async`` it never waited for). The
    runtime logs every nested call as awaited (it cannot tell at the call whether the UDF
    will wait), so this shape is outside the spec on purpose and the checker says so here."""

    action: ClassVar[str] = "UnawaitedRpcAsync"
    w: int
    h: Handler


class RecvRpcBackwardApplyArgs(ActionArgs):
    action: ClassVar[str] = "RecvRpcBackwardApply"
    w: int
    c: AutogradId
    r: RecvFn


#: Every action's args model, in the spec's order of AppNext, FaultNext, SystemNext and the
#: refusal.
ARGS_MODELS: Final[tuple[type[ActionArgs], ...]] = (
    NewContextArgs,
    SendMessageWithAutogradArgs,
    NestedSendMessageWithAutogradArgs,
    ReleaseContextArgs,
    DistEngineExecuteArgs,
    RetrieveContextArgs,
    FetchStoredValueArgs,
    UdfRaisesArgs,
    RetryCleanupArgs,
    LoseCleanupMsgArgs,
    CrashArgs,
    PeerDiedArgs,
    BackwardErrorArgs,
    ProcessForwardAutogradReqArgs,
    FinishForwardAutogradReqArgs,
    DeserializeForwardAutogradRespArgs,
    DeserializeResponseArgs,
    PollTimeoutRpcsArgs,
    ProcessCleanupAutogradContextReqArgs,
    ReleaseOrphanedContextArgs,
    DiscardArgs,
    RecvRpcBackwardApplyArgs,
    ProcessBackwardAutogradReqArgs,
    ProcessBackwardAutogradRespArgs,
    CleanupBackwardPassArgs,
    ProcessBackwardStartArgs,
    ProcessBackwardAckArgs,
    NewContextRefusedArgs,
)
#: The spec's action names (and the trace's event names), in that order.
ACTION_NAMES: Final[tuple[str, ...]] = tuple(m.action for m in ARGS_MODELS)
