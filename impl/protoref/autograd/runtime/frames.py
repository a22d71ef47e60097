"""What autograd adds to the RPC layer's frames, and its own frames.

A wrapped call or reply carries :class:`AutogradMeta`: the spec's message record (context id,
message id, sender, whether the tensors require grad) and the sender's Lamport stamp; the payload
stays the RPC layer's (tensors through :class:`~protoref.autograd.runtime.payload.TensorCodec`).
Cleanups and the backward pass's messages are :class:`AutogradFrame` frames of their own, with the
gradients a ``BWD_REQ`` carries (one per tensor of the message it answers). Fields beyond the spec's
record (docs/divergences.md): ``retain_graph`` says whether the pass keeps the graph on every
worker; ``error`` carries the text of an error of a worker's part of a pass up the flood to the root
(the spec's ``BWD_ACK`` carries only that it failed); ``pass_no`` repeats the pass the record's own
``pass`` names (kept for the frame's readers; the core reads the record's).
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import ConfigDict, Field, JsonValue, TypeAdapter

from protoref.autograd.core.events import Msg
from protoref.rpc.frames import Seq, register
from protoref.tracing import FrozenModel, trusted

__all__ = [
    "FRAME_ADAPTER",
    "MAX_GRADS",
    "Autograd",
    "AutogradFrame",
    "AutogradMeta",
    "control_frame",
]

#: At most this many gradients in one request (a message carries at most this many tensors).
MAX_GRADS: Final = 4096


class AutogradMeta(FrozenModel):
    """The autograd part of a wrapped call or reply (``FWD_REQ``, ``FWD_RESP``, ``RESP``)."""

    msg: Msg
    stamp: int = Field(ge=0)

    @classmethod
    def of(cls, msg: Msg, stamp: int) -> AutogradMeta:
        """Built without validation (the sender's own values; the receiver validates)."""
        return trusted(cls, {"msg": msg, "stamp": stamp})


class AutogradFrame(FrozenModel):
    """A cleanup or a backward-pass message between two workers' autograd containers."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    kind: Literal["autograd"] = "autograd"
    msg: Msg
    stamp: int = Field(ge=0)
    grads: tuple[float, ...] = Field(default=(), max_length=MAX_GRADS)
    #: The gradients as torch tensors (the tensor codec's JSON: dtype, shape, bytes; never
    #: pickled), for a pass over torch tensors; then ``grads`` is empty.
    tensors: tuple[dict[str, JsonValue], ...] = Field(default=(), max_length=MAX_GRADS)
    pass_no: int = Field(default=1, ge=1)
    retain_graph: bool = False
    error: str = Field(default="", max_length=4096)


def control_frame(  # noqa: PLR0917 - the frame's fields, in order
    msg: Msg,
    stamp: int,
    grads: tuple[float, ...],
    pass_no: int,
    retain_graph: bool,
    error: str,
    tensors: tuple[dict[str, JsonValue], ...] = (),
) -> AutogradFrame:
    """An :class:`AutogradFrame` built without validation (the sender's own values; the
    receiver validates every frame in full)."""
    values = {
        "kind": "autograd",
        "msg": msg,
        "stamp": stamp,
        "grads": grads,
        "tensors": tensors,
        "pass_no": pass_no,
        "retain_graph": retain_graph,
        "error": error,
    }
    return trusted(AutogradFrame, values)


FRAME_ADAPTER: Final[TypeAdapter[AutogradFrame]] = TypeAdapter(AutogradFrame)


class Autograd(Seq):
    """A distributed autograd cleanup or backward-pass message on an RPC link."""

    kind: Literal["autograd"] = "autograd"
    body: AutogradFrame


register(Autograd)
