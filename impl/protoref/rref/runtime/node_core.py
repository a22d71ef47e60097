"""The driver's base: one worker's RRefContext, its core steps, trace events and sends.

Every protocol step goes through :meth:`NodeCore.apply`: ``machine.step``, then one trace event
with the acting node, its ``seq`` and Lamport clock (``NodeClock``: a handler's step takes the
sender's stamp, so per-process logs merge causally) and its post-state, then the messages the
step sent. UserRRef destructors (``DelUser``, G1) run as soon as a step leaves a UserRRef
unreferenced. Any thread may step the core, always under ``lock``; each writes the frames its
step sends itself. The layers above: :mod:`.node_payload` (RRefs inside payloads),
:mod:`.node_inbox` (arriving frames), :mod:`.node` (retries, timers, drops).
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from protoref.errors import ProtocolError
from protoref.ids import GloballyUniqueId, WorkerId
from protoref.rpc.codec import Codec
from protoref.rpc.handoff import LoopQueue
from protoref.rref.core import events as ev
from protoref.rref.core.machine import Step
from protoref.rref.core.machine import step as core_step
from protoref.rref.core.state import RRefContext
from protoref.rref.runtime import frames as rf
from protoref.rref.runtime.wraps import Wraps
from protoref.rref.trace import make_event
from protoref.tracing import NodeClock, NullSink, TraceSink

__all__ = [
    "COMPACT_EVERY",
    "DROP_SWEEP_SECONDS",
    "KEEP_ERRORS",
    "NodeCore",
    "settle",
]

Gid = GloballyUniqueId
#: How many protocol errors a node keeps for inspection.
KEEP_ERRORS = 256
#: A retried message in ``unacked`` with the generation PENDING (protoref.rpc.handoff) has
#: not been written anywhere, so a new link must not re-send it (the original still leaves, on
#: that link or a later one: see ``sent_on``).
#: Untraced workers forget finished UserRRefs every this many steps.
COMPACT_EVERY = 256
#: A dropped handle is applied at the latest this long after (when nothing else runs sooner).
#: A busy worker applies drops at its next call or frame anyway; the sweep only serves an idle
#: one, and each sweep costs the loop two wake-ups (arming it from the dropping thread, firing),
#: so it is not made shorter than it needs to be.
DROP_SWEEP_SECONDS = 0.02


def settle(target: cf.Future[Any] | None, value: Any, error: BaseException | None) -> bool:
    """Complete ``target`` unless it is done already (a reply racing its timeout or its peer's
    death: the first outcome stands); False if it was. Bypasses Future.set_result's
    torch-shaped checks: the runtime may store any exception."""
    if target is None:
        return False
    try:
        if error is None:
            cf.Future.set_result(target, value)
        else:
            cf.Future.set_exception(target, error)
    except cf.InvalidStateError:
        return False
    return True


@dataclass(eq=False)
class NodeCore:
    """Worker ``me``'s RRefContext and everything the runtime keeps around it."""

    """Worker ``me``'s RRefContext and everything the runtime keeps around it."""

    me: WorkerId
    #: (peer, frame class, **fields) on the outbound link; returns the link's generation.
    send_frame: Callable[..., int]
    #: (thunk, asynchronous) -> the UDF's future (asynchronous: the thunk returns a Future).
    run_udf: Callable[..., cf.Future[Any]]
    codecs: Sequence[Codec] = ()
    sink: TraceSink = field(default_factory=NullSink)
    rpc_timeout: float = 60.0
    ctx: RRefContext = field(init=False)
    clock: NodeClock = field(default_factory=NodeClock)
    #: Owner values by RRefId, while the core keeps the OwnerRRef or a UDF is computing it.
    boxes: dict[Gid, cf.Future[Any]] = field(default_factory=dict)
    computing: set[Gid] = field(default_factory=set)
    fetches: dict[Gid, cf.Future[Any]] = field(default_factory=dict)
    calls: dict[int, cf.Future[Any]] = field(default_factory=dict)
    #: The worker each of ``calls`` went to (its death fails them).
    call_peers: dict[int, WorkerId] = field(default_factory=dict)
    #: Retried control messages not yet acked: ctl id -> (message, link generation sent on,
    #: or PENDING while the loop thread has yet to write it).
    unacked: dict[int, tuple[ev.Message, int]] = field(default_factory=dict)
    processed: dict[WorkerId, set[int]] = field(default_factory=dict)
    protocol_errors: deque[ProtocolError] = field(default_factory=lambda: deque(maxlen=KEEP_ERRORS))
    agent: Any = None  # the RRef plug-in's calls (handles need them for their methods)
    #: The requests wrapped by another plug-in's call hook, waiting for their answers.
    wraps: Wraps = field(default_factory=lambda: Wraps(None))
    on_step: Callable[[], None] = lambda: None  # shutdown waits re-check after every step
    frozen: bool = False  # set when the links close: late GC drops are not applied any more
    #: Guards the core state and the maps around it: application threads step the core
    #: themselves (no trip through the loop), the loop thread steps it for arriving frames.
    lock: threading.RLock = field(default_factory=threading.RLock)
    #: The worker's loop-thread queue (its agent's, shared with the other plug-ins: one order).
    queue: LoopQueue = field(default_factory=LoopQueue)
    _ids: int = 0
    _steps: int = 0
    #: Handles dropped by Python, not applied yet (see note_drop).
    _drops: deque[tuple[Callable[[Gid], None], Gid]] = field(default_factory=deque)
    _sweep_wanted: bool = False

    def __post_init__(self) -> None:
        self.ctx = RRefContext(me=self.me)

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def add_call(self, peer: WorkerId, future: cf.Future[Any]) -> int:
        """Register a user call (or refetch) to ``peer``; its id."""
        call_id = self.next_id()
        self.calls[call_id] = future
        self.call_peers[call_id] = peer
        return call_id

    def pop_call(self, call_id: int) -> cf.Future[Any] | None:
        self.call_peers.pop(call_id, None)
        return self.calls.pop(call_id, None)

    # ------------------------------------------------------------------ core plumbing

    def apply(self, inp: ev.RRefInput, stamp: int | None = None, *, send: bool = True) -> Step:
        """One core step: state, trace event, sends (unless the caller sends them itself)."""
        with self.lock:
            return self._apply(inp, stamp, send)

    def _apply(self, inp: ev.RRefInput, stamp: int | None, send: bool) -> Step:
        before = self.ctx
        result = core_step(before, inp)  # raises ProtocolError with the state untouched
        self.ctx = result.state
        seq, lamport = self.clock.local() if stamp is None else self.clock.receive(stamp)
        if self.sink.enabled:
            delivered = inp if isinstance(inp, ev.MessageBase) else None
            self.sink.emit(
                make_event(
                    result.action,
                    self.me,
                    seq,
                    lamport,
                    self.ctx,
                    delivered=delivered,
                    before=before,
                    # schema 4: a delivered message names its send (sender, its clock then)
                    sent_by=None if delivered is None or stamp is None else (delivered.src, stamp),
                )
            )
        if send:
            for m in result.sent:
                self.emit(m, lamport)
        self._destructors(before)
        self._forget_values()
        self._steps += 1
        if self._steps % COMPACT_EVERY == 0 and not self.sink.enabled:
            self._forget_finished_users()
        self.on_step()
        return result

    def _destructors(self, before: RRefContext) -> None:
        """``DelUser`` for every UserRRef this step may have left unreferenced (G1 after G2)."""
        after = self.ctx
        if (
            before.held is after.held
            and before.pending_users is after.pending_users
            and before.fetching is after.fetching
            and before.pending_children is after.pending_children
        ):  # the core's evolve keeps untouched sets: nothing can have become unreferenced
            return
        maybe = (
            (before.held - after.held)
            | (before.pending_users - after.pending_users)
            | (before.fetching - after.fetching)
            | {p for _, p in before.pending_children - after.pending_children}
        )
        for f in sorted(maybe):
            self.destroy_if_unreferenced(f)

    def destroy_if_unreferenced(self, f: Gid) -> None:
        """``DelUser(f)`` if nothing references the UserRRef f and no copy of its own
        RREF_FORK_REQUEST is unacknowledged (RRef.tla ``AwaitForkCopies``, DeleteLast: a late
        copy must not follow the delete, since the owner keeps no tombstone)."""
        c = self.ctx
        if f in c.users and f not in c.deleted and not c.referenced(f):  # noqa: SIM102
            if not self.fork_request_out(f):  # (separately: the scan of unacked is the slow part)
                self.apply(ev.DelUser(f=f))

    def fork_request_out(self, f: Gid) -> bool:
        """A copy of f's RREF_FORK_REQUEST is still in ``unacked`` (sent, not acknowledged)."""
        return any(m.type == "RREF_FORK_REQUEST" and m.fork == f for m, _ in self.unacked.values())

    def _forget_finished_users(self) -> None:
        """Untraced runs only: drop the records of UserRRefs that are deleted and referenced by
        nothing. The spec keeps them forever (``users``, ``deleted``, ``fetched`` are history
        it logs), which makes a long-running worker's memory and every step's cost grow with
        each RRef it ever had. No guard of the core can need a forgotten record: every message
        about such a UserRRef that can still arrive is one its handler drops (docs/divergences.md
        21). A traced run keeps them, so its post-states stay the spec's."""
        c = self.ctx
        gone = frozenset(f for f in c.deleted if f in c.users and not c.referenced(f))
        if gone:
            users = {f: u for f, u in c.users.items() if f not in gone}
            self.ctx = replace(
                c,
                users=users,
                deleted=c.deleted - gone,
                fetched=c.fetched - gone,
                timed_out=c.timed_out - gone,
            )

    def _forget_values(self) -> None:
        keep = self.ctx.owners | self.ctx.owner_held | self.ctx.self_calls | self.computing
        if len(self.boxes) > len(keep):
            for r in [r for r in self.boxes if r not in keep]:
                del self.boxes[r]

    def on_loop(self) -> bool:
        return self.queue.on_loop()

    def later(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn`` on the loop thread soon (now, if this is it: order is kept either way)."""
        self.queue.later(fn, *args)

    def handoff(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn`` on the loop thread after everything handed off before it (any thread)."""
        self.queue.handoff(fn, *args)

    def emit(
        self,
        m: ev.Message,
        stamp: int,
        call: rf.CallBody | None = None,
        meta: Any = None,
    ) -> None:
        """Send a message a step produced, from the thread that stepped (the caller holds the
        lock): links take writes from any thread, so an application or UDF thread does not
        wake the loop to send (``send_frame`` hands the frame to the loop only when the link
        must be dialed first; a retried message then records PENDING until it is written).
        ``meta``: the call hook's part (wraps.py), in the frame's ext."""
        self.send_proto(m, stamp, call, meta)

    def send_proto(
        self,
        m: ev.Message,
        stamp: int,
        call: rf.CallBody | None = None,
        meta: Any = None,
    ) -> None:
        if m.dst == self.me:  # to self through the loop, never inline: it is a separate step
            self.handoff(self._take_local, m, stamp, call, meta)
            return
        if isinstance(m, ev.RRefFetchRet):
            self._send_value_when_ready(m, stamp)
            return
        if m.type in ev.RETRIED:
            ctl = self.next_id()
            gen = self.send_frame(m.dst, rf.Proto, stamp=stamp, msg=m, ctl=ctl)
            self.unacked[ctl] = (m, gen)
            return
        ext = self.wraps.ext(meta)
        self.send_frame(m.dst, rf.Proto, stamp=stamp, msg=m, call=call, ext=ext)

    def _send_value_when_ready(self, m: ev.RRefFetchRet, stamp: int) -> None:
        # retrieveOwnerRRef replies once the OwnerRRef's value future has completed.
        box = self.boxes.get(m.rref)
        if box is None:
            result = rf.Result(ok=False, error_type="RPCError", error=f"no value for {m.rref}")
            self.send_frame(m.dst, rf.Proto, stamp=stamp, msg=m, result=result)
            return

        def ready(done: cf.Future[Any]) -> None:
            result = self._result_of(done, m.dst, allow_rrefs=True)  # RRefs inside: forked
            # a fetch made under a context: its handler answers (wrapped if the value needs it)
            ext = self.wraps.ext(self.fetch_answered(m.fork, done, result))
            self.send_frame(m.dst, rf.Proto, stamp=stamp, msg=m, result=result, ext=ext)

        if box.done():  # the common case: no extra trip through the loop
            ready(box)
        else:
            self.when_done(box, ready)

    def when_done(self, future: cf.Future[Any], fn: Callable[..., Any], *args: Any) -> None:
        """``fn(*args, future)`` once ``future`` is done: on the thread that completes it (a UDF
        thread replies itself, without a trip through the loop), or through the loop when it
        completes on the thread asking (never inline inside the step that asked)."""
        asker = threading.get_ident()

        def done(d: cf.Future[Any]) -> None:
            if threading.get_ident() == asker:
                self.handoff(fn, *args, d)
            else:
                fn(*args, d)

        future.add_done_callback(done)

    def _take_local(
        self,
        m: ev.Message,
        stamp: int,
        call: rf.CallBody | None,
        meta: Any = None,
    ) -> None:
        with self.lock:
            self.take(self.me, m, stamp, call, None, meta=meta)

    # ------------------------------------------------------------------ dropped handles

    def note_drop(self, fn: Callable[[Gid], None], g: Gid) -> None:
        """A handle's finalizer (any thread, at any point, possibly inside a step of this very
        thread): queue the drop. It is applied at the next safe point: the next application
        call or arriving frame of this worker, or a sweep on the loop shortly after, so a
        dropped RRef does not wake the loop each time."""
        self._drops.append((fn, g))
        if not self._sweep_wanted:
            self._sweep_wanted = True
            self.handoff(self._arm_sweep)

    def _arm_sweep(self) -> None:
        asyncio.get_running_loop().call_later(DROP_SWEEP_SECONDS, self._sweep)

    def _sweep(self) -> None:
        self._sweep_wanted = False  # before looking: a drop queued after is seen, or re-arms
        self.apply_drops()

    def apply_drops(self) -> None:
        """Apply the queued drops (DropRRef / DropOwnerRRef, and the DelUser they allow)."""
        if self._drops:
            with self.lock:
                while self._drops:
                    fn, g = self._drops.popleft()
                    fn(g)

    # ------------------------------------------------------------------ the layers above

    def _result_of(self, done: cf.Future[Any], dst: WorkerId, *, allow_rrefs: bool) -> rf.Result:
        """A call's outcome as a frame's Result (node_payload.Payload, through Node)."""
        raise NotImplementedError

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
        """A protocol message taken from the inbox (node_inbox.Inbox, through Node)."""
        raise NotImplementedError

    def fetch_answered(self, fork: Gid, done: cf.Future[Any], result: rf.Result) -> Any:
        """The call hook's part of a fetch's reply (node_inbox.Inbox, through Node)."""
        raise NotImplementedError
