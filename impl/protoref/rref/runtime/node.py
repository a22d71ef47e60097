"""The driver: one worker's RRef core fed from its event loop, traced like the simulator.

Every protocol step goes through :meth:`Node.apply`: ``machine.step``, then one trace event with
the acting node, its ``seq`` and Lamport clock (``NodeClock``: a handler's step takes the
sender's stamp, so per-process logs merge causally) and its post-state, then the messages the
step sent. A message is applied when it is taken from its link (arrival order); the handler of a
PYTHON_REMOTE_CALL runs when its UDF has returned (RRef.tla ``AssignOwnerRRef``: the UDF runs,
then assignOwnerRRef). UserRRef destructors (``DelUser``, G1) run as soon as a step leaves a
UserRRef unreferenced: Python GC drives ``DropRRef`` through ``weakref.finalize``, and G2 holds
the delete back exactly as ``Referenced`` says. Retried control messages (RRef.tla ``Retried``)
wait for a transport ack and are re-sent once on a new link (``RetrySend``); user calls never are.
Any thread may step the core (application calls, arriving frames on the loop thread, UDF
completions on the pool), always under ``lock``; each writes the frames its step sends itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from protoref.errors import ProtocolError
from protoref.ids import GloballyUniqueId, WorkerId
from protoref.rref import events as ev
from protoref.rref.machine import Step
from protoref.rref.machine import step as core_step
from protoref.rref.runtime import frames as fr
from protoref.rref.runtime.codec import Codec, decode_value, encode_value
from protoref.rref.runtime.errors import CodecError, FrameError, RemoteError
from protoref.rref.runtime.handle import RRef
from protoref.rref.runtime.transport import corked
from protoref.rref.runtime.udf import resolve
from protoref.rref.state import RRefContext
from protoref.rref.trace import LoseFirstAttemptArgs, RetrySendArgs, make_event
from protoref.tracing import NodeClock, NullSink, TraceSink

__all__ = ["Node"]

Gid = GloballyUniqueId
log = logging.getLogger("protoref.rref.runtime")
#: How many rejected frames / protocol errors a node keeps for inspection.
KEEP_ERRORS = 256
#: ``send_frame``'s answer for a frame it handed to the loop thread (the link must be dialed
#: first): the link generation it will go out on is not known yet. A retried message in
#: ``unacked`` with this generation has not been written anywhere, so a new link must not
#: re-send it (the original still leaves, on that link or a later one: see ``sent_on``).
PENDING: Final = -1
#: Untraced workers forget finished UserRRefs every this many steps.
COMPACT_EVERY = 256
#: A dropped handle is applied at the latest this long after (when nothing else runs sooner).
#: A busy worker applies drops at its next call or frame anyway; the sweep only serves an idle
#: one, and each sweep costs the loop two wake-ups (arming it from the dropping thread, firing),
#: so it is not made shorter than it needs to be.
DROP_SWEEP_SECONDS = 0.02


def post(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> None:
    """Hand a callback to the worker's loop from any thread; a loop already closed (the worker
    shut down while a UDF was still running) has nobody left to tell."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(fn, *args)


def _error_result(exc: BaseException) -> fr.Result:
    if isinstance(exc, RemoteError):
        return fr.Result(ok=False, error_type=exc.remote_type, error=exc.remote_message)
    return fr.Result(ok=False, error_type=type(exc).__qualname__, error=str(exc))


