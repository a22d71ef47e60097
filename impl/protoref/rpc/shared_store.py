"""init_rpc after ``torch.distributed.init_process_group`` on the same MASTER_ADDR:MASTER_PORT.

torch's process group (its TCPStore) already listens on MASTER_PORT in the master's process,
and torch's init_rpc shares that store. So do we: when this process has an initialized default
process group, the master (rank 0) listens on a port of its own choosing and publishes its
address in the process group's store; the other ranks read it there (a blocking ``get``, off
the event loop). The key is numbered by how many times this process started RPC that way, so a
program that shuts RPC down and starts it again (every rank the same number of times, as
torch's programs do) reads the new master. torch is never imported here: a process group
exists only where the program imported torch.distributed.

The store's value is the master's ``host:port`` written by a process of the same job (the
store is the process group's); it is parsed and checked, never unpickled.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Final

from protoref.rpc.errors import PeerDiscoveryError

__all__ = ["master_from_store", "publish_master", "shared_store"]

_PREFIX: Final = "protoref/rpc/master/"
_lock = threading.Lock()
_starts = [0]


def shared_store(master_port: int | None = None) -> tuple[Any, str] | None:
    """The default process group's store and this start's key, or None without one, or when
    its TCPStore listens on another port than ``master_port`` (a process group of some of the
    workers on a port of its own, as pytorch/examples' ddp_rpc makes: RPC then uses
    MASTER_PORT itself, as torch's does)."""
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    if c10d is None or not c10d.is_initialized():
        return None
    store = c10d._get_default_store()
    while hasattr(store, "underlying_store"):  # PrefixStore around the TCPStore
        store = store.underlying_store
    if master_port is not None and getattr(store, "port", master_port) != master_port:
        return None
    with _lock:
        _starts[0] += 1
        key = f"{_PREFIX}{_starts[0]}"
    return c10d._get_default_store(), key


def publish_master(store: Any, key: str, host: str, port: int) -> None:
    store.set(key, f"{host}:{port}")


def master_from_store(store: Any, key: str) -> tuple[str, int]:
    """The master's address the master published (blocks until it has, up to the store's
    timeout)."""
    raw = store.get(key)
    text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else str(raw)
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise PeerDiscoveryError(
            f"the process group's store holds {text!r} under {key!r}, "
            "not the RPC master's host:port"
        )
    return host, int(port)
