"""Deterministic simulator of the dynamic rendezvous: N nodes, one thread, virtual time.

Time is integer ticks (one tick = the read cache's lifetime = torch's 1 s SYNC delay, as in
DynamicRendezvous.tla). A seeded :class:`random.Random` owns every choice: which enabled step
happens next (a node starts ``next_rendezvous``, its heartbeat timer fires, an agent calls
``set_closed``, a node syncs, decides and applies, a node crashes, or a tick passes), when late
joiners arrive and whether a finished node joins again (exiting its round first). The steps are
the real executor's (:class:`NodeRunner` over :class:`StateHolder` over :class:`InMemoryStore`);
each is one trace event named after its spec action. With ``check_invariants`` the spec's
invariants and action properties are checked after every step.

Reproducible from its seed: ``python -m protoref.rendezvous.sim.simulator --seed N --nodes 3``.
"""

from __future__ import annotations

import argparse
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from pydantic import JsonValue

from protoref.rendezvous.adapters.store import InMemoryStore
from protoref.rendezvous.core import invariants
from protoref.rendezvous.core.codec import decode_state
from protoref.rendezvous.core.ops import Op
from protoref.rendezvous.core.state import (
    EMPTY_STATE,
    NodeDesc,
    RendezvousSettings,
    RendezvousState,
)
from protoref.rendezvous.runtime.executor import NodeRunner, Pc, Result
from protoref.rendezvous.runtime.holder import StateHolder
from protoref.rendezvous.trace.events import CLOCK_NODE, make_event
from protoref.tracing import (
    JsonlSink,
    NodeClock,
    NullSink,
    TraceEnd,
    TraceHeader,
    TraceSink,
    tla_set,
)

__all__ = ["RunSummary", "SimConfig", "Simulator", "main"]

Option = tuple[float, Callable[[], object]]


@dataclass(frozen=True)
class SimConfig:
    """Knobs of a run; times in ticks. The first ones are DynamicRendezvous.tla constants."""

    nodes: int = 3
    min_nodes: int = 2
    max_nodes: int = 2
    closers: int = 1  # the first ``closers`` nodes may call set_closed (Closers)
    max_crashes: int = 1  # MaxCrashes
    join_timeout: int = 12
    last_call_timeout: int = 2
    close_timeout: int = 4
    heartbeat_timeout: int = 2
    keep_alive_interval: int = 2
    keep_alive_max_attempt: int = 2
    rollback_period: int = 1
    late_max: int = 6  # a node's first next_rendezvous comes at a random tick in 0..late_max
    max_rejoins: int = 2  # finished nodes call next_rendezvous again at most this often in all
    close_after: int = 10  # set_closed is possible from this tick on
    read_only_syncs: bool = False  # idle/stopped nodes call is_closed() (ReadOnlySyncs)
    #: A participant that calls next_rendezvous again may stall past its exit op's deadline (a
    #: GC pause, a slow store): the exit op then times out (ExitDecision's ErrorTimeout), a
    #: path random runs seldom reach. Off by default (it changes the random choices); the
    #: campaigns turn it on.
    stalls: bool = False
    check_invariants: bool = False

    def settings(self) -> RendezvousSettings:
        return RendezvousSettings(
            run_id="sim",
            min_nodes=self.min_nodes,
            max_nodes=self.max_nodes,
            join_timeout=self.join_timeout,
            last_call_timeout=self.last_call_timeout,
            close_timeout=self.close_timeout,
            heartbeat_timeout=self.heartbeat_timeout,
            keep_alive_interval=self.keep_alive_interval,
            keep_alive_max_attempt=self.keep_alive_max_attempt,
            rollback_period=self.rollback_period,
            cache_duration=1,
        )


@dataclass(frozen=True)
class RunSummary:
    seed: int
    events: int
    now: int
    counts: dict[str, int] = field(default_factory=dict)
    results: dict[str, str] = field(default_factory=dict)


def node_descs(count: int) -> tuple[NodeDesc, ...]:
    """Descriptors whose string order differs from their index order (10.0.0.10 < 10.0.0.8)."""
    return tuple(NodeDesc(f"10.0.0.{8 + i}", 100 + i % 2, i) for i in range(count))


