"""What keeps a worker's RRef protocol going over time: retries on redialed links and the
rpc.remote deadlines (parts of :class:`~.node.Node`).

Retried control messages (RRef.tla ``Retried``) wait for a transport ack and are re-sent once
on a new link (``RetrySend``); user calls never are. rpc.remote deadlines fire
``TimeOutRemote``.
"""

from __future__ import annotations

import asyncio
import heapq
import time

from protoref.ids import GloballyUniqueId, WorkerId
from protoref.rpc import frames as fr
from protoref.rpc.handoff import PENDING
from protoref.rref.core import events as ev
from protoref.rref.runtime import frames as rf
from protoref.rref.runtime.node_core import NodeCore
from protoref.rref.trace import LoseFirstAttemptArgs, RetrySendArgs, make_event

__all__ = ["Deadlines", "Retries"]

Gid = GloballyUniqueId


class Retries:
    """Retried control messages across links (RRef.tla ``RetrySend``, ``LoseFirstAttempt``)."""

    def __init__(self, node: NodeCore) -> None:
        self.node = node

    def welcome_state(self, peer: WorkerId) -> tuple[int, tuple[int, ...]]:
        return self.node.clock.lamport, tuple(sorted(self.node.processed.get(peer, ())))

    def sent_on(self, ctl: int, generation: int) -> None:
        """(loop thread) The frame of retried message ``ctl``, handed to the loop as PENDING,
        was written on (or queued for) link ``generation``."""
        with self.node.lock:
            entry = self.node.unacked.get(ctl)
            if entry is not None and entry[1] == PENDING:
                self.node.unacked[ctl] = (entry[0], generation)

    def on_link_ready(self, peer: WorkerId, welcome: fr.Welcome, generation: int) -> None:
        """A (re)dialed link: control messages written on an older link that the acceptor never
        applied were lost with it; ``RetrySend`` re-sends each once, causally after the Welcome
        (the acceptor dropped the old link before reporting what it had applied)."""
        with self.node.lock:
            self._retry_lost(peer, welcome, generation)

    def _retry_lost(self, peer: WorkerId, welcome: fr.Welcome, generation: int) -> None:
        self.node.clock.lamport = max(self.node.clock.lamport, welcome.lamport)
        done = set(welcome.processed)
        for ctl, (m, gen) in sorted(self.node.unacked.items()):
            # PENDING: still queued for the loop, which sends it after this (the same thread),
            # so the original is not lost; re-sending it too would deliver the first attempt
            # after the retry, which RRef.tla's RetrySend does not allow (dup 0 after the copy)
            if m.dst != peer or gen == PENDING or gen >= generation:
                continue
            del self.node.unacked[ctl]
            if ctl in done:
                continue
            copy = m
            if m.dup == 0:  # RRef.tla RetrySend: the first attempt is duplicated once
                seq, lamport = self.node.clock.local()
                if self.node.sink.enabled:
                    self.node.sink.emit(
                        make_event(RetrySendArgs(m=m), self.node.me, seq, lamport, self.node.ctx)
                    )
                # ... and that first attempt (now dup 1) is known lost: it went with the old
                # link, the acceptor never applied it (RRef.tla LoseFirstAttempt)
                seq, lamport = self.node.clock.local()
                if self.node.sink.enabled:
                    lost = LoseFirstAttemptArgs(m=m.model_copy(update={"dup": 1}))
                    self.node.sink.emit(make_event(lost, self.node.me, seq, lamport, self.node.ctx))
                copy = m.model_copy(update={"dup": 2})
            new = self.node.next_id()
            sent_on = self.node.send_frame(
                peer, rf.Proto, stamp=self.node.clock.lamport, msg=copy, ctl=new
            )
            self.node.unacked[new] = (copy, sent_on)


class Deadlines:
    """rpc.remote deadlines in a heap behind one loop timer (RRef.tla ``TimeOutRemote``)."""

    def __init__(self, node: NodeCore) -> None:
        self.node = node
        #: (deadline, tiebreak, r, f), and the loop timer serving the earliest.
        self._deadlines: list[tuple[float, int, Gid, Gid]] = []
        self._timer: asyncio.TimerHandle | None = None

    def remote_timer(self, r: Gid, f: Gid, timeout: float | None = None) -> None:
        """Time the rpc.remote out after ``timeout`` (default ``rpc_timeout``; 0: never, as
        torch's) unless it was confirmed by then (RRef.tla ``TimeOutRemote``). Deadlines wait in
        a heap behind one loop timer, so a call wakes the loop only when its deadline is the
        earliest (the first call, or a shorter timeout than those pending)."""
        limit = self.node.rpc_timeout if timeout is None else timeout
        if limit <= 0:
            return
        with self.node.lock:
            deadline = time.monotonic() + limit
            earliest = not self._deadlines or deadline < self._deadlines[0][0]
            heapq.heappush(self._deadlines, (deadline, self.node.next_id(), r, f))
        if earliest:
            self.node.later(self._arm_timer)

    def _arm_timer(self) -> None:
        # Loop thread only (asyncio's clock is time.monotonic, as the deadlines').
        with self.node.lock:
            if not self._deadlines:
                return
            head = self._deadlines[0][0]
        if self._timer is not None:
            if self._timer.when() <= head:
                return
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_at(head, self._check_deadlines)

    def _check_deadlines(self) -> None:
        self._timer = None
        now = time.monotonic()
        due = []
        with self.node.lock:
            while self._deadlines and self._deadlines[0][0] <= now:
                due.append(heapq.heappop(self._deadlines))
        for _, _, r, f in due:
            self._maybe_time_out(r, f)
        self._arm_timer()

    def _maybe_time_out(self, r: Gid, f: Gid) -> None:
        with self.node.lock:
            self._time_out_if_pending(r, f)

    def _time_out_if_pending(self, r: Gid, f: Gid) -> None:
        ctx = self.node.ctx  # a timed-out creator stays pending (RRef.tla PinTimedOut)
        alive = f in ctx.pending_users and f not in ctx.timed_out if f != r else r in ctx.self_calls
        if alive:
            self.node.apply(ev.TimeOutRemote(r=r, f=f))
            self.node.wraps.remote_done(r, None)  # a wrapped remote call got no answer
