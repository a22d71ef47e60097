"""The distributed-autograd scenario library: torch programs on three workers, each a context
block on one worker (:func:`protoref.torch.rpc.autograd_steps.program`) followed by a quiet
point where every worker's ``dist_autograd._get_debug_info()`` counters are sampled.

Roles A, B, C are distinct workers drawn from the seed per scenario: nested calls (A calls B,
whose UDF calls C), several passes (``retain_graph``, then one over the freed graph), a
self-call and a refused nested context, a release with a call in flight (the late answer meets
a released context: #38513), the cleanup cascade (B's UDF calls C and back to the creator),
a backward function that raises (and FAST mode's graph tasks that never end), a nested call
fired and forgotten, and a call that times out. The shapes stay inside DistAutograd.tla's:
no forward call after the first pass, no UDF that raises by itself, one block at a time per
worker (one application thread), every awaited output in the loss.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Final

from protoref.torch.rpc import autograd_steps as s
from protoref.torch.rpc.conductor import Conductor

__all__ = ["SCENARIOS", "conduct", "order"]

#: seconds a worker waits for its counters to settle at a quiet point
SETTLE: Final = 8.0

Plan = dict[str, Any]


def _leaf(peer: str, label: str, **extra: Any) -> dict[str, Any]:
    return {"peer": peer, "label": label, "grad": True, **extra}


def nested_calls(c: Conductor, n: str) -> tuple[str, Plan]:
    a, b, d = c.roles(3)
    inner = [{"peer": d, "label": n + "bc", "grad": True, "wait": True}]
    return a, {"calls": [_leaf(b, n + "ab", nested=inner)], "passes": [False]}


def several_passes(c: Conductor, n: str) -> tuple[str, Plan]:
    """Two passes over a retained graph, then one over the graph the second freed (raises)."""
    a, b, d = c.roles(3)
    calls = [_leaf(b, n + "ab"), _leaf(d, n + "ac")]
    return a, {"calls": calls, "passes": [True, False, False]}


def self_call(c: Conductor, n: str) -> tuple[str, Plan]:
    """A calls itself; a nested `with context()` is refused first."""
    (a,) = c.roles(1)
    return a, {"calls": [_leaf(a, n + "aa")], "passes": [c.rng.random() < 0.5], "refuse": True}


def release_in_flight(c: Conductor, n: str) -> tuple[str, Plan]:
    """The block exits while its call runs (0.5 s): the cleanup erases B's context under the
    running UDF, or the late answer re-creates A's released context (#38513); then a late
    get_gradients or backward (#40880)."""
    a, b = c.roles(2)
    call = _leaf(b, n + "ab", delay=0.5, in_flight=True)
    return a, {"calls": [call], "late": c.rng.choice(("gradients", "backward"))}


def cleanup_cascade(c: Conductor, n: str) -> tuple[str, Plan]:
    """B's UDF calls C and back to the creator: the cleanup reaches B, C and A's own copy."""
    a, b, d = c.roles(3)
    inner = [
        {"peer": d, "label": n + "bc", "grad": True, "wait": True},
        {"peer": a, "label": n + "ba", "grad": True, "wait": True},
    ]
    return a, {"calls": [_leaf(b, n + "ab", nested=inner)], "passes": [False]}


def backward_error(c: Conductor, n: str) -> tuple[str, Plan]:
    """B's backward function raises: A's backward raises. C's backward function is slow, so
    its gradient request reaches A after A's pass failed and before A leaves the block; A
    starts a graph task for it that never answers, and C's never ends (FAST mode:
    MCDistAutograd_pytorchBackwardErrorHang)."""
    a, b, d = c.roles(3)
    calls = [_leaf(b, n + "ab", boom=True), _leaf(d, n + "ac", slow=True)]
    return a, {"calls": calls, "passes": [False], "linger": 0.8}


def fire_and_forget(c: Conductor, n: str) -> tuple[str, Plan]:
    """B's UDF fires a call to C (no grad) and returns without waiting for it."""
    a, b, d = c.roles(3)
    inner = [{"peer": d, "label": n + "bc", "grad": False, "wait": False, "delay": 0.2}]
    return a, {"calls": [_leaf(b, n + "ab", nested=inner)], "passes": [False]}


def call_timeout(c: Conductor, n: str) -> tuple[str, Plan]:
    """A call times out (0.2 s) while its UDF sleeps (0.6 s); its late answer is dropped."""
    a, b = c.roles(2)
    call = {"peer": b, "label": n + "ab", "grad": False, "delay": 0.6, "timeout": 0.2}
    return a, {"calls": [call]}


SCENARIOS: Final[dict[str, Callable[[Conductor, str], tuple[str, Plan]]]] = {
    "nested_calls": nested_calls,
    "several_passes": several_passes,
    "self_call": self_call,
    "release_in_flight": release_in_flight,
    "cleanup_cascade": cleanup_cascade,
    "backward_error": backward_error,
    "fire_and_forget": fire_and_forget,
    "call_timeout": call_timeout,
}


def conduct(c: Conductor, names: list[str]) -> list[str]:
    """Run the scenarios ``names`` (in that order), each followed by a quiet point."""
    ran = []
    for i, name in enumerate(names):
        worker, plan = SCENARIOS[name](c, f"{i}{name[:2]}.")
        c.step(worker, s.program, plan)
        s.quiet_point(list(c.workers), SETTLE)
        ran.append(name)
    return ran


def order(seed: int) -> list[str]:
    """The session's scenarios in a seeded order."""
    names = list(SCENARIOS)
    random.Random(f"autograd-order:{seed}").shuffle(names)
    return names