class Simulator:
    """N rendezvous nodes driven by one seeded scheduler."""

    def __init__(self, seed: int, config: SimConfig | None = None, sink: TraceSink | None = None):
        self.seed = seed
        self.config = config or SimConfig()
        self.settings = self.config.settings()
        self.sink: TraceSink = sink or NullSink()
        self.rng = random.Random(seed)
        self.store = InMemoryStore()
        self.now = 0
        self.counts: Counter[str] = Counter()
        self.nodes = node_descs(self.config.nodes)
        self.runners = {
            n: NodeRunner(n, StateHolder(self.store, self.settings), self._observe)
            for n in self.nodes
        }
        self.clocks = {n: NodeClock() for n in self.nodes}
        self.tick_clock = NodeClock()
        self.start_at = {n: self.rng.randint(0, self.config.late_max) for n in self.nodes}
        self.closers = frozenset(sorted(self.nodes)[: self.config.closers])
        self.rejoins = 0
        self.crashes = 0
        self.store_lamport = 0
        self._store_state = EMPTY_STATE
        if self.sink.enabled:
            self.sink.header(self._header())

    def _header(self) -> TraceHeader:
        c = self.config
        ordered = sorted(self.nodes)
        settings: dict[str, JsonValue] = {
            "Variant": "Reference",  # protoref's epilogue (DynamicRendezvous.tla, Variant)
            "MinNodes": c.min_nodes,
            "MaxNodes": c.max_nodes,
            "Closers": tla_set([str(n) for n in sorted(self.closers)]),
            "MaxCrashes": c.max_crashes,
            "JoinTimeout": c.join_timeout,
            "LastCallTimeout": c.last_call_timeout,
            "CloseTimeout": c.close_timeout,
            "HeartbeatTimeout": c.heartbeat_timeout,
            "KeepAliveInterval": c.keep_alive_interval,
            "KeepAliveMaxAttempt": c.keep_alive_max_attempt,
            "RollbackPeriod": c.rollback_period,
            "SleeperWakesEarly": False,  # a sleeper syncs again only after a Tick (2.13's sleep)
            "ReadOnlySyncs": c.read_only_syncs,
            "late_max": c.late_max,
            "max_rejoins": c.max_rejoins,
        }
        return TraceHeader(
            protocol="rendezvous",
            nodes=tuple(str(n) for n in ordered),
            settings=settings,
            seed=self.seed,
            environment=(CLOCK_NODE,),
        )

    def _end_record(self) -> TraceEnd:
        """The end line: the last seq of every node (and the clock) that logged an event."""
        clocks = {**{str(n): c for n, c in self.clocks.items()}, CLOCK_NODE: self.tick_clock}
        return TraceEnd(seqs={n: c.seq for n, c in clocks.items() if c.seq})

    # ------------------------------------------------------------------ observation

    def store_state(self) -> RendezvousState:
        """The state in the store now (the spec's ``Cur``)."""
        got = self.store.get(self.runners[self.nodes[0]].holder.key)
        if got is None:
            return EMPTY_STATE
        return decode_state(got.value, state_key_of(self.settings), self.settings.run_id)

    def _observe(self, event: str, runner: NodeRunner, now: float) -> None:
        clock = self.clocks[runner.node]
        if event.startswith("Sync") and event != "SyncCached":
            seq, lamport = clock.receive(self.store_lamport)
        else:
            seq, lamport = clock.local()
        new_store: RendezvousState | None = None
        if event == "SyncWriteWon":
            self.store_lamport = lamport
            new_store = self.store_state()
            if self.config.check_invariants:
                invariants.check_store_step(
                    self._store_state, new_store, self.settings, seed=self.seed
                )
            self._store_state = new_store
        self.counts[event] += 1
        if self.sink.enabled:
            ev = make_event(event, runner, seq, lamport, now=now, store_state=new_store)
            self.sink.emit(ev)
        if self.config.check_invariants:
            self._check()

    def _check(self) -> None:
        views = {n: r.view for n, r in self.runners.items() if r.view is not None}
        copies = [r.holder.state for r in self.runners.values()]
        invariants.check_state(self._store_state, copies, views, self.settings, seed=self.seed)

    # ------------------------------------------------------------------ steps

    def tick(self) -> None:
        """``Tick``: one unit of time passes."""
        self.now += 1
        seq, lamport = self.tick_clock.local()
        self.counts["Tick"] += 1
        if self.sink.enabled:
            self.sink.emit(make_event("Tick", None, seq, lamport, now=self.now))

    def next_rendezvous(self, r: NodeRunner) -> None:
        if r.result is Result.OK:
            self.rejoins += 1
        r.start(Op.EXIT, self.now)

    def keep_alive_timer(self, r: NodeRunner) -> None:
        r.start(Op.KEEP_ALIVE, self.now)

    def set_closed(self, r: NodeRunner) -> None:
        r.start(Op.CLOSE, self.now)

    def read_only_sync(self, r: NodeRunner) -> None:
        """``ReadOnlySync``: an agent asks ``is_closed()`` / ``num_nodes_waiting()``."""
        r.holder.sync(self.now)
        self._observe("ReadOnlySync", r, self.now)

    def rejoin_stalled(self, r: NodeRunner) -> None:
        """A participant calls next_rendezvous again and stalls (``Tick``s, nobody acts) until
        its exit op's deadline is behind it: the exit op times out (``ExitDecision``)."""
        self.next_rendezvous(r)
        while self.now <= r.deadline:
            self.tick()

    def crash(self, r: NodeRunner) -> None:
        self.crashes += 1
        r.crash(self.now)

    def _heartbeat_due(self, n: NodeDesc, cur: RendezvousState) -> bool:
        beat = cur.last_heartbeats.get(n)
        return beat is not None and self.now - beat >= self.settings.keep_alive_interval

    def _node_options(self, r: NodeRunner, cur: RendezvousState) -> list[Option]:
        c = self.config
        opts: list[Option] = []
        if r.pc is Pc.IDLE:
            if r.result in (Result.NONE, Result.TIMEOUT) and self.now >= self.start_at[r.node]:
                opts.append((3.0, partial(self.next_rendezvous, r)))
            if r.result is Result.OK:
                if self.rejoins < c.max_rejoins:
                    opts.append((0.05, partial(self.next_rendezvous, r)))
                    if c.stalls:
                        opts.append((0.05, partial(self.rejoin_stalled, r)))
                if self._heartbeat_due(r.node, cur):
                    opts.append((2.0, partial(self.keep_alive_timer, r)))
            if r.node in self.closers and not cur.closed and self.now >= c.close_after:
                opts.append((0.03, partial(self.set_closed, r)))
        if c.read_only_syncs and r.pc in (Pc.IDLE, Pc.STOPPED) and not r.holder.dirty:
            opts.append((0.05, partial(self.read_only_sync, r)))
        elif r.pc is Pc.SYNC or (r.pc is Pc.SLEEP and not r.holder.fresh(self.now)):
            opts.append((3.0, partial(r.sync_step, self.now)))
        elif r.pc is Pc.DECIDE:
            opts.append((3.0, partial(r.decide_step, self.now)))
        if r.pc not in (Pc.CRASHED, Pc.STOPPED) and self.crashes < c.max_crashes:
            opts.append((0.01, partial(self.crash, r)))
        return opts

    def step(self) -> bool:
        """One scheduler step; False once every node stopped or crashed."""
        live = [r for r in self.runners.values() if r.pc not in (Pc.CRASHED, Pc.STOPPED)]
        if not live:
            return False
        cur = self._store_state
        opts: list[Option] = []
        for r in live:
            opts += self._node_options(r, cur)
        busy = any(w >= 2.0 for w, _ in opts)
        opts.append((0.5 if busy else 10.0, self.tick))
        self.rng.choices([o for _, o in opts], weights=[w for w, _ in opts])[0]()
        return True

    def run(self, steps: int) -> RunSummary:
        """Up to ``steps`` scheduler steps; then close the trace."""
        for _ in range(steps):
            if not self.step():
                # Every node stopped or crashed: the run finished (schema 4's end line), and
                # the checker requires the spec's quiescence after its last event.
                self.sink.end(self._end_record())
                break
        self.sink.close()
        results = {str(n): r.result.value for n, r in self.runners.items()}
        return RunSummary(
            self.seed, sum(self.counts.values()), self.now, dict(self.counts), results
        )


