"""The scalar reverse-mode engine and SGD: values, gradients, torch's repr and errors."""

from __future__ import annotations

import pytest

from protoref.autograd.core.ids import AutogradId
from protoref.autograd.runtime.engine import (
    FREED,
    RecvRpcBackward,
    SendRpcBackward,
    Tensor,
    reachable_recvs,
    run_local,
    tensor,
)
from protoref.autograd.runtime.payload import TensorCodec, grad_tensors
from protoref.optim import SGD

C = AutogradId(0, 0)


def grads_of(root: Tensor, *, retain_graph: bool = True) -> dict[Tensor, float]:
    found: dict[Tensor, float] = {}

    def on_leaf(t: Tensor, g: float) -> None:
        found[t] = found.get(t, 0.0) + g

    assert root.grad_fn is not None
    run_local([(root.grad_fn, 1.0)], on_leaf, retain_graph=retain_graph)
    return found


def test_operations_values_and_gradients() -> None:
    x = tensor(2.0, requires_grad=True)
    y = tensor(3.0, requires_grad=True)
    z = x * y + x * x - (-y) - 1 + 2 * x + (5 - y)
    assert float(z) == 6 + 4 + 3 - 1 + 4 + 2
    g = grads_of(z)
    assert g[x] == 3 + 2 * 2 + 2  # y + 2x + 2
    assert g[y] == 2 + 1 - 1  # x + 1 - 1
    assert z.requires_grad
    assert not (tensor(1.0) * 2).requires_grad


def test_torch_like_repr_identity_hash_and_in_place_update() -> None:
    x = tensor(2.0, requires_grad=True)
    assert repr(x) == "tensor(2., requires_grad=True)"
    assert repr(x * 3) == "tensor(6., grad_fn=<MulBackward0>)"
    assert repr(tensor(1.5)) == "tensor(1.5)"
    twin = tensor(2.0, requires_grad=True)
    assert x == twin  # values compare
    assert len({x: 1, twin: 2}) == 2  # keys by identity
    x.set_(1.0)
    assert float(x) == 1.0
    assert x.item() == 1.0
    assert x.sum() is x
    with pytest.raises(RuntimeError, match="cannot be changed in place"):
        (x * 2).set_(3.0)
    with pytest.raises(TypeError, match="a number is required"):
        tensor("1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unsupported operand"):
        x + "a"  # type: ignore[operator]


def test_freed_graph_raises_before_anything_accumulates() -> None:
    x = tensor(2.0, requires_grad=True)
    y = x * x + x
    assert grads_of(y, retain_graph=False)[x] == 5.0
    with pytest.raises(RuntimeError) as err:
        grads_of(y)
    assert str(err.value) == FREED
    z = x + x  # no saved values: a second pass is fine, as in torch
    grads_of(z, retain_graph=False)
    assert grads_of(z)[x] == 2.0


def test_recv_outputs_accumulate_and_reachability() -> None:
    mid = AutogradId(1, 0)
    recv = RecvRpcBackward(C, mid, 1, 2)
    a, b = tensor(1.0), tensor(2.0)
    a.grad_fn, b.grad_fn = recv.outputs
    a.requires_grad = b.requires_grad = True
    loss = a * 3 + b * a
    assert reachable_recvs([loss], C) == {mid}
    assert reachable_recvs([loss], AutogradId(0, 1)) == frozenset()
    grads_of(loss)
    assert recv.grads == [3 + 2.0, 1.0]
    send = SendRpcBackward(C, AutogradId(0, 0), [a, tensor(1.0)])
    with pytest.raises(ValueError, match="1 gradients for the 2 tensors"):
        send.roots([1.0])


def test_codec_round_trip_and_refusals() -> None:
    codec = TensorCodec()
    x = tensor(2.5, requires_grad=True)
    back = codec.decode(codec.encode(x))
    assert isinstance(back, Tensor)
    assert float(back) == 2.5
    assert back.requires_grad
    assert back.grad_fn is None
    for bad in (
        {"value": float("nan"), "requires_grad": True},
        {"value": 1},
        [1],
        {"value": True, "requires_grad": 1},
    ):
        with pytest.raises(ValueError, match=r"tensor|value|requires_grad"):
            codec.decode(bad)  # type: ignore[arg-type]
    assert grad_tensors(([x, tensor(1.0)], {"k": (x,)})) == [x, x]


def test_sgd_with_momentum_and_weight_decay_as_torch() -> None:
    p = tensor(1.0, requires_grad=True)
    opt = SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01)
    p.grad = tensor(2.0)
    opt.step()  # buf = 2 + 0.01 = 2.01
    assert float(p) == pytest.approx(1.0 - 0.1 * 2.01)
    p.grad = tensor(2.0)
    opt.step()  # buf = 0.9 * 2.01 + 2 + 0.01 * p
    assert float(p) == pytest.approx(0.799 - 0.1 * (0.9 * 2.01 + 2 + 0.01 * 0.799))
    opt.zero_grad()
    assert p.grad is None
    with pytest.raises(ValueError, match="Invalid learning rate"):
        SGD([p], lr=-1)
