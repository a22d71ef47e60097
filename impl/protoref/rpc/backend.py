"""torch's backend options for init_rpc, and where the master is.

``TensorPipeRpcBackendOptions(num_worker_threads=16, rpc_timeout=60.0, init_method="env://")``
takes torch's keywords; ``init_method`` is ``env://`` (``MASTER_ADDR``/``MASTER_PORT``, as
torch reads them) or ``tcp://host:port``. Device maps and devices (CUDA) are refused: there is
no CUDA here.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlparse

__all__ = [
    "DEFAULT_RPC_TIMEOUT_SEC",
    "DEFAULT_SHUTDOWN_TIMEOUT",
    "UNSET_RPC_TIMEOUT",
    "BackendType",
    "RpcBackendOptions",
    "TensorPipeRpcBackendOptions",
    "master_of",
]

#: torch.distributed.rpc.constants' values.
DEFAULT_RPC_TIMEOUT_SEC: Final = 60.0
DEFAULT_SHUTDOWN_TIMEOUT: Final = 0.0
UNSET_RPC_TIMEOUT: Final = -1.0
DEFAULT_NUM_WORKER_THREADS: Final = 16


class BackendType(enum.Enum):
    """torch's rpc.BackendType: one backend (ours answers to torch's name for it)."""

    TENSORPIPE = "TENSORPIPE"


class RpcBackendOptions:
    """torch's RpcBackendOptions: the RPC timeout and the init method."""

    def __init__(
        self, rpc_timeout: float = DEFAULT_RPC_TIMEOUT_SEC, init_method: str = "env://"
    ) -> None:
        self.rpc_timeout = rpc_timeout
        self.init_method = init_method

    def as_changes(self) -> dict[str, Any]:
        """The RpcOptions fields these options set."""
        return {"rpc_timeout": self.rpc_timeout}


class TensorPipeRpcBackendOptions(RpcBackendOptions):
    """torch's TensorPipeRpcBackendOptions (same keywords, same defaults)."""

    def __init__(
        self,
        *,
        num_worker_threads: int = DEFAULT_NUM_WORKER_THREADS,
        rpc_timeout: float = DEFAULT_RPC_TIMEOUT_SEC,
        init_method: str = "env://",
        device_maps: Mapping[str, Mapping[Any, Any]] | None = None,
        devices: Sequence[Any] | None = None,
        _transports: Sequence[Any] | None = None,
        _channels: Sequence[Any] | None = None,
    ) -> None:
        if device_maps or devices:
            raise ValueError(
                "protoref.rpc has no CUDA support: device_maps and devices must be empty"
            )
        if num_worker_threads < 1:
            raise ValueError(f"num_worker_threads must be at least 1, got {num_worker_threads}")
        super().__init__(rpc_timeout, init_method)
        self.num_worker_threads = num_worker_threads

    def set_device_map(self, to: str, device_map: Mapping[Any, Any]) -> None:
        raise ValueError("protoref.rpc has no CUDA support: set_device_map is not available")

    def as_changes(self) -> dict[str, Any]:
        return {**super().as_changes(), "num_worker_threads": self.num_worker_threads}


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise ValueError(  # torch's env:// rendezvous text
            "Error initializing torch.distributed using env:// rendezvous: environment "
            f"variable {name} expected, but not set"
        )
    return value


def master_of(
    options: RpcBackendOptions | None,
    addr: str | None,
    port: int | None,
    base: tuple[str, int] | None = None,
) -> tuple[str, int]:
    """The master's address: ``addr``/``port`` where given, else from ``base`` (an explicit
    RpcOptions), else from the init method (torch's env:// by default)."""
    if addr and port:
        return addr, int(port)
    if base is not None:
        return addr or base[0], int(port or base[1])
    method = options.init_method if options is not None else "env://"
    if method == "env://":
        found_addr = addr or _env("MASTER_ADDR")
        found_port = port or _env("MASTER_PORT")
    else:
        url = urlparse(method)
        if url.scheme != "tcp" or not url.hostname or url.port is None:
            raise ValueError(
                f"init_method {method!r}: protoref.rpc takes env:// or tcp://host:port"
            )
        found_addr, found_port = addr or url.hostname, port or url.port
    try:
        return found_addr, int(found_port)
    except ValueError as err:
        raise ValueError(f"MASTER_PORT must be a port number, not {found_port!r}") from err
