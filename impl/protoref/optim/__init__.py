"""Optimizers for distributed autograd, shaped like ``torch.distributed.optim`` and
``torch.optim``: :class:`DistributedOptimizer` and :class:`SGD` over protoref's scalar tensors."""

from protoref.optim.optimizer import DistributedOptimizer
from protoref.optim.sgd import SGD

__all__ = ["SGD", "DistributedOptimizer"]
