"""DistAutograd.tla's safety invariants, and its liveness properties at quiescence, as Python
predicates over a whole simulated system.

A :class:`World` is the spec's state at runtime: every worker's container, the messages in
flight and the history variable ``released`` (the driver records each ``<<w, c>>`` an erase
removed). :func:`check` raises :class:`~protoref.errors.InvariantViolationError` naming the first
violated invariant, spelled as in the spec. These are cheap self-checks for the simulator (after
every step in test mode); TLC checks the spec itself, and the traces (conformance).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from protoref.autograd.core.events import Msg
from protoref.autograd.core.ids import ROOT_FN, AutogradId
from protoref.autograd.core.state import Container
from protoref.errors import InvariantViolationError

__all__ = ["INVARIANTS", "PROPERTIES", "World", "check", "check_quiescent", "live"]

Id = AutogradId


@dataclass
class World:
    """The spec state of a run: containers by worker, ``net``, and ``released``."""

    containers: Mapping[int, Container]
    net: Iterable[Msg]
    released: frozenset[tuple[int, Id]] = field(default_factory=frozenset)

    def drawn(self, i: Id, counter: Callable[[Container], int]) -> bool:
        """``DrawnBy(id, ctr)``: drawn by the existing worker its high bits name."""
        ctn = self.containers.get(i.worker)
        return ctn is not None and i.n < counter(ctn)


def unique_ids(world: World) -> str | None:
    """D1 ``UniqueIdsInv``: every id in use was drawn by the worker its high bits name."""

    def ctx(c: Container) -> int:
        return c.next_ctx

    def msg(c: Container) -> int:
        return c.next_msg

    for w, ctn in world.containers.items():
        for c in ctn.threads.values():
            if c.worker != w or not world.drawn(c, ctx):
                return f"worker {w}'s thread has context {c}, not drawn by it"
        for c in ctn.ctxs:
            if not world.drawn(c, ctx):
                return f"worker {w} holds context {c}, never drawn"
        for s in ctn.sends:
            if s.mid.worker != w or not world.drawn(s.mid, msg):
                return f"worker {w} has a send function {s.mid} it did not draw"
        for r in ctn.recvs:
            if not world.drawn(r.mid, msg):
                return f"worker {w} has a recv function {r.mid} nobody drew"
    return None


def send_recv_pairing(world: World) -> str | None:
    """D4 ``SendRecvPairingInv``: one recv function per (context, message id) on a worker; a
    recv function for message m from X names the worker that drew m, and while X holds the
    context X has the matching send function."""
    for w, ctn in world.containers.items():
        seen: set[tuple[Id, Id]] = set()
        for r in ctn.recvs:
            if (r.ctx, r.mid) in seen:
                return f"worker {w} has two recv functions for {r.mid} in {r.ctx}"
            seen.add((r.ctx, r.mid))
            if r.mid.worker != r.src:
                return f"worker {w}'s recv function {r.mid} names {r.src}, not its drawer"
            src = world.containers.get(r.src)
            if src is None or not src.alive or r.ctx not in src.ctxs:
                continue
            if not any(s.ctx == r.ctx and s.mid == r.mid and s.dst == w for s in src.sends):
                return f"worker {r.src} has no send function {r.mid} for {w}'s recv"
    return None


def cleanup_reaches(world: World) -> str | None:
    """D5 ``CleanupReachesInv``: a holder of c other than its (live) creator is a known worker
    of some live holder of c, or a cleanup for c is on its way to it."""
    cleanups = {(m.ctx, m.dst) for m in world.net if m.type == "CLEANUP"}
    for w, ctn in world.containers.items():
        for c in ctn.ctxs:
            creator = world.containers.get(c.worker)
            if w == c.worker or creator is None or not creator.alive:
                continue
            if (c, w) in cleanups:
                continue
            if not any(
                x != w and o.alive and c in o.ctxs and (c, w) in o.known
                for x, o in world.containers.items()
            ):
                return f"worker {w} holds {c}, but no holder knows it and no cleanup comes"
    return None


def no_resurrection(world: World) -> str | None:
    """A3 ``NoResurrectionInv``: a context erased on a worker never comes back there."""
    for w, c in world.released:
        if c in world.containers[w].ctxs:
            return f"worker {w} holds {c} again after erasing it"
    return None


def current_context_valid(world: World) -> str | None:
    """A2 ``CurrentContextValidInv``: a thread's current context, and the context of every
    running handler, exist on its worker."""
    for w, ctn in world.containers.items():
        for t, c in ctn.threads.items():
            if ctn.alive and c not in ctn.ctxs:
                return f"worker {w}'s thread {t} runs under {c}, which it no longer holds"
        for h in ctn.handlers:
            if h.ctx not in ctn.ctxs:
                return f"worker {w}'s handler of {h.req} runs under {h.ctx}, which is gone"
    return None


def no_redundant_cleanup(world: World) -> str | None:
    """#32497 ``NoRedundantCleanupInv``: no cleanup goes back to the worker that triggered it."""
    for m in world.net:
        if m.type == "CLEANUP" and m.dst == m.trig:
            return f"{m} goes back to the worker that triggered it"
    return None


