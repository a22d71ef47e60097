"""The RRef runtime behind an API shaped like ``torch.distributed.rpc``.

``init_rpc(name, rank, world_size, ...)``, ``remote``, ``rpc_sync``, ``rpc_async``, ``RRef``
(``to_here``, ``owner``, ``owner_name``, ``local_value``, ``is_owner``, ``confirmed_by_owner``)
and ``shutdown(graceful=True)``. Functions run remotely are named by ``module:qualname`` and
imported by the callee (code is never pickled); arguments and results are JSON values, or types
an explicit :class:`Codec` handles. Peers authenticate with a shared secret (``secret=`` or the
``PROTOREF_RPC_SECRET`` environment variable); the master is ``master_addr:master_port`` (or
``MASTER_ADDR``/``MASTER_PORT``). Several workers may live in one process, each initialised on
its own thread; the module-level functions act for the calling thread's worker.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from protoref.rref.runtime.agent import Agent, RpcFuture, RpcOptions, ShutdownReport, current_agent
from protoref.rref.runtime.codec import Codec
from protoref.rref.runtime.errors import (
    CodecError,
    PeerDiscoveryError,
    RemoteError,
    RPCError,
    RPCTimeoutError,
    UnresolvableFunctionError,
)
from protoref.rref.runtime.handle import RRef, WorkerInfo

__all__ = [
    "Codec",
    "CodecError",
    "PeerDiscoveryError",
    "RPCError",
    "RPCTimeoutError",
    "RRef",
    "RemoteError",
    "RpcFuture",
    "RpcOptions",
    "ShutdownReport",
    "UnresolvableFunctionError",
    "WorkerInfo",
    "get_worker_info",
    "init_rpc",
    "remote",
    "rpc_async",
    "rpc_sync",
    "shutdown",
]


def init_rpc(
    name: str,
    rank: int,
    world_size: int,
    *,
    secret: bytes | str | None = None,
    master_addr: str | None = None,
    master_port: int | None = None,
    options: RpcOptions | None = None,
    trace: Path | str | None = None,
    codecs: Sequence[Codec] | None = None,
    rpc_timeout: float | None = None,
) -> Agent:
    """Start this worker and block until all ``world_size`` workers have joined."""
    key = secret if secret is not None else os.environ.get("PROTOREF_RPC_SECRET")
    if key is None and options is None:
        raise PeerDiscoveryError("no shared secret: pass secret= or set PROTOREF_RPC_SECRET")
    opts = options or RpcOptions(secret=b"")
    changes: dict[str, Any] = {}
    if key is not None:
        changes["secret"] = key.encode() if isinstance(key, str) else key
    addr = master_addr or (None if options else os.environ.get("MASTER_ADDR"))
    port = master_port or (None if options else os.environ.get("MASTER_PORT"))
    if addr:
        changes["master_addr"] = addr
    if port:
        changes["master_port"] = int(port)
    if trace is not None:
        changes["trace"] = Path(trace)
    if codecs is not None:
        changes["codecs"] = tuple(codecs)
    if rpc_timeout is not None:
        changes["rpc_timeout"] = rpc_timeout
    agent = Agent(name, rank, world_size, replace(opts, **changes))
    agent.start()
    return agent


def remote(
    to: str | WorkerInfo,
    func: Callable[..., Any] | str,
    args: Sequence[Any] = (),
    kwargs: dict[str, Any] | None = None,
) -> RRef[Any]:
    """Run ``func`` on ``to`` and return an RRef to its result at once (rpc.remote)."""
    return current_agent().remote(_name(to), func, args, kwargs or {})


def rpc_async(
    to: str | WorkerInfo,
    func: Callable[..., Any] | str,
    args: Sequence[Any] = (),
    kwargs: dict[str, Any] | None = None,
    timeout: float | None = None,
) -> RpcFuture[Any]:
    """Run ``func`` on ``to``; a future of its result. A timeout of 0 waits forever."""
    return current_agent().rpc_async(_name(to), func, args, kwargs or {}, timeout)


def rpc_sync(
    to: str | WorkerInfo,
    func: Callable[..., Any] | str,
    args: Sequence[Any] = (),
    kwargs: dict[str, Any] | None = None,
    timeout: float | None = None,
) -> Any:
    """Run ``func`` on ``to`` and wait for its result."""
    return rpc_async(to, func, args, kwargs, timeout).wait()


def get_worker_info(name: str | None = None) -> WorkerInfo:
    agent = current_agent()
    return agent.worker_info(name or agent.name)


def shutdown(graceful: bool = True) -> ShutdownReport:
    """Stop this thread's worker; graceful: wait for every worker and report leaks."""
    return current_agent().shutdown(graceful)


def _name(to: str | WorkerInfo) -> str:
    return to.name if isinstance(to, WorkerInfo) else to
