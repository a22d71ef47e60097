"""Graceful shutdown of one worker, as RRef.tla's three shutdown actions.

Graceful shutdown follows PyTorch's: ``_wait_all_workers`` (barrier 1, after this worker's own
user calls and UDFs finished), then ``delAllUsersAndUnforkedOwners`` (wait until pendingUsers_,
pendingChildren_ and this worker's fetches drained; delete every confirmed UserRRef still
alive, held ones included; wait for every retried control message to be acked), barrier 2,
then the leak report (what RRefContext still holds) and the links close. The barriers are held
by the master (rank 0), which logs ``WaitAllWorkers`` once under the environment actor.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

from protoref.rref import events as ev
from protoref.rref.machine import step as core_step
from protoref.rref.runtime import current
from protoref.rref.runtime import frames as fr
from protoref.rref.runtime.errors import RPCError
from protoref.rref.runtime.worker import BARRIER, WorkerCore
from protoref.rref.state import Leak
from protoref.rref.trace import WaitAllWorkersArgs, make_event
from protoref.tracing import NodeClock

__all__ = ["Shutdown", "ShutdownReport"]

log = logging.getLogger("protoref.rref.runtime")


@dataclass(frozen=True)
class ShutdownReport:
    """What graceful shutdown found: RRefContext entries left behind are leaks."""

    worker: str
    leaks: dict[str, list[str]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    @property
    def leak_free(self) -> bool:
        return not self.leaks and not self.problems


class Shutdown(WorkerCore):
    """The barriers and the graceful shutdown of a worker."""

    def _init_barriers(self) -> None:
        self._arrived: dict[int, dict[str, int]] = {}
        self.barrier_clock = NodeClock()
        self._go: dict[int, asyncio.Future[None]] = {}

    def on_barrier_frame(self, frame: fr.Barrier | fr.BarrierGo) -> None:
        if isinstance(frame, fr.Barrier):
            self._arrive(frame.phase, frame.name, frame.stamp)
        else:
            self._pass(frame.phase, frame.stamp)

    async def _until(self, what: str, pred: Callable[[], bool], deadline: float) -> str | None:
        while True:
            self.node.apply_drops()
            if pred():
                return None
            if time.monotonic() > deadline:
                return f"timed out waiting for {what}"
            await asyncio.sleep(0.002)

    async def _barrier(self, phase: int, deadline: float) -> str | None:
        go = self._go.setdefault(phase, self.loop.create_future())
        stamp = self.node.clock.lamport
        if self.rank == 0:
            self._arrive(phase, self.name, stamp)
        else:
            master = next(n for n, k in self.ranks.items() if k == 0)
            self._send_frame(master, fr.Barrier, phase=phase, name=self.name, stamp=stamp)
        try:
            await asyncio.wait_for(go, max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            return f"barrier {phase}: not every worker arrived"
        return None

    def _arrive(self, phase: int, name: str, stamp: int) -> None:
        arrived = self._arrived.setdefault(phase, {})
        arrived[name] = stamp
        if len(arrived) < self.world_size:
            return
        seq, lamport = self.barrier_clock.receive(max(arrived.values()))
        if phase == 1 and self.sink.enabled:
            # WaitAllWorkers is one global step: logged once, above every arrival's clock.
            with self.node.lock:
                post_state = core_step(self.node.ctx, ev.WaitAllWorkers()).state
                event = make_event(WaitAllWorkersArgs(), BARRIER, seq, lamport, post_state)
                self.sink.emit(event)
        for other in self.ranks:
            if other != self.name:
                self._send_frame(other, fr.BarrierGo, phase=phase, stamp=lamport)
        self._pass(phase, lamport)

    def _pass(self, phase: int, stamp: int) -> None:
        with self.node.lock:
            self.node.clock.lamport = max(self.node.clock.lamport, stamp)
        if phase == 1:
            # From here on no new user call (AppCanAct): until every worker arrived, this
            # worker's UDFs may still call out on behalf of callers that have not arrived.
            self.stopping = True
            self.node.pass_barrier()
        go = self._go.setdefault(phase, self.loop.create_future())
        if not go.done():
            go.set_result(None)

    async def _graceful(self) -> ShutdownReport:
        """rpc.shutdown(graceful=True) as RRef.tla's three shutdown actions."""
        deadline = time.monotonic() + self.options.shutdown_timeout
        node = self.node
        problems: list[str | None] = []
        leaks: list[Leak] = []
        calls_done = lambda: node.calls_quiet() and not self.udfs_running  # noqa: E731
        problems.append(await self._until("this worker's user calls", calls_done, deadline))
        problems.append(await self._barrier(1, deadline))  # WaitAllWorkers
        waited = await self._until("pending users, children and fetches", node.quiet, deadline)
        problems.append(waited)
        # DelAllUsersAndUnforkedOwners: forced (and reported) only if the wait timed out.
        leaks += node.apply(ev.DelAllUsersAndUnforkedOwners(force=waited is not None)).leaks
        problems.append(
            await self._until("acks of control messages", lambda: not node.unacked, deadline)
        )
        problems.append(await self._barrier(2, deadline))  # every worker swept, deletes applied
        owners_gone = await self._until(
            "OwnerRRefs to be deleted", lambda: not node.ctx.owners, deadline
        )
        problems.append(owners_gone)
        destroy = ev.DestroyInstance(
            active_calls=0, peers_swept=True, force=owners_gone is not None
        )
        leaks += node.apply(destroy).leaks
        grouped: dict[str, list[str]] = {}
        for leak in leaks:
            grouped.setdefault(leak.kind, []).append(str(leak))
        report = ShutdownReport(self.name, grouped, tuple(p for p in problems if p))
        if not report.leak_free:
            log.warning(
                "%s: graceful shutdown: leaks %s, problems %s", self.name, grouped, report.problems
            )
        return report

    async def _close(self) -> None:
        self.node.frozen = True
        await self.transport.close()
        self.sink.close()
        me = asyncio.current_task()
        rest = [t for t in asyncio.all_tasks() if t is not me]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    def shutdown(self, graceful: bool = True) -> ShutdownReport:
        """torch's rpc.shutdown: graceful waits for the others and reports leaks."""
        if self.closed:
            raise RPCError(f"RPC on {self.name} is already shut down")
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
