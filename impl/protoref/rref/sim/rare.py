"""Rare paths on purpose (``SimConfig(rare_paths=True)``, the campaigns' setting).

A random workload seldom reaches some of the protocol's corners, so a planted bug there went
unseen by every campaign (issue #21). With ``rare_paths`` the scheduler sometimes (one workload
step in :data:`RARE_SHARE`, drawn only when the option is on, so other runs keep their streams)
takes one of these bursts instead:

- **Misuse.** The application forks, or fetches, a UserRRef whose rpc.remote timed out: a
  state where RRef.tla's ``PrepareChildFork`` / ``ToHere`` are not enabled (``parent \\notin
  timedOut``). torch raises there; the core must refuse (:class:`ProtocolError`) and log
  nothing. An implementation that accepts logs a step the spec rejects.
- **The owner-creation race.** ``rpc.remote(w, d)`` whose PYTHON_REMOTE_CALL is slow (a delay
  past the rpc timeout: the network may deliver in any order), the creator's UserRRef shared
  at once with a third worker: the child's fork request can reach ``d`` first, the creator's
  call time out and its delete reach ``d`` too, all before the call creates the OwnerRRef
  (RRef.tla ``AssignOwnerRRef``: ``stale`` with another fork, so the owner is still needed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protoref.errors import ProtocolError
from protoref.ids import WorkerId
from protoref.rref.core.machine import Step
from protoref.rref.sim import base
from protoref.rref.sim.base import SimBase

__all__ = ["RARE_SHARE", "SLOW", "RarePaths"]

#: The share of workload steps that try a rare burst when ``SimConfig.rare_paths`` is on.
RARE_SHARE = 0.04
#: How late the slow PYTHON_REMOTE_CALL may be delivered: the rpc timeout plus this many
#: maximal message delays (room for the fork request, the timeout and the delete to overtake).
SLOW = 5


class RarePaths:
    """The bursts of :mod:`protoref.rref.sim.rare`."""

    def __init__(self, sim: SimBase) -> None:
        self.sim = sim

    def _rare_step(self) -> bool:
        """Maybe one burst; False when none was taken (the scheduler then steps as usual)."""
        if self.sim._random() >= RARE_SHARE:
            return False
        if self.sim._random() < 0.5:
            return self._misuse_timed_out()
        return self._slow_remote_shared()

    def _misuse_timed_out(self) -> bool:
        """Fork or fetch a held UserRRef that timed out: the core must refuse."""
        candidates = [
            (w, f)
            for w, ctx in self.sim.contexts.items()
            for f in sorted(ctx.held & ctx.timed_out - ctx.deleted)
            if ctx.app_can_act()
        ]
        if not candidates:
            return False
        w, f = candidates[int(self.sim._random() * len(candidates))]
        others = self.sim._others[w]
        rref = self.sim.contexts[w].users[f].rref
        attempts: list[tuple[Callable[..., Step], tuple[Any, ...]]] = [(base.machine.to_here, (f,))]
        if others:
            dst = others[int(self.sim._random() * len(others))]
            attempts.insert(0, (base.machine.prepare_child_fork, (dst, rref, f)))
        for transition, args in attempts:
            try:
                self.sim._apply(w, transition, args)
            except ProtocolError:
                self.sim.refused += 1  # torch raises to the application; nothing happened
        return True

    def _slow_remote_shared(self) -> bool:
        """rpc.remote to another worker with a slow call, its UserRRef shared with a third."""
        workers = [w for w, ctx in self.sim.contexts.items() if ctx.app_can_act()]
        if len(workers) < 3:
            return False
        w = workers[int(self.sim._random() * len(workers))]
        targets = [d for d in self.sim._targets[w] if d != w]
        if not targets:
            return False
        d = targets[int(self.sim._random() * len(targets))]
        third = [x for x in self.sim._others[w] if x != d]
        if not third:
            return False
        x = third[int(self.sim._random() * len(third))]
        r, f = self._remote_slowly(w, d)
        self.sim._apply(w, base.machine.prepare_child_fork, (x, r, f))
        # ``rref = rpc.remote(d, ...); rpc.rpc_async(x, g, args=(rref,)); del rref``: the
        # destructor deletes it once it timed out and the child was accepted (G2)
        self.sim._apply(w, base.machine.drop_rref, (f,))
        return True

    def _remote_slowly(self, w: WorkerId, d: WorkerId) -> tuple[base.Gid, base.Gid]:
        ctx = self.sim.contexts[w]
        r, f = ctx.new_id(), ctx.new_id(1)
        sent = len(self.sim.net)
        self.sim._apply(w, base.machine.remote, (d,))
        self.sim.deadlines[(w, r, f)] = self.sim.now + self.sim.config.rpc_timeout
        for env in self.sim.net[sent:]:  # the PYTHON_REMOTE_CALL just sent: late past the timeout
            env.ready_at = (
                self.sim.now + self.sim.config.rpc_timeout + SLOW * self.sim.config.max_delay
            )
        return r, f
