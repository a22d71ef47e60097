"""The RPC layer behind ``torch.distributed.rpc``'s API: ``import protoref.rpc as rpc``.

The layer is protocol-free (agent, transport, frames, codecs, handshake, liveness, futures,
shutdown); the protocols plug in (:mod:`.hooks`, :mod:`.plugins`): the RRef runtime provides
``remote``, ``rpc_async`` and :class:`RRef` (attributes of this module found through the
plug-ins), distributed autograd rides on its calls.

A program written against torch's RPC runs with only its import changed, with the usual
``MASTER_ADDR``/``MASTER_PORT``: ``init_rpc(name, backend=None, rank=-1, world_size=None,
rpc_backend_options=None)``, ``rpc_sync``/``rpc_async``/``remote`` (to a name, a rank or a
:class:`WorkerInfo`; ``timeout`` -1 for the default, 0 for none), ``get_worker_info``,
``shutdown(graceful=True)``, :class:`RRef` (``to_here``, ``owner``, ``owner_name``,
``local_value``, ``is_owner``, ``confirmed_by_owner``, and the helpers ``rpc_sync()``,
``rpc_async()``, ``remote()``), :mod:`.functions` (``async_execution``),
:class:`TensorPipeRpcBackendOptions` and :class:`BackendType`. rpc_async returns a
:class:`protoref.rpc.futures.Future` (torch.futures.Future's methods).

What differs (docs/divergences.md): functions travel by name (``module:qualname``; a script's
own functions as ``__main__:name``, found in the callee's ``__main__`` as pickle finds them),
values as JSON where they fit, else pickled as torch's are, between authenticated workers
only (:mod:`protoref.rpc.codec`; functions and classes as values by name); peers authenticate with a
secret, found without configuration on one host (:mod:`protoref.rpc.secret`) and
required across hosts; ``shutdown`` returns a :class:`ShutdownReport`. ``PROTOREF_RPC_TRACE_DIR``
makes every worker write its RRef trace there (``<name>.ndjson``). Our own keywords after
torch's: ``secret``, ``master_addr``, ``master_port``, ``options`` (:class:`RpcOptions`),
``trace``, ``codecs``, ``rpc_timeout``. With ``PROTOREF_RPC_TRACE_DIR`` a worker also writes
its distributed autograd trace in ``DIR/autograd/<name>.ndjson``. Several workers may live in
one process, each initialised on its own thread; the module-level functions act for the calling
thread's worker.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from protoref.rpc import functions, plugins
from protoref.rpc.agent import Agent, RpcOptions, ShutdownReport, current_agent
from protoref.rpc.backend import (
    DEFAULT_SHUTDOWN_TIMEOUT,
    UNSET_RPC_TIMEOUT,
    BackendType,
    RpcBackendOptions,
    TensorPipeRpcBackendOptions,
    master_of,
)
from protoref.rpc.codec import Codec
from protoref.rpc.current import WorkerInfo
from protoref.rpc.errors import (
    CodecError,
    PeerDeadError,
    PeerDiscoveryError,
    RemoteError,
    RPCError,
    RPCTimeoutError,
    UnresolvableFunctionError,
)
from protoref.rpc.futures import Future, as_torch_future
from protoref.rpc.secret import SecretFileError, resolve_secret

#: A folder: every worker writes its trace there as ``<name>.ndjson`` (an unchanged torch
#: program's runs can be traced and checked with ``tracecheck validate --merge``).
TRACE_DIR_ENV = "PROTOREF_RPC_TRACE_DIR"

__all__ = [
    "TRACE_DIR_ENV",
    "BackendType",
    "Codec",
    "CodecError",
    "Future",
    "PeerDeadError",
    "PeerDiscoveryError",
    "RPCError",
    "RPCTimeoutError",
    "RemoteError",
    "RpcBackendOptions",
    "RpcOptions",
    "SecretFileError",
    "ShutdownReport",
    "TensorPipeRpcBackendOptions",
    "UnresolvableFunctionError",
    "WorkerInfo",
    "functions",
    "get_rpc_timeout",
    "get_worker_info",
    "init_rpc",
    "is_available",
    "remote",
    "rpc_async",
    "rpc_sync",
    "shutdown",
]


def is_available() -> bool:
    """torch's rpc.is_available: this RPC is always there."""
    return True


