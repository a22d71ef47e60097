"""The values of one context on one worker, beside the core's protocol state.

The core (:class:`~protoref.autograd.core.state.Container`) knows a context's send and recv
functions as the spec's records; the engine's objects they stand for, and the gradients
accumulated into this worker's leaves (torch's ``accumulatedGrads_``, keyed by the leaf
itself), live here, one :class:`ContextData` per context the container holds, erased with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from protoref.autograd.core.ids import AutogradId
from protoref.autograd.runtime.engine import Node, RecvRpcBackward, SendRpcBackward, Tensor
from protoref.autograd.runtime.torch_engine import TorchRecv, TorchSend

__all__ = ["ContextData"]


@dataclass
class ContextData:
    """The engine's side of context ``ctx`` on one worker."""

    ctx: AutogradId
    sends: dict[AutogradId, SendRpcBackward | TorchSend] = field(default_factory=dict)
    recvs: dict[AutogradId, RecvRpcBackward | TorchRecv] = field(default_factory=dict)
    #: Leaf -> its accumulated gradient (identity keys, as torch's are): a float for a scalar
    #: leaf, a torch tensor for a torch leaf.
    grads: dict[Any, Any] = field(default_factory=dict)
    #: The backward pass this worker is in (1 for the first), and whether it retains the graph.
    pass_no: int = 0
    retain_graph: bool = False
    #: The first error of this worker's part of the pass (or a flood child's), for the root.
    error: str = ""
    #: Nodes this worker's part of the pass ran without retain_graph: freed when that part
    #: ends (CleanupBackwardPass), not after each local run, so a node reached by the root
    #: and by send functions, or by two send functions (one value returned by two RPCs),
    #: runs for each of them within the pass, as torch's one graph task runs it once.
    ran: dict[int, Node] = field(default_factory=dict)

    def ran_node(self, node: Node) -> None:
        self.ran[id(node)] = node

    def free_ran(self) -> None:
        """The worker's part of the pass is over: free what it ran (retain_graph False)."""
        for node in self.ran.values():
            node.release()
        self.ran.clear()

    def accumulate(self, leaf: Any, grad: Any) -> None:
        prev = self.grads.get(leaf)
        self.grads[leaf] = grad if prev is None else prev + grad

    def gradients(self) -> dict[Any, Any]:
        """``get_gradients``: leaf -> its accumulated gradient (a new scalar tensor, or the
        torch tensor the context holds, as torch's ``accumulatedGrads_`` gives it)."""
        return {
            leaf: Tensor(g) if isinstance(g, float | int) else g for leaf, g in self.grads.items()
        }

    def new_pass(self, pass_no: int, retain_graph: bool) -> None:
        """Start pass ``pass_no``: recv functions start from zero again; leaves keep theirs
        (passes accumulate, as torch's do since PR #32506)."""
        self.free_ran()
        self.pass_no = pass_no
        self.retain_graph = retain_graph
        self.error = ""
        for recv in self.recvs.values():
            recv.reset()
