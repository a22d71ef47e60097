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
from bisect import bisect
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import accumulate
from typing import Any, Final, Literal, TypeAlias

from pydantic import JsonValue

from protoref.errors import LeakError
from protoref.ids import GloballyUniqueId, WorkerId
from protoref.rref import events as ev
from protoref.rref import invariants, machine
from protoref.rref.machine import Step
from protoref.rref.machine import step as core_step
from protoref.rref.state import Leak, Pair, RRefContext
from protoref.rref.trace import (
    ActionArgs,
    EventEncoder,
    LoseFirstAttemptArgs,
    RetrySendArgs,
    WaitAllWorkersArgs,
    make_event,
)
from protoref.tracing import (
    SCHEMA_VERSION,
    JsonlSink,
    NodeClock,
    NullSink,
    TraceHeader,
    TraceSink,
    tla_set,
    trusted,
)

__all__ = ["Envelope", "RunSummary", "SimConfig", "Simulator", "main"]

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
        if self._emit_line is not None:
            self._emit_line(self._encoder.line(action, w, seq, lamport, state, delivered, before))
        elif self._tracing:
            self.sink.emit(
                make_event(action, w, seq, lamport, state, delivered=delivered, before=before)
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

    # ------------------------------------------------------------------ system steps

    def deliver(self, index: int) -> None:
        """Take message ``index`` from the network; its handler runs on the destination."""
        net = self.net
        env = net[index]
        net[index] = net[-1]
        net.pop()
        m = env.msg
        self._apply(m.dst, core_step, (m,), env.stamp, m)

    def retry_send(self, index: int) -> None:
        """RRef.tla ``RetrySend(m)``: sendWithRetries re-sends a control message whose first
        attempt is unacknowledged; both copies may arrive (at-least-once delivery)."""
        env = self.net[index]
        m = env.msg
        if m.type not in ev.RETRIED or m.dup != 0:
            raise ValueError(f"RetrySend of {m!r}: only first attempts of retried messages")
        seq, lamport = self.clocks[m.src].local()
        make = type(m).make
        env.msg = make(m.src, m.dst, m.rref, m.owner, m.fork, parent=m.parent, dup=1)
        env.retryable = False
        self._send(make(m.src, m.dst, m.rref, m.owner, m.fork, parent=m.parent, dup=2), lamport)
        self._record(RetrySendArgs.of(m), m.src, seq, lamport, self.contexts[m.src])

    def lose_first_attempt(self, index: int) -> None:
        """RRef.tla ``LoseFirstAttempt(m)``: the first attempt of a retried message, already
        retried (``dup`` 1), is lost with its connection; the sender learns it when it redials
        (as the runtime does) and logs it."""
        net = self.net
        m = net[index].msg
        if m.type not in ev.RETRIED or m.dup != 1:
            raise ValueError(f"LoseFirstAttempt of {m!r}: only retried first attempts")
        net[index] = net[-1]
        net.pop()
        seq, lamport = self.clocks[m.src].local()
        self._record(LoseFirstAttemptArgs.of(m), m.src, seq, lamport, self.contexts[m.src])

    def _system_options(self) -> Options:
        weights: list[float] = []
        actions: list[Callable[[], object]] = []
        weight, action, now = weights.append, actions.append, self.now
        deliver, retry, net = self._deliver_at, self._retry_at, self.net
        while len(deliver) < len(net):
            # The options of the envelope at an index: made once, reused by every step.
            deliver.append(partial(self.deliver, len(deliver)))
            retry.append(partial(self.retry_send, len(retry)))
        for env, deliver_it, retry_it in zip(net, deliver, retry, strict=False):
            if env.ready_at <= now:
                if env.retryable:
                    weights += (1.0, 0.3)
                    actions += (deliver_it, retry_it)
                else:
                    weight(1.0)
                    action(deliver_it)
            elif env.retryable:
                weight(0.3)
                action(retry_it)
        destructors = self._destructors
        for w, ctx in self.contexts.items():
            cached = destructors[w]
            if cached[0] is not ctx:
                cached = destructors[w] = self._destructors_of(w, ctx, cached)
            if cached[2][0]:
                weights += cached[2][0]
                actions += cached[2][1]
        if self.deadlines:
            self._timeout_options(weights, actions)
        if self.config.lose_first_attempts:  # last, so that the other options keep their order
            for i, env in enumerate(net):
                if env.msg.dup == 1:
                    weight(0.1)
                    action(partial(self.lose_first_attempt, i))
        return weights, actions

    def _timeout_options(self, weights: list[float], actions: list[Callable[[], object]]) -> None:
        now, contexts, timeouts = self.now, self.contexts, self.config.timeouts
        finished = []
        for key, deadline in self.deadlines.items():
            w, r, f = key
            ctx = contexts[w]
            if not (f in ctx.pending_users if f != r else r in ctx.self_calls):
                finished.append(key)  # the future completed: no timeout any more
            elif timeouts and deadline <= now:
                weights.append(0.5)
                actions.append(partial(self.time_out_remote, w, r, f))
        for key in finished:
            del self.deadlines[key]

    def _destructors_of(
        self,
        w: WorkerId,
        ctx: RRefContext,
        cached: tuple[RRefContext | None, tuple[object, ...], Options],
    ) -> tuple[RRefContext, tuple[object, ...], Options]:
        """The cache entry of ``w``'s destructor options, recomputed only when a field that
        :meth:`RRefContext.destructible` reads changed."""
        key = (
            ctx.users,
            ctx.deleted,
            ctx.held,
            ctx.pending_users,
            ctx.pending_children,
            ctx.fetching,
        )
        if key == cached[1]:
            return ctx, key, cached[2]
        return ctx, key, self._destructor_options(w, ctx)

    def _destructor_options(self, w: WorkerId, ctx: RRefContext) -> Options:
        """DelUser for every UserRRef nothing references any more (in ``users`` order)."""
        fs = ctx.destructible()
        if not fs:
            return [], []
        made = self._del_user_at
        actions = []
        for f in fs:
            action = made.get((w, f))
            if action is None:
                action = made[(w, f)] = partial(self.del_user, w, f)
            actions.append(action)
        return [1.0] * len(fs), actions

    def del_user(self, w: WorkerId, f: Gid) -> None:
        """The UserRRef's refcount reached zero: its destructor runs (G1)."""
        self._apply(w, machine.del_user, (f,))

    def time_out_remote(self, w: WorkerId, r: Gid, f: Gid) -> None:
        self.deadlines.pop((w, r, f), None)
        self._apply(w, machine.time_out_remote, (r, f))

    # ------------------------------------------------------------------ graceful shutdown

    def wait_all_workers(self) -> None:
        """RRef.tla ``WaitAllWorkers``: the barrier, one step for all workers at once, logged
        once by the environment actor ``barrier`` (its Lamport clock follows every worker's)."""
        calls = sum(1 for e in self.net if e.msg.type in ev.USER_CALL_TYPES)
        barrier = ev.WaitAllWorkers(user_calls_in_flight=calls)
        states = {w: core_step(ctx, barrier).state for w, ctx in self.contexts.items()}
        self.contexts.update(states)  # all or nothing: a refusal above changed no context
        self._stopping = True
        seq, lamport = self.barrier_clock.receive(max(c.lamport for c in self.clocks.values()))
        for clock in self.clocks.values():
            clock.lamport = max(clock.lamport, lamport)
        self._record(WaitAllWorkersArgs.of(), BARRIER, seq, lamport, states[self.workers[0]])

    def del_all_users_and_unforked_owners(self, w: WorkerId) -> None:
        """RRef.tla ``DelAllUsersAndUnforkedOwners(w)``: the worker's shutdown sweep."""
        self._apply(w, machine.del_all_users_and_unforked_owners, ())

    def destroy_instance(self, w: WorkerId) -> None:
        """RRef.tla ``DestroyInstance(w)``: agent.join, then destroyInstance."""
        active = sum(1 for e in self.net if w in (e.msg.src, e.msg.dst))
        swept = all(ctx.phase != "running" for ctx in self.contexts.values())
        self._apply(w, machine.destroy_instance, (active, swept))

    def _shutdown_options(self) -> list[tuple[float, Callable[[], object]]]:
        """The shutdown steps whose spec guards hold (the core re-checks every one)."""
        contexts = self.contexts
        if not self._stopping:
            user_calls = ev.USER_CALL_TYPES
            for e in self.net:  # a plain loop: no generator per step
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
                if not (ctx.pending_users or ctx.pending_children or fetching):
                    opts.append((1.0, partial(self.del_all_users_and_unforked_owners, w)))
            elif ctx.phase == "swept" and swept and not (ctx.owners or fetching):
                if busy is None:
                    busy = {e.msg.src for e in self.net} | {e.msg.dst for e in self.net}
                if w not in busy:
                    opts.append((1.0, partial(self.destroy_instance, w)))
        return opts

    def shutdown(self) -> None:
        """rpc.shutdown(graceful=True) on every worker: run until every context is destroyed.

        The application stops issuing calls but may still drop references; the scheduler
        interleaves deliveries, retries, destructors and the shutdown steps.
        """
        contexts = self.contexts.values()
        for _ in range(MAX_DRAIN_STEPS):
            for ctx in contexts:  # all destroyed? (a plain loop: no generator per step)
                if ctx.phase != "destroyed":
                    break
            else:
                return
            # Until then, the barrier's and the sweeps' steps are offered with the others.
            if not self.step("shutdown"):
                break
        phases = {w: ctx.phase for w, ctx in self.contexts.items()}
        raise LeakError("ShutdownCompletesProp", f"shutdown stuck: {phases}", seed=self.seed)

    # ------------------------------------------------------------------ application API

    def create_local_rref(self, w: WorkerId) -> Gid:
        r = self.contexts[w].new_id()
        self._apply(w, machine.create_local_rref, ())
        return r

    def remote(self, w: WorkerId, dst: WorkerId) -> tuple[Gid, Gid]:
        """rpc.remote: returns (RRefId, ForkId of the caller's UserRRef; = RRefId for self)."""
        ctx = self.contexts[w]
        r, f = ctx.new_id(), (ctx.new_id(1) if dst != w else ctx.new_id())
        self._apply(w, machine.remote, (dst,))
        self.deadlines[(w, r, f)] = self.now + self.config.rpc_timeout
        return r, f

    def share(self, w: WorkerId, dst: WorkerId, r: Gid, parent: Gid) -> Gid:
        """Pass RRef ``r`` (held as ``parent``) to ``dst`` in a user RPC; returns the child fork."""
        c = self.contexts[w].new_id()
        self._apply(w, machine.prepare_child_fork, (dst, r, parent))
        return c

    def to_here(self, w: WorkerId, f: Gid) -> None:
        self._apply(w, machine.to_here, (f,))

    def drop(self, w: WorkerId, f: Gid) -> None:
        self._apply(w, machine.drop_rref, (f,))

    def drop_owner(self, w: WorkerId, r: Gid) -> None:
        self._apply(w, machine.drop_owner_rref, (r,))

    def _remote_any(self, w: WorkerId, targets: Sequence[WorkerId]) -> None:
        self.remote(w, self.rng.choice(targets))

    def _share_any(self, w: WorkerId, others: Sequence[WorkerId], r: Gid, parent: Gid) -> None:
        # share() without drawing the child's id it returns (nobody here reads it).
        self._apply(w, machine.prepare_child_fork, (self.rng.choice(others), r, parent))

    def _app_enabled(self, mode: Mode) -> bool:
        """Whether :meth:`_app_options` would offer anything (without building the options: the
        scheduler needs them only when it picks an application step)."""
        if mode == "system":
            return False
        if mode == "workload":
            return True  # every worker may always create a local RRef or call rpc.remote
        for ctx in self.contexts.values():  # noqa: SIM110 - a plain loop: no generator per step
            if ctx.held or ctx.owner_held:
                return True
        return False

    def _app_options(self, mode: Mode) -> AppOptions:
        """Every worker's application options, as parallel lists (weights, actions): what
        :meth:`_pick_app` picks from without listing them."""
        weights: list[float] = []
        actions: list[AppAction] = []
        workload = mode == "workload"
        for w, ctx in self.contexts.items():
            worker_weights, worker_actions = self._worker_app_options(w, ctx, workload=workload)
            weights += worker_weights
            actions += worker_actions
        return weights, actions

    def _pick_app(self, mode: Mode) -> AppAction:
        """``rng.choices(actions, weights)[0]`` over ``_app_options(mode)``, without listing
        every worker's options.

        Application weights are multiples of 0.5, so every cumulative sum of the concatenated
        list is exact: the one at a worker's option is (the totals of the workers before it)
        + (its own cumulative weight), whichever way it is added up, and a worker's total
        follows from the sizes of its sets (:meth:`_app_total`). The same ``random()`` draw
        is compared with the same values, so the same option is picked; only the picked
        worker's options are listed."""
        workload = mode == "workload"
        cache = self._app_totals
        totals = []
        total = 0.0
        for w, ctx in self.contexts.items():
            # A step changes one worker's context: the others' totals are reused.
            cached = cache.get(w)
            if cached is not None and cached[0] is ctx and cached[1] is workload:
                worker_total = cached[2]
            else:
                worker_total = self._app_total(ctx, workload)
                cache[w] = (ctx, workload, worker_total)
            totals.append((w, ctx, worker_total))
            total += worker_total
        x = self._random() * (total + 0.0)
        offset = 0.0
        last = None
        for w, ctx, worker_total in totals:
            if not worker_total:
                continue
            last = (w, ctx)
            if offset + worker_total > x:
                picked = self._pick_in_worker(w, ctx, workload, offset, x)
                if picked is None:  # the worker's options add up to less than _app_total says
                    raise AssertionError(f"{w}: application options and their total disagree")
                return picked
            offset += worker_total
        if last is None:
            raise IndexError("no application step is enabled")
        # x rounded up to the total: the last option, as bisect gives.
        w, ctx = last
        return self._worker_app_options(w, ctx, workload=workload)[1][-1]

    def _pick_in_worker(
        self, w: WorkerId, ctx: RRefContext, workload: bool, offset: float, x: float
    ) -> AppAction | None:
        """The first of ``w``'s options (:meth:`_worker_app_options`, in order) whose
        cumulative weight plus ``offset`` exceeds ``x``, found part by part from set sizes:
        only the part it falls in is sorted, and no option list is built. Every sum compared
        is a multiple of 0.5, so exact."""
        base = offset
        n = len(ctx.held)
        if n and base + n > x:
            return self.drop, (w, sorted(ctx.held)[_first_over(x, base, 1.0, n)])
        base += n
        n = len(ctx.owner_held)
        if n and base + 0.5 * n > x:
            return self.drop_owner, (w, sorted(ctx.owner_held)[_first_over(x, base, 0.5, n)])
        base += 0.5 * n
        if not workload:
            return None
        others = self._others[w]
        if base + 0.5 > x:
            return self.create_local_rref, (w,)
        if base + 2.0 > x:
            return self._remote_any, (w, self._targets[w])
        base += 2.0
        shared = ctx.owner_held | ctx.owners
        n = len(shared)
        if n and base + n > x:
            r = sorted(shared)[_first_over(x, base, 1.0, n)]
            return self._share_any, (w, others, r, r)
        base += n
        users, fetched = ctx.users, ctx.fetched
        for f in sorted(ctx.held - ctx.timed_out - ctx.deleted):
            base += 1.5
            if base > x:
                return self._share_any, (w, others, users[f].rref, f)
            if f not in fetched:
                base += 1.0
                if base > x:
                    return self.to_here, (w, f)
        return None

    @staticmethod
    def _app_total(ctx: RRefContext, workload: bool) -> float:
        """The sum of the weights :meth:`_worker_app_options` gives ``ctx``'s worker, from set
        sizes (exact: every weight is a multiple of 0.5)."""
        total = len(ctx.held) + 0.5 * len(ctx.owner_held)
        if workload:
            usable = ctx.held
            if ctx.timed_out or ctx.deleted:
                usable = usable - ctx.timed_out - ctx.deleted
            total += 2.0 + len(ctx.owner_held | ctx.owners) + 1.5 * len(usable)
            total += len(usable - ctx.fetched) if ctx.fetched else len(usable)
        return total

    def _worker_app_options(self, w: WorkerId, ctx: RRefContext, *, workload: bool) -> AppOptions:
        """``w``'s application options in their fixed order: drop each held UserRRef, drop
        each held OwnerRRef, then (workload) create a local RRef, rpc.remote, share each
        OwnerRRef, share and fetch each usable UserRRef."""
        weights, actions = self._drop_part(w, ctx)
        if workload:
            for part in (self._owned_part(w, ctx), self._user_part(w, ctx)):
                weights += part[0]
                actions += part[1]
        return weights, actions

    def _drop_part(self, w: WorkerId, ctx: RRefContext) -> AppOptions:
        held, owner_held = sorted(ctx.held), sorted(ctx.owner_held)
        weights = [1.0] * len(held) + [0.5] * len(owner_held)
        drop, drop_owner = self.drop, self.drop_owner
        actions: list[AppAction] = [(drop, (w, f)) for f in held]
        actions += [(drop_owner, (w, r)) for r in owner_held]
        return weights, actions

    def _owned_part(self, w: WorkerId, ctx: RRefContext) -> AppOptions:
        others, targets = self._others[w], self._targets[w]
        share = self._share_any
        shared = sorted(ctx.owner_held | ctx.owners)
        weights = [0.5, 1.5] + [1.0] * len(shared)
        actions: list[AppAction] = [
            (self.create_local_rref, (w,)),
            (self._remote_any, (w, targets)),
        ]
        actions += [(share, (w, others, r, r)) for r in shared]
        return weights, actions

    def _user_part(self, w: WorkerId, ctx: RRefContext) -> AppOptions:
        # Reads the records of held UserRRefs too, but a record never changes and a new
        # UserRRef is held (``held`` changes with it).
        others = self._others[w]
        share, users, fetched, to_here = self._share_any, ctx.users, ctx.fetched, self.to_here
        weights: list[float] = []
        actions: list[AppAction] = []
        for f in sorted(ctx.held - ctx.timed_out - ctx.deleted):
            weights.append(1.5)
            actions.append((share, (w, others, users[f].rref, f)))
            if f not in fetched:
                weights.append(1.0)
                actions.append((to_here, (w, f)))
        return weights, actions

    # ------------------------------------------------------------------ scheduling

    def step(self, mode: Mode = "workload") -> bool:
        """One scheduler step; False when nothing can happen any more.

        Options are listed in a deterministic order (sets are sorted: string hashing is salted per
        process), so the seed alone fixes the run.
        """
        app = mode == "workload" or self._app_enabled(mode)
        if app and self._deliverable():
            # Some system step is enabled, so the coin decides; the system options are listed
            # only if it says so (listing them draws nothing from the generator).
            app = self._random() < self._app_weight
            system = self._all_system_options(mode) if not app else _NO_OPTIONS
        else:
            system = self._all_system_options(mode)
            app = app and (not system[1] or self._random() < self._app_weight)
        if app:
            method, args = self._pick_app(mode)
            method(*args)
        elif system[1]:
            # rng.choices(actions, weights)[0], inlined: the same single random() draw and the
            # same cumulative sums and bisection as CPython's Random.choices, so the streams
            # are the ones seeds always gave, without its per-call overhead.
            cum = list(accumulate(system[0]))
            system[1][bisect(cum, self._random() * (cum[-1] + 0.0), 0, len(cum) - 1)]()
        elif self.net:
            self.now = min(e.ready_at for e in self.net)  # idle: jump to the next delivery
            return True
        else:
            return False
        self.now += 1
        return True

    def _deliverable(self) -> bool:
        """Some message can be delivered or retried now (then some system step is enabled)."""
        now = self.now
        for env in self.net:  # noqa: SIM110 - a plain loop: no generator per step
            if env.ready_at <= now or env.retryable:
                return True
        return False

    def _all_system_options(self, mode: Mode) -> Options:
        system = self._system_options()
        if mode == "shutdown":
            for weight, action in self._shutdown_options():
                system[0].append(weight)
                system[1].append(action)
        return system

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


def _first_over(x: float, base: float, weight: float, n: int) -> int:
    """The least k < n with ``base + (k + 1) * weight > x``, given ``base + n * weight > x``
    (estimated by division, then settled with the exact comparisons)."""
    k = min(max(int((x - base) / weight), 0), n - 1)
    while k > 0 and base + k * weight > x:
        k -= 1
    while not base + (k + 1) * weight > x:
        k += 1
    return k


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
