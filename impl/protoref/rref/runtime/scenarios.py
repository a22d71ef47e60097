"""The design note's four scenarios (note §1.6) and a self remote, as API scripts run by A.

Workers ``w0`` (A), ``w1`` (B, the owner) and ``w2`` (C), as in :mod:`protoref.rref.sim.scenarios`.
Steps the note gives to B run on B as UDFs (``*_on_b``), so every function here has an
importable name (a function in ``__main__`` has none another process can import).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from protoref import rpc
from protoref.rref.runtime.udfs import add, fetch, take

__all__ = ["NAMES", "SCENARIOS"]

A, B, C = "w0", "w1", "w2"
NAMES: Final = (A, B, C)


def user_to_owner_return() -> None:
    """S1: A: ``rref = rpc.remote(B, f); rref.to_here()``; A drops the RRef."""
    rref = rpc.remote(B, add, (1, 2))
    assert rref.to_here() == 3
    del rref


def user_to_owner_arg() -> None:
    """S2: A: ``rref = rpc.remote(B, f); rpc_async(B, g, args=(rref,))``; A drops the RRef."""
    rref = rpc.remote(B, add, (3, 4))
    assert rpc.rpc_async(B, take, (rref,)).wait() == B
    del rref


def owner_to_user_on_b() -> None:
    """S3 on B: ``rref = RRef(x); rpc_async(C, g, args=(rref,))``; B drops its OwnerRRef."""
    rref = rpc.RRef({"x": [1, 2]})
    assert rpc.rpc_async(C, fetch, (rref,)).wait() == {"x": [1, 2]}
    del rref


def owner_to_user() -> None:
    rpc.rpc_sync(B, owner_to_user_on_b)


def user_to_user() -> None:
    """S4: A: ``rref = rpc.remote(B, f); rpc_async(C, g, args=(rref,))``; A drops the RRef."""
    rref = rpc.remote(B, add, (5, 6))
    assert rpc.rpc_async(C, fetch, (rref,)).wait() == 11
    del rref


def self_remote_on_b() -> None:
    """B: ``rref = rpc.remote(B, f)`` (to itself), shares the OwnerRRef with C, drops it."""
    rref = rpc.remote(B, add, (7, 8))
    assert rpc.rpc_sync(C, fetch, (rref,)) == 15
    del rref


def self_remote() -> None:
    rpc.rpc_sync(B, self_remote_on_b)


#: Scenario name -> the script A runs (names as in protoref.rref.sim.scenarios).
SCENARIOS: Final[dict[str, Callable[[], None]]] = {
    "user_to_owner_return": user_to_owner_return,
    "user_to_owner_arg": user_to_owner_arg,
    "owner_to_user": owner_to_user,
    "user_to_user": user_to_user,
    "self_remote": self_remote,
}
