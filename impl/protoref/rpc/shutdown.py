"""Graceful shutdown of one worker: two barriers held by the master, the plug-ins' phases
between them (RRef.tla's three shutdown actions are the RRef plug-in's).

Graceful shutdown follows PyTorch's: ``_wait_all_workers`` (barrier 1, after this worker's own
calls and UDFs finished: every plug-in :meth:`~.hooks.Plugin.idle`), then every plug-in's
:meth:`~.hooks.Plugin.sweep` (the RRef plug-in's ``delAllUsersAndUnforkedOwners`` and its
waits), barrier 2, then every plug-in's :meth:`~.hooks.Plugin.destroy` and the report of what
each left behind; then the links close. The barriers are held by the master (rank 0), which
tells the plug-ins when barrier 1 passes with everyone (the RRef plug-in logs
``WaitAllWorkers`` then, once, under the environment actor).

With a worker dead (liveness.py), or missing from barrier 1 when the shutdown timeout ends, the
protocols' shutdown cannot be completed (RRef.tla's ``WaitAllWorkers`` needs every worker, and
no user call in flight, while calls to the dead one stay in flight forever). The survivors then
agree on it (the master completes a barrier with the live workers and names the dead in
``BarrierGo``; with the master dead there is no barrier) and each returns a
:class:`ShutdownReport` naming the dead worker(s) and listing what its plug-ins still hold
(:meth:`~.hooks.Plugin.leftovers`), without taking a further protocol step, so its traces stay
ones the specs accept (they end where the protocol stopped). Once the barrier has passed, a death
stops the shutdown at the next wait the same way.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from protoref.rpc import frames as fr
from protoref.rpc.hooks import Swept
from protoref.tracing import NodeClock

if TYPE_CHECKING:  # the agent composes this part
    from protoref.rpc.hooks import Host

__all__ = ["Barriers", "ShutdownReport", "graceful"]

log = logging.getLogger("protoref.rpc")


@dataclass(frozen=True)
class ShutdownReport:
    """What graceful shutdown found: entries the protocols left behind are leaks;
    ``dead_peers`` the workers found dead (then the protocols' shutdown could not complete)."""

    worker: str
    leaks: dict[str, list[str]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    dead_peers: tuple[str, ...] = ()

    @property
    def leak_free(self) -> bool:
        return not self.leaks and not self.problems and not self.dead_peers


def _merge(into: dict[str, list[str]], leaks: Mapping[str, Sequence[str]]) -> None:
    for kind, items in leaks.items():
        into.setdefault(kind, []).extend(items)


class Barriers:
    """The master-held shutdown barriers of ``agent`` (``declare_dead``: liveness's, for the
    workers the master found dead)."""

    def __init__(self, agent: Host, declare_dead: Callable[[str, str], None]) -> None:
        self.agent = agent
        self._declare_dead = declare_dead
        self._arrived: dict[int, dict[str, int]] = {}
        self.clock = NodeClock()
        #: Phase -> done when the barrier passed: the dead workers it went without (() : none).
        self._go: dict[int, asyncio.Future[tuple[str, ...]]] = {}

    def go_done(self, phase: int) -> bool:
        """Whether barrier ``phase`` has passed."""
        go = self._go.get(phase)
        return go is not None and go.done()

    def on_frame(self, link: object, frame: fr.Barrier | fr.BarrierGo) -> None:
        if isinstance(frame, fr.Barrier):
            self._arrive(frame.phase, frame.name, frame.stamp)
        else:
            self._pass(frame.phase, frame.stamp, frame.dead)

    def on_peer_dead(self, peer: str) -> None:
        """A barrier stops waiting for a dead worker: the master completes it with the live
        ones; without a master there is nobody to hold it."""
        a = self.agent
        if a.rank == 0:
            for phase in sorted(self._arrived):
                self._maybe_pass(phase)
        elif a.peers.ranks.get(peer) == 0:
            for go in self._go.values():
                if not go.done():
                    go.set_result(tuple(sorted(a.dead)))

    async def wait(self, phase: int, deadline: float) -> tuple[str | None, tuple[str, ...]]:
        """Arrive at barrier ``phase``; (a problem, the dead workers it went without)."""
        a = self.agent
        go = self._go.setdefault(phase, a.loop.create_future())
        stamp = max((p.lamport() for p in a.plugins), default=0)
        master = a.peers.master()
        if a.rank == 0:
            self._arrive(phase, a.name, stamp)
        elif master in a.dead:
            return None, tuple(sorted(a.dead))
        else:
            a.send_frame(master, fr.Barrier, phase=phase, name=a.name, stamp=stamp)
        try:
            left = None if deadline == math.inf else max(0.0, deadline - time.monotonic())
            dead = await asyncio.wait_for(asyncio.shield(go), left)
        except TimeoutError:
            missing = sorted(set(a.peers.ranks) - set(self._arrived.get(phase, {})))
            who = f" (missing: {', '.join(missing)})" if a.rank == 0 and missing else ""
            return f"barrier {phase}: not every worker arrived{who}", ()
        return None, dead

    def _arrive(self, phase: int, name: str, stamp: int) -> None:
        self._arrived.setdefault(phase, {})[name] = stamp
        self._maybe_pass(phase)

    def _maybe_pass(self, phase: int) -> None:
        """(master) Pass barrier ``phase`` once every live worker arrived."""
        a = self.agent
        arrived = self._arrived.get(phase, {})
        if self.go_done(phase) or any(w not in arrived and w not in a.dead for w in a.peers.ranks):
            return
        dead = tuple(sorted(a.dead))
        seq, lamport = self.clock.receive(max(arrived.values()))
        if phase == 1 and not dead:
            # one global step: logged once, above every arrival's clock
            for plugin in a.plugins:
                plugin.barrier_logged(phase, seq, lamport)
        for other in a.peers.ranks:
            if other != a.name and other not in a.dead:
                a.send_frame(other, fr.BarrierGo, phase=phase, stamp=lamport, dead=dead)
        self._pass(phase, lamport, dead)

    def _pass(self, phase: int, stamp: int, dead: tuple[str, ...] = ()) -> None:
        a = self.agent
        for plugin in a.plugins:
            plugin.observe(stamp)
        for peer in dead:  # the master saw them die; this worker may not have talked to them
            self._declare_dead(peer, "the master found it dead at the shutdown barrier")
        if phase == 1 and not dead:
            # From here on no new call (RRef.tla AppCanAct): until every worker arrived, this
            # worker's UDFs may still call out on behalf of callers that have not arrived.
            a.stopping = True
            for plugin in a.plugins:
                plugin.barrier_passed(phase)
        go = self._go.setdefault(phase, a.loop.create_future())
        if not go.done():
            go.set_result(dead)


async def _until(agent: Host, what: str, pred: Callable[[], bool], deadline: float) -> str | None:
    """Wait for ``pred`` (or a death, which ends the protocols' shutdown)."""
    while True:
        for plugin in agent.plugins:
            plugin.poll()
        if pred() or agent.dead:
            return None
        if time.monotonic() > deadline:
            return f"timed out waiting for {what}"
        await asyncio.sleep(0.002)


def _unfinished(agent: Host, problems: list[str | None]) -> ShutdownReport:
    """The report of a shutdown the protocols could not complete (see the module's note)."""
    agent.stopping = True
    leaks: dict[str, list[str]] = {}
    for plugin in agent.plugins:
        _merge(leaks, plugin.leftovers())
    dead = tuple(sorted(agent.dead))
    why = f"worker(s) {', '.join(dead)} died" if dead else "not every worker reached shutdown"
    problems.append(
        f"graceful shutdown incomplete: {why}; the protocols' shutdown (the plug-ins' "
        "sweeps, e.g. RRef.tla's WaitAllWorkers, DelAllUsersAndUnforkedOwners and "
        "DestroyInstance) needs every worker, so it was skipped, and what this worker "
        "still holds is listed as leaks"
    )
    for peer in dead:
        problems.append(f"{peer}: {agent.dead[peer]}")
    report = ShutdownReport(agent.name, leaks, tuple(p for p in problems if p), dead_peers=dead)
    log.warning("%s: %s", agent.name, "; ".join(report.problems))
    return report


async def graceful(agent: Host, barriers: Barriers) -> ShutdownReport:
    """rpc.shutdown(graceful=True): barrier 1, the plug-ins' sweeps, barrier 2, their last
    steps (see the module's note)."""
    bound = agent.options.shutdown_timeout
    # Unbounded unless the caller asked (torch waits for its peers); a death ends every wait.
    deadline = math.inf if bound is None else time.monotonic() + bound
    plugins = agent.plugins
    problems: list[str | None] = []
    leaks: dict[str, list[str]] = {}

    async def until(what: str, pred: Callable[[], bool]) -> str | None:
        return await _until(agent, what, pred, deadline)

    def calls_done() -> bool:
        return all(p.idle(agent.dead) for p in plugins) and not agent.pool.running

    problems.append(await until("this worker's user calls", calls_done))
    missing, dead = await barriers.wait(1, deadline)  # RRef.tla WaitAllWorkers
    if missing or dead or agent.dead:
        return _unfinished(agent, [*problems, missing])
    for plugin in plugins:
        swept = await plugin.sweep(until)
        if swept is None:  # a death stopped it
            return _unfinished(agent, problems)
        problems += swept.problems
        _merge(leaks, swept.leaks)
    missing, dead = await barriers.wait(2, deadline)  # every worker swept
    if dead or agent.dead:
        return _unfinished(agent, [*problems, missing])
    problems.append(missing)
    for plugin in plugins:
        done: Swept = await plugin.destroy(until)
        problems += done.problems
        _merge(leaks, done.leaks)
    report = ShutdownReport(agent.name, leaks, tuple(p for p in problems if p))
    if not report.leak_free:
        log.warning(
            "%s: graceful shutdown: leaks %s, problems %s", agent.name, leaks, report.problems
        )
    return report
