"""``torch.optim.SGD`` for scalar tensors: ``p <- p - lr * (p.grad + weight_decay * p)``,
with optional momentum, updating each parameter's value in place."""

from __future__ import annotations

from collections.abc import Iterable

from protoref.autograd.runtime.engine import Tensor

__all__ = ["SGD"]


class SGD:
    """Stochastic gradient descent on the parameters whose ``.grad`` is set."""

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float = 1e-3,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
    ) -> None:
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        self.params = list(params)
        if not self.params:
            raise ValueError("optimizer got an empty parameter list")
        for p in self.params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, got {type(p).__name__}")
        self.lr = lr
        self.momentum = momentum
        self.weight_decay = weight_decay
        self._buffers: dict[Tensor, float] = {}

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        for p in self.params:
            if p.grad is None:
                continue
            d = float(p.grad) + self.weight_decay * p.value
            if self.momentum:
                # torch: the buffer starts as the first step's d, then momentum * buf + d
                previous = self._buffers.get(p)
                d = d if previous is None else self.momentum * previous + d
                self._buffers[p] = d
            p.set_(p.value - self.lr * d)
