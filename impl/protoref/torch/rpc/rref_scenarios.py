"""The RRef scenario library: torch programs on three workers, each ending at a quiet point
where every worker's RRefContext counters are sampled.

Roles A, B, C are three distinct workers drawn from the seed per scenario. The sharing
scenarios follow the design note (docs/source/rpc/rref.rst): the owner shares its OwnerRRef
with a user (S1), a user shares with the owner (S2), a user shares with another user (S3),
and the creator shares before the owner confirmed (S4); then forks of forks, a remote to
self, an RRef returned as a result, an rpc.remote that times out with its call processed
late (pytorch#41217's leak), a to_here that times out while its fetch is parked, and RRefs
still held at rpc.shutdown (the shutdown sweep deletes them). Each RRef calls to_here at
most once (RRef.tla's bound, not torch's). Drops happen in a seeded order.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Final

from protoref.torch.rpc import rref_steps as s
from protoref.torch.rpc.conductor import Conductor

__all__ = ["EXTRA", "SCENARIOS", "conduct", "order"]

#: seconds a worker waits for its counters to settle at a quiet point
SETTLE: Final = 6.0
#: to_here's timeout where it must succeed
LONG: Final = 20.0


def _drops(c: Conductor, items: list[tuple[str, str]]) -> None:
    c.rng.shuffle(items)
    for worker, label in items:
        c.step(worker, s.drop, label)


def owner_to_user(c: Conductor, n: str) -> None:
    a, b = c.roles(2)
    c.step(a, s.create_local, n + "o")
    c.step(a, s.share, b, n + "o", n + "u")
    c.step(b, s.to_here, n + "u", LONG)
    _drops(c, [(a, n + "o"), (b, n + "u")])


def user_to_owner(c: Conductor, n: str) -> None:
    a, b = c.roles(2)
    c.step(a, s.remote, b, n + "a", 0.0, LONG)
    c.step(a, s.wait_remote, n + "a")
    c.step(a, s.share, b, n + "a", n + "x")
    _drops(c, [(a, n + "a"), (b, n + "x")])


def user_to_user(c: Conductor, n: str) -> None:
    a, b, d = c.roles(3)
    c.step(a, s.remote, b, n + "a", 0.0, LONG)
    c.step(a, s.wait_remote, n + "a")
    c.step(a, s.share, d, n + "a", n + "b")
    c.step(d, s.to_here, n + "b", LONG)
    _drops(c, [(a, n + "a"), (d, n + "b")])


def unconfirmed_share(c: Conductor, n: str) -> None:
    """The creator shares before the owner has run the call (its UDF sleeps)."""
    a, b, d = c.roles(3)
    c.step(a, s.remote, b, n + "a", 0.3, LONG)
    c.step(a, s.share, d, n + "a", n + "b")
    c.step(d, s.to_here, n + "b", LONG)
    _drops(c, [(a, n + "a"), (d, n + "b")])


def forks_of_forks(c: Conductor, n: str) -> None:
    a, b, d = c.roles(3)
    c.step(a, s.remote, b, n + "a", 0.0, LONG)
    c.step(a, s.share, d, n + "a", n + "b")
    c.step(d, s.share, a, n + "b", n + "c")
    c.step(d, s.share, b, n + "b", n + "x")
    c.step(a, s.to_here, n + "c", LONG)
    _drops(c, [(a, n + "a"), (d, n + "b"), (a, n + "c"), (b, n + "x")])


def self_remote(c: Conductor, n: str) -> None:
    a, b = c.roles(2)
    c.step(a, s.remote, a, n + "s", 0.0, LONG)
    c.step(a, s.share, b, n + "s", n + "u")
    c.step(b, s.to_here, n + "u", LONG)
    _drops(c, [(a, n + "s"), (b, n + "u")])


def as_result(c: Conductor, n: str) -> None:
    a, b, d = c.roles(3)
    c.step(a, s.remote, b, n + "a", 0.0, LONG)
    c.step(d, s.take, a, n + "a", n + "b")
    c.step(d, s.to_here, n + "b", LONG)
    _drops(c, [(a, n + "a"), (d, n + "b")])


def remote_timeout(c: Conductor, n: str) -> None:
    """rpc.remote times out, its call still runs later; the USER_DELETE of the dropped
    RRef may reach the owner first (then the OwnerRRef leaks: pytorch#41217)."""
    a, b = c.roles(2)
    c.step(a, s.remote, b, n + "a", 0.8, 0.2)
    c.step(a, s.wait_remote, n + "a")
    c.step(a, s.to_here, n + "a", LONG)
    _drops(c, [(a, n + "a")])


def to_here_timeout(c: Conductor, n: str) -> None:
    """to_here times out while the owner has not run the call: the fetch parks."""
    a, b = c.roles(2)
    c.step(a, s.remote, b, n + "a", 0.5, LONG)
    c.step(a, s.to_here, n + "a", 0.1)
    c.step(a, s.wait_remote, n + "a")
    _drops(c, [(a, n + "a")])


def held_at_shutdown(c: Conductor, n: str) -> None:
    """Left held: rpc.shutdown's sweep deletes them."""
    a, b, d = c.roles(3)
    c.step(a, s.remote, b, n + "a", 0.0, LONG)
    c.step(a, s.share, d, n + "a", n + "b")


SCENARIOS: Final[dict[str, Callable[[Conductor, str], None]]] = {
    "owner_to_user": owner_to_user,
    "user_to_owner": user_to_owner,
    "user_to_user": user_to_user,
    "unconfirmed_share": unconfirmed_share,
    "forks_of_forks": forks_of_forks,
    "self_remote": self_remote,
    "as_result": as_result,
    "to_here_timeout": to_here_timeout,
}

#: Scenarios outside the default order: after remote_timeout torch 2.13's graceful shutdown
#: never completes (the creator never reports ready; docs/divergences.md), which costs the
#: session torch's 30 s store timeout. Run them by name (``--scenarios``).
EXTRA: Final[dict[str, Callable[[Conductor, str], None]]] = {"remote_timeout": remote_timeout}


def conduct(c: Conductor, names: list[str]) -> list[str]:
    """Run the scenarios ``names`` (in that order), each followed by a quiet point, then leave
    RRefs held for the shutdown sweep. Returns what ran."""
    ran = []
    for i, name in enumerate(names):
        (SCENARIOS | EXTRA)[name](c, f"{i}{name[:2]}.")
        c.quiesce(s.settle, s.counters, SETTLE)
        ran.append(name)
    held_at_shutdown(c, "end.")
    c.quiesce(s.settle, s.counters, SETTLE)
    ran.append("held_at_shutdown")
    return ran


def order(seed: int) -> list[str]:
    """The session's scenarios in a seeded order."""
    names = list(SCENARIOS)
    random.Random(f"rref-order:{seed}").shuffle(names)
    return names
