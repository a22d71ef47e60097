"""Inputs of the RRef core: protocol messages, application calls, timers and destructors.

Messages have RRef.tla's one record shape ``[type, src, dst, rref, owner, fork, parent, dup]``
(``Msg(t, s, d, r, o, f, p)``) and its type names. The other inputs are the application and
environment steps of the spec (``Remote``, ``ToHere``, ``TimeOutRemote``, ``DelUser``...), named
by an upper-case ``type`` so one discriminated union :data:`RRefInput` covers everything a worker
can be asked to do. Transport metadata (Lamport stamps, delivery times) stays in the driver's
envelope: a message is exactly the spec's record.

Validated construction (``UserDelete(src=..., ...)``, :data:`MESSAGE_ADAPTER`) is for values from
outside: wire frames, trace lines, tests. The core and the simulator build their own messages and
inputs with unvalidated, statically typed factories (``UserDelete.make(...)``, ``DelUser.of(f)``):
mypy checks their arguments, and validation was a tenth of a simulator step.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final, Literal, Self, TypeAlias

from pydantic import BeforeValidator, Field, PlainSerializer, TypeAdapter

from protoref.ids import GloballyUniqueId, WorkerId
from protoref.tracing import FrozenModel, trusted

__all__ = [
    "INPUT_ADAPTER",
    "MESSAGE_ADAPTER",
    "MSG_TYPES",
    "RETRIED",
    "USER_CALL_TYPES",
    "ChildAccept",
    "CreateLocalRRef",
    "DelAllUsersAndUnforkedOwners",
    "DelUser",
    "DestroyInstance",
    "DropOwnerRRef",
    "DropRRef",
    "ForkRequest",
    "Message",
    "MessageBase",
    "Parent",
    "PrepareChildFork",
    "PythonCall",
    "PythonRemoteCall",
    "RRefAck",
    "RRefFetchCall",
    "RRefFetchRet",
    "RRefInput",
    "Remote",
    "RemoteRet",
    "TimeOutRemote",
    "ToHere",
    "UserDelete",
    "WaitAllWorkers",
]

Gid: TypeAlias = GloballyUniqueId


def _no_id_in(value: Any) -> Any:
    # The spec's NoId is <<>>, an empty tuple: JSON [] decodes to None.
    return None if value in ([], ()) else value


def _no_id_out(value: Gid | None) -> Any:
    return [] if value is None else [value.worker, value.local_id]


#: The parent ForkId of a PYTHON_CALL (the RRefId when the owner is the parent), None for NoId.
Parent = Annotated[
    Gid | None,
    BeforeValidator(_no_id_in),
    PlainSerializer(_no_id_out, when_used="json"),
]


# --------------------------------------------------------------------------- messages


class MessageBase(FrozenModel):
    """RRef.tla ``Msg``: every message has every field; ``dup`` bounds duplication (RetrySend)."""

    type: str  # narrowed to one Literal of MSG_TYPES by each subclass
    src: WorkerId
    dst: WorkerId
    rref: Gid
    owner: WorkerId
    fork: Gid
    parent: Parent = None
    # 0 = first attempt, 1 = first attempt already retried, 2 = the retry's copy.
    dup: int = Field(default=0, ge=0, le=2)

    #: The subclass's ``type`` literal (set for each subclass).
    TYPE: ClassVar[str] = ""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.TYPE = str(cls.model_fields["type"].default)

    @classmethod
    def make(
        cls,
        src: WorkerId,
        dst: WorkerId,
        rref: Gid,
        owner: WorkerId,
        fork: Gid,
        *,
        parent: Gid | None = None,
        dup: int = 0,
    ) -> Self:
        """The message, built without validation (for the core: see the module docstring)."""
        values = {
            "type": cls.TYPE,
            "src": src,
            "dst": dst,
            "rref": rref,
            "owner": owner,
            "fork": fork,
            "parent": parent,
            "dup": dup,
        }
        return trusted(cls, values)


class PythonRemoteCall(MessageBase):
    """rpc.remote(dst, f): run the UDF and assignOwnerRRef(rref, fork). Never retried."""

    type: Literal["PYTHON_REMOTE_CALL"] = "PYTHON_REMOTE_CALL"


class RemoteRet(MessageBase):
    """Reply to PYTHON_REMOTE_CALL, sent once the value is set (fork = rref for self remote)."""

    type: Literal["REMOTE_RET"] = "REMOTE_RET"


class RRefFetchCall(MessageBase):
    """UserRRef.to_here(): fetch the value of ``rref`` for the UserRRef ``fork``."""

    type: Literal["PYTHON_RREF_FETCH_CALL"] = "PYTHON_RREF_FETCH_CALL"


class RRefFetchRet(MessageBase):
    """The value, for the UserRRef ``fork``."""

    type: Literal["PYTHON_RREF_FETCH_RET"] = "PYTHON_RREF_FETCH_RET"


class PythonCall(MessageBase):
    """A user RPC (argument or return value) carrying the child fork ``fork`` of ``parent``."""

    type: Literal["PYTHON_CALL"] = "PYTHON_CALL"


class ForkRequest(MessageBase):
    """Child user -> owner: register ``fork`` (addForkOfOwnerIfNotPresent). Retried."""

    type: Literal["RREF_FORK_REQUEST"] = "RREF_FORK_REQUEST"


class RRefAck(MessageBase):
    """Owner -> child: the fork request for ``fork`` is registered."""

    type: Literal["RREF_ACK"] = "RREF_ACK"


class ChildAccept(MessageBase):
    """Child (or owner) -> parent: the owner knows ``fork``; drop the pending child (G2).

    Retried."""

    type: Literal["RREF_CHILD_ACCEPT"] = "RREF_CHILD_ACCEPT"


class UserDelete(MessageBase):
    """User -> owner: the UserRRef ``fork`` is gone (G1). Retried."""

    type: Literal["RREF_USER_DELETE"] = "RREF_USER_DELETE"


Message = Annotated[
    PythonRemoteCall
    | RemoteRet
    | RRefFetchCall
    | RRefFetchRet
    | PythonCall
    | ForkRequest
    | RRefAck
    | ChildAccept
    | UserDelete,
    Field(discriminator="type"),
]
MESSAGE_ADAPTER: Final[TypeAdapter[Message]] = TypeAdapter(Message)

#: RRef.tla ``MsgTypes``.
MSG_TYPES: Final = frozenset(
    {
        "PYTHON_REMOTE_CALL",
        "REMOTE_RET",
        "PYTHON_RREF_FETCH_CALL",
        "PYTHON_RREF_FETCH_RET",
        "PYTHON_CALL",
        "RREF_FORK_REQUEST",
        "RREF_ACK",
        "RREF_CHILD_ACCEPT",
        "RREF_USER_DELETE",
    }
)
#: RRef.tla ``Retried``: control messages sent with sendWithRetries (at least once).
RETRIED: Final = frozenset({"RREF_FORK_REQUEST", "RREF_CHILD_ACCEPT", "RREF_USER_DELETE"})
#: RRef.tla ``UserCallTypes``: user calls and their replies (none may be in flight at the
#: shutdown barrier).
USER_CALL_TYPES: Final = frozenset(
    {
        "PYTHON_REMOTE_CALL",
        "REMOTE_RET",
        "PYTHON_RREF_FETCH_CALL",
        "PYTHON_RREF_FETCH_RET",
        "PYTHON_CALL",
    }
)


# --------------------------------------------------------------------------- other inputs


class CreateLocalRRef(FrozenModel):
    """rpc.RRef(obj): spec ``CreateLocalRRef(w)``."""

    type: Literal["CREATE_LOCAL_RREF"] = "CREATE_LOCAL_RREF"

    @classmethod
    def of(cls) -> Self:
        return trusted(cls, {"type": "CREATE_LOCAL_RREF"})


class Remote(FrozenModel):
    """rpc.remote(dst, f): spec ``Remote(w, dst)``; dst may be the worker itself."""

    type: Literal["REMOTE"] = "REMOTE"
    dst: WorkerId

    @classmethod
    def of(cls, dst: WorkerId) -> Self:
        return trusted(cls, {"type": "REMOTE", "dst": dst})


class PrepareChildFork(FrozenModel):
    """Pickle RRef ``r`` (held as ``parent``) into a user RPC to ``dst``.

    ``parent == r`` shares the worker's OwnerRRef; otherwise ``parent`` is its UserRRef's ForkId.
    """

    type: Literal["PREPARE_CHILD_FORK"] = "PREPARE_CHILD_FORK"
    dst: WorkerId
    r: Gid
    parent: Gid

    @classmethod
    def of(cls, dst: WorkerId, r: Gid, parent: Gid) -> Self:
        return trusted(cls, {"type": "PREPARE_CHILD_FORK", "dst": dst, "r": r, "parent": parent})


class ToHere(FrozenModel):
    """UserRRef.to_here() on the UserRRef ``f``."""

    type: Literal["TO_HERE"] = "TO_HERE"
    f: Gid

    @classmethod
    def of(cls, f: Gid) -> Self:
        return trusted(cls, {"type": "TO_HERE", "f": f})


class DropRRef(FrozenModel):
    """Application code drops its reference to the UserRRef ``f`` (Python GC)."""

    type: Literal["DROP_RREF"] = "DROP_RREF"
    f: Gid

    @classmethod
    def of(cls, f: Gid) -> Self:
        return trusted(cls, {"type": "DROP_RREF", "f": f})


class DropOwnerRRef(FrozenModel):
    """Application code drops the OwnerRRef ``r`` it holds."""

    type: Literal["DROP_OWNER_RREF"] = "DROP_OWNER_RREF"
    r: Gid

    @classmethod
    def of(cls, r: Gid) -> Self:
        return trusted(cls, {"type": "DROP_OWNER_RREF", "r": r})


class TimeOutRemote(FrozenModel):
    """The rpc.remote future of (r, f) fails with TIMEOUT (f = r for a self remote)."""

    type: Literal["TIME_OUT_REMOTE"] = "TIME_OUT_REMOTE"
    r: Gid
    f: Gid

    @classmethod
    def of(cls, r: Gid, f: Gid) -> Self:
        return trusted(cls, {"type": "TIME_OUT_REMOTE", "r": r, "f": f})


class DelUser(FrozenModel):
    """The UserRRef ``f``'s refcount reached zero: its destructor runs (tryDel, G1)."""

    type: Literal["DEL_USER"] = "DEL_USER"
    f: Gid

    @classmethod
    def of(cls, f: Gid) -> Self:
        return trusted(cls, {"type": "DEL_USER", "f": f})


