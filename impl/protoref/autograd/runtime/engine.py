"""A scalar reverse-mode engine: torch-shaped scalar tensors and their local backward pass.

:func:`tensor` makes a :class:`Tensor` (a Python float with ``requires_grad``, ``grad_fn``,
``+ - *``, unary minus, ``float()``, ``.item()``, ``.sum()``, identity hashing). An operation on
tensors that require grad records a :class:`Node` (``AddBackward0``, ``SubBackward0``,
``MulBackward0``, ``NegBackward0``) whose next edges are its inputs' ``grad_fn`` or, for a leaf,
the leaf itself. The distributed engine adds two kinds of node (torch's, in
torch/csrc/distributed/autograd/functions/): :class:`SendRpcBackward`, registered when tensors
that require grad leave in a message (its next edges: those tensors), and
:class:`RecvRpcBackward`, whose outputs are the ``grad_fn`` of the tensors a message brought.

:func:`run_local` is one worker's local part of a backward pass from some roots: the nodes
reachable from them, in dependency order (a node runs once every path into it has delivered its
gradient, so a leaf reached by two paths gets the sum), stopping at leaves (whose gradient goes
to the caller's ``on_leaf``: the distributed context, never ``.grad``) and at recv functions
(whose gradient accumulates in them until the protocol fires them). Saved values of a
``MulBackward0`` are freed after a pass without ``retain_graph``; a later pass through it raises
torch's error before anything is accumulated (:func:`check_not_freed`).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Final

from protoref.autograd.core.ids import AutogradId

__all__ = [
    "FREED",
    "Node",
    "RecvOutput",
    "RecvRpcBackward",
    "SendRpcBackward",
    "Tensor",
    "check_not_freed",
    "reachable_recvs",
    "run_local",
    "tensor",
]

#: torch's message for a pass through freed saved values (the first line of it).
FREED: Final = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed when "
    "you call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward "
    "through the graph a second time or if you need to access saved tensors after calling "
    "backward."
)

Number = float | int
_order = itertools.count()  # creation order of nodes (a deterministic topological tie-break)
_order_lock = threading.Lock()


def _next_order() -> int:
    with _order_lock:
        return next(_order)


class Node:
    """A backward function: ``apply(grad)`` gives the gradient for each next edge."""

    name = "Node"

    def __init__(self, inputs: Sequence[Tensor]) -> None:
        #: Next edges: each input's grad_fn, or the input itself if it is a leaf that requires
        #: grad; None where the input needs no gradient.
        self.next: list[Node | Tensor | None] = [_edge(t) for t in inputs]
        self.order = _next_order()

    def apply(self, grad: float) -> list[float]:
        raise NotImplementedError

    def saved_freed(self) -> bool:
        return False

    def release(self) -> None:
        """Free the saved values (a pass without ``retain_graph`` ran through this node)."""

    def __repr__(self) -> str:
        return f"<{self.name} object at {id(self):#x}>"


def _edge(t: Tensor) -> Node | Tensor | None:
    if t.grad_fn is not None:
        return t.grad_fn
    return t if t.requires_grad else None


class AddBackward0(Node):
    name = "AddBackward0"

    def apply(self, grad: float) -> list[float]:
        return [grad, grad]


class SubBackward0(Node):
    name = "SubBackward0"

    def apply(self, grad: float) -> list[float]:
        return [grad, -grad]


class NegBackward0(Node):
    name = "NegBackward0"

    def apply(self, grad: float) -> list[float]:
        return [-grad]


class MulBackward0(Node):
    """Saves both operands' values (torch saves the tensors): d(a*b) = (grad*b, grad*a)."""

    name = "MulBackward0"

    def __init__(self, inputs: Sequence[Tensor]) -> None:
        super().__init__(inputs)
        self.saved: tuple[float, float] | None = (inputs[0].value, inputs[1].value)

    def apply(self, grad: float) -> list[float]:
        if self.saved is None:
            raise RuntimeError(FREED)
        a, b = self.saved
        return [grad * b, grad * a]

    def saved_freed(self) -> bool:
        return self.saved is None

    def release(self) -> None:
        self.saved = None


