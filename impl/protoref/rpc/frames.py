"""The frames the RPC layer exchanges: pydantic models in one discriminated union (``kind``).

This module holds the protocol-free frames: the handshake (:class:`Challenge`, :class:`Hello`,
:class:`Welcome`), the transport ack of retried messages (:class:`Ack`), the rendezvous
(:class:`Join`, :class:`Peers`) and the shutdown barriers (:class:`Barrier`,
:class:`BarrierGo`). A protocol plug-in adds its own frames with :func:`register` (the RRef
runtime its messages, calls and replies, :mod:`protoref.rref.runtime.frames`; distributed
autograd its control frames); the union the receiver validates against (:func:`adapter`) is
every registered kind, so an unregistered kind is an :class:`UnknownFrameError`, not a
malformed frame. Payloads are JSON values produced by :mod:`protoref.rpc.codec`: never pickle.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal, Union

from pydantic import Field, TypeAdapter
from pydantic_core import to_json

from protoref.tracing import FrozenModel

__all__ = [
    "Ack",
    "Barrier",
    "BarrierGo",
    "Challenge",
    "Frame",
    "Hello",
    "Join",
    "PeerInfo",
    "Peers",
    "Seq",
    "Welcome",
    "adapter",
    "dump",
    "kinds",
    "register",
]


class Frame(FrozenModel):
    """The base of every frame model: its ``kind`` (a literal in each model) discriminates the
    union; handlers narrow a frame with isinstance."""

    kind: str


# --------------------------------------------------------------------------- handshake
# Sent before a session key exists; each carries its own HMAC (see wire.py).


class Challenge(Frame):
    """Acceptor -> dialer: a fresh nonce the dialer must MAC (challenge-response)."""

    kind: Literal["challenge"] = "challenge"
    nonce: str


class Hello(Frame):
    """Dialer -> acceptor: its worker name, its own nonce, and the MAC over both nonces."""

    kind: Literal["hello"] = "hello"
    name: str = Field(min_length=1, max_length=128)
    nonce: str
    mac: str


class Welcome(Frame):
    """Acceptor -> dialer: proves the acceptor knows the secret too. ``lamport`` and
    ``processed`` (ids of the dialer's retried control messages already applied) let the dialer
    retry exactly the lost ones, causally after what the acceptor has seen."""

    kind: Literal["welcome"] = "welcome"
    mac: str
    lamport: int = Field(ge=0)
    processed: tuple[int, ...] = ()


# --------------------------------------------------------------------------- session frames


class Seq(Frame):
    """A session frame: sent after the handshake, numbered per link (wire.Session)."""

    seq: int = Field(ge=1)


class Ack(Seq):
    """Transport ack of the retried control messages ``ctls``: they were applied (not a protocol
    message: RRef.tla's control messages have no reply other than the fork request's). Acks
    gather for a moment on the link they answer (Link.ack), so one frame acks several."""

    kind: Literal["ack"] = "ack"
    ctls: tuple[int, ...] = Field(min_length=1)
    stamp: int = Field(ge=0)  # the acceptor's clock once it sent them (orders DestroyInstance)


class PeerInfo(FrozenModel):
    name: str
    rank: int = Field(ge=0)
    host: str
    port: int = Field(ge=1, le=65535)


class Join(Seq):
    """Worker -> master (rank 0): here I am, reach me at host:port."""

    kind: Literal["join"] = "join"
    info: PeerInfo


class Peers(Seq):
    """Master -> every worker, once all ``world_size`` joined: the peer table in rank order."""

    kind: Literal["peers"] = "peers"
    peers: tuple[PeerInfo, ...]


class Barrier(Seq):
    """Worker -> master: this worker reached shutdown phase ``phase``."""

    kind: Literal["barrier"] = "barrier"
    phase: int = Field(ge=1)
    name: str
    stamp: int = Field(ge=0)


class BarrierGo(Seq):
    """Master -> worker: every worker reached ``phase``, or every live one: ``dead`` names the
    workers found dead, whom the barrier went without (the shutdown cannot complete)."""

    kind: Literal["barrier_go"] = "barrier_go"
    phase: int = Field(ge=1)
    #: Above every arrival's clock: everything a worker did before arriving precedes it.
    stamp: int = Field(ge=0)
    dead: tuple[str, ...] = Field(default=(), max_length=4096)


_MODELS: dict[str, type[Frame]] = {}


def register(*models: type[Frame]) -> None:
    """Add frame models to the union (a plug-in's frames, at its import). A kind belongs to one
    model: registering another model under a taken kind is a programming error."""
    for model in models:
        kind = model.model_fields["kind"].default
        if not isinstance(kind, str):
            raise TypeError(f"{model.__name__} has no literal default kind")
        taken = _MODELS.setdefault(kind, model)
        if taken is not model:
            raise ValueError(f"frame kind {kind!r} is {taken.__name__}'s, not {model.__name__}'s")
    adapter.cache_clear()


def kinds() -> frozenset[str]:
    """The ``kind`` of every registered frame type."""
    return frozenset(_MODELS)


@cache
def adapter() -> TypeAdapter[Any]:
    """The discriminated union of every registered frame (rebuilt when one is registered)."""
    union: Any = Union[tuple(_MODELS.values())]  # noqa: UP007 - built from a runtime tuple
    return TypeAdapter(Annotated[union, Field(discriminator="kind")])


register(Challenge, Hello, Welcome, Ack, Join, Peers, Barrier, BarrierGo)


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
