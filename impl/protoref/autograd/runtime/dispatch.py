"""Which engine a message's tensors belong to: protoref's scalars or torch's tensors.

The node (:mod:`protoref.autograd.runtime.node`) is the same for both; what differs is how a
send function keeps its tensors, how received tensors become outputs of a recv function, how a
local pass runs and how gradients travel in a frame. Each function here picks the engine from
the tensors themselves (:mod:`protoref.autograd.runtime.engine` for :class:`~.engine.Tensor`,
:mod:`protoref.autograd.runtime.torch_engine` for ``torch.Tensor``). A message carries tensors
of one kind: mixing the two in one call is refused with a TypeError naming both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from protoref.autograd.core.ids import AutogradId
from protoref.autograd.runtime import engine, torch_engine
from protoref.autograd.runtime.contextdata import ContextData
from protoref.autograd.runtime.frames import AutogradFrame

__all__ = [
    "Recv",
    "Send",
    "attach",
    "check_roots",
    "frame_values",
    "make_send",
    "reachable",
    "run_local",
    "starts_of",
]

Send = engine.SendRpcBackward | torch_engine.TorchSend
Recv = engine.RecvRpcBackward | torch_engine.TorchRecv


def _torch_kind(tensors: Sequence[object]) -> bool:
    """True for torch tensors, False for scalars; refuses a mixture."""
    kinds = {torch_engine.is_tensor(t) for t in tensors}
    if len(kinds) > 1:
        raise TypeError("a message mixes protoref's scalar tensors with torch tensors")
    return kinds == {True}


def make_send(c: AutogradId, mid: AutogradId, tensors: Sequence[Any]) -> Send:
    if _torch_kind(tensors):
        return torch_engine.TorchSend(c, mid, tensors)
    return engine.SendRpcBackward(c, mid, tensors)


def reachable(tensors: Sequence[Any], c: AutogradId) -> frozenset[AutogradId]:
    """The spec's ``in`` of a send function made for ``tensors``."""
    if _torch_kind(tensors):
        return torch_engine.reachable_recvs(tensors, c)
    return engine.reachable_recvs(tensors, c)


def attach(c: AutogradId, mid: AutogradId, src: int, tensors: Sequence[Any]) -> Recv:
    """The recv function of message ``mid``, its outputs the received ``tensors``."""
    if _torch_kind(tensors):
        recv = torch_engine.TorchRecv(c, mid, src, tensors)
        torch_engine.attach(recv, tensors)
        return recv
    scalar = engine.RecvRpcBackward(c, mid, src, len(tensors))
    for t, out in zip(tensors, scalar.outputs, strict=True):
        t.grad_fn = out
        t.requires_grad = True
    return scalar


def check_roots(roots: Sequence[Any]) -> None:
    """``dist_autograd.backward``'s checks of its roots (torch's texts)."""
    for root in roots:
        if torch_engine.is_tensor(root):
            if not root.requires_grad:
                raise RuntimeError("requires_grad not set on root")
            if root.numel() != 1:
                raise RuntimeError(f"{root!r} is not a scalar, all roots need to be scalar")
        elif not isinstance(root, engine.Tensor):
            raise TypeError(f"backward(): roots are tensors, got {type(root).__name__}")
        elif not root.requires_grad:
            raise RuntimeError("requires_grad not set on root")
        if root.grad_fn is None:
            raise RuntimeError(f"{root!r} does not have a valid gradient function.")
    _torch_kind(roots)


def starts_of(roots: Sequence[Any]) -> list[tuple[Any, Any]]:
    """The local pass's starts for the roots of a backward call (each with gradient 1);
    scalar graphs are checked for values an earlier pass freed."""
    if _torch_kind(roots):
        return [torch_engine.ones_root(r) for r in roots]
    starts = [r.grad_fn for r in roots if r.grad_fn is not None]
    engine.check_not_freed(starts)
    return [(s, 1.0) for s in starts]


def run_local(starts: Sequence[tuple[Any, Any]], data: ContextData) -> None:
    """One local pass of ``data``'s context from ``starts``."""
    if starts and torch_engine.is_tensor(starts[0][0]):
        torch_engine.run_local(starts, data.accumulate)
        return
    engine.run_local(starts, data.accumulate, retain_graph=data.retain_graph, release=data.ran_node)


def frame_values(frame: AutogradFrame) -> Sequence[Any]:
    """The gradients a ``BWD_REQ`` brought: tensors, or the scalar engine's floats."""
    if frame.tensors:
        return torch_engine.decode_grads(frame.tensors)
    return frame.grads
