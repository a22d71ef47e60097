"""The design note's four scenarios (note §1.6) as simulator scripts, plus self remote.

Each script issues the application calls of its scenario on workers ``w0`` (A), ``w1`` (B, the
owner) and ``w2`` (C), letting the seeded scheduler run a few protocol steps in between, so every
seed gives a different but reproducible interleaving. The receiving UDF of the note
(``def func(rref): pass``) is the drain phase: it drops the received RRef. Call
:meth:`Simulator.finish` afterwards to drain and check leak-free quiescence.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from protoref.rref.sim import Simulator

__all__ = ["SCENARIOS"]

A, B, C = "w0", "w1", "w2"
SETTLE: Final = 4  # at most this many protocol steps between two application calls


def user_to_owner_return(sim: Simulator) -> None:
    """S1: A: ``rref = rpc.remote(B, f); rref.to_here()``; A drops the RRef."""
    _, f = sim.remote(A, B)
    sim.settle(SETTLE)
    sim.to_here(A, f)
    sim.settle(SETTLE)
    sim.drop(A, f)


def user_to_owner_arg(sim: Simulator) -> None:
    """S2: A: ``rref = rpc.remote(B, f); rpc_async(B, g, args=(rref,))``; A drops the RRef."""
    r, f = sim.remote(A, B)
    sim.settle(SETTLE)
    sim.share(A, B, r, f)
    sim.settle(SETTLE)
    sim.drop(A, f)


def owner_to_user(sim: Simulator) -> None:
    """S3: B: ``rref = RRef(x); rpc_async(C, g, args=(rref,))``; B drops its OwnerRRef."""
    r = sim.create_local_rref(B)
    sim.settle(SETTLE)
    sim.share(B, C, r, r)
    sim.settle(SETTLE)
    sim.drop_owner(B, r)


def user_to_user(sim: Simulator) -> None:
    """S4: A: ``rref = rpc.remote(B, f); rpc_async(C, g, args=(rref,))``; A drops the RRef."""
    r, f = sim.remote(A, B)
    sim.settle(SETTLE)
    sim.share(A, C, r, f)
    sim.settle(SETTLE)
    sim.drop(A, f)


def self_remote(sim: Simulator) -> None:
    """B: ``rref = rpc.remote(B, f)`` (to itself), shares the OwnerRRef with C, drops it."""
    r, _ = sim.remote(B, B)
    sim.settle(SETTLE)
    sim.share(B, C, r, r)
    sim.settle(SETTLE)
    sim.drop_owner(B, r)


#: Scenario name -> script (the CLI's ``--scenario``).
SCENARIOS: Final[dict[str, Callable[[Simulator], None]]] = {
    "user_to_owner_return": user_to_owner_return,
    "user_to_owner_arg": user_to_owner_arg,
    "owner_to_user": owner_to_user,
    "user_to_user": user_to_user,
    "self_remote": self_remote,
}
