"""The runtime's knobs (torch's ``rpc_backend_options`` plus ours) and its event loop."""

from __future__ import annotations

import asyncio
import importlib
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from protoref.rpc.codec import Codec
from protoref.rpc.errors import RPCError
from protoref.rpc.secret import is_loopback
from protoref.rpc.wire import DEFAULT_MAX_FRAME_BYTES

__all__ = ["RpcOptions", "free_port", "local_address_toward", "new_loop"]


@dataclass(frozen=True)
class RpcOptions:
    """The runtime's knobs (torch's ``rpc_backend_options`` plus ours)."""

    secret: bytes
    master_addr: str = "127.0.0.1"
    master_port: int = 29500
    #: Where this worker listens and is reached; None: 127.0.0.1 when the master is on this
    #: host (loopback), else this host's address on the route to the master.
    host: str | None = None
    rpc_timeout: float = 60.0
    connect_timeout: float = 30.0
    #: Bound on graceful shutdown; None (the default, torch's): it waits as long as every
    #: peer it waits for is alive, and a death ends it (issue 28 s3).
    shutdown_timeout: float | None = None
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    num_worker_threads: int = 16  # torch's default (TensorPipeRpcBackendOptions)
    codecs: Sequence[Codec] = ()
    trace: Path | None = None  # write this worker's trace (JSON lines) here
    #: write this worker's distributed autograd trace (protocol ``autograd``) here
    autograd_trace: Path | None = None
    workload: str = "runtime"  # trace header label; equal on every worker of a run
    #: The worker's event loop: ``"auto"`` takes uvloop when it is installed (the optional
    #: ``fast`` extra), else asyncio's own; ``"asyncio"`` / ``"uvloop"`` insist.
    event_loop: Literal["auto", "asyncio", "uvloop"] = "auto"


def new_loop(kind: str = "auto") -> asyncio.AbstractEventLoop:
    """A fresh event loop of ``kind`` (see RpcOptions.event_loop). uvloop runs the same code
    (streams, timers, add_writer) with its loop machinery in C: less CPU per round trip."""
    if kind not in ("auto", "asyncio", "uvloop"):
        raise RPCError(f"event_loop must be auto, asyncio or uvloop, not {kind!r}")
    if kind != "asyncio":
        try:
            uvloop: Any = importlib.import_module("uvloop")
        except ImportError as err:
            if kind == "uvloop":
                raise RPCError("event_loop='uvloop' but uvloop is not installed") from err
        else:
            return uvloop.new_event_loop()  # type: ignore[no-any-return]
    return asyncio.new_event_loop()


def free_port() -> int:
    """A port the OS says is free now (bind to 0), for the master."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def local_address_toward(host: str, port: int) -> str:
    """The address this host is reached at by ``host``: loopback for a master on this host,
    else the source address of the route to it (a UDP connect sends nothing)."""
    if is_loopback(host):
        return "127.0.0.1"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host, port))
            return str(probe.getsockname()[0])
    except OSError as err:
        raise RPCError(f"no route to the master {host}:{port} from this host: {err}") from err
