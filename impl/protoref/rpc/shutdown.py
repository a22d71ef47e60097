"""Graceful shutdown of one worker, as RRef.tla's three shutdown actions.

Graceful shutdown follows PyTorch's: ``_wait_all_workers`` (barrier 1, after this worker's own
user calls and UDFs finished), then ``delAllUsersAndUnforkedOwners`` (wait until pendingUsers_,
pendingChildren_ and this worker's fetches drained; delete every confirmed UserRRef still
alive, held ones included; wait for every retried control message to be acked), barrier 2,
then the leak report (what RRefContext still holds) and the links close. The barriers are held
by the master (rank 0), which logs ``WaitAllWorkers`` once under the environment actor.

With a worker dead (liveness.py), or missing from barrier 1 when the shutdown timeout ends,
the spec's shutdown cannot be completed: ``WaitAllWorkers`` needs every worker (and no user
call in flight, while calls to the dead one stay in flight forever), and the sweep and
``DestroyInstance`` need it too. The survivors then agree on it (the master completes a barrier
with the live workers and names the dead in ``BarrierGo``; with the master dead there is no
barrier) and each returns a :class:`ShutdownReport` naming the dead worker(s) and listing what
its RRefContext still holds, without taking a further protocol step, so its trace stays one the
spec accepts (it ends where the protocol stopped). Once the barrier has passed, a death stops the
shutdown at the next wait the same way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import cast

from protoref.rpc import current
from protoref.rpc import frames as fr
from protoref.rpc.errors import RPCError
from protoref.rpc.liveness import Liveness
from protoref.rpc.worker import BARRIER
from protoref.rref.core import events as ev
from protoref.rref.core.machine import step as core_step
from protoref.rref.core.state import Leak, RRefContext
from protoref.rref.trace import WaitAllWorkersArgs, make_event
from protoref.tracing import NodeClock

__all__ = ["Shutdown", "ShutdownReport"]

log = logging.getLogger("protoref.rref.runtime")


@dataclass(frozen=True)
class ShutdownReport:
    """What graceful shutdown found: RRefContext entries left behind are leaks; ``dead_peers``
    the workers found dead (then the protocol's shutdown could not complete)."""

    worker: str
    leaks: dict[str, list[str]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    dead_peers: tuple[str, ...] = ()

    @property
    def leak_free(self) -> bool:
        return not self.leaks and not self.problems and not self.dead_peers


def leftovers(ctx: RRefContext) -> list[Leak]:
    """What a context still holds when its shutdown cannot sweep it (pure, no step taken)."""
    alive = sorted(f for f in ctx.users if f not in ctx.deleted)
    return (
        [Leak("pending_user", ctx.users[f].rref, f) for f in sorted(ctx.pending_users)]
        + [Leak("pending_child", ctx.users[p].rref, c) for c, p in sorted(ctx.pending_children)]
        + [Leak("user", ctx.users[f].rref, f) for f in alive if f not in ctx.pending_users]
        + [Leak("owner", r) for r in sorted(ctx.owners | ctx.owner_held)]
        + [Leak("fork", r, f) for r, f in sorted(ctx.forks)]
        + [Leak("parked_fetch", r, f) for r, f, _ in sorted(ctx.pending_owners)]
    )


def _grouped(leaks: list[Leak]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for leak in leaks:
        grouped.setdefault(leak.kind, []).append(str(leak))
    return grouped


class Shutdown(Liveness):
    """The barriers and the graceful shutdown of a worker."""

    def _init_barriers(self) -> None:
        self._arrived: dict[int, dict[str, int]] = {}
        self.barrier_clock = NodeClock()
        #: Phase -> done when the barrier passed: the dead workers it went without (() : none).
        self._go: dict[int, asyncio.Future[tuple[str, ...]]] = {}

    def _go_done(self, phase: int) -> bool:
        go = self._go.get(phase)
        return go is not None and go.done()

    def on_barrier_frame(self, frame: fr.Barrier | fr.BarrierGo) -> None:
        if isinstance(frame, fr.Barrier):
            self._arrive(frame.phase, frame.name, frame.stamp)
        else:
            self._pass(frame.phase, frame.stamp, frame.dead)

    def on_peer_dead(self, peer: str) -> None:
        """A barrier stops waiting for a dead worker: the master completes it with the live
        ones; without a master there is nobody to hold it."""
        if self.rank == 0:
            for phase in sorted(self._arrived):
                self._maybe_pass(phase)
        elif self.ranks.get(peer) == 0:
            for go in self._go.values():
                if not go.done():
                    go.set_result(tuple(sorted(self.dead)))

    async def _until(self, what: str, pred: Callable[[], bool], deadline: float) -> str | None:
        """Wait for ``pred`` (or a death, which ends the protocol's shutdown)."""
        while True:
            self.node.apply_drops()
            if pred() or self.dead:
                return None
            if time.monotonic() > deadline:
                return f"timed out waiting for {what}"
            await asyncio.sleep(0.002)

    async def _barrier(self, phase: int, deadline: float) -> tuple[str | None, tuple[str, ...]]:
        """Arrive at barrier ``phase``; (a problem, the dead workers it went without)."""
        go = self._go.setdefault(phase, self.loop.create_future())
        stamp = self.node.clock.lamport
        master = next(n for n, k in self.ranks.items() if k == 0)
        if self.rank == 0:
            self._arrive(phase, self.name, stamp)
        elif master in self.dead:
            return None, tuple(sorted(self.dead))
        else:
            self._send_frame(master, fr.Barrier, phase=phase, name=self.name, stamp=stamp)
        try:
            dead = await asyncio.wait_for(asyncio.shield(go), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            missing = sorted(set(self.ranks) - set(self._arrived.get(phase, {})))
            who = f" (missing: {', '.join(missing)})" if self.rank == 0 and missing else ""
            return f"barrier {phase}: not every worker arrived{who}", ()
        return None, dead

    def _arrive(self, phase: int, name: str, stamp: int) -> None:
        self._arrived.setdefault(phase, {})[name] = stamp
        self._maybe_pass(phase)

    def _maybe_pass(self, phase: int) -> None:
        """(master) Pass barrier ``phase`` once every live worker arrived."""
        arrived = self._arrived.get(phase, {})
        if self._go_done(phase) or any(w not in arrived and w not in self.dead for w in self.ranks):
            return
        dead = tuple(sorted(self.dead))
        seq, lamport = self.barrier_clock.receive(max(arrived.values()))
        if phase == 1 and not dead and self.sink.enabled:
            # WaitAllWorkers is one global step: logged once, above every arrival's clock.
            with self.node.lock:
                post_state = core_step(self.node.ctx, ev.WaitAllWorkers()).state
                event = make_event(WaitAllWorkersArgs(), BARRIER, seq, lamport, post_state)
                self.sink.emit(event)
        for other in self.ranks:
            if other != self.name and other not in self.dead:
                self._send_frame(other, fr.BarrierGo, phase=phase, stamp=lamport, dead=dead)
        self._pass(phase, lamport, dead)

    def _pass(self, phase: int, stamp: int, dead: tuple[str, ...] = ()) -> None:
        with self.node.lock:
            self.node.clock.lamport = max(self.node.clock.lamport, stamp)
        for peer in dead:  # the master saw them die; this worker may not have talked to them
            self.declare_dead(peer, "the master found it dead at the shutdown barrier")
        if phase == 1 and not dead:
            # From here on no new user call (AppCanAct): until every worker arrived, this
            # worker's UDFs may still call out on behalf of callers that have not arrived.
            self.stopping = True
            self.node.pass_barrier()
        go = self._go.setdefault(phase, self.loop.create_future())
        if not go.done():
            go.set_result(dead)

    def _unfinished(self, problems: list[str | None]) -> ShutdownReport:
        """The report of a shutdown the protocol could not complete (see the module's note)."""
        self.stopping = True
        with self.node.lock:
            leaks = leftovers(self.node.ctx)
        dead = tuple(sorted(self.dead))
        why = f"worker(s) {', '.join(dead)} died" if dead else "not every worker reached shutdown"
        problems.append(
            f"graceful shutdown incomplete: {why}; the RRef sweep (RRef.tla WaitAllWorkers, "
            "DelAllUsersAndUnforkedOwners, DestroyInstance) needs every worker, so it was "
            "skipped, and what this worker still holds is listed as leaks"
        )
        for peer in dead:
            problems.append(f"{peer}: {self.dead[peer]}")
        report = ShutdownReport(
            self.name, _grouped(leaks), tuple(p for p in problems if p), dead_peers=dead
        )
        log.warning("%s: %s", self.name, "; ".join(report.problems))
        return report

    async def _graceful(self) -> ShutdownReport:
        """rpc.shutdown(graceful=True) as RRef.tla's three shutdown actions."""
        deadline = time.monotonic() + self.options.shutdown_timeout
        node = self.node
        problems: list[str | None] = []
        leaks: list[Leak] = []

        def calls_done() -> bool:
            return node.calls_quiet(gone=self.dead) and not self.udfs_running

        problems.append(await self._until("this worker's user calls", calls_done, deadline))
        missing, dead = await self._barrier(1, deadline)  # WaitAllWorkers
        if missing or dead or self.dead:
            return self._unfinished([*problems, missing])
        waited = await self._until("pending users, children and fetches", node.quiet, deadline)
        if self.dead:
            return self._unfinished(problems)
        problems.append(waited)
        # DelAllUsersAndUnforkedOwners: forced (and reported) only if the wait timed out.
        leaks += node.apply(ev.DelAllUsersAndUnforkedOwners(force=waited is not None)).leaks
        problems.append(
            await self._until("acks of control messages", lambda: not node.unacked, deadline)
        )
        missing, dead = await self._barrier(2, deadline)  # every worker swept, deletes applied
        if dead or self.dead:
            return self._unfinished([*problems, missing])
        problems.append(missing)
        owners_gone = await self._until(
            "OwnerRRefs to be deleted", lambda: not node.ctx.owners, deadline
        )
        problems.append(owners_gone)
        destroy = ev.DestroyInstance(
            active_calls=0, peers_swept=True, force=owners_gone is not None
        )
        leaks += node.apply(destroy).leaks
        grouped = _grouped(leaks)
        report = ShutdownReport(self.name, grouped, tuple(p for p in problems if p))
        if not report.leak_free:
            log.warning(
                "%s: graceful shutdown: leaks %s, problems %s", self.name, grouped, report.problems
            )
        return report

    async def _close(self) -> None:
        self.closing = True
        self.node.frozen = True
        await self.transport.close()
        self.sink.close()
        self.close_autograd_trace()
        me = asyncio.current_task()
        rest = [t for t in asyncio.all_tasks() if t is not me]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def shutdown(self, graceful: bool = True, timeout: float | None = None) -> ShutdownReport:
        """torch's rpc.shutdown: graceful waits for the others and reports leaks. ``timeout``
        bounds the graceful part (default ``shutdown_timeout``; torch's default waits forever,
        which a dead peer would make a hang)."""
        if self.closed:
            raise RPCError(f"RPC on {self.name} is already shut down")
        if timeout is not None and timeout > 0:
            self.options = replace(self.options, shutdown_timeout=timeout)
        report = ShutdownReport(self.name)
        limit = self.options.shutdown_timeout + 10
        if graceful:
            report = asyncio.run_coroutine_threadsafe(self._graceful(), self.loop).result(limit)
        self.stopping = True
        asyncio.run_coroutine_threadsafe(self._close(), self.loop).result(limit)
        self.closed = True
        self.executor.shutdown(wait=graceful)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(limit)
        self.loop.close()
        current.unbind(cast(current.Worker, self))
        current.unregister(cast(current.Worker, self))
        return report
