"""``torch.distributed.nn.RemoteModule`` over protoref.rpc (issue 26 §3).

torch's own RemoteModule runs only on torch's RPC agent (it asks the agent for device maps and
calls torch's private RPC functions), so a program moved to protoref imports this one instead.
As torch 2.13's (torch/distributed/nn/api/remote_module.py, the non-TorchScript path): the
module is built on the worker ``remote_device`` names (``"worker1/cpu"``, ``"rank:1/cpu"`` or
``"worker1"``) by an ``rpc.remote`` of the module class (which travels by name), and ``forward``
runs there (``rpc_sync``; ``forward_async`` gives the future), the module's RRef its argument.
``remote_parameters`` gives RRefs of the module's parameters (for ``DistributedOptimizer``).
Only CPU: a CUDA device is refused, as elsewhere in protoref. Unlike torch's, it is not an
``nn.Module`` itself (torch's refuses nearly every ``nn.Module`` method anyway): it has
``forward``, ``__call__``, ``forward_async``, ``remote_parameters``, ``get_module_rref`` and
``train``/``eval``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from protoref import rpc

__all__ = ["RemoteModule"]


def _parse_remote_device(remote_device: str) -> tuple[str | int, str]:
    """``"worker1/cpu"`` -> ("worker1", "cpu"); ``"rank:1/cpu"`` -> (1, "cpu") (torch's forms)."""
    worker, _, device = remote_device.partition("/")
    device = device or "cpu"
    if not worker:
        raise ValueError(
            f"Could not parse remote_device: {remote_device}. The valid format is "
            "'<workername>/<device>'"
        )
    if device != "cpu":
        raise ValueError(
            f"protoref has no CUDA support: remote_device {remote_device!r} must name the CPU"
        )
    if worker.startswith("rank:"):
        rank = worker.removeprefix("rank:")
        if not rank.isdigit():
            raise ValueError(f"Could not parse remote_device: {remote_device}")
        return int(rank), device
    return worker, device


def _create_module(
    module_cls: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]
) -> Any:
    module = module_cls(*args, **kwargs)
    if not hasattr(module, "forward") or not hasattr(module, "parameters"):
        raise ValueError(
            f"Expect `module_cls(*args, **kwargs)` returns an instance of <class nn.Module>, "
            f"but it returns an instance of {type(module)}."
        )
    return module


def _forward(module_rref: Any, *args: Any, **kwargs: Any) -> Any:
    return module_rref.local_value().forward(*args, **kwargs)


def _param_rrefs(module_rref: Any, recurse: bool) -> list[Any]:
    return [rpc.RRef(p) for p in module_rref.local_value().parameters(recurse)]


def _train(module_rref: Any, mode: bool) -> None:
    module_rref.local_value().train(mode)


class RemoteModule:
    """A module that lives on another worker; calling it runs its forward there."""

    def __init__(
        self,
        remote_device: str,
        module_cls: Callable[..., Any],
        args: Sequence[Any] | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.on, self.device = _parse_remote_device(remote_device)
        self.module_rref = rpc.remote(
            self.on, _create_module, (module_cls, tuple(args or ()), dict(kwargs or {}))
        )
        self.module_rref.to_here()  # torch's constructor waits for the module too (and fails)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return rpc.rpc_sync(self.on, _forward, (self.module_rref, *args), kwargs)

    __call__ = forward

    def forward_async(self, *args: Any, **kwargs: Any) -> Any:
        return rpc.rpc_async(self.on, _forward, (self.module_rref, *args), kwargs)

    def remote_parameters(self, recurse: bool = True) -> list[Any]:
        """RRefs of the module's parameters, owned by its worker."""
        return rpc.rpc_sync(self.on, _param_rrefs, (self.module_rref, recurse))  # type: ignore[no-any-return]

    def get_module_rref(self) -> Any:
        return self.module_rref

    def train(self, mode: bool = True) -> RemoteModule:
        rpc.rpc_sync(self.on, _train, (self.module_rref, mode))
        return self

    def eval(self) -> RemoteModule:
        return self.train(False)