class SendRpcBackward:
    """torch's ``SendRpcBackward``: the tensors message ``mid`` sent; their gradients come back
    in a BACKWARD_AUTOGRAD_REQ (one per tensor) and flow into their graphs from here (a root
    of the receiving worker's local pass)."""

    name = "SendRpcBackward"

    def __init__(self, ctx: AutogradId, mid: AutogradId, inputs: Sequence[Tensor]) -> None:
        self.ctx = ctx
        self.mid = mid
        self.inputs = list(inputs)

    def roots(self, grads: Sequence[float]) -> list[tuple[Node | Tensor, float]]:
        """The local pass's roots for the gradients a request brought."""
        if len(grads) != len(self.inputs):
            raise ValueError(
                f"{len(grads)} gradients for the {len(self.inputs)} tensors of message {self.mid}"
            )
        out: list[tuple[Node | Tensor, float]] = []
        for t, g in zip(self.inputs, grads, strict=True):
            edge = _edge(t)
            if edge is not None:
                out.append((edge, g))
        return out


class RecvRpcBackward:
    """torch's ``RecvRpcBackward``: the tensors message ``mid`` from ``src`` brought. Each
    tensor's ``grad_fn`` is one of its outputs (:class:`RecvOutput`); their gradients
    accumulate in :attr:`grads` until the protocol fires it (RecvRpcBackwardApply)."""

    name = "RecvRpcBackward"

    def __init__(self, ctx: AutogradId, mid: AutogradId, src: int, count: int) -> None:
        self.ctx = ctx
        self.mid = mid
        self.src = src
        self.grads = [0.0] * count
        self.outputs = [RecvOutput(self, i) for i in range(count)]

    def reset(self) -> None:
        """A new pass: the gradients start from zero again."""
        self.grads = [0.0] * len(self.grads)


class RecvOutput(Node):
    """Output ``index`` of a :class:`RecvRpcBackward`: the ``grad_fn`` of one received tensor;
    a local pass ends here, adding its gradient to the recv function's."""

    name = "RecvRpcBackward"

    def __init__(self, recv: RecvRpcBackward, index: int) -> None:
        super().__init__(())
        self.recv = recv
        self.index = index

    def apply(self, grad: float) -> list[float]:
        self.recv.grads[self.index] += grad
        return []


def _value(x: object) -> float:
    if isinstance(x, Tensor):
        return x.value
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise TypeError(f"unsupported operand: a Tensor and a {type(x).__name__}")
    return float(x)


class Tensor:
    """A scalar (0-dim) tensor. Hashes by identity, as torch's tensors do (``get_gradients``
    is keyed by the leaf itself); ``==`` compares values, returning a bool."""

    __slots__ = ("__weakref__", "_value", "grad", "grad_fn", "requires_grad")
    __hash__ = object.__hash__

    def __init__(self, value: Number, requires_grad: bool = False, grad_fn: Node | None = None):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"tensor(): a number is required, not {type(value).__name__}")
        self._value = float(value)
        self.requires_grad = bool(requires_grad) or grad_fn is not None
        self.grad_fn = grad_fn
        #: Stays None under distributed autograd (gradients live in the context); an optimizer
        #: may set it, as torch's local optimizer does.
        self.grad: Tensor | None = None

    # ------------------------------------------------------------------ values

    @property
    def value(self) -> float:
        return self._value

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    def set_(self, value: Number) -> Tensor:
        """In-place update of a leaf's value (optimizers); refused for a non-leaf that
        requires grad, as torch refuses an in-place change of a leaf that requires grad outside
        ``no_grad`` (ours is the optimizer's own path, so a leaf may change)."""
        if self.grad_fn is not None:
            raise RuntimeError("a view or a result of an operation cannot be changed in place")
        self._value = _value(value)
        return self

    def item(self) -> float:
        return self._value

    def sum(self) -> Tensor:
        """A scalar's sum is itself (torch programs write ``loss.sum()``)."""
        return self

    def detach(self) -> Tensor:
        return Tensor(self._value)

    def __float__(self) -> float:
        return self._value

    def __bool__(self) -> bool:
        return self._value != 0.0

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Tensor | int | float) and not isinstance(other, bool):
            return self._value == _value(other)
        return NotImplemented

    def __repr__(self) -> str:
        text = f"{self._value:g}"
        number = text if any(ch in text for ch in ".en") else text + "."
        if self.grad_fn is not None:
            return f"tensor({number}, grad_fn=<{self.grad_fn.name}>)"
        if self.requires_grad:
            return f"tensor({number}, requires_grad=True)"
        return f"tensor({number})"

    # ------------------------------------------------------------------ operations

    def _op(self, other: object, node: type[Node], value: float, swap: bool = False) -> Tensor:
        o = other if isinstance(other, Tensor) else Tensor(_value(other))
        inputs = (o, self) if swap else (self, o)
        if not (self.requires_grad or o.requires_grad):
            return Tensor(value)
        return Tensor(value, grad_fn=node(inputs))

    def __add__(self, other: object) -> Tensor:
        return self._op(other, AddBackward0, self._value + _value(other))

    def __radd__(self, other: object) -> Tensor:
        return self._op(other, AddBackward0, _value(other) + self._value, swap=True)

    def __sub__(self, other: object) -> Tensor:
        return self._op(other, SubBackward0, self._value - _value(other))

    def __rsub__(self, other: object) -> Tensor:
        return self._op(other, SubBackward0, _value(other) - self._value, swap=True)

    def __mul__(self, other: object) -> Tensor:
        return self._op(other, MulBackward0, self._value * _value(other))

    def __rmul__(self, other: object) -> Tensor:
        return self._op(other, MulBackward0, _value(other) * self._value, swap=True)

    def __neg__(self) -> Tensor:
        if not self.requires_grad:
            return Tensor(-self._value)
        return Tensor(-self._value, grad_fn=NegBackward0((self,)))


