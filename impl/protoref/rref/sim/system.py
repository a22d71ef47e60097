"""The protocol's own steps in the simulator: deliveries, retries, timeouts, destructors.

Every enabled step is offered with a weight; the scheduler (scheduler.py) picks one with the
seeded generator. A message may be delivered once its delay has passed, in any order; a
retried control message may be duplicated once (RRef.tla ``RetrySend``) or its first attempt
lost (``LoseFirstAttempt``); an rpc.remote whose deadline passed may time out; a UserRRef that
nothing references any more may be destroyed (``DelUser``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from protoref.ids import GloballyUniqueId, WorkerId
from protoref.rref.core import events as ev
from protoref.rref.core.state import RRefContext
from protoref.rref.sim import base
from protoref.rref.sim.base import Options, SimBase
from protoref.rref.trace import LoseFirstAttemptArgs, RetrySendArgs

__all__ = ["SystemSteps"]

#: RRef.tla ``AwaitForkCopies``: the destructor waits for its fork request's copies. Only the
#: planted fault ``resurrect-deleted-fork`` (protoref.rref.sim.faults) turns it off.
AWAIT_FORK_COPIES = True

Gid = GloballyUniqueId


class SystemSteps:
    """Deliveries, retries, timeouts and destructors."""

    def __init__(self, sim: SimBase) -> None:
        self.sim = sim

    # ------------------------------------------------------------------ system steps

    def deliver(self, index: int) -> None:
        """Take message ``index`` from the network; its handler runs on the destination."""
        net = self.sim.net
        env = net[index]
        net[index] = net[-1]
        net.pop()
        m = env.msg
        self.sim._apply(m.dst, base.core_step, (m,), env.stamp, m)

    def retry_send(self, index: int) -> None:
        """RRef.tla ``RetrySend(m)``: sendWithRetries re-sends a control message whose first
        attempt is unacknowledged; both copies may arrive (at-least-once delivery)."""
        env = self.sim.net[index]
        m = env.msg
        if m.type not in ev.RETRIED or m.dup != 0:
            raise ValueError(f"RetrySend of {m!r}: only first attempts of retried messages")
        seq, lamport = self.sim.clocks[m.src].local()
        make = type(m).make
        env.msg = make(m.src, m.dst, m.rref, m.owner, m.fork, parent=m.parent, dup=1)
        env.retryable = False
        # The first attempt becomes the dup-1 copy at this step (RRef.tla RetrySend puts both
        # copies in net), so it carries this step's clock: with the send's old stamp, a
        # receiver's clock could fall below the retry's, and logs split per node and merged
        # by clock put the receipt before the retry (the checker rejected the merge).
        env.stamp = lamport
        self.sim._send(make(m.src, m.dst, m.rref, m.owner, m.fork, parent=m.parent, dup=2), lamport)
        self.sim._record(RetrySendArgs.of(m), m.src, seq, lamport, self.sim.contexts[m.src])

    def lose_first_attempt(self, index: int) -> None:
        """RRef.tla ``LoseFirstAttempt(m)``: the first attempt of a retried message, already
        retried (``dup`` 1), is lost with its connection; the sender learns it when it redials
        (as the runtime does) and logs it."""
        net = self.sim.net
        m = net[index].msg
        if m.type not in ev.RETRIED or m.dup != 1:
            raise ValueError(f"LoseFirstAttempt of {m!r}: only retried first attempts")
        net[index] = net[-1]
        net.pop()
        seq, lamport = self.sim.clocks[m.src].local()
        self.sim._record(LoseFirstAttemptArgs.of(m), m.src, seq, lamport, self.sim.contexts[m.src])

    def _system_options(self) -> Options:
        weights: list[float] = []
        actions: list[Callable[[], object]] = []
        weight, action, now = weights.append, actions.append, self.sim.now
        deliver, retry, net = self.sim._deliver_at, self.sim._retry_at, self.sim.net
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
        destructors = self.sim._destructors
        # RRef.tla AwaitForkCopies (DeleteLast): a UserRRef with a copy of its own
        # RREF_FORK_REQUEST in flight is not destroyed (the owner keeps no tombstone)
        forking = {
            (env.msg.src, env.msg.fork)
            for env in net
            if AWAIT_FORK_COPIES and env.msg.type == "RREF_FORK_REQUEST"
        }
        for w, ctx in self.sim.contexts.items():
            cached = destructors[w]
            out = frozenset(f for v, f in forking if v == w)
            if cached[0] is not ctx or cached[1][-1:] != (out,):
                cached = destructors[w] = self._destructors_of(w, ctx, cached, out)
            if cached[2][0]:
                weights += cached[2][0]
                actions += cached[2][1]
        if self.sim.deadlines:
            self._timeout_options(weights, actions)
        if self.sim.config.lose_first_attempts:  # last, so that the other options keep their order
            for i, env in enumerate(net):
                if env.msg.dup == 1:
                    weight(0.1)
                    action(partial(self.lose_first_attempt, i))
        return weights, actions

    def _timeout_options(self, weights: list[float], actions: list[Callable[[], object]]) -> None:
        now, contexts, timeouts = self.sim.now, self.sim.contexts, self.sim.config.timeouts
        finished = []
        for key, deadline in self.sim.deadlines.items():
            w, r, f = key
            ctx = contexts[w]
            # a timed-out creator stays pending (RRef.tla PinTimedOut): its future failed once
            pending = f in ctx.pending_users and f not in ctx.timed_out
            if not (pending if f != r else r in ctx.self_calls):
                finished.append(key)  # the future completed: no timeout any more
            elif timeouts and deadline <= now:
                weights.append(0.5)
                actions.append(partial(self.time_out_remote, w, r, f))
        for key in finished:
            del self.sim.deadlines[key]

    def _destructors_of(
        self,
        w: WorkerId,
        ctx: RRefContext,
        cached: tuple[RRefContext | None, tuple[object, ...], Options],
        out: frozenset[Gid] = frozenset(),
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
            out,
        )
        if key == cached[1]:
            return ctx, key, cached[2]
        return ctx, key, self._destructor_options(w, ctx, out)

    def _destructor_options(
        self, w: WorkerId, ctx: RRefContext, out: frozenset[Gid] = frozenset()
    ) -> Options:
        """DelUser for every UserRRef nothing references any more (in ``users`` order) and
        none of whose RREF_FORK_REQUEST copies is in flight (``out``)."""
        fs = [f for f in ctx.destructible() if f not in out]
        if not fs:
            return [], []
        made = self.sim._del_user_at
        actions = []
        for f in fs:
            action = made.get((w, f))
            if action is None:
                action = made[(w, f)] = partial(self.del_user, w, f)
            actions.append(action)
        return [1.0] * len(fs), actions

    def del_user(self, w: WorkerId, f: Gid) -> None:
        """The UserRRef's refcount reached zero: its destructor runs (G1)."""
        self.sim._apply(w, base.machine.del_user, (f,))

    def time_out_remote(self, w: WorkerId, r: Gid, f: Gid) -> None:
        self.sim.deadlines.pop((w, r, f), None)
        self.sim._apply(w, base.machine.time_out_remote, (r, f))