def init_rpc(
    name: str,
    backend: BackendType | None = None,
    rank: int = -1,
    world_size: int | None = None,
    rpc_backend_options: RpcBackendOptions | None = None,
    *,
    secret: bytes | str | None = None,
    master_addr: str | None = None,
    master_port: int | None = None,
    options: RpcOptions | None = None,
    trace: Path | str | None = None,
    codecs: Sequence[Codec] | None = None,
    rpc_timeout: float | None = None,
) -> Agent:
    """Start this worker and block until all ``world_size`` workers have joined (torch's
    init_rpc; ``rank`` -1 reads ``RANK``, as torch's env:// rendezvous does)."""
    if backend is not None and not isinstance(backend, BackendType):
        raise TypeError("Argument backend must be a member of BackendType")  # torch's text
    if rpc_backend_options is not None and not isinstance(rpc_backend_options, RpcBackendOptions):
        raise TypeError("Argument rpc_backend_options must be an instance of RpcBackendOptions")
    rank, world_size = _rank_and_size(rank, world_size)
    opts = options or RpcOptions(secret=b"")
    changes: dict[str, Any] = {}
    if rpc_backend_options is not None:
        changes.update(rpc_backend_options.as_changes())
    base = None if options is None else (options.master_addr, options.master_port)
    addr, port = master_of(rpc_backend_options, master_addr, master_port, base)
    changes["master_addr"], changes["master_port"] = addr, port
    if secret is not None or not opts.secret:
        master = changes.get("master_addr", opts.master_addr)
        changes["secret"] = resolve_secret(secret, master)
    if trace is None and os.environ.get(TRACE_DIR_ENV):
        if not name or any(c in name for c in "/\\\0") or name.startswith("."):
            raise ValueError(f"worker name {name!r} cannot name a trace file in {TRACE_DIR_ENV}")
        trace = Path(os.environ[TRACE_DIR_ENV]) / f"{name}.ndjson"
        # and its distributed autograd trace in a folder of its own (another protocol: DIR/*.ndjson
        # stays the RRef traces, which merge together)
        changes["autograd_trace"] = Path(os.environ[TRACE_DIR_ENV]) / "autograd" / f"{name}.ndjson"
    if trace is not None:
        changes["trace"] = Path(trace)
    if codecs is not None:
        changes["codecs"] = tuple(codecs)
    if rpc_timeout is not None:
        changes["rpc_timeout"] = rpc_timeout
    agent = Agent(name, rank, world_size, replace(opts, **changes), plugins.installed())
    agent.start()
    return agent


def _rank_and_size(rank: int, world_size: int | None) -> tuple[int, int]:
    if rank == -1:
        value = os.environ.get("RANK")
        if value is None:
            raise ValueError(  # torch's env:// rendezvous text
                "Error initializing torch.distributed using env:// rendezvous: environment "
                "variable RANK expected, but not set"
            )
        rank = int(value)
    if world_size is None:
        raise PeerDiscoveryError(
            "world_size=None (torch's dynamic RPC group) is not supported: pass world_size"
        )
    return rank, world_size


def remote(
    to: str | int | WorkerInfo,
    func: Callable[..., Any] | str,
    args: Sequence[Any] | None = None,
    kwargs: dict[str, Any] | None = None,
    timeout: float = UNSET_RPC_TIMEOUT,
) -> Any:
    """Run ``func`` on ``to`` and return an RRef to its result at once (rpc.remote)."""
    run: Callable[..., Any] = plugins.require("remote")  # type: ignore[assignment]
    return run(to, func, args, kwargs, timeout)


def rpc_async(
    to: str | int | WorkerInfo,
    func: Callable[..., Any] | str,
    args: Sequence[Any] | None = None,
    kwargs: dict[str, Any] | None = None,
    timeout: float = UNSET_RPC_TIMEOUT,
) -> Any:
    """Run ``func`` on ``to``; a Future of its result. A timeout of 0 waits forever. With
    torch loaded, the Future is a torch.futures.Future (torch.futures.wait_all takes it)."""
    run: Callable[..., Any] = plugins.require("rpc_async")  # type: ignore[assignment]
    return as_torch_future(run(to, func, args, kwargs, timeout))


def rpc_sync(
    to: str | int | WorkerInfo,
    func: Callable[..., Any] | str,
    args: Sequence[Any] | None = None,
    kwargs: dict[str, Any] | None = None,
    timeout: float = UNSET_RPC_TIMEOUT,
) -> Any:
    """Run ``func`` on ``to`` and wait for its result."""
    run: Callable[..., Any] = plugins.require("rpc_async")  # type: ignore[assignment]
    return run(to, func, args, kwargs, timeout).wait()


def get_worker_info(worker_name: str | int | None = None) -> WorkerInfo:
    """The WorkerInfo (``.name``, ``.id``) of ``worker_name``, or of this worker."""
    return current_agent().worker_info(worker_name)


def get_rpc_timeout() -> float:
    """This worker's default RPC timeout, in seconds."""
    return current_agent().options.rpc_timeout


def shutdown(graceful: bool = True, timeout: float = DEFAULT_SHUTDOWN_TIMEOUT) -> ShutdownReport:
    """Stop this thread's worker; graceful: wait for every worker and report leaks (and dead
    workers). ``timeout`` > 0 bounds the wait, else the worker's ``shutdown_timeout``."""
    return current_agent().shutdown(graceful, timeout)


def __getattr__(name: str) -> Any:
    """The names the plug-ins add to this module (the RRef runtime's ``RRef``, ``RpcFuture``)."""
    if name.startswith("__"):
        raise AttributeError(name)
    return plugins.export(name)