def live(world: World, c: Id) -> frozenset[tuple[int, Id]]:
    """``Live(c)``: the functions of ``c`` on the loss's gradient path (a fixpoint): the root; a
    recv function with a live consumer; the send function a live recv function answers."""
    found = {(c.worker, ROOT_FN)}
    while True:
        more = set(found)
        for w, ctn in world.containers.items():
            for r in ctn.recvs_of(c):
                if any((w, f) in found for f in ctn.consumers(c, r)):
                    more.add((w, r.mid))
        for x, ctn in world.containers.items():
            for s in ctn.sends_of(c):
                for w, other in world.containers.items():
                    if (w, s.mid) in found and any(
                        r.mid == s.mid and r.src == x for r in other.recvs_of(c)
                    ):
                        more.add((x, s.mid))
        if more == found:
            return frozenset(found)
        found = more


def gradient_exactly_once(world: World) -> str | None:
    """``GradientExactlyOnceInv``: for every pass the root's backward returned from, while the
    creator holds the context and no worker has crashed, the contributions of that pass on
    every worker are exactly those of the functions on the loss's gradient path."""
    if not all(ctn.alive for ctn in world.containers.values()):
        return None
    for creator in world.containers.values():
        for c, p, outcome in creator.results:
            held = c in creator.ctxs and not creator.refused(c)
            if outcome != "done" or c.worker != creator.me or not held:
                continue
            path = live(world, c)
            for w, ctn in world.containers.items():
                got = {f for k, q, f in ctn.grads if k == c and q == p}
                sends = {s.mid for s in ctn.sends_of(c)}
                want = {f for x, f in path if x == w and (f == ROOT_FN or f in sends)}
                if got != want:
                    return (
                        f"worker {w}'s contributions to {c} pass {p} are {sorted(got)}, "
                        f"not {sorted(want)}"
                    )
    return None


#: Spec name -> predicate (None when it holds, else what is wrong).
INVARIANTS: dict[str, Callable[[World], str | None]] = {
    "UniqueIdsInv": unique_ids,
    "SendRecvPairingInv": send_recv_pairing,
    "CleanupReachesInv": cleanup_reaches,
    "NoResurrectionInv": no_resurrection,
    "CurrentContextValidInv": current_context_valid,
    "NoRedundantCleanupInv": no_redundant_cleanup,
    "GradientExactlyOnceInv": gradient_exactly_once,
}


def check(world: World, *, seed: int | None = None) -> None:
    """Raise :class:`InvariantViolationError` for the first invariant ``world`` violates."""
    for name, predicate in INVARIANTS.items():
        problem = predicate(world)
        if problem is not None:
            raise InvariantViolationError(name, problem, seed=seed)


def _dead(world: World, c: Id) -> bool:
    creator = world.containers.get(c.worker)
    return creator is not None and ((c.worker, c) in world.released or not creator.alive)


def eventual_release(world: World) -> str | None:
    """D8 ``EventualReleaseProp`` in a final state: no worker holds a dead context."""
    for w, ctn in world.containers.items():
        for c in ctn.ctxs:
            if _dead(world, c):
                return f"worker {w} still holds {c}, whose creator released it or died"
    return None


def backward_terminates(world: World) -> str | None:
    """``BackwardTerminatesProp`` in a final state: no graph task still runs."""
    for w, ctn in world.containers.items():
        for c, _, state in ctn.bstate:
            if ctn.alive and state in ("run", "err"):
                return f"worker {w}'s graph task of {c} still runs"
    return None


def forward_terminates(world: World) -> str | None:
    """``ForwardTerminatesProp`` in a final state: no handler, application future or
    forgotten nested call's future waits."""
    for w, ctn in world.containers.items():
        if ctn.handlers:
            return f"worker {w} still has handlers {sorted(h.req for h in ctn.handlers)}"
        if ctn.pending or ctn.detached:
            waiting = sorted(ctn.pending | ctn.detached)
            return f"worker {w}'s futures still wait for {waiting}"
    return None


#: The spec's liveness properties, checked where every behaviour ends (a final state).
PROPERTIES: dict[str, Callable[[World], str | None]] = {
    "EventualReleaseProp": eventual_release,
    "BackwardTerminatesProp": backward_terminates,
    "ForwardTerminatesProp": forward_terminates,
}


def check_quiescent(world: World, *, seed: int | None = None, skip: Iterable[str] = ()) -> None:
    """At quiescence (nothing in flight, nothing enabled but the application's steps), the
    properties' ``<>[]P`` says ``P`` holds: raise for the first that does not (but those in
    ``skip``, which the run's configuration does not claim)."""
    for name, predicate in PROPERTIES.items():
        if name in skip:
            continue
        problem = predicate(world)
        if problem is not None:
            raise InvariantViolationError(name, problem, seed=seed)
