"""The driver: one worker's RRef core fed from its event loop, traced like the simulator.

:class:`Node` is the worker's RRefContext with its core plumbing (:mod:`.node_core`: core steps,
trace events, sends, dropped handles) and the parts composed around it: RRefs in payloads
(:mod:`.node_payload`), arriving frames (:mod:`.node_inbox`), retries and rpc.remote deadlines
(:mod:`.node_retries`). UserRRef destructors (``DelUser``, G1) run as soon as a step leaves a
UserRRef unreferenced: Python GC drives ``DropRRef`` through ``weakref.finalize``, and G2 holds
the delete back exactly as ``Referenced`` says.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from protoref.ids import GloballyUniqueId, WorkerId
from protoref.rpc import frames as fr
from protoref.rpc.handoff import PENDING
from protoref.rref.core import events as ev
from protoref.rref.core.machine import step as core_step
from protoref.rref.runtime import frames as rf
from protoref.rref.runtime.handle import RRef
from protoref.rref.runtime.node_core import COMPACT_EVERY, NodeCore, settle
from protoref.rref.runtime.node_inbox import Inbox
from protoref.rref.runtime.node_payload import Payload
from protoref.rref.runtime.node_retries import Deadlines, Retries

__all__ = ["COMPACT_EVERY", "PENDING", "Node"]

Gid = GloballyUniqueId


@dataclass(eq=False)
class Node(NodeCore):
    """Worker ``me``'s driver: the core plumbing, its parts, shutdown's and liveness's steps."""

    payload: Payload = field(init=False)
    inbox: Inbox = field(init=False)
    retries: Retries = field(init=False)
    deadlines: Deadlines = field(init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.payload = Payload(self)
        self.inbox = Inbox(self, self.payload)
        self.retries = Retries(self)
        self.deadlines = Deadlines(self)

    # ------------------------------------------------------------------ the parts' API

    def on_frame(self, peer: WorkerId, frame: fr.Frame, ack: Callable[[int], None]) -> None:
        self.inbox.on_frame(peer, frame, ack)

    def take(
        self,
        peer: WorkerId,
        m: ev.Message,
        stamp: int,
        call: rf.CallBody | None,
        result: rf.Result | None,
        *,
        meta: Any = None,
    ) -> None:
        self.inbox.take(peer, m, stamp, call, result, meta=meta)

    def fetch_answered(self, fork: Gid, done: cf.Future[Any], result: rf.Result) -> Any:
        return self.inbox.fetch_answered(fork, done, result)

    def _result_of(self, done: cf.Future[Any], dst: WorkerId, *, allow_rrefs: bool) -> rf.Result:
        return self.payload._result_of(done, dst, allow_rrefs=allow_rrefs)

    def encode_call(
        self, fn: str, args: Sequence[Any], kwargs: dict[str, Any], dst: WorkerId
    ) -> rf.CallBody:
        return self.payload.encode_call(fn, args, kwargs, dst)

    def decode_call(self, body: rf.CallBody, stamp: int) -> tuple[list[Any], dict[str, Any]]:
        return self.payload.decode_call(body, stamp)

    def unpickle(self, m: ev.PythonCall, stamp: int) -> RRef[Any]:
        return self.payload.unpickle(m, stamp)

    def welcome_state(self, peer: WorkerId) -> tuple[int, tuple[int, ...]]:
        return self.retries.welcome_state(peer)

    def sent_on(self, ctl: int, generation: int) -> None:
        self.retries.sent_on(ctl, generation)

    def on_link_ready(self, peer: WorkerId, welcome: fr.Welcome, generation: int) -> None:
        self.retries.on_link_ready(peer, welcome, generation)

    def remote_timer(self, r: Gid, f: Gid, timeout: float | None = None) -> None:
        self.deadlines.remote_timer(r, f, timeout)

    def _time_out_if_pending(self, r: Gid, f: Gid) -> None:
        self.deadlines._time_out_if_pending(r, f)

    # ------------------------------------------------------------------ shutdown, drops, deaths

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
                if u.parent is None and u.owner == peer and f not in self.ctx.timed_out:
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
