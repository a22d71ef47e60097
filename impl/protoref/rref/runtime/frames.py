"""The RRef runtime's frames on :mod:`protoref.rpc`'s links: protocol messages, calls, replies.

Protocol messages travel inside :class:`Proto` as the core's own records (the spec's ``Msg``,
:data:`protoref.rref.core.events.Message`), so the wire reuses their discriminated union; user
calls (:class:`UserCall`, :class:`Refetch`) and their replies (:class:`UserReply`) carry
payloads whose RRefs are forked by the protocol (``forks``: PYTHON_CALL records); ``ext`` carries
the parts of the plug-ins riding on a call (:data:`protoref.rpc.hooks.Ext`: distributed
autograd's context), opaque here and checked by their owner on arrival. Registered
with the RPC layer's frame union at import (:func:`protoref.rpc.frames.register`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from protoref.rpc.frames import Seq, register
from protoref.rpc.hooks import Ext
from protoref.rref.core.events import Message, PythonCall
from protoref.tracing import FrozenModel

__all__ = ["CallBody", "Proto", "Refetch", "Result", "UserCall", "UserReply"]


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


class Proto(Seq):
    """One core message. ``stamp`` is the sender's Lamport clock after the step that sent it;
    ``ctl`` identifies a retried control message for the transport ack; ``call`` goes with a
    PYTHON_REMOTE_CALL and ``result`` with a PYTHON_RREF_FETCH_RET."""

    kind: Literal["proto"] = "proto"
    stamp: int = Field(ge=0)
    msg: Message
    ctl: int | None = None
    call: CallBody | None = None
    result: Result | None = None
    #: The riding plug-ins' part of a PYTHON_REMOTE_CALL, REMOTE_RET or a fetch and its reply
    #: (distributed autograd's, under a context: the spec's message, context, id, sender).
    ext: Ext | None = None


class UserCall(Seq):
    kind: Literal["call"] = "call"
    stamp: int = Field(ge=0)
    call_id: int
    body: CallBody
    ext: Ext | None = None  # e.g. a call made under a distributed autograd context


class Refetch(Seq):
    """A second or later to_here of one UserRRef: outside the spec, which bounds to_here to
    one call per UserRRef (docs/divergences.md), so it is a plain user call, not traced."""

    kind: Literal["refetch"] = "refetch"
    stamp: int = Field(ge=0)
    call_id: int
    rref: tuple[str, int]
    ext: Ext | None = None


class UserReply(Seq):
    kind: Literal["reply"] = "reply"
    stamp: int = Field(ge=0)
    call_id: int
    result: Result
    ext: Ext | None = None  # the answer to a wrapped call (autograd: FWD_RESP or RESP)


register(Proto, UserCall, Refetch, UserReply)
