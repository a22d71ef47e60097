"""torch's local autograd under protoref's distributed autograd (issue 26 §1).

The local graph is torch's; the distributed part (contexts, ids, send and recv functions, the
cleanup cascade, the Echo backward) is the node's, as for the scalar engine
(:mod:`protoref.autograd.runtime.engine`). What torch's DistEngine does
(torch/csrc/distributed/autograd/functions/), done with torch's public autograd:

- a send (:class:`TorchSend`, torch's ``SendRpcBackward``) keeps the tensors of a message that
  require grad; the gradients a ``BWD_REQ`` brings for them are the roots of a local pass;
- a receive (:func:`attach`, torch's ``addRecvRpcBackward``) makes the received tensors outputs
  of :class:`RecvRpc`, a ``torch.autograd.Function`` that modifies them in place
  (``mark_dirty``), so their ``grad_fn`` is ``<RecvRpcBackward>`` as in torch; its backward adds
  the gradients into the :class:`TorchRecv`, which the protocol fires (``RecvRpcBackwardApply``)
  and sends on. An unused output gets zeros, as torch's ``RecvRpcBackward::apply`` puts them.
  A custom function runs only if an input is among the pass's ``inputs``, so each recv
  function has an *anchor*, an empty leaf that is its first input;
- a local pass (:func:`run_local`) is ``torch.autograd.backward`` from the roots over the
  leaves the graph reaches and the anchors of its recv functions: leaf gradients go to the
  context; each leaf's ``.grad`` is set aside for the run and put back after it (so the hooks
  of its AccumulateGrad node run, DistributedDataParallel's among them). Each run keeps the
  graph (``retain_graph=True``): one node may be reached by the root and by several send
  functions, each a separate run of one pass (torch's one graph task runs it once; backward
  functions are linear in the gradient, so the sum is the same). That a pass without
  ``retain_graph`` frees the graph is the core's (``freed``: the next pass of the context fails
  at once with torch's error); saved tensors are freed with the graph itself.

Gradients travel in the backward frames as tensors, in
:class:`protoref.rpc.tensors.TensorCodec`'s JSON form (dtype, shape, bytes), never pickled.
Nothing here imports torch at module level: the functions are reached only for values that are
torch tensors, so torch is loaded already.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from pydantic import JsonValue

from protoref.autograd.core.ids import AutogradId
from protoref.rpc.tensors import TensorCodec

__all__ = [
    "RECV_MARK",
    "TorchRecv",
    "TorchSend",
    "attach",
    "decode_grads",
    "encode_grads",
    "is_tensor",
    "ones_root",
    "reachable_recvs",
    "run_local",
]

#: The attribute that marks a recv function's anchor leaf (never a context's leaf).
RECV_MARK: Final = "_protoref_recv_anchor"
_CODEC: Final = TensorCodec()


def _torch() -> Any:
    return sys.modules["torch"]


def is_tensor(value: object) -> bool:
    """``value`` is a torch tensor (False where torch was never imported)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


class TorchSend:
    """torch's ``SendRpcBackward``: the tensors message ``mid`` sent that require grad."""

    name = "SendRpcBackward"

    def __init__(self, ctx: AutogradId, mid: AutogradId, inputs: Sequence[Any]) -> None:
        self.ctx = ctx
        self.mid = mid
        self.inputs = list(inputs)

    def roots(self, grads: Sequence[Any]) -> list[tuple[Any, Any]]:
        """The local pass's roots: each input with the gradient a request brought for it."""
        if len(grads) != len(self.inputs):
            raise ValueError(
                f"{len(grads)} gradients for the {len(self.inputs)} tensors of message {self.mid}"
            )
        for t, g in zip(self.inputs, grads, strict=True):
            if not is_tensor(g) or tuple(g.shape) != tuple(t.shape):
                shape = tuple(g.shape) if is_tensor(g) else type(g).__name__
                raise ValueError(
                    f"a gradient of shape {shape} for a tensor of shape {tuple(t.shape)} "
                    f"(message {self.mid})"
                )
        return list(zip(self.inputs, grads, strict=True))


class TorchRecv:
    """torch's ``RecvRpcBackward``: the tensors message ``mid`` from ``src`` brought; their
    gradients accumulate in :attr:`grads` (zeros to begin with) until the protocol fires it."""

    name = "RecvRpcBackward"

    def __init__(self, ctx: AutogradId, mid: AutogradId, src: int, tensors: Sequence[Any]):
        torch = _torch()
        self.ctx = ctx
        self.mid = mid
        self.src = src
        self._like = [torch.zeros_like(t, requires_grad=False) for t in tensors]
        self.grads: list[Any] = []
        self.reset()
        self.anchor = torch.empty(0, requires_grad=True)
        setattr(self.anchor, RECV_MARK, True)

    def reset(self) -> None:
        """A new pass: the gradients start from zero again."""
        self.grads = [z.clone() for z in self._like]

    def add(self, grads: Sequence[Any]) -> None:
        for i, g in enumerate(grads):
            if g is not None:
                self.grads[i] = self.grads[i] + g


