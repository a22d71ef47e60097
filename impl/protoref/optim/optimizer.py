"""``torch.distributed.optim.DistributedOptimizer`` for protoref's workers.

As torch 2.13 does it (torch/distributed/optim/optimizer.py, the non-TorchScript path): the
parameters' RRefs are grouped by owner; each owner builds a local optimizer over its parameters
(an RPC returning an RRef to it); :meth:`DistributedOptimizer.step` checks the context, then asks
every owner to read ``get_gradients(context_id)``, set the parameters' ``.grad`` and step, under
one lock per worker, and waits for all of them (the last error is raised).

The RPC layer is the calling thread's: the in-process world's
(:mod:`protoref.autograd.runtime.local`) when the thread acts in one, else :mod:`protoref.rpc`.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, ClassVar

import protoref.autograd as dist_autograd

__all__ = ["DistributedOptimizer"]


class _LocalOptimizer:
    """The optimizer of one worker's parameters (torch's ``_LocalOptimizer``)."""

    global_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self, optim_cls: type, local_params_rref: Sequence[Any], *args: Any, **kwargs: Any
    ):
        self._local_params = [rref.local_value() for rref in local_params_rref]
        self.optim = optim_cls(self._local_params, *args, **kwargs)

    def step(self, autograd_ctx_id: int) -> None:
        all_local_grads = dist_autograd.get_gradients(autograd_ctx_id)
        with _LocalOptimizer.global_lock:
            # torch 2.13 steps its functional optimizers (SGD, Adam, ...: _FunctionalSGD) with
            # the context's gradients and never touches .grad; the optimizer here reads .grad,
            # so it is set for the step and put back after it
            before = {param: param.grad for param in all_local_grads}
            for param, grad in all_local_grads.items():
                param.grad = grad
            try:
                self.optim.step()
            finally:
                for param, grad in before.items():
                    param.grad = grad


def _new_local_optimizer(
    optim_cls: type | str, local_params_rref: Sequence[Any], *args: Any, **kwargs: Any
) -> Any:
    """On a parameters' owner: its local optimizer, in an RRef. The class comes by name over
    the wire (``module:qualname``: a class is never pickled), itself in-process."""
    if isinstance(optim_cls, str):
        from protoref.rpc.udf import resolve  # noqa: PLC0415 - the runtime's only

        optim_cls = resolve(optim_cls)  # type: ignore[assignment]
    assert isinstance(optim_cls, type)
    return _backend().RRef(_LocalOptimizer(optim_cls, local_params_rref, *args, **kwargs))


def _local_optimizer_step(local_optim_rref: Any, autograd_ctx_id: int) -> None:
    local_optim_rref.local_value().step(autograd_ctx_id)


def _wait_for_all(futures: Sequence[Any]) -> list[Any]:
    exception: BaseException | None = None
    results: list[Any] = []
    for fut in futures:
        try:
            results.append(fut.wait())
        except Exception as e:
            results.append(e)
            exception = e
    if exception is not None:
        raise exception
    return results


def _backend() -> Any:
    from protoref.autograd.runtime import local  # noqa: PLC0415 - the backend is chosen per call

    world = local.active_world()
    if world is not None:
        return world
    import protoref.rpc  # noqa: PLC0415 - only when no in-process world is in use

    return protoref.rpc


class DistributedOptimizer:
    """Applies ``optimizer_class`` on every worker that owns some of ``params_rref``."""

    def __init__(
        self, optimizer_class: type, params_rref: Sequence[Any], *args: Any, **kwargs: Any
    ):
        rpc = _backend()
        if getattr(rpc, "__name__", "") == "protoref.rpc":  # over the wire: by its name
            from protoref.rpc.udf import qualified_name  # noqa: PLC0415

            optim: type | str = qualified_name(optimizer_class)
        else:
            optim = optimizer_class
        per_worker_params_rref: defaultdict[Any, list[Any]] = defaultdict(list)
        for param in params_rref:
            per_worker_params_rref[param.owner()].append(param)
        remote_optim_futs = [
            rpc.rpc_async(
                worker,
                _new_local_optimizer,
                args=(optim, param_rrefs, *args),
                kwargs=kwargs,
            )
            for worker, param_rrefs in per_worker_params_rref.items()
        ]
        self.remote_optimizers = _wait_for_all(remote_optim_futs)

    def step(self, context_id: int) -> None:
        """One optimization step on every worker, with the gradients of ``context_id``."""
        dist_autograd._is_valid_context(context_id)
        rpc = _backend()
        rpc_futs = [
            rpc.rpc_async(optimizer.owner(), _local_optimizer_step, args=(optimizer, context_id))
            for optimizer in self.remote_optimizers
        ]
        _wait_for_all(rpc_futs)
