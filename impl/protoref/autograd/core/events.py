"""Messages of distributed autograd: DistAutograd.tla's one record shape ``Msg``.

Every message has every field, as in the spec (``Msg(t, c, m, rq, s, d, f)`` and
``CleanupMsg(c, s, d, tr)``): ``type``, the context ``ctx``, ``mid`` (the message's own autograd
message id), ``req`` (the request it answers), ``src``, ``dst``, ``flag``, ``trig`` and ``dup``.
What the fields mean per type (the spec's comment above ``Msg``):

- ``FWD_REQ``: a wrapped request (torch's ``FORWARD_AUTOGRAD_REQ``); ``mid = req`` = its
  message id, ``flag`` = its tensors require grad.
- ``FWD_RESP``: a wrapped answer (``FORWARD_AUTOGRAD_RESP``); ``mid`` its own message id,
  ``req`` the request's.
- ``RESP``: an unwrapped answer, ``flag`` = a value (TRUE) or an exception (FALSE).
- ``CLEANUP``: ``CLEANUP_AUTOGRAD_CONTEXT_REQ``; ``trig`` = the worker whose release or cleanup
  made the sender send it.
- ``BWD_REQ``: ``BACKWARD_AUTOGRAD_REQ`` for the send function ``mid``; ``flag`` = the gradient
  is non-zero (some consumer of the recv function fed it).
- ``BWD_RESP``: its answer, ``flag`` = ok (in the Reference only a dead worker's agent answers).
- ``BWD_START``, ``BWD_ACK``: the Reference's Echo flood and its acknowledgements
  (``BWD_ACK``: ``flag`` = the subtree's part of the pass is ok).

``hz`` is the creator's horizon a ``CLEANUP`` carries (``<<n, open>>``, the spec's ``Horizon``
scheme: every id of the context's creator below ``n`` but those in ``open`` is dead; see
:mod:`protoref.autograd.core.horizon`); other messages have none, and their records, as the spec's,
no such field.

``pass`` (``pass_`` in Python, a keyword) is the backward pass a ``BWD_*`` message belongs to
(``BwdMsg``; the Reference's "passTag"), 0 otherwise. ``dup`` is 0 for a first attempt, 1 for
an attempt that was retried and 2 for the retry's copy (``RetryCleanup``). A message holds no
tensor: the gradient and the call's payload travel beside it in the driver's frame; the record
is exactly the spec's, so the network is a set of them.

Validated construction (``Msg(...)``, :data:`MESSAGE_ADAPTER`) is for values from outside (wire
frames, trace lines); the core builds its messages with the unvalidated :meth:`Msg.make`.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal, Self, TypeAlias

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    model_serializer,
)

from protoref.autograd.core.ids import NO_WORKER, AutogradId
from protoref.tracing import FrozenModel, TlaSet, trusted

__all__ = [
    "MESSAGE_ADAPTER",
    "MSG_TYPES",
    "REQUEST_TYPES",
    "MaybeId",
    "Msg",
    "MsgType",
]

MsgType: TypeAlias = Literal[
    "FWD_REQ", "FWD_RESP", "RESP", "CLEANUP", "BWD_REQ", "BWD_RESP", "BWD_START", "BWD_ACK"
]
#: DistAutograd.tla ``MsgRec.type``.
MSG_TYPES: Final[frozenset[str]] = frozenset(
    {"FWD_REQ", "FWD_RESP", "RESP", "CLEANUP", "BWD_REQ", "BWD_RESP", "BWD_START", "BWD_ACK"}
)
#: Messages whose loss at a dead worker fails the sender's future (spec ``Discard``).
REQUEST_TYPES: Final[frozenset[str]] = frozenset({"FWD_REQ", "BWD_REQ"})


def _none_in(value: Any) -> Any:
    # The spec's None is <<>>, an empty tuple: JSON [] decodes to None.
    return None if value in ([], ()) else value


def _none_out(value: AutogradId | None) -> Any:
    return [] if value is None else [value.worker, value.n]


#: An id or the spec's ``None`` (``<<>>``, JSON ``[]``).
MaybeId = Annotated[
    AutogradId | None,
    BeforeValidator(_none_in),
    PlainSerializer(_none_out, when_used="json"),
]


class Msg(FrozenModel):
    """DistAutograd.tla ``MsgRec``: one record shape for every message."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    type: MsgType
    ctx: AutogradId
    mid: MaybeId = None
    req: MaybeId = None
    src: int
    dst: int
    flag: bool = True
    trig: int = NO_WORKER
    pass_: int = Field(default=0, ge=0, alias="pass")
    dup: int = Field(default=0, ge=0, le=2)
    hz: tuple[Annotated[int, Field(ge=0)], TlaSet[AutogradId]] | None = None

    @model_serializer(mode="wrap")
    def _without_hz(self, handler: SerializerFunctionWrapHandler) -> Any:
        # The spec's record has the field only on a cleanup under Horizon.
        out = handler(self)
        if isinstance(out, dict) and out.get("hz") is None:
            out.pop("hz", None)
        return out

    @classmethod
    def make(  # noqa: PLR0917 - the spec's Msg(t, c, m, rq, s, d, f), positionally
        cls,
        type_: MsgType,
        ctx: AutogradId,
        mid: AutogradId | None,
        req: AutogradId | None,
        src: int,
        dst: int,
        flag: bool,
    ) -> Self:
        """``Msg(t, c, m, rq, s, d, f)``, built without validation (for the core)."""
        values = {
            "type": type_,
            "ctx": ctx,
            "mid": mid,
            "req": req,
            "src": src,
            "dst": dst,
            "flag": flag,
            "trig": NO_WORKER,
            "pass_": 0,
            "dup": 0,
            "hz": None,
        }
        return trusted(cls, values)

    @classmethod
    def bwd(  # noqa: PLR0917 - the spec's BwdMsg(t, c, m, p, s, d, f), positionally
        cls,
        type_: MsgType,
        ctx: AutogradId,
        mid: AutogradId | None,
        pass_: int,
        src: int,
        dst: int,
        flag: bool,
    ) -> Self:
        """``BwdMsg(t, c, m, p, s, d, f)``: a backward message of pass ``p`` (no ``req``)."""
        values = {
            "type": type_,
            "ctx": ctx,
            "mid": mid,
            "req": None,
            "src": src,
            "dst": dst,
            "flag": flag,
            "trig": NO_WORKER,
            "pass_": pass_,
            "dup": 0,
            "hz": None,
        }
        return trusted(cls, values)

    @classmethod
    def cleanup(
        cls,
        ctx: AutogradId,
        src: int,
        dst: int,
        trig: int,
        hz: tuple[int, frozenset[AutogradId]] | None = None,
    ) -> Self:
        """``CleanupMsg(c, s, d, tr, hz)``."""
        values = {
            "type": "CLEANUP",
            "ctx": ctx,
            "mid": None,
            "req": None,
            "src": src,
            "dst": dst,
            "flag": True,
            "trig": trig,
            "pass_": 0,
            "dup": 0,
            "hz": hz,
        }
        return trusted(cls, values)

    def with_dup(self, dup: int) -> Msg:
        """``[m EXCEPT !.dup = dup]`` (RetryCleanup's two copies)."""
        return trusted(Msg, {**self.__dict__, "dup": dup})

    def __str__(self) -> str:
        ids = " ".join(str(i) for i in (self.mid, self.req) if i is not None)
        tag = f" pass={self.pass_}" if self.pass_ else ""
        return f"{self.type} {self.src}->{self.dst} c{self.ctx} {ids} flag={self.flag}{tag}"


MESSAGE_ADAPTER: Final[TypeAdapter[Msg]] = TypeAdapter(Msg)
