"""The frames the runtime exchanges: pydantic models in one discriminated union (``kind``).

Protocol messages travel inside :class:`Proto` as the core's own records (the spec's ``Msg``,
:data:`protoref.rref.core.events.Message`), so the wire reuses their discriminated union; user
calls, replies, transport acks, rendezvous and shutdown barriers are runtime frames around them.
Payloads are JSON values produced by :mod:`protoref.rpc.codec`: never pickle.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Final, Literal

from pydantic import Field, JsonValue, TypeAdapter
from pydantic_core import to_json

from protoref.autograd.runtime.frames import AutogradFrame, AutogradMeta
from protoref.rref.core.events import Message, PythonCall
from protoref.tracing import FrozenModel

__all__ = [
    "FRAME_ADAPTER",
    "Ack",
    "Autograd",
    "Barrier",
    "BarrierGo",
    "CallBody",
    "Challenge",
    "Frame",
    "Hello",
    "Join",
    "PeerInfo",
    "Peers",
    "Proto",
    "Refetch",
    "Result",
    "UserCall",
    "UserReply",
    "Welcome",
    "dump",
]

# --------------------------------------------------------------------------- handshake
# Sent before a session key exists; each carries its own HMAC (see wire.py).


class Challenge(FrozenModel):
    """Acceptor -> dialer: a fresh nonce the dialer must MAC (challenge-response)."""

    kind: Literal["challenge"] = "challenge"
    nonce: str


class Hello(FrozenModel):
    """Dialer -> acceptor: its worker name, its own nonce, and the MAC over both nonces."""

    kind: Literal["hello"] = "hello"
    name: str = Field(min_length=1, max_length=128)
    nonce: str
    mac: str


class Welcome(FrozenModel):
    """Acceptor -> dialer: proves the acceptor knows the secret too. ``lamport`` and
    ``processed`` (ids of the dialer's retried control messages already applied) let the dialer
    retry exactly the lost ones, causally after what the acceptor has seen."""

    kind: Literal["welcome"] = "welcome"
    mac: str
    lamport: int = Field(ge=0)
    processed: tuple[int, ...] = ()


# --------------------------------------------------------------------------- payloads


class CallBody(FrozenModel):
    """A user function call: ``fn`` is ``module:qualname``; RRef arguments are forked into
    ``forks`` (one PYTHON_CALL record each) and referenced from ``args`` by index."""

    fn: str
    args: list[JsonValue] = Field(default_factory=list)
    kwargs: dict[str, JsonValue] = Field(default_factory=dict)
    forks: tuple[PythonCall, ...] = ()


class Result(FrozenModel):
    """A call's outcome: a value (RRefs forked into ``forks``) or the callee's exception."""

    ok: bool
    value: JsonValue = None
    error_type: str = ""
    error: str = ""
    forks: tuple[PythonCall, ...] = ()


# --------------------------------------------------------------------------- session frames


class _Seq(FrozenModel):
    seq: int = Field(ge=1)


class Proto(_Seq):
    """One core message. ``stamp`` is the sender's Lamport clock after the step that sent it;
    ``ctl`` identifies a retried control message for the transport ack; ``call`` goes with a
    PYTHON_REMOTE_CALL and ``result`` with a PYTHON_RREF_FETCH_RET."""

    kind: Literal["proto"] = "proto"
    stamp: int = Field(ge=0)
    msg: Message
    ctl: int | None = None
    call: CallBody | None = None
    result: Result | None = None
    #: Distributed autograd's part of a PYTHON_REMOTE_CALL, REMOTE_RET or a fetch and its
    #: reply made under a context (the spec's message: context, message id, sender).
    autograd: AutogradMeta | None = None


class Ack(_Seq):
    """Transport ack of the retried control messages ``ctls``: they were applied (not a protocol
    message: RRef.tla's control messages have no reply other than the fork request's). Acks
    gather for a moment on the link they answer (Link.ack), so one frame acks several."""

    kind: Literal["ack"] = "ack"
    ctls: tuple[int, ...] = Field(min_length=1)
    stamp: int = Field(ge=0)  # the acceptor's clock once it sent them (orders DestroyInstance)


class UserCall(_Seq):
    kind: Literal["call"] = "call"
    stamp: int = Field(ge=0)
    call_id: int
    body: CallBody
    autograd: AutogradMeta | None = None  # a call made under a distributed autograd context


class Refetch(_Seq):
    """A second or later to_here of one UserRRef: outside the spec, which bounds to_here to
    one call per UserRRef (docs/divergences.md), so it is a plain user call, not traced."""

    kind: Literal["refetch"] = "refetch"
    stamp: int = Field(ge=0)
    call_id: int
    rref: tuple[str, int]
    autograd: AutogradMeta | None = None


class UserReply(_Seq):
    kind: Literal["reply"] = "reply"
    stamp: int = Field(ge=0)
    call_id: int
    result: Result
    autograd: AutogradMeta | None = None  # the answer to a wrapped call (FWD_RESP or RESP)


class Autograd(_Seq):
    """A distributed autograd cleanup or backward-pass message
    (protoref.autograd.runtime.frames)."""

    kind: Literal["autograd"] = "autograd"
    body: AutogradFrame


class PeerInfo(FrozenModel):
    name: str
    rank: int = Field(ge=0)
    host: str
    port: int = Field(ge=1, le=65535)


class Join(_Seq):
    """Worker -> master (rank 0): here I am, reach me at host:port."""

    kind: Literal["join"] = "join"
    info: PeerInfo


class Peers(_Seq):
    """Master -> every worker, once all ``world_size`` joined: the peer table in rank order."""

    kind: Literal["peers"] = "peers"
    peers: tuple[PeerInfo, ...]


class Barrier(_Seq):
    """Worker -> master: this worker reached shutdown phase ``phase``."""

    kind: Literal["barrier"] = "barrier"
    phase: int = Field(ge=1)
    name: str
    stamp: int = Field(ge=0)


class BarrierGo(_Seq):
    """Master -> worker: every worker reached ``phase``, or every live one: ``dead`` names the
    workers found dead, whom the barrier went without (the shutdown cannot complete)."""

    kind: Literal["barrier_go"] = "barrier_go"
    phase: int = Field(ge=1)
    #: Above every arrival's clock: everything a worker did before arriving precedes it.
    stamp: int = Field(ge=0)
    dead: tuple[str, ...] = Field(default=(), max_length=4096)


Frame = Annotated[
    Challenge
    | Hello
    | Welcome
    | Proto
    | Ack
    | UserCall
    | Refetch
    | UserReply
    | Autograd
    | Join
    | Peers
    | Barrier
    | BarrierGo,
    Field(discriminator="kind"),
]
FRAME_ADAPTER: Final[TypeAdapter[Frame]] = TypeAdapter(Frame)
#: The ``kind`` of every frame type (an unknown kind is an UnknownFrameError, not malformed).
FRAME_KINDS: Final = frozenset(
    {
        "challenge",
        "hello",
        "welcome",
        "proto",
        "ack",
        "call",
        "refetch",
        "reply",
        "autograd",
        "join",
        "peers",
        "barrier",
        "barrier_go",
    }
)


@cache
def _shape(cls: type[FrozenModel]) -> tuple[bytes, frozenset[str]]:
    kind = cls.model_fields["kind"].default
    return b'{"kind":"' + kind.encode() + b'","seq":', frozenset(cls.model_fields)


def dump(cls: type[FrozenModel], seq: int, fields: dict[str, Any]) -> bytes:
    """The JSON body of ``cls(seq=seq, **fields)`` without building the frame model: a trusted
    factory for the frames this process sends, whose values are its own (models it built, ints,
    strings), as the core builds its records. Field names are checked; the receiver validates
    every frame in full (wire.Session.open), so nothing unchecked is ever acted on."""
    head, names = _shape(cls)
    if not names.issuperset(fields):
        raise TypeError(f"{cls.__name__} has no field(s) {sorted(fields.keys() - names)}")
    parts = [head, b"%d" % seq]
    for name, value in fields.items():
        parts += (b',"', name.encode(), b'":', to_json(value))
    parts.append(b"}")
    return b"".join(parts)