_recv_function: Any = None


def _recv_rpc() -> Any:
    """The ``torch.autograd.Function`` named so that its backward node is ``RecvRpcBackward``
    (made on first use: torch is imported by then)."""
    global _recv_function  # noqa: PLW0603 - one class per process, made lazily
    if _recv_function is None:
        torch = _torch()

        class RecvRpc(torch.autograd.Function):  # type: ignore[misc, name-defined]
            @staticmethod
            def forward(ctx: Any, anchor: Any, *tensors: Any) -> Any:
                ctx.mark_dirty(*tensors)
                return tensors

            @staticmethod
            def backward(ctx: Any, *grads: Any) -> Any:
                ctx.recv.add(grads)
                return (None,) * (1 + len(grads))

        _recv_function = RecvRpc
    return _recv_function


def attach(recv: TorchRecv, tensors: Sequence[Any]) -> None:
    """The received ``tensors`` become outputs of ``recv`` (in place: the objects the UDF or
    the caller sees), requiring grad, their ``grad_fn`` ``RecvRpcBackward``."""
    if not tensors:
        return
    torch = _torch()
    for t in tensors:
        if t._is_view():  # torch refuses a function that changes a view in place
            raise RuntimeError("a received tensor is a view: it cannot become a recv output")
        if t.grad_fn is None:  # a fresh leaf off the wire: in place needs it not to require grad
            t.requires_grad_(False)
    with torch.enable_grad():
        _recv_rpc().apply(recv.anchor, *tensors)
    tensors[0].grad_fn.recv = recv


def _nodes_from(starts: Iterable[Any]) -> list[Any]:
    """Every node of torch's graph reachable from ``starts``."""
    seen: dict[int, Any] = {}
    stack = [s for s in starts if s is not None]
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen[id(node)] = node
            stack.extend(n for n, _ in node.next_functions if n is not None)
    return list(seen.values())


def reachable_recvs(tensors: Iterable[Any], ctx: AutogradId) -> frozenset[AutogradId]:
    """The recv functions of context ``ctx`` the tensors' graphs reach (the spec's ``in``)."""
    found: set[AutogradId] = set()
    for node in _nodes_from(t.grad_fn for t in tensors):
        recv = getattr(node, "recv", None)
        if isinstance(recv, TorchRecv) and recv.ctx == ctx:
            found.add(recv.mid)
    return frozenset(found)


def ones_root(root: Any) -> tuple[Any, Any]:
    """A root of ``dist_autograd.backward`` with its implicit gradient (a scalar's 1)."""
    return root, _torch().ones_like(root)


def run_local(roots: Sequence[tuple[Any, Any]], on_leaf: Callable[[Any, Any], None]) -> None:
    """One local pass from ``roots`` ((tensor, gradient) pairs): leaf gradients to
    ``on_leaf``, recv functions' gradients into them (their backward); ``.grad`` untouched."""
    torch = _torch()
    outputs, grads = [], []
    for t, g in roots:
        if t.grad_fn is None:
            if t.requires_grad and not hasattr(t, RECV_MARK):
                on_leaf(t, g)  # a leaf sent as it is: its gradient is the one that came
            continue
        outputs.append(t)
        grads.append(g)
    if not outputs:
        return
    leaves: list[Any] = []
    anchors: list[Any] = []
    for node in _nodes_from(t.grad_fn for t in outputs):
        var = getattr(node, "variable", None)  # an AccumulateGrad: a leaf of the graph
        if var is not None:
            (anchors if hasattr(var, RECV_MARK) else leaves).append(var)
    if not leaves and not anchors:
        return
    # torch.autograd.backward into the leaves' .grad, which is set aside before and put back
    # after: the leaves' AccumulateGrad nodes run, so the hooks on them run as in torch's
    # DistEngine (DistributedDataParallel's reducer all-reduces there and writes the average
    # into .grad; torch's writes it into the context, which is what the context gets here)
    before = [leaf.grad for leaf in leaves]
    for leaf in leaves:
        leaf.grad = None
    try:
        with torch.enable_grad():
            torch.autograd.backward(outputs, grads, retain_graph=True, inputs=[*leaves, *anchors])
        found = [leaf.grad for leaf in leaves]
    finally:
        for leaf, grad in zip(leaves, before, strict=True):
            leaf.grad = grad
    for leaf, g in zip(leaves, found, strict=True):
        if g is not None:
            on_leaf(leaf, g)


def encode_grads(grads: Sequence[Any]) -> tuple[dict[str, JsonValue], ...]:
    """Gradient tensors for a backward frame (the tensor codec's JSON form)."""
    out: list[dict[str, JsonValue]] = []
    for g in grads:
        encoded = _CODEC.encode(g)
        assert isinstance(encoded, dict)
        out.append(encoded)
    return tuple(out)


def decode_grads(data: Sequence[dict[str, JsonValue]]) -> list[Any]:
    """The gradient tensors of a backward frame (checked by the codec; a CodecError names
    what was wrong)."""
    return [_CODEC.decode(dict(d)) for d in data]
