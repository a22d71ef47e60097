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
import heapq
import time
from collections.abc import Collection

from protoref.ids import GloballyUniqueId, WorkerId
from protoref.rpc import frames as fr
from protoref.rpc.handoff import PENDING
from protoref.rref.core import events as ev
from protoref.rref.core.machine import step as core_step
from protoref.rref.runtime import frames as rf
from protoref.rref.runtime.node_core import COMPACT_EVERY, settle
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
            sent_on = self.send_frame(peer, rf.Proto, stamp=self.clock.lamport, msg=copy, ctl=new)
            self.unacked[new] = (copy, sent_on)

    # ------------------------------------------------------------------ application calls

    def remote_timer(self, r: Gid, f: Gid, timeout: float | None = None) -> None:
        """Time the rpc.remote out after ``timeout`` (default ``rpc_timeout``; 0: never, as
        torch's) unless it was confirmed by then (RRef.tla ``TimeOutRemote``). Deadlines wait in
        a heap behind one loop timer, so a call wakes the loop only when its deadline is the
        earliest (the first call, or a shorter timeout than those pending)."""
        limit = self.rpc_timeout if timeout is None else timeout
        if limit <= 0:
            return
        with self.lock:
            deadline = time.monotonic() + limit
            earliest = not self._deadlines or deadline < self._deadlines[0][0]
            heapq.heappush(self._deadlines, (deadline, self.next_id(), r, f))
        if earliest:
            self.later(self._arm_timer)

    def _arm_timer(self) -> None:
        # Loop thread only (asyncio's clock is time.monotonic, as the deadlines').
        with self.lock:
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
        with self.lock:
            while self._deadlines and self._deadlines[0][0] <= now:
                due.append(heapq.heappop(self._deadlines))
        for _, _, r, f in due:
            self._maybe_time_out(r, f)
        self._arm_timer()

    def _maybe_time_out(self, r: Gid, f: Gid) -> None:
        with self.lock:
            self._time_out_if_pending(r, f)

    def _time_out_if_pending(self, r: Gid, f: Gid) -> None:
        alive = f in self.ctx.pending_users if f != r else r in self.ctx.self_calls
        if alive:
            self.apply(ev.TimeOutRemote(r=r, f=f))
            self.wraps.remote_done(r, None)  # a wrapped remote call got no answer

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

    def calls_quiet(self, gone: Collection[WorkerId] = ()) -> bool:
        """No user call of this worker is in flight (RRef.tla ``WaitAllWorkers``'s guard):
        every rpc.remote answered (its creator UserRRef confirmed), fetch and call replied.
        Creations and fetches owned by a worker in ``gone`` (dead) are not waited for."""
        c = self.ctx
        creators = any(
            c.users[f].parent is None and c.users[f].owner not in gone for f in c.pending_users
        )
        mine = any(f in c.users and c.users[f].owner not in gone for f in c.fetching)
        return not (creators or mine or c.self_calls or self.calls or self.fetches)

    def peer_dead(self, peer: WorkerId, error: BaseException) -> None:
        """Worker ``peer`` is gone: fail at once what waits on it. Its calls and fetches fail
        with ``error``; an rpc.remote it was to answer times out now (RRef.tla
        ``TimeOutRemote``, the step its deadline would take later); retried control messages
        to it are no longer waited for (nobody will ack them). The protocol state keeps what
        the spec keeps: a fetch stays pinned (Reference), messages to it stay in flight."""
        with self.lock:
            for call_id in [c for c, p in self.call_peers.items() if p == peer]:
                settle(self.pop_call(call_id), None, error)
                self.wraps.call_done(call_id, None, None)  # a wrapped call: no answer either
            users = self.ctx.users
            for f in [f for f in self.fetches if f in users and users[f].owner == peer]:
                settle(self.fetches.pop(f), None, error)
                self.wraps.fetch_done(f, None, None)
            for f in sorted(self.ctx.pending_users):
                u = self.ctx.users[f]
                if u.parent is None and u.owner == peer:
                    self.apply(ev.TimeOutRemote(r=u.rref, f=f))
                    self.wraps.remote_done(u.rref, None)
            for ctl in [c for c, (m, _) in self.unacked.items() if m.dst == peer]:
                del self.unacked[ctl]
        self.on_step()

    def quiet(self) -> bool:
        """The sweep may run: pendingUsers_, pendingChildren_ and this worker's fetches drained."""
        c = self.ctx
        mine = any(f in c.users for f in c.fetching)
        return not (c.pending_users or c.pending_children or mine)