def tensor(value: Number, requires_grad: bool = False) -> Tensor:
    """``torch.tensor(value, requires_grad=...)`` for a scalar."""
    return Tensor(value, requires_grad=requires_grad)


# --------------------------------------------------------------------------- local passes


def _nodes_from(starts: Iterable[Node]) -> list[Node]:
    """Every node reachable from ``starts`` through next edges."""
    seen: dict[int, Node] = {}
    stack = list(starts)
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen[id(node)] = node
            stack.extend(e for e in node.next if isinstance(e, Node))
    return list(seen.values())


def reachable_recvs(tensors: Iterable[Tensor], ctx: AutogradId) -> frozenset[AutogradId]:
    """The recv functions of context ``ctx`` the tensors' graphs reach: the next edges of a
    send function made for them (the spec's ``in``)."""
    starts = [t.grad_fn for t in tensors if t.grad_fn is not None]
    return frozenset(
        n.recv.mid for n in _nodes_from(starts) if isinstance(n, RecvOutput) and n.recv.ctx == ctx
    )


def check_not_freed(starts: Iterable[Node]) -> None:
    """Raise torch's error if a pass from ``starts`` would need values a pass freed."""
    if any(n.saved_freed() for n in _nodes_from(starts)):
        raise RuntimeError(FREED)


def run_local(
    roots: Sequence[tuple[Node | Tensor, float]],
    on_leaf: Callable[[Tensor, float], None],
    *,
    retain_graph: bool,
    release: Callable[[Node], None] | None = None,
) -> None:
    """One worker's local pass: ``roots`` are (next edge, gradient) pairs (a loss's grad_fn with
    1.0, or a send function's inputs with the gradients a request brought). Nodes run in
    dependency order; leaves go to ``on_leaf``; recv functions accumulate. Checked first, so a
    pass through freed values raises before anything is accumulated. Without ``retain_graph``
    a node that ran is freed at once, or handed to ``release`` (the distributed engine frees
    them when the worker's part of the pass is over: one node may be reached by the root and
    by several send functions, each a separate run; backward functions are linear in the
    gradient, so the runs' sum is the single run's torch makes)."""
    nodes = _nodes_from(r for r, _ in roots if isinstance(r, Node))
    if any(n.saved_freed() for n in nodes):
        raise RuntimeError(FREED)
    waiting: dict[int, int] = dict.fromkeys(map(id, nodes), 0)
    for node in nodes:
        for e in node.next:
            if isinstance(e, Node):
                waiting[id(e)] += 1
    pending: dict[int, float] = {}
    leaves: list[tuple[Tensor, float]] = []

    def deliver(edge: Node | Tensor | None, grad: float) -> None:
        if isinstance(edge, Tensor):
            leaves.append((edge, grad))
        elif edge is not None:
            pending[id(edge)] = pending.get(id(edge), 0.0) + grad

    for edge, grad in roots:
        deliver(edge, grad)
    # newest first among the ready ones (a deterministic order; any order is correct)
    ready = [(-n.order, n) for n in nodes if waiting[id(n)] == 0]
    heapq.heapify(ready)
    while ready:
        _, node = heapq.heappop(ready)
        outs = node.apply(pending.pop(id(node), 0.0))
        for nxt, g in zip(node.next, outs, strict=True):
            deliver(nxt, g)
            if isinstance(nxt, Node):
                waiting[id(nxt)] -= 1
                if waiting[id(nxt)] == 0:
                    heapq.heappush(ready, (-nxt.order, nxt))
        if not retain_graph:
            if release is None:
                node.release()
            else:
                release(node)
    for leaf, g in leaves:
        on_leaf(leaf, g)
