"""The parameters of each RRef.tla action, as a trace event's ``args`` (under TLA+ names)."""

from __future__ import annotations

from typing import ClassVar, Self, TypeAlias

from protoref.ids import GloballyUniqueId, WorkerId
from protoref.rref.core.events import Message
from protoref.tracing import FrozenModel, trusted

__all__ = [
    "ActionArgs",
    "AddForkOfOwnerIfNotPresentArgs",
    "AssignOwnerRRefArgs",
    "ConfirmPendingUserArgs",
    "CreateLocalRRefArgs",
    "DelAllUsersAndUnforkedOwnersArgs",
    "DelForkOfOwnerArgs",
    "DelPendingChildArgs",
    "DelUserArgs",
    "DestroyInstanceArgs",
    "DropOwnerRRefArgs",
    "DropRRefArgs",
    "FinishCreatingOwnerRRefArgs",
    "FinishForkRequestArgs",
    "GetOrCreateRRefArgs",
    "LoseFirstAttemptArgs",
    "PrepareChildForkArgs",
    "ReceiveFetchRetArgs",
    "RemoteArgs",
    "RetrieveOwnerRRefArgs",
    "RetrySendArgs",
    "TimeOutRemoteArgs",
    "ToHereArgs",
    "WaitAllWorkersArgs",
]

Gid: TypeAlias = GloballyUniqueId


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
