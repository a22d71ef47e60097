"""The torch engine's pieces in one process: recv functions, local passes, frames' gradients."""

from __future__ import annotations

from typing import Any

import pytest

from protoref.autograd.core.ids import AutogradId
from protoref.autograd.runtime import dispatch, torch_engine
from protoref.autograd.runtime.contextdata import ContextData
from protoref.rpc.errors import CodecError

torch = pytest.importorskip("torch")

C = AutogradId(0, 1)
M = AutogradId(1, 2)


def test_received_tensors_become_recv_outputs_and_a_pass_fills_the_recv_and_the_context() -> None:
    got = [torch.tensor([1.0, 2.0], requires_grad=True), torch.tensor(3.0, requires_grad=True)]
    recv = dispatch.attach(C, M, 1, got)
    assert isinstance(recv, torch_engine.TorchRecv)
    assert [type(t.grad_fn).__name__ for t in got] == ["RecvRpcBackward"] * 2
    w = torch.tensor([5.0, 7.0], requires_grad=True)
    loss = (got[0] * w).sum() + got[1] * 0  # the second output is used with gradient zero
    assert dispatch.reachable([loss], C) == {M}
    data = ContextData(C)
    dispatch.run_local(dispatch.starts_of([loss]), data)
    assert [g.tolist() for g in recv.grads] == [[5.0, 7.0], 0.0]
    assert data.gradients()[w].tolist() == [1.0, 2.0]
    assert w.grad is None  # the context holds it, never .grad
    assert recv.anchor not in data.gradients()


def test_a_send_refuses_gradients_that_do_not_fit_its_tensors() -> None:
    t = torch.ones(2, 3, requires_grad=True)
    send = dispatch.make_send(C, M, [t])
    with pytest.raises(ValueError, match=r"shape \(3,\) for a tensor of shape \(2, 3\)"):
        send.roots([torch.ones(3)])
    with pytest.raises(ValueError, match="1 gradients for the 2 tensors"):
        dispatch.make_send(C, M, [t, t]).roots([torch.ones(2, 3)])


def test_gradients_cross_as_tensor_json_and_bad_ones_are_refused() -> None:
    grads = [torch.tensor([[1.5, -2.0]]), torch.tensor(0.25, dtype=torch.float64)]
    back = torch_engine.decode_grads(torch_engine.encode_grads(grads))
    assert [(g.dtype, g.tolist()) for g in back] == [(g.dtype, g.tolist()) for g in grads]
    bad: dict[str, Any] = dict(torch_engine.encode_grads(grads)[0])
    bad["shape"] = [3, 3]
    with pytest.raises(CodecError, match="needs 36"):
        torch_engine.decode_grads([bad])


def test_a_message_mixing_scalar_and_torch_tensors_is_refused() -> None:
    from protoref.autograd import tensor  # noqa: PLC0415

    with pytest.raises(TypeError, match="mixes"):
        dispatch.make_send(C, M, [tensor(1.0, requires_grad=True), torch.ones(1)])


def test_backward_roots_are_checked_as_torch_checks_them() -> None:
    with pytest.raises(RuntimeError, match="requires_grad not set on root"):
        dispatch.check_roots([torch.ones(())])
    with pytest.raises(RuntimeError, match="all roots need to be scalar"):
        dispatch.check_roots([torch.ones(2, requires_grad=True) * 2])
