"""``RRef.backward(dist_autograd_ctx_id=-1, retain_graph=False)`` for protoref's RRefs.

torch 2.13 (``PyRRef::backward``) runs the pass with the RRef's value as its root: locally on
the owner when no context is given (gradients in ``.grad``), else a distributed pass in the
context started on the owner. protoref's Echo backward is started by a context's creator, whose
flood reaches every worker the context reached; so a distributed ``RRef.backward`` here fetches
the value under the context (``to_here``, a wrapped call whose answer feeds the owner's graph)
and runs ``dist_autograd.backward`` from the calling thread: the gradients are the same, at the
cost of one round trip (docs/divergences.md).
"""

from __future__ import annotations

from typing import Any

from protoref.autograd.core.ids import from_int
from protoref.autograd.runtime import api, current
from protoref.autograd.runtime.engine import Tensor, run_local
from protoref.autograd.runtime.torch_engine import is_tensor

__all__ = ["rref_backward"]


def _root(value: Any) -> Any:
    if is_tensor(value):  # a torch tensor: torch's checks, in dist_autograd.backward's words
        if not value.requires_grad or value.grad_fn is None:
            raise RuntimeError("the RRef's value does not require grad or has no grad_fn")
        return value
    if not isinstance(value, Tensor):
        raise RuntimeError(
            f"RRef.backward needs a scalar tensor as the RRef's value, not {type(value).__name__}"
        )
    if not value.requires_grad or value.grad_fn is None:
        raise RuntimeError("the RRef's value does not require grad or has no grad_fn")
    return value


def rref_backward(rref: Any, context_id: int, retain_graph: bool) -> None:
    if context_id == -1:
        if not rref.is_owner():
            raise RuntimeError(
                "RRef.backward() without a dist_autograd_ctx_id is a local pass: call it on the "
                "RRef's owner"
            )
        root = _root(rref.local_value())
        if is_tensor(root):  # torch's own local pass: gradients in .grad
            root.backward(retain_graph=retain_graph)
            return

        def to_grad(leaf: Tensor, g: float) -> None:
            leaf.grad = Tensor(g if leaf.grad is None else float(leaf.grad) + g)

        assert root.grad_fn is not None
        run_local([(root.grad_fn, 1.0)], to_grad, retain_graph=retain_graph)
        return
    node = current.current_node()
    ctx = from_int(context_id)
    node.check_held(ctx)
    if rref.is_owner():
        value = rref.local_value()
    else:
        if node.current() != ctx:
            raise RuntimeError(
                f"RRef.backward({context_id}) fetches the value under that context: call it "
                "inside its `with dist_autograd.context()` block, on its thread"
            )
        value = rref.to_here()
    api.backward(context_id, [_root(value)], retain_graph)