def state_key_of(settings: RendezvousSettings) -> str:
    return f"torch.rendezvous.{settings.run_id}"


# ---------------------------------------------------------------------- CLI


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m protoref.rendezvous.sim.simulator",
        description="Simulate protoref's dynamic rendezvous (DynamicRendezvous.tla, Reference).",
    )
    p.add_argument("--seed", type=int, default=None, help="scheduler seed (random if omitted)")
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--min", type=int, default=2, dest="min_nodes")
    p.add_argument("--max", type=int, default=None, dest="max_nodes", help="default: nodes - 1")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--out", default=None, help="write the trace (JSON lines) here")
    p.add_argument("--check", action="store_true", help="check the invariants after every step")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print(f"seed {seed}", flush=True)  # first, so a crashing run can be replayed
    max_nodes = args.max_nodes or max(args.min_nodes, args.nodes - 1)
    config = SimConfig(
        nodes=args.nodes,
        min_nodes=min(args.min_nodes, max_nodes),
        max_nodes=max_nodes,
        check_invariants=args.check,
    )
    sink: TraceSink = JsonlSink(args.out) if args.out else NullSink()
    summary = Simulator(seed, config, sink).run(args.steps)
    print(f"{summary.events} events, virtual time {summary.now}")
    print("results: " + ", ".join(f"{n}={r}" for n, r in summary.results.items()))
    if args.out:
        print(f"trace written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