class WaitAllWorkers(FrozenModel):
    """rpc.shutdown's ``_wait_all_workers`` barrier passed (spec ``WaitAllWorkers``); the driver
    says how many user calls it knows to be in flight (the barrier requires none)."""

    type: Literal["WAIT_ALL_WORKERS"] = "WAIT_ALL_WORKERS"
    user_calls_in_flight: int = Field(default=0, ge=0)


class DelAllUsersAndUnforkedOwners(FrozenModel):
    """The shutdown sweep (spec ``DelAllUsersAndUnforkedOwners(w)``); ``force`` after a timeout."""

    type: Literal["DEL_ALL_USERS_AND_UNFORKED_OWNERS"] = "DEL_ALL_USERS_AND_UNFORKED_OWNERS"
    force: bool = False


class DestroyInstance(FrozenModel):
    """agent.join + destroyInstance (spec ``DestroyInstance(w)``): ``active_calls`` messages to or
    from this worker in flight, ``peers_swept`` every worker has swept; ``force`` skips waits."""

    type: Literal["DESTROY_INSTANCE"] = "DESTROY_INSTANCE"
    active_calls: int = Field(default=0, ge=0)
    peers_swept: bool = True
    force: bool = False


RRefInput = Annotated[
    PythonRemoteCall
    | RemoteRet
    | RRefFetchCall
    | RRefFetchRet
    | PythonCall
    | ForkRequest
    | RRefAck
    | ChildAccept
    | UserDelete
    | CreateLocalRRef
    | Remote
    | PrepareChildFork
    | ToHere
    | DropRRef
    | DropOwnerRRef
    | TimeOutRemote
    | DelUser
    | WaitAllWorkers
    | DelAllUsersAndUnforkedOwners
    | DestroyInstance,
    Field(discriminator="type"),
]
INPUT_ADAPTER: Final[TypeAdapter[RRefInput]] = TypeAdapter(RRefInput)
