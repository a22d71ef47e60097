"""The simulator's base: its state, the core step it drives, the trace it writes.

:class:`SimBase` holds the seeded generator, the workers' contexts, the network and the trace
sink, and applies one core step (:meth:`SimBase._apply`: state, sends, history, one trace event,
invariant checks). The module globals ``core_step`` and ``machine`` are how every part of the
simulator calls the core, so :mod:`protoref.rref.sim.faults` can plant a fault in one place.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

from pydantic import JsonValue

from protoref.ids import GloballyUniqueId, WorkerId
from protoref.rref.core import events as ev
from protoref.rref.core import invariants, machine
from protoref.rref.core.machine import Step
from protoref.rref.core.machine import step as core_step
from protoref.rref.core.state import Leak, Pair, RRefContext
from protoref.rref.trace import ActionArgs, EventEncoder, make_event
from protoref.tracing import (
    SCHEMA_VERSION,
    JsonlSink,
    NodeClock,
    NullSink,
    TraceEnd,
    TraceHeader,
    TraceSink,
    tla_set,
    trusted,
)

__all__ = [
    "BARRIER",
    "MAX_DRAIN_STEPS",
    "AppAction",
    "AppOptions",
    "Envelope",
    "Mode",
    "Options",
    "RunSummary",
    "SimBase",
    "SimConfig",
    "core_step",
    "machine",
]


Gid = GloballyUniqueId
Mode = Literal["workload", "drain", "system", "shutdown"]
#: Steps allowed in the drain (or shutdown) phase before the run is declared stuck.
MAX_DRAIN_STEPS: Final = 200_000
#: Enabled steps as parallel lists (weights, actions), in a deterministic order.
Options: TypeAlias = tuple[list[float], list[Callable[[], object]]]
#: An application step not yet bound: (method, its arguments). Building a partial for each
#: option of every worker cost more than the step that is finally picked.
AppAction: TypeAlias = tuple[Callable[..., object], tuple[Any, ...]]
AppOptions: TypeAlias = tuple[list[float], list[AppAction]]
#: The environment actor that logs the global shutdown barrier (RRef.tla ``WaitAllWorkers``).
BARRIER: Final = "barrier"
#: No system options (the coin chose an application step); never mutated.
_NO_OPTIONS: Final[Options] = ([], [])


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
    #: LoseFirstAttempt: the first attempt of a retried message may be lost (its connection
    #: broke); only the retry's copy can still arrive. Off by default: with it on, the random
    #: choices differ from step one, so every seed's trace would be another one.
    lose_first_attempts: bool = False
    #: Rare paths on purpose (protoref.rref.sim.rare): the application sometimes misuses a
    #: timed-out UserRRef, or shares one whose rpc.remote call is slow. Off by default, for
    #: the same reason as ``lose_first_attempts``; the campaigns turn it on.
    rare_paths: bool = False


@dataclass(slots=True, eq=False)
class Envelope:
    """A message in flight with its transport metadata (not part of the spec's record)."""

    msg: ev.Message
    stamp: int  # the sender's Lamport clock when it sent the message
    ready_at: int  # virtual time from which it may be delivered
    retryable: bool = False  # RetrySend is enabled: a first attempt of a retried message


@dataclass(frozen=True)
class RunSummary:
    seed: int
    events: int
    now: int
    counts: dict[str, int] = field(default_factory=dict)
    #: What graceful shutdown reported (worker, leak), as PyTorch logs it.
    leaks: tuple[tuple[WorkerId, Leak], ...] = ()


class SimBase:
    """N RRef workers ``w0..w{N-1}`` driven by one seeded scheduler: state and core steps."""

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
        self._bits = self.rng.getrandbits
        self._delays = self.config.max_delay + 1
        self._delay_bits = self._delays.bit_length()
        self._duplicates = self.config.duplicates
        self.workers: tuple[WorkerId, ...] = tuple(f"w{i}" for i in range(self.config.workers))
        self.contexts: dict[WorkerId, RRefContext] = {w: RRefContext(me=w) for w in self.workers}
        # Per worker: the workers it may share an RRef with, and rpc.remote's destinations.
        self._others = {w: tuple(d for d in self.workers if d != w) for w in self.workers}
        self._targets = {
            w: (*others, w) if self.config.self_remote else others
            for w, others in self._others.items()
        }
        self.clocks = {w: NodeClock() for w in self.workers}
        self.barrier_clock = NodeClock()
        self.leaks: list[tuple[WorkerId, Leak]] = []
        self.refused = 0  # application calls the core refused (rare_paths' misuse)
        # History the invariants read, kept in test mode only (``check_invariants``): for R4
        # (not protocol state), distinct RREF_USER_DELETEs sent per ForkId, and ForkIds that
        # ever left a ``deleted`` set (deletedOnOwner_ must be monotone); and the spec's
        # history variables removedForks and erasedOwners below.
        self.delete_sends: Counter[Gid] = Counter()
        self.undeleted: dict[WorkerId, frozenset[Gid]] = dict.fromkeys(self.workers, frozenset())
        self.net: list[Envelope] = []
        self._deliver_at: list[Callable[[], object]] = []
        self._retry_at: list[Callable[[], object]] = []
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
        # Scheduler cache: a worker's destructor options, with the context they were computed
        # from and the context fields they depend on (contexts and their sets are immutable
        # and shared by the contexts a step leaves them to, so identity says they are current).
        # Application options need no cache: _pick_app lists none of them.
        self._destructors: dict[
            WorkerId, tuple[RRefContext | None, tuple[object, ...], Options]
        ] = {w: (None, (), ([], [])) for w in self.workers}
        self._del_user_at: dict[tuple[WorkerId, Gid], Callable[[], object]] = {}
        # Per worker: (context, workload, the total of its application weights) (_pick_app).
        self._app_totals: dict[WorkerId, tuple[RRefContext, bool, float]] = {}
        # A JSON-lines sink takes lines rendered straight from the context (EventEncoder: the
        # same bytes as its generic path, without building the event models).
        self._encoder = EventEncoder()
        self._emit_line = self.sink.emit_line if isinstance(self.sink, JsonlSink) else None
        self._tracing = self.sink.enabled
        self._check = self.config.check_invariants
        self._app_weight = self.config.app_weight
        self._random = self.rng.random
        self._stopping = False  # the barrier passed (every context's ``stopping``)
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
            "DeleteLast": True,  # RRef.tla DeleteLast: no tombstones (issue 28)
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
        # Unvalidated (trusted): the simulator's own, statically typed values. Validating
        # them cost 16 of the 19 us a header took, once per traced run.
        return trusted(
            TraceHeader,
            {
                "kind": "header",
                "schema_version": SCHEMA_VERSION,
                "protocol": "rref",
                "nodes": self.workers,
                "settings": settings,
                "seed": self.seed,
                "environment": (BARRIER,) if c.shutdown else (),
            },
        )

    def end_record(self) -> TraceEnd:
        """The end line: the last seq of every node (and the barrier) that logged an event."""
        clocks = {**self.clocks, BARRIER: self.barrier_clock}
        return TraceEnd(seqs={n: c.seq for n, c in clocks.items() if c.seq})

    # ------------------------------------------------------------------ core plumbing

    def world(self) -> invariants.World:
        """The system as the invariants see it. Its history (removedForks, erasedOwners, the
        R4 counts) is recorded only when ``config.check_invariants`` is set."""
        return invariants.World(
            contexts=self.contexts,
            net=[e.msg for e in self.net],
            removed_forks=self.removed_forks,
            erased_owners=self.erased_owners,
            stopping=any(ctx.stopping for ctx in self.contexts.values()),
            delete_sends=self.delete_sends,
            undeleted=self.undeleted,
        )

    def _apply(
        self,
        w: WorkerId,
        transition: Callable[..., Step],
        args: tuple[Any, ...],
        stamp: int | None = None,
        delivered: ev.Message | None = None,
    ) -> RRefContext:
        """One core step on ``w``, ``transition(context, *args)``: new state, sends, history,
        one trace event, checks. ``transition`` is :func:`machine.step` for a delivered message
        (``delivered``, then ``args`` is ``(delivered,)``), and the action's own transition for
        an application, timer or destructor step: what ``machine.step`` would dispatch the
        input to, called without building the input record."""
        before = self.contexts[w]
        state, sent, action, leaks = transition(before, *args)
        self.contexts[w] = state
        # NodeClock.local() / receive(stamp), inlined (once per event).
        clock = self.clocks[w]
        clock.seq = seq = clock.seq + 1
        lamport = clock.lamport if stamp is None or clock.lamport >= stamp else stamp
        clock.lamport = lamport = lamport + 1
        for m in sent:
            self._send(m, lamport)
        if self._check:
            self._history(w, before, state, sent)
        if leaks:
            self.leaks += ((w, leak) for leak in leaks)
        # _record, inlined (once per event).
        self.counts[action.action] += 1
        # A delivered message's event names its send (schema 4): the sender and its clock then.
        if self._emit_line is not None:
            self._emit_line(
                self._encoder.line(action, w, seq, lamport, state, delivered, before, stamp)
            )
        elif self._tracing:
            sent_by = None if delivered is None or stamp is None else (delivered.src, stamp)
            self.sink.emit(
                make_event(
                    action,
                    w,
                    seq,
                    lamport,
                    state,
                    delivered=delivered,
                    before=before,
                    sent_by=sent_by,
                )
            )
        if self._check:
            invariants.check(self.world(), seed=self.seed)
        return state

    def _history(
        self, w: WorkerId, before: RRefContext, state: RRefContext, sent: tuple[ev.Message, ...]
    ) -> None:
        """The history the invariants read (test mode only: nothing else does)."""
        for m in sent:
            if m.type == "RREF_USER_DELETE":
                self.delete_sends[m.fork] += 1
        if state.forks is not before.forks:
            self.removed_forks[w] |= before.forks - state.forks
        if state.owners is not before.owners:
            self.erased_owners[w] |= before.owners - state.owners
        if state.deleted is not before.deleted and not before.deleted <= state.deleted:
            self.undeleted[w] |= before.deleted - state.deleted

    def _send(self, m: ev.Message, stamp: int) -> None:
        # rng.randint(0, max_delay), inlined as CPython computes it (randrange -> _randbelow:
        # getrandbits(k) until below the bound), so the stream is the one seeds always gave.
        bound = self._delays
        delay = self._bits(self._delay_bits)
        while delay >= bound:
            delay = self._bits(self._delay_bits)
        retryable = self._duplicates and m.dup == 0 and m.type in ev.RETRIED
        self.net.append(Envelope(m, stamp, self.now + delay, retryable))

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
        """Log a step that is no core transition of ``w`` (RetrySend, LoseFirstAttempt,
        WaitAllWorkers): none logs a set, so no pre-state is needed (the encoders refuse to
        write a set's delta or growth without one)."""
        self.counts[action.action] += 1
        if self._emit_line is not None:
            self._emit_line(self._encoder.line(action, w, seq, lamport, ctx, delivered))
        elif self.sink.enabled:
            self.sink.emit(make_event(action, w, seq, lamport, ctx, delivered=delivered))
        if self.config.check_invariants:
            invariants.check(self.world(), seed=self.seed)

    def step(self, mode: Mode = "workload") -> bool:
        """One scheduler step (scheduler.Simulator)."""
        raise NotImplementedError
