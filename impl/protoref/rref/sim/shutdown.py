"""Graceful shutdown in the simulator: RRef.tla's ``WaitAllWorkers``,
``DelAllUsersAndUnforkedOwners`` and ``DestroyInstance``, offered when their guards hold and
interleaved with deliveries, retries, destructors and the application's drops.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from protoref.errors import LeakError
from protoref.ids import WorkerId
from protoref.rref.core import events as ev
from protoref.rref.sim import base
from protoref.rref.sim.base import BARRIER, MAX_DRAIN_STEPS, SimBase
from protoref.rref.trace import WaitAllWorkersArgs

__all__ = ["ShutdownSteps"]


class ShutdownSteps:
    """rpc.shutdown(graceful=True) on every worker."""

    def __init__(self, sim: SimBase) -> None:
        self.sim = sim

    # ------------------------------------------------------------------ graceful shutdown

    def wait_all_workers(self) -> None:
        """RRef.tla ``WaitAllWorkers``: the barrier, one step for all workers at once, logged
        once by the environment actor ``barrier`` (its Lamport clock follows every worker's)."""
        calls = sum(1 for e in self.sim.net if e.msg.type in ev.USER_CALL_TYPES)
        barrier = ev.WaitAllWorkers(user_calls_in_flight=calls)
        states = {w: base.core_step(ctx, barrier).state for w, ctx in self.sim.contexts.items()}
        self.sim.contexts.update(states)  # all or nothing: a refusal above changed no context
        self.sim._stopping = True
        seq, lamport = self.sim.barrier_clock.receive(
            max(c.lamport for c in self.sim.clocks.values())
        )
        for clock in self.sim.clocks.values():
            clock.lamport = max(clock.lamport, lamport)
        self.sim._record(
            WaitAllWorkersArgs.of(), BARRIER, seq, lamport, states[self.sim.workers[0]]
        )

    def del_all_users_and_unforked_owners(self, w: WorkerId) -> None:
        """RRef.tla ``DelAllUsersAndUnforkedOwners(w)``: the worker's shutdown sweep."""
        self.sim._apply(w, base.machine.del_all_users_and_unforked_owners, ())

    def destroy_instance(self, w: WorkerId) -> None:
        """RRef.tla ``DestroyInstance(w)``: agent.join, then destroyInstance."""
        active = sum(1 for e in self.sim.net if w in (e.msg.src, e.msg.dst))
        swept = all(ctx.phase != "running" for ctx in self.sim.contexts.values())
        # agent.join hears from every worker (it waits for every call of the group to finish,
        # TensorPipeAgent::join's all-gather), so its step follows every worker's events so
        # far: its clock follows theirs, and logs merged by clock put it after the deliveries
        # it waited for (with its own clock, a destroy sorted before them was refused).
        clock = self.sim.clocks[w]
        clock.lamport = max(c.lamport for c in self.sim.clocks.values())
        self.sim._apply(w, base.machine.destroy_instance, (active, swept))

    def _shutdown_options(self) -> list[tuple[float, Callable[[], object]]]:
        """The shutdown steps whose spec guards hold (the core re-checks every one)."""
        contexts = self.sim.contexts
        if not self.sim._stopping:
            user_calls = ev.USER_CALL_TYPES
            for e in self.sim.net:  # a plain loop: no generator per step
                if e.msg.type in user_calls:
                    return []
            return [(1.0, self.wait_all_workers)]
        opts: list[tuple[float, Callable[[], object]]] = []
        swept = True
        for ctx in contexts.values():
            if ctx.phase == "running":
                swept = False
                break
        busy: set[WorkerId] | None = None  # the workers some message in flight is to or from
        for w, ctx in contexts.items():
            fetching = not ctx.fetching.isdisjoint(ctx.users)
            if ctx.phase == "running":
                # RRef.tla AwaitForkCopies: not while one of its fork requests is in flight
                forking = any(
                    e.msg.type == "RREF_FORK_REQUEST" and e.msg.src == w for e in self.sim.net
                )
                if not (ctx.pending_users or ctx.pending_children or fetching or forking):
                    opts.append((1.0, partial(self.del_all_users_and_unforked_owners, w)))
            elif ctx.phase == "swept" and swept and not (ctx.owners or fetching):
                if busy is None:
                    busy = {e.msg.src for e in self.sim.net} | {e.msg.dst for e in self.sim.net}
                if w not in busy:
                    opts.append((1.0, partial(self.destroy_instance, w)))
        return opts

    def shutdown(self) -> None:
        """rpc.shutdown(graceful=True) on every worker: run until every context is destroyed.

        The application stops issuing calls but may still drop references; the scheduler
        interleaves deliveries, retries, destructors and the shutdown steps.
        """
        contexts = self.sim.contexts.values()
        for _ in range(MAX_DRAIN_STEPS):
            for ctx in contexts:  # all destroyed? (a plain loop: no generator per step)
                if ctx.phase != "destroyed":
                    break
            else:
                return
            # Until then, the barrier's and the sweeps' steps are offered with the others.
            if not self.sim.step("shutdown"):
                # Stuck: no step is enabled, so nothing will ever happen again. The run is
                # over and its trace says so (the end line); the checker then finds the
                # spec state after the last event not quiescent (a context never destroyed).
                self.sim.sink.end(self.sim.end_record())
                break
        phases = {w: ctx.phase for w, ctx in self.sim.contexts.items()}
        raise LeakError("ShutdownCompletesProp", f"shutdown stuck: {phases}", seed=self.sim.seed)
