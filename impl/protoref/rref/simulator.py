"""Deterministic simulator of the Reference RRef protocol: N workers, one thread, virtual time.

A seeded :class:`random.Random` owns every choice: which enabled step happens next (deliver any
ready message in any order, duplicate a retried control message once as RRef.tla's ``RetrySend``
does, fire an rpc.remote timeout whose deadline passed, run a UserRRef destructor, or an
application action), and each message's delivery delay. User calls are never retried. A run is a
workload phase (random application actions, or a scripted scenario), optionally a graceful
shutdown phase (rpc.shutdown(graceful=True): the barrier, each worker's sweep and destroy,
interleaved with deliveries and with the application dropping some references), then a drain
phase in which the application drops every reference and the network empties; it ends with the
leak-free quiescence check (R9) and, in test mode, checks the spec's invariants after every step.

Every run is reproducible from its seed: ``python -m protoref.rref.simulator --seed N``.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Final, Literal, TypeAlias

from pydantic import JsonValue

from protoref.errors import LeakError
from protoref.ids import GloballyUniqueId, WorkerId
from protoref.rref import events as ev
from protoref.rref import invariants
from protoref.rref.machine import step as core_step
from protoref.rref.state import Leak, Pair, RRefContext
from protoref.rref.trace import ActionArgs, RetrySendArgs, WaitAllWorkersArgs, make_event
from protoref.tracing import JsonlSink, NodeClock, NullSink, TraceHeader, TraceSink, tla_set

__all__ = ["Envelope", "RunSummary", "SimConfig", "Simulator", "main"]

Gid = GloballyUniqueId
Mode = Literal["workload", "drain", "system", "shutdown"]
#: Steps allowed in the drain (or shutdown) phase before the run is declared stuck.
MAX_DRAIN_STEPS: Final = 200_000
#: Enabled steps as parallel lists (weights, actions), in a deterministic order.
Options: TypeAlias = tuple[list[float], list[Callable[[], object]]]
#: The environment actor that logs the global shutdown barrier (RRef.tla ``WaitAllWorkers``).
BARRIER: Final = "barrier"


@dataclass(frozen=True)
class SimConfig:
    """Knobs of a run. The first four are RRef.tla constants (header ``settings``)."""

    workers: int = 3
    self_remote: bool = True  # SelfRemote
    duplicates: bool = True  # Duplicates: RetrySend of retried control messages
    timeouts: bool = True  # Timeouts: rpc.remote futures may fail with TIMEOUT
    max_delay: int = 4  # virtual ticks a message may wait before it can be delivered
    rpc_timeout: int = 10  # virtual ticks after which an rpc.remote may time out
    app_weight: float = 0.35  # chance that a workload step is an application action
    check_invariants: bool = False  # check every spec invariant after every step (tests)
    shutdown: bool = False  # Shutdown: a graceful-shutdown phase after the workload


@dataclass(slots=True, eq=False)
class Envelope:
    """A message in flight with its transport metadata (not part of the spec's record)."""

    msg: ev.Message
    stamp: int  # the sender's Lamport clock when it sent the message
    ready_at: int  # virtual time from which it may be delivered
    # The scheduler's two options for this envelope, built once when it is sent.
    deliver: Callable[[], object] = field(default=lambda: None, repr=False)
    retry: Callable[[], object] = field(default=lambda: None, repr=False)
    retryable: bool = False  # RetrySend is enabled: a first attempt of a retried message


@dataclass(frozen=True)
class RunSummary:
    seed: int
    events: int
    now: int
    counts: dict[str, int] = field(default_factory=dict)
    #: What graceful shutdown reported (worker, leak), as PyTorch logs it.
    leaks: tuple[tuple[WorkerId, Leak], ...] = ()


class Simulator:
    """N RRef workers ``w0..w{N-1}`` driven by one seeded scheduler."""

    def __init__(
        self,
        seed: int,
        config: SimConfig | None = None,
        sink: TraceSink | None = None,
        *,
        workload: str = "random",
    ) -> None:
        self.seed = seed
        self.config = config or SimConfig()
        self.sink: TraceSink = sink or NullSink()
        self.rng = random.Random(seed)
        self.workers: tuple[WorkerId, ...] = tuple(f"w{i}" for i in range(self.config.workers))
        self.contexts: dict[WorkerId, RRefContext] = {w: RRefContext(me=w) for w in self.workers}
        self.clocks = {w: NodeClock() for w in self.workers}
        self.barrier_clock = NodeClock()
        self.leaks: list[tuple[WorkerId, Leak]] = []
        # History for R4 (not protocol state): distinct RREF_USER_DELETEs sent per ForkId, and
        # ForkIds that ever left a ``deleted`` set (deletedOnOwner_ must be monotone).
        self.delete_sends: Counter[Gid] = Counter()
        self.undeleted: dict[WorkerId, frozenset[Gid]] = dict.fromkeys(self.workers, frozenset())
        self.net: list[Envelope] = []
        self.now = 0
        self.counts: Counter[str] = Counter()
        self.removed_forks: dict[WorkerId, frozenset[Pair]] = dict.fromkeys(
            self.workers, frozenset()
        )
        self.erased_owners: dict[WorkerId, frozenset[Gid]] = dict.fromkeys(
            self.workers, frozenset()
        )
        # rpc.remote futures that may time out: (caller, r, f) -> virtual deadline.
        self.deadlines: dict[tuple[WorkerId, Gid, Gid], int] = {}
        # Scheduler caches: a worker's destructor and application options, with the context
        # they were computed from (contexts are immutable, so identity says they are current).
        self._destructors: dict[WorkerId, tuple[RRefContext, Options]] = {}
        self._app_cache: dict[tuple[WorkerId, bool], tuple[RRefContext, Options]] = {}
        if self.sink.enabled:
            self.sink.header(self._header(workload))

    # ------------------------------------------------------------------ trace header

    def _header(self, workload: str) -> TraceHeader:
        c = self.config
        links: list[JsonValue] = [[a, b] for a in self.workers for b in self.workers if a != b]
        settings = {
            "Variant": "Reference",
            "SelfRemote": c.self_remote,
            "Duplicates": c.duplicates,
            "Timeouts": c.timeouts,
            "RemoteDsts": tla_set(list(self.workers)),
            "G1": True,
            "G2Workers": tla_set(list(self.workers)),
            "Shutdown": c.shutdown,
            "Links": tla_set(links),
            "workload": workload,
            "max_delay": c.max_delay,
            "rpc_timeout": c.rpc_timeout,
        }
        environment = (BARRIER,) if c.shutdown else ()
        return TraceHeader(
            protocol="rref",
            nodes=self.workers,
            settings=settings,
            seed=self.seed,
            environment=environment,
        )

    # ------------------------------------------------------------------ core plumbing

    def world(self) -> invariants.World:
        return invariants.World(
            contexts=self.contexts,
            net=[e.msg for e in self.net],
            removed_forks=self.removed_forks,
            erased_owners=self.erased_owners,
            stopping=any(ctx.stopping for ctx in self.contexts.values()),
            delete_sends=self.delete_sends,
            undeleted=self.undeleted,
        )

    def _apply(self, w: WorkerId, inp: ev.RRefInput, stamp: int | None = None) -> RRefContext:
        """One core step on ``w``: new state, sends, history, one trace event, checks."""
        before = self.contexts[w]
        result = core_step(before, inp)
        after = self.contexts[w] = result.state
        clock = self.clocks[w]
        seq, lamport = clock.local() if stamp is None else clock.receive(stamp)
        for m in result.sent:
            if m.type == "RREF_USER_DELETE":
                self.delete_sends[m.fork] += 1
            self._send(m, lamport)
        if after.forks is not before.forks:
            self.removed_forks[w] |= before.forks - after.forks
        if after.owners is not before.owners:
            self.erased_owners[w] |= before.owners - after.owners
        if after.deleted is not before.deleted and not before.deleted <= after.deleted:
            self.undeleted[w] |= before.deleted - after.deleted
        self.leaks += ((w, leak) for leak in result.leaks)
        delivered = inp if isinstance(inp, ev.MessageBase) else None
        self._record(result.action, w, seq, lamport, after, delivered=delivered)
        return after

    def _send(self, m: ev.Message, stamp: int) -> None:
        delay = self.rng.randint(0, self.config.max_delay)
        env = Envelope(m, stamp, self.now + delay)
        env.deliver = partial(self._deliver_envelope, env)
        env.retry = partial(self._retry_envelope, env)
        env.retryable = self.config.duplicates and m.dup == 0 and m.type in ev.RETRIED
        self.net.append(env)

    def _record(
        self,
        action: ActionArgs,
        w: WorkerId,
        seq: int,
        lamport: int,
        ctx: RRefContext,
        *,
        delivered: ev.Message | None = None,
    ) -> None:
        self.counts[action.action] += 1
        if self.sink.enabled:
            self.sink.emit(make_event(action, w, seq, lamport, ctx, delivered=delivered))
        if self.config.check_invariants:
            invariants.check(self.world(), seed=self.seed)

    # ------------------------------------------------------------------ system steps

    def deliver(self, index: int) -> None:
        """Take message ``index`` from the network; its handler runs on the destination."""
        env = self.net[index]
        self.net[index] = self.net[-1]
        self.net.pop()
        self._apply(env.msg.dst, env.msg, env.stamp)

    def _index(self, env: Envelope) -> int:
        # Identity, not equality: two envelopes may carry equal messages.
        return next(i for i, e in enumerate(self.net) if e is env)

    def _deliver_envelope(self, env: Envelope) -> None:
        self.deliver(self._index(env))

    def _retry_envelope(self, env: Envelope) -> None:
        self.retry_send(self._index(env))

    def retry_send(self, index: int) -> None:
        """RRef.tla ``RetrySend(m)``: sendWithRetries re-sends a control message whose first
        attempt is unacknowledged; both copies may arrive (at-least-once delivery)."""
        env = self.net[index]
        m = env.msg
        if m.type not in ev.RETRIED or m.dup != 0:
            raise ValueError(f"RetrySend of {m!r}: only first attempts of retried messages")
        seq, lamport = self.clocks[m.src].local()
        env.msg = m.model_copy(update={"dup": 1})
        env.retryable = False
        self._send(m.model_copy(update={"dup": 2}), lamport)
        self._record(RetrySendArgs(m=m), m.src, seq, lamport, self.contexts[m.src])

    def _system_options(self) -> Options:
        weights: list[float] = []
        actions: list[Callable[[], object]] = []
        weight, action, now = weights.append, actions.append, self.now
        for env in self.net:
            if env.ready_at <= now:
                weight(1.0)
                action(env.deliver)
            if env.retryable:
                weight(0.3)
                action(env.retry)
        for w, ctx in self.contexts.items():
            cached = self._destructors.get(w)
            if cached is None or cached[0] is not ctx:
                cached = (ctx, self._destructor_options(w, ctx))
                self._destructors[w] = cached
            weights += cached[1][0]
            actions += cached[1][1]
        for (w, r, f), deadline in list(self.deadlines.items()):
            ctx = self.contexts[w]
            alive = f in ctx.pending_users if f != r else r in ctx.self_calls
            if not alive:
                del self.deadlines[(w, r, f)]
            elif self.config.timeouts and deadline <= now:
                weights.append(0.5)
                actions.append(partial(self.time_out_remote, w, r, f))
        return weights, actions

    def _destructor_options(self, w: WorkerId, ctx: RRefContext) -> Options:
        """DelUser for every UserRRef nothing references any more (in ``users`` order)."""
        fs = [f for f in ctx.users if f not in ctx.deleted and not ctx.referenced(f)]
        return [1.0] * len(fs), [partial(self.del_user, w, f) for f in fs]

    def del_user(self, w: WorkerId, f: Gid) -> None:
        """The UserRRef's refcount reached zero: its destructor runs (G1)."""
        self._apply(w, ev.DelUser(f=f))

    def time_out_remote(self, w: WorkerId, r: Gid, f: Gid) -> None:
        self.deadlines.pop((w, r, f), None)
        self._apply(w, ev.TimeOutRemote(r=r, f=f))

    # ------------------------------------------------------------------ graceful shutdown

    def wait_all_workers(self) -> None:
        """RRef.tla ``WaitAllWorkers``: the barrier, one step for all workers at once, logged
        once by the environment actor ``barrier`` (its Lamport clock follows every worker's)."""
        calls = sum(1 for e in self.net if e.msg.type in ev.USER_CALL_TYPES)
        barrier = ev.WaitAllWorkers(user_calls_in_flight=calls)
        states = {w: core_step(ctx, barrier).state for w, ctx in self.contexts.items()}
        self.contexts.update(states)  # all or nothing: a refusal above changed no context
        seq, lamport = self.barrier_clock.receive(max(c.lamport for c in self.clocks.values()))
        for clock in self.clocks.values():
            clock.lamport = max(clock.lamport, lamport)
        self._record(WaitAllWorkersArgs(), BARRIER, seq, lamport, states[self.workers[0]])

    def del_all_users_and_unforked_owners(self, w: WorkerId) -> None:
        """RRef.tla ``DelAllUsersAndUnforkedOwners(w)``: the worker's shutdown sweep."""
        self._apply(w, ev.DelAllUsersAndUnforkedOwners())

    def destroy_instance(self, w: WorkerId) -> None:
        """RRef.tla ``DestroyInstance(w)``: agent.join, then destroyInstance."""
        active = sum(1 for e in self.net if w in (e.msg.src, e.msg.dst))
        swept = all(ctx.phase != "running" for ctx in self.contexts.values())
        self._apply(w, ev.DestroyInstance(active_calls=active, peers_swept=swept))

    def _shutdown_options(self) -> list[tuple[float, Callable[[], object]]]:
        """The shutdown steps whose spec guards hold (the core re-checks every one)."""
        if not any(ctx.stopping for ctx in self.contexts.values()):
            if any(e.msg.type in ev.USER_CALL_TYPES for e in self.net):
                return []
            return [(1.0, self.wait_all_workers)]
        opts: list[tuple[float, Callable[[], object]]] = []
        swept = all(ctx.phase != "running" for ctx in self.contexts.values())
        busy = {e.msg.src for e in self.net} | {e.msg.dst for e in self.net}
        for w, ctx in self.contexts.items():
            fetching = any(f in ctx.users for f in ctx.fetching)
            if ctx.phase == "running":
                if not (ctx.pending_users or ctx.pending_children or fetching):
                    opts.append((1.0, partial(self.del_all_users_and_unforked_owners, w)))
            elif ctx.phase == "swept" and swept and not (ctx.owners or fetching or w in busy):
                opts.append((1.0, partial(self.destroy_instance, w)))
        return opts

    def shutdown(self) -> None:
        """rpc.shutdown(graceful=True) on every worker: run until every context is destroyed.

        The application stops issuing calls but may still drop references; the scheduler
        interleaves deliveries, retries, destructors and the shutdown steps.
        """
        for _ in range(MAX_DRAIN_STEPS):
            if all(ctx.phase == "destroyed" for ctx in self.contexts.values()):
                return
            if not self.step("shutdown"):
                break
        phases = {w: ctx.phase for w, ctx in self.contexts.items()}
        raise LeakError("ShutdownCompletesProp", f"shutdown stuck: {phases}", seed=self.seed)

    # ------------------------------------------------------------------ application API

    def create_local_rref(self, w: WorkerId) -> Gid:
        r = self.contexts[w].new_id()
        self._apply(w, ev.CreateLocalRRef())
        return r

    def remote(self, w: WorkerId, dst: WorkerId) -> tuple[Gid, Gid]:
        """rpc.remote: returns (RRefId, ForkId of the caller's UserRRef; = RRefId for self)."""
        ctx = self.contexts[w]
        r, f = ctx.new_id(), (ctx.new_id(1) if dst != w else ctx.new_id())
        self._apply(w, ev.Remote(dst=dst))
        self.deadlines[(w, r, f)] = self.now + self.config.rpc_timeout
        return r, f

    def share(self, w: WorkerId, dst: WorkerId, r: Gid, parent: Gid) -> Gid:
        """Pass RRef ``r`` (held as ``parent``) to ``dst`` in a user RPC; returns the child fork."""
        c = self.contexts[w].new_id()
        self._apply(w, ev.PrepareChildFork(dst=dst, r=r, parent=parent))
        return c

    def to_here(self, w: WorkerId, f: Gid) -> None:
        self._apply(w, ev.ToHere(f=f))

    def drop(self, w: WorkerId, f: Gid) -> None:
        self._apply(w, ev.DropRRef(f=f))

    def drop_owner(self, w: WorkerId, r: Gid) -> None:
        self._apply(w, ev.DropOwnerRRef(r=r))

    def _remote_any(self, w: WorkerId, targets: Sequence[WorkerId]) -> None:
        self.remote(w, self.rng.choice(targets))

    def _share_any(self, w: WorkerId, others: Sequence[WorkerId], r: Gid, parent: Gid) -> None:
        self.share(w, self.rng.choice(others), r, parent)

    def _app_enabled(self, mode: Mode) -> bool:
        """Whether :meth:`_app_options` would offer anything (without building the options: the
        scheduler needs them only when it picks an application step)."""
        if mode == "system":
            return False
        if mode == "workload":
            return True  # every worker may always create a local RRef or call rpc.remote
        return any(ctx.held or ctx.owner_held for ctx in self.contexts.values())

    def _app_options(self, mode: Mode) -> Options:
        weights: list[float] = []
        actions: list[Callable[[], object]] = []
        workload = mode == "workload"
        for w, ctx in self.contexts.items():
            # Each worker's options depend only on its context (immutable): cache them.
            cached = self._app_cache.get((w, workload))
            if cached is None or cached[0] is not ctx:
                cached = (ctx, self._worker_app_options(w, ctx, workload=workload))
                self._app_cache[(w, workload)] = cached
            weights += cached[1][0]
            actions += cached[1][1]
        return weights, actions

    def _worker_app_options(self, w: WorkerId, ctx: RRefContext, *, workload: bool) -> Options:
        opts: list[tuple[float, Callable[[], object]]] = []
        for f in sorted(ctx.held):
            opts.append((1.0, partial(self.drop, w, f)))
        for r in sorted(ctx.owner_held):
            opts.append((0.5, partial(self.drop_owner, w, r)))
        if workload:
            opts += self._workload_options(w, ctx)
        return [o[0] for o in opts], [o[1] for o in opts]

    def _workload_options(
        self, w: WorkerId, ctx: RRefContext
    ) -> list[tuple[float, Callable[[], object]]]:
        others = [d for d in self.workers if d != w]
        targets = [*others, w] if self.config.self_remote else others
        opts: list[tuple[float, Callable[[], object]]] = [
            (0.5, partial(self.create_local_rref, w)),
            (1.5, partial(self._remote_any, w, targets)),
        ]
        for r in sorted(ctx.owner_held | ctx.owners):
            opts.append((1.0, partial(self._share_any, w, others, r, r)))
        for f in sorted(ctx.held - ctx.timed_out - ctx.deleted):
            r = ctx.users[f].rref
            opts.append((1.5, partial(self._share_any, w, others, r, f)))
            if f not in ctx.fetched:
                opts.append((1.0, partial(self.to_here, w, f)))
        return opts

    # ------------------------------------------------------------------ scheduling

    def step(self, mode: Mode = "workload") -> bool:
        """One scheduler step; False when nothing can happen any more.

        Options are listed in a deterministic order (sets are sorted: string hashing is salted per
        process), so the seed alone fixes the run.
        """
        system = self._system_options()
        if mode == "shutdown":
            for weight, action in self._shutdown_options():
                system[0].append(weight)
                system[1].append(action)
        if self._app_enabled(mode) and (
            not system[1] or self.rng.random() < self.config.app_weight
        ):
            self._pick(self._app_options(mode))()
        elif system[1]:
            self._pick(system)()
        elif self.net:
            self.now = min(e.ready_at for e in self.net)  # idle: jump to the next delivery
            return True
        else:
            return False
        self.now += 1
        return True

    def _pick(self, opts: Options) -> Callable[[], object]:
        return self.rng.choices(opts[1], weights=opts[0])[0]

    def settle(self, max_steps: int) -> None:
        """Up to ``max_steps`` random system steps (deliveries, retries, timeouts, destructors)."""
        for _ in range(self.rng.randint(0, max_steps)):
            if not self.step("system"):
                return

    def drain(self) -> None:
        """The application drops everything; run until no step is enabled."""
        for _ in range(MAX_DRAIN_STEPS):
            if not self.step("drain"):
                return
        raise LeakError("LeakFreeQuiescenceInv", "drain did not terminate", seed=self.seed)

    def finish(self) -> RunSummary:
        """Drain, then check leak-free quiescence (R9); close the trace."""
        self.drain()
        invariants.check_leak_free(self.world(), seed=self.seed)
        self.sink.close()
        return RunSummary(
            self.seed, sum(self.counts.values()), self.now, dict(self.counts), tuple(self.leaks)
        )

    def run(self, steps: int) -> RunSummary:
        """A random workload of ``steps`` scheduler steps, the shutdown phase if configured, then
        :meth:`finish`."""
        for _ in range(steps):
            if not self.step("workload"):
                break
        if self.config.shutdown:
            self.shutdown()
        return self.finish()


# ---------------------------------------------------------------------- CLI


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m protoref.rref.simulator",
        description="Simulate the Reference RRef protocol.",
    )
    p.add_argument("--seed", type=int, default=None, help="scheduler seed (random if omitted)")
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--steps", type=int, default=200, help="workload-phase scheduler steps")
    p.add_argument(
        "--scenario", default=None, help="a scripted scenario instead of a random workload"
    )
    p.add_argument("--out", default=None, help="write the trace (JSON lines) here")
    p.add_argument("--no-duplicates", action="store_true")
    p.add_argument("--no-timeouts", action="store_true")
    p.add_argument("--check", action="store_true", help="check every invariant after every step")
    p.add_argument(
        "--shutdown", action="store_true", help="end with a graceful shutdown (rpc.shutdown)"
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from protoref.rref.scenarios import SCENARIOS  # noqa: PLC0415 - scenarios import this module

    args = _parser().parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print(f"seed {seed}", flush=True)  # first, so a crashing run can be replayed
    config = SimConfig(
        workers=args.workers,
        duplicates=not args.no_duplicates,
        timeouts=not args.no_timeouts,
        check_invariants=args.check,
        shutdown=args.shutdown,
    )
    sink: TraceSink = JsonlSink(args.out) if args.out else NullSink()
    if args.scenario is None:
        summary = Simulator(seed, config, sink).run(args.steps)
    else:
        if args.scenario not in SCENARIOS:
            print(
                f"unknown scenario {args.scenario!r}; known: {', '.join(SCENARIOS)}",
                file=sys.stderr,
            )
            return 2
        sim = Simulator(seed, config, sink, workload=args.scenario)
        SCENARIOS[args.scenario](sim)
        if config.shutdown:
            sim.shutdown()
        summary = sim.finish()
    for w, leak in summary.leaks:
        print(f"shutdown on {w}: {leak}")
    print(f"{summary.events} events, virtual time {summary.now}, leak-free")
    if args.out:
        print(f"trace written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
