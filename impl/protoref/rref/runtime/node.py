"""The driver: one worker's RRef core fed from its event loop, traced like the simulator.

:class:`Node` is the top of the driver's layers (:mod:`.node_core`: core steps, trace events,
sends; :mod:`.node_payload`: RRefs in payloads; :mod:`.node_inbox`: arriving frames) and adds
what keeps the protocol going over time. Retried control messages (RRef.tla ``Retried``) wait
for a transport ack and are re-sent once on a new link (``RetrySend``); user calls never are.
rpc.remote deadlines fire ``TimeOutRemote``. UserRRef destructors (``DelUser``, G1) run as soon
as a step leaves a UserRRef unreferenced: Python GC drives ``DropRRef`` through
``weakref.finalize``, and G2 holds the delete back exactly as ``Referenced`` says.
"""

from __future__ import annotations

import asyncio
import time

from protoref.ids import GloballyUniqueId, WorkerId
from protoref.rref import events as ev
from protoref.rref.machine import step as core_step
from protoref.rref.runtime import frames as fr
from protoref.rref.runtime.node_core import COMPACT_EVERY, PENDING
from protoref.rref.runtime.node_inbox import NodeInbox
from protoref.rref.trace import LoseFirstAttemptArgs, RetrySendArgs, make_event

__all__ = ["COMPACT_EVERY", "PENDING", "Node"]

Gid = GloballyUniqueId


class Node(NodeInbox):
    """Worker ``me``'s driver: the layers below, plus retries, timers and drops."""

    # ------------------------------------------------------------------ retries

    def welcome_state(self, peer: WorkerId) -> tuple[int, tuple[int, ...]]:
        return self.clock.lamport, tuple(sorted(self.processed.get(peer, ())))

    def sent_on(self, ctl: int, generation: int) -> None:
        """(loop thread) The frame of retried message ``ctl``, handed to the loop as PENDING,
        was written on (or queued for) link ``generation``."""
        with self.lock:
            entry = self.unacked.get(ctl)
            if entry is not None and entry[1] == PENDING:
                self.unacked[ctl] = (entry[0], generation)

    def on_link_ready(self, peer: WorkerId, welcome: fr.Welcome, generation: int) -> None:
        """A (re)dialed link: control messages written on an older link that the acceptor never
        applied were lost with it; ``RetrySend`` re-sends each once, causally after the Welcome
        (the acceptor dropped the old link before reporting what it had applied)."""
        with self.lock:
            self._retry_lost(peer, welcome, generation)

    def _retry_lost(self, peer: WorkerId, welcome: fr.Welcome, generation: int) -> None:
        self._merge(welcome.lamport)
        done = set(welcome.processed)
        for ctl, (m, gen) in sorted(self.unacked.items()):
            # PENDING: still queued for the loop, which sends it after this (the same thread),
            # so the original is not lost; re-sending it too would deliver the first attempt
            # after the retry, which RRef.tla's RetrySend does not allow (dup 0 after the copy)
            if m.dst != peer or gen == PENDING or gen >= generation:
                continue
            del self.unacked[ctl]
            if ctl in done:
                continue
            copy = m
            if m.dup == 0:  # RRef.tla RetrySend: the first attempt is duplicated once
                seq, lamport = self.clock.local()
                if self.sink.enabled:
                    self.sink.emit(make_event(RetrySendArgs(m=m), self.me, seq, lamport, self.ctx))
                # ... and that first attempt (now dup 1) is known lost: it went with the old
                # link, the acceptor never applied it (RRef.tla LoseFirstAttempt)
                seq, lamport = self.clock.local()
                if self.sink.enabled:
                    lost = LoseFirstAttemptArgs(m=m.model_copy(update={"dup": 1}))
                    self.sink.emit(make_event(lost, self.me, seq, lamport, self.ctx))
                copy = m.model_copy(update={"dup": 2})
            new = self.next_id()
            sent_on = self.send_frame(peer, fr.Proto, stamp=self.clock.lamport, msg=copy, ctl=new)
            self.unacked[new] = (copy, sent_on)

    # ------------------------------------------------------------------ application calls

    def remote_timer(self, r: Gid, f: Gid) -> None:
        """Time the rpc.remote out after ``rpc_timeout`` (RRef.tla ``TimeOutRemote``) unless it
        was confirmed by then. Deadlines queue in order (one timeout for all) behind one loop
        timer, so a call does not wake the loop to arm a timer of its own."""
        self._deadlines.append((time.monotonic() + self.rpc_timeout, r, f))
        if not self._timer_wanted:
            self._timer_wanted = True
            self.later(self._arm_timer)

    def _arm_timer(self) -> None:
        # Loop thread only (asyncio's clock is time.monotonic, as the deadlines').
        if self._timer is None and self._deadlines:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_at(self._deadlines[0][0], self._check_deadlines)

    def _check_deadlines(self) -> None:
        self._timer = None
        self._timer_wanted = False  # before looking: a deadline queued after is seen, or re-arms
        now = time.monotonic()
        while self._deadlines and self._deadlines[0][0] <= now:
            _, r, f = self._deadlines.popleft()
            self._maybe_time_out(r, f)
        if self._deadlines:
            self._timer_wanted = True
            self._arm_timer()

    def _maybe_time_out(self, r: Gid, f: Gid) -> None:
        with self.lock:
            self._time_out_if_pending(r, f)

    def _time_out_if_pending(self, r: Gid, f: Gid) -> None:
        alive = f in self.ctx.pending_users if f != r else r in self.ctx.self_calls
        if alive:
            self.apply(ev.TimeOutRemote(r=r, f=f))

    def pass_barrier(self) -> None:
        """RRef.tla ``WaitAllWorkers`` on this context: one global step, logged once by the
        master under the environment actor ``barrier`` (see Agent._arrive)."""
        with self.lock:
            self.ctx = core_step(self.ctx, ev.WaitAllWorkers()).state

    def drop_user(self, f: Gid) -> None:
        with self.lock:
            if not self.frozen and f in self.ctx.held:
                self.apply(ev.DropRRef(f=f))

    def drop_owner(self, r: Gid) -> None:
        with self.lock:
            if not self.frozen and r in self.ctx.owner_held:
                self.apply(ev.DropOwnerRRef(r=r))

    def calls_quiet(self) -> bool:
        """No user call of this worker is in flight (RRef.tla ``WaitAllWorkers``'s guard):
        every rpc.remote answered (its creator UserRRef confirmed), fetch and call replied."""
        c = self.ctx
        creators = any(c.users[f].parent is None for f in c.pending_users)
        mine = any(f in c.users for f in c.fetching)
        return not (creators or mine or c.self_calls or self.calls or self.fetches)

    def quiet(self) -> bool:
        """The sweep may run: pendingUsers_, pendingChildren_ and this worker's fetches drained."""
        c = self.ctx
        mine = any(f in c.users for f in c.fetching)
        return not (c.pending_users or c.pending_children or mine)