@dataclass(eq=False)
class Node:
    """Worker ``me``'s RRefContext and everything the runtime keeps around it."""

    me: WorkerId
    #: (peer, frame class, **fields) on the outbound link; returns the link's generation.
    send_frame: Callable[..., int]
    run_udf: Callable[[Callable[[], Any]], cf.Future[Any]]
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
    #: Retried control messages not yet acked: ctl id -> (message, link generation sent on,
    #: or PENDING while the loop thread has yet to write it).
    unacked: dict[int, tuple[ev.Message, int]] = field(default_factory=dict)
    processed: dict[WorkerId, set[int]] = field(default_factory=dict)
    rejected: deque[FrameError] = field(default_factory=lambda: deque(maxlen=KEEP_ERRORS))
    protocol_errors: deque[ProtocolError] = field(default_factory=lambda: deque(maxlen=KEEP_ERRORS))
    agent: Any = None  # the Agent (handles need it for their methods)
    on_step: Callable[[], None] = lambda: None  # shutdown waits re-check after every step
    frozen: bool = False  # set when the links close: late GC drops are not applied any more
    #: Guards the core state and the maps around it: application threads step the core
    #: themselves (no trip through the loop), the loop thread steps it for arriving frames.
    lock: threading.RLock = field(default_factory=threading.RLock)
    loop: asyncio.AbstractEventLoop | None = None  # None: everything runs on one thread (tests)
    loop_thread: int | None = None
    _ids: int = 0
    _steps: int = 0
    #: Callbacks handed to the loop thread, in order (see :meth:`handoff`).
    _handoffs: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = field(default_factory=deque)
    _drain_pending: bool = False
    #: rpc.remote deadlines in order (see remote_timer) and the loop timer serving them.
    _deadlines: deque[tuple[float, Gid, Gid]] = field(default_factory=deque)
    _timer: asyncio.TimerHandle | None = None
    _timer_wanted: bool = False
    #: Handles dropped by Python, not applied yet (see note_drop).
    _drops: deque[tuple[Callable[[Gid], None], Gid]] = field(default_factory=deque)
    _sweep_wanted: bool = False

    def __post_init__(self) -> None:
        self.ctx = RRefContext(me=self.me)

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

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
            if f in self.ctx.users and f not in self.ctx.deleted and not self.ctx.referenced(f):
                self.apply(ev.DelUser(f=f))

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
        return self.loop_thread is None or threading.get_ident() == self.loop_thread

    def later(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn`` on the loop thread soon (now, if this is it: order is kept either way)."""
        if self.on_loop():
            fn(*args)
        else:
            self.handoff(fn, *args)

    def handoff(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn`` on the loop thread after everything handed off before it (any thread).

        One queue in FIFO order for every thread, and one wake-up of the loop for a whole batch:
        a round trip's remote call, its timer, its fetch and the previous RRef's delete, handed
        off by the application thread while the loop sleeps, cost one self-pipe write and one
        loop iteration (whose frames then leave in one socket write, see Link.send) instead of
        one each. Race-free under the GIL: ``_drain`` clears the flag before it pops, so an
        entry appended while the flag is set is popped by a drain that has not started yet."""
        self._handoffs.append((fn, args))
        if self._drain_pending:
            return
        self._drain_pending = True
        if self.on_loop():
            (self.loop or asyncio.get_running_loop()).call_soon(self._drain)
        else:
            assert self.loop is not None
            post(self.loop, self._drain)

    def _drain(self) -> None:
        self._drain_pending = False
        queue = self._handoffs
        while queue:
            fn, args = queue.popleft()
            fn(*args)

    def emit(self, m: ev.Message, stamp: int, call: fr.CallBody | None = None) -> None:
        """Send a message a step produced, from the thread that stepped (the caller holds the
        lock): links take writes from any thread, so an application or UDF thread does not
        wake the loop to send (``send_frame`` hands the frame to the loop only when the link
        must be dialed first; a retried message then records PENDING until it is written)."""
        self.send_proto(m, stamp, call)

    def send_proto(self, m: ev.Message, stamp: int, call: fr.CallBody | None = None) -> None:
        if m.dst == self.me:  # to self through the loop, never inline: it is a separate step
            self.handoff(self._take_local, m, stamp, call)
            return
        if isinstance(m, ev.RRefFetchRet):
            self._send_value_when_ready(m, stamp)
            return
        if m.type in ev.RETRIED:
            ctl = self.next_id()
            gen = self.send_frame(m.dst, fr.Proto, stamp=stamp, msg=m, ctl=ctl)
            self.unacked[ctl] = (m, gen)
            return
        self.send_frame(m.dst, fr.Proto, stamp=stamp, msg=m, call=call)

    def _send_value_when_ready(self, m: ev.RRefFetchRet, stamp: int) -> None:
        # retrieveOwnerRRef replies once the OwnerRRef's value future has completed.
        box = self.boxes.get(m.rref)
        if box is None:
            result = fr.Result(ok=False, error_type="RPCError", error=f"no value for {m.rref}")
            self.send_frame(m.dst, fr.Proto, stamp=stamp, msg=m, result=result)
            return

        def ready(done: cf.Future[Any]) -> None:
            result = self._result_of(done, m.dst, allow_rrefs=False)
            self.send_frame(m.dst, fr.Proto, stamp=stamp, msg=m, result=result)

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

    def _take_local(self, m: ev.Message, stamp: int, call: fr.CallBody | None) -> None:
        with self.lock:
            self.take(self.me, m, stamp, call, None)

    # ------------------------------------------------------------------ encoding RRefs

    def encode(self, value: Any, dst: WorkerId, path: str) -> tuple[Any, tuple[ev.PythonCall, ...]]:
        (data,), forks = self.encode_parts([(value, path)], dst)
        return data, forks

    def encode_parts(
        self, parts: Sequence[tuple[Any, str]], dst: WorkerId
    ) -> tuple[list[Any], tuple[ev.PythonCall, ...]]:
        """Encode payload parts for ``dst``; their RRefs are forked (``PrepareChildFork``) only
        after every part encoded and every fork was dry-run on a copy of the state, so a
        refused payload leaves no pending child behind."""
        with self.lock:  # the dry run and the forks see one state
            return self._encode_parts(parts, dst)

    def _encode_parts(
        self, parts: Sequence[tuple[Any, str]], dst: WorkerId
    ) -> tuple[list[Any], tuple[ev.PythonCall, ...]]:
        found: list[RRef[Any]] = []

        def on_rref(h: Any) -> int:
            if h._agent is not self.agent:
                raise CodecError(f"{h!r} belongs to worker {h._agent.name}, not {self.me}")
            found.append(h)
            return len(found) - 1

        datas = [
            encode_value(v, self.codecs, on_rref, path=p, is_rref=lambda x: isinstance(x, RRef))
            for v, p in parts
        ]
        inputs = [
            ev.PrepareChildFork(dst=dst, r=h.rref_id, parent=h.fork_id or h.rref_id) for h in found
        ]
        scratch = self.ctx
        for inp in inputs:
            scratch = core_step(scratch, inp).state
        forks: list[ev.PythonCall] = []
        for inp in inputs:
            sent = self.apply(inp, send=False).sent
            forks += [m for m in sent if isinstance(m, ev.PythonCall)]
        return datas, tuple(forks)

    def decode(self, data: Any, forks: Sequence[ev.PythonCall], stamp: int, path: str) -> Any:
        handles = [self.unpickle(m, stamp) for m in forks]
        return decode_value(data, self.codecs, lambda i: handles[i], path=path)

    def decode_call(self, body: fr.CallBody, stamp: int) -> tuple[list[Any], dict[str, Any]]:
        handles = [self.unpickle(m, stamp) for m in body.forks]
        args = decode_value(body.args, self.codecs, lambda i: handles[i], path="args")
        kwargs = decode_value(body.kwargs, self.codecs, lambda i: handles[i], path="kwargs")
        return list(args), dict(kwargs)

    def encode_call(
        self, fn: str, args: Sequence[Any], kwargs: dict[str, Any], dst: WorkerId
    ) -> fr.CallBody:
        (a, k), forks = self.encode_parts([(list(args), "args"), (dict(kwargs), "kwargs")], dst)
        return fr.CallBody(fn=fn, args=a, kwargs=k, forks=forks)

    def unpickle(self, m: ev.PythonCall, stamp: int) -> RRef[Any]:
        """``GetOrCreateRRef``: an RRef received in a call or reply becomes a handle here."""
        self.apply(m, stamp)
        if m.owner == self.me:
            box = self.boxes.get(m.rref)
            if box is None:
                box = cf.Future()
                box.set_exception(RemoteError("RPCError", f"OwnerRRef {m.rref} no longer exists"))
            return RRef._owner_side(self.agent, m.rref, box, held=False)
        return RRef._user_side(self.agent, m.owner, m.rref, m.fork)

    def _result_of(self, done: cf.Future[Any], dst: WorkerId, *, allow_rrefs: bool) -> fr.Result:
        exc = done.exception()
        if exc is not None:
            return _error_result(exc)
        try:
            if allow_rrefs:
                value, forks = self.encode(done.result(), dst, "result")
                return fr.Result(ok=True, value=value, forks=forks)
            value = encode_value(
                done.result(),
                self.codecs,
                None,
                path="result",
                is_rref=lambda v: isinstance(v, RRef),
            )
            return fr.Result(ok=True, value=value)
        except (ProtocolError, Exception) as err:  # the result is refused, not the link
            return _error_result(err)

    def outcome(self, result: fr.Result, stamp: int, target: cf.Future[Any] | None) -> None:
        if result.ok:
            value = self.decode(result.value, result.forks, stamp, "result")
            if target is not None and not target.done():
                target.set_result(value)
        elif target is not None and not target.done():
            target.set_exception(RemoteError(result.error_type, result.error))

    # ------------------------------------------------------------------ incoming

    def on_frame(self, peer: WorkerId, frame: fr.Frame, ack: Callable[[int], None]) -> None:
        self.apply_drops()
        try:
            with self.lock:
                self._dispatch(peer, frame, ack)
        except ProtocolError as err:  # the core refused: its state is unchanged
            self.protocol_errors.append(err)
            log.warning("%s: frame %s from %s refused: %s", self.me, frame.kind, peer, err)

    def _dispatch(self, peer: WorkerId, frame: fr.Frame, ack: Callable[[int], None]) -> None:
        if isinstance(frame, fr.Proto):
            if frame.msg.src != peer or frame.msg.dst != self.me:
                raise ProtocolError(
                    self.me,
                    "Receive",
                    f"{frame.msg.type} from {frame.msg.src} to "
                    f"{frame.msg.dst} arrived on {peer}'s link",
                )
            if frame.ctl is not None:
                seen = self.processed.setdefault(peer, set())
                if frame.ctl in seen:  # a copy already applied: ack again, apply nothing
                    ack(frame.ctl)
                    return
                self.take(peer, frame.msg, frame.stamp, frame.call, frame.result)
                seen.add(frame.ctl)
                ack(frame.ctl)
                return
            self.take(peer, frame.msg, frame.stamp, frame.call, frame.result)
        elif isinstance(frame, fr.Ack):
            self._merge(frame.stamp)
            for ctl in frame.ctls:
                self.unacked.pop(ctl, None)
            self.on_step()
        elif isinstance(frame, fr.UserCall):
            self._merge(frame.stamp)
            self._user_call(peer, frame)
        elif isinstance(frame, fr.UserReply):
            self._merge(frame.stamp)
            self.outcome(frame.result, frame.stamp, self.calls.pop(frame.call_id, None))
            self.on_step()
        elif isinstance(frame, fr.Refetch):
            self._merge(frame.stamp)
            self._refetch(peer, frame)
        else:
            raise ProtocolError(self.me, "Receive", f"unexpected {frame.kind} frame from {peer}")

    def _merge(self, stamp: int) -> None:
        self.clock.lamport = max(self.clock.lamport, stamp)

    def take(
        self,
        peer: WorkerId,
        m: ev.Message,
        stamp: int,
        call: fr.CallBody | None,
        result: fr.Result | None,
    ) -> None:
        """A protocol message taken from the inbox."""
        if isinstance(m, ev.PythonRemoteCall):
            self._remote_call(m, stamp, call)
        elif isinstance(m, ev.RRefFetchRet):
            self.apply(m, stamp)
            target = self.fetches.pop(m.fork, None)
            if result is None:
                result = fr.Result(
                    ok=False, error_type="RPCError", error="fetch reply without value"
                )
            self.outcome(result, stamp, target)
        elif isinstance(m, ev.PythonCall):
            raise ProtocolError(self.me, "GetOrCreateRRef", "PYTHON_CALL outside a call or reply")
        else:
            self.apply(m, stamp)

    def _remote_call(self, m: ev.PythonRemoteCall, stamp: int, call: fr.CallBody | None) -> None:
        if call is None:
            raise ProtocolError(self.me, "AssignOwnerRRef", "PYTHON_REMOTE_CALL without a call")
        r = m.rref
        self.boxes.setdefault(r, cf.Future())
        self.computing.add(r)
        try:
            args, kwargs = self.decode_call(call, stamp)
            fn = resolve(call.fn)
        except Exception as err:  # the UDF fails before it runs: stored in the RRef, as PyTorch
            udf: cf.Future[Any] = cf.Future()
            udf.set_exception(err)
        else:
            udf = self.run_udf(lambda: fn(*args, **kwargs))
        self.when_done(udf, self._remote_done, m, stamp)

    def _remote_done(self, m: ev.PythonRemoteCall, stamp: int, done: cf.Future[Any]) -> None:
        # Usually on the UDF's thread: REMOTE_RET and the waiting fetch's reply leave in one
        # write (corked), straight from here.
        with corked(), self.lock:
            self._assign(m, stamp, done)

    def _assign(self, m: ev.PythonRemoteCall, stamp: int, done: cf.Future[Any]) -> None:
        box = self.boxes.get(m.rref)
        self.computing.discard(m.rref)
        try:
            self.apply(m, stamp)
        finally:
            # The value is stored once assignOwnerRRef ran (under the lock, nobody sees the
            # difference), so a fetch waiting for it replies after REMOTE_RET, as before.
            if box is not None and not box.done():
                exc = done.exception()
                if exc is None:
                    box.set_result(done.result())
                else:
                    box.set_exception(
                        exc
                        if isinstance(exc, RemoteError)
                        else RemoteError(type(exc).__qualname__, str(exc))
                    )

    def _user_call(self, peer: WorkerId, frame: fr.UserCall) -> None:
        body = frame.body
        try:
            args, kwargs = self.decode_call(body, frame.stamp)
            fn = resolve(body.fn)
        except Exception as err:
            udf: cf.Future[Any] = cf.Future()
            udf.set_exception(err)
        else:
            udf = self.run_udf(lambda: fn(*args, **kwargs))

        def reply(done: cf.Future[Any]) -> None:
            result = self._result_of(done, peer, allow_rrefs=True)
            self.send_frame(
                peer, fr.UserReply, stamp=self.clock.lamport, call_id=frame.call_id, result=result
            )

        self.when_done(udf, reply)

    def _refetch(self, peer: WorkerId, frame: fr.Refetch) -> None:
        r = Gid(*frame.rref)
        box = self.boxes.get(r)

        def reply(done: cf.Future[Any]) -> None:
            result = self._result_of(done, peer, allow_rrefs=False)
            self.send_frame(
                peer, fr.UserReply, stamp=self.clock.lamport, call_id=frame.call_id, result=result
            )

        if box is None:
            box = cf.Future()
            box.set_exception(RemoteError("RPCError", f"{self.me} holds no OwnerRRef {r}"))
        self.when_done(box, reply)

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
        self._sweep_wanted = False  # before looking, as _check_deadlines
        self.apply_drops()

    def apply_drops(self) -> None:
        """Apply the queued drops (DropRRef / DropOwnerRRef, and the DelUser they allow)."""
        if self._drops:
            with self.lock:
                while self._drops:
                    fn, g = self._drops.popleft()
                    fn(g)

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
