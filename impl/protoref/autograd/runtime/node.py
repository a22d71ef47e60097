"""One worker's distributed autograd: the core's container driven by real threads.

:class:`AutogradNode` holds a worker's :class:`~protoref.autograd.core.state.Container` and the
engine's values of its contexts (:class:`~protoref.autograd.runtime.contextdata.ContextData`) under
one lock, applies the core's transitions for the application's calls
(:mod:`protoref.autograd.runtime.api`) and for what arrives, logs one trace event per transition,
and hands what a step sends to the RPC layer (a wrapped call or reply carries the spec's message in
its frame) or to its :class:`Transport` (cleanups, the backward pass's messages). After
every step it lets the protocol progress as far as it can: recv functions whose consumers have
run fire, graph tasks that are complete end, cleanups that waited for a handler run.
Waiting (a release while a handler of the context runs, a backward pass) is on a condition of
the lock.

Threads: each application thread has its own current context (torch's thread-local), numbered
in the order threads first use the worker (the spec's ``Threads``: ``cur[w][t]``). A
request's UDF runs under the caller's context (``DistAutogradContextGuard``): the RPC layer
calls :meth:`AutogradNode.guard` around it, and calls the UDF makes are nested calls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Final, Protocol

from protoref.autograd.core import echo as bw
from protoref.autograd.core import forward as fw
from protoref.autograd.core.events import Msg
from protoref.autograd.core.ids import MAX_LOCAL_ID, WORKER_BITS, AutogradId, from_int
from protoref.autograd.core.state import Container, Handler
from protoref.autograd.core.transition import NotYetError, Step
from protoref.autograd.runtime.contextdata import ContextData
from protoref.autograd.runtime.engine import (
    FREED,
    RecvRpcBackward,
    SendRpcBackward,
    Tensor,
    check_not_freed,
    reachable_recvs,
    run_local,
)
from protoref.autograd.runtime.frames import AutogradFrame, AutogradMeta, control_frame
from protoref.autograd.runtime.payload import grad_tensors
from protoref.autograd.trace.args import UnawaitedRpcAsyncArgs
from protoref.autograd.trace.events import make_event
from protoref.errors import ProtocolError
from protoref.tracing import NodeClock, NullSink, TraceSink

__all__ = ["AutogradNode", "Refused", "Transport", "Wrapped"]

#: How long a backward pass or a release may wait before it reports being stuck (torch waits
#: for ever; the Reference's pass always ends, so this only turns a bug into an error).
WAIT_SECONDS: Final = 300.0
NOT_FOUND: Final = "Could not find autograd context with id: {}"


class Transport(Protocol):
    """Where a worker's cleanups and backward-pass messages go (fire and forget; cleanups are
    retried until acknowledged by the transport). A transport may also offer ``batch()``, a
    context manager that sends what is sent inside it together (one write per peer)."""

    def send(self, dst: int, frame: AutogradFrame) -> None: ...


class Wrapped:
    """A call the current thread makes under a context: its message, to put in the frame."""

    __slots__ = ("meta", "tensors")

    def __init__(self, meta: AutogradMeta, tensors: list[Tensor]) -> None:
        self.meta = meta
        self.tensors = tensors


class Refused(Exception):  # noqa: N818 - a request the callee refuses, not an error of ours
    """The callee refuses a request (a context it released: the Reference's tombstone); the
    RPC layer answers with this error and the message :attr:`meta`."""

    def __init__(self, meta: AutogradMeta, context: AutogradId) -> None:
        self.meta = meta
        super().__init__(NOT_FOUND.format(context.to_int()))


class AutogradNode:
    """Distributed autograd on worker ``rank`` (``DistAutogradContainer`` and ``DistEngine``)."""

    def __init__(self, rank: int, transport: Transport, sink: TraceSink | None = None) -> None:
        if not 0 <= rank < (1 << 15):
            raise ValueError(f"a worker id is below 2^15 (torch's int16), got {rank}")
        self.rank = rank
        self.transport = transport
        self.sink: TraceSink = sink if sink is not None else NullSink()
        self.node_name = str(rank)
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._ctn = Container(me=rank)
        self._data: dict[AutogradId, ContextData] = {}
        self._clock = NodeClock()
        self._local = threading.local()
        self._threads = 0
        self._deferred: list[tuple[Msg, int]] = []
        #: The workers the RPC layer's failure detector declared dead (the spec's ``~alive``
        #: as the survivors see it, with ``Detect``).
        self._dead: set[int] = set()

    # ------------------------------------------------------------------ reading

    @property
    def container(self) -> Container:
        return self._ctn

    def max_id(self) -> int:
        """``_get_max_id()``: the largest id this worker may draw."""
        return (self.rank << WORKER_BITS) + MAX_LOCAL_ID

    def debug_info(self) -> dict[str, int]:
        """``_get_debug_info()``: torch's two counters."""
        with self._lock:
            running = sum(1 for _, _, s in self._ctn.bstate if s in ("run", "err"))
            return {
                "num_autograd_contexts": len(self._ctn.ctxs),
                "num_current_backward_passes": running,
            }

    def is_held(self, c: AutogradId) -> bool:
        with self._lock:
            return c in self._ctn.ctxs

    def check_held(self, c: AutogradId) -> None:
        if not self.is_held(c):
            raise RuntimeError(NOT_FOUND.format(c.to_int()))

    def current(self) -> AutogradId | None:
        """The calling thread's context: its own, or the one a request runs under."""
        guard = self._guard()
        if guard is not None:
            return guard[0]
        with self._lock:
            return self._ctn.threads.get(self._thread())

    def gradients(self, c: AutogradId) -> dict[Tensor, Tensor]:
        with self._lock:
            self.late_call(c)
            data = self._data.get(c)
            if data is None or c not in self._ctn.ctxs:
                raise RuntimeError(NOT_FOUND.format(c.to_int()))
            return data.gradients()

    def functions(
        self, c: AutogradId
    ) -> tuple[dict[int, SendRpcBackward], dict[int, RecvRpcBackward], set[int]]:
        """A context's send and recv functions by message id, and its known workers."""
        with self._lock:
            self.check_held(c)
            data = self._data[c]
            sends = {m.to_int(): f for m, f in data.sends.items()}
            recvs = {m.to_int(): f for m, f in data.recvs.items()}
            return sends, recvs, set(self._ctn.known_of(c))

    # ------------------------------------------------------------------ threads

    def _thread(self) -> int:
        t: int | None = getattr(self._local, "t", None)
        if t is None:
            with self._lock:
                t = self._threads
                self._threads += 1
            self._local.t = t
        return t

    def _guard(self) -> tuple[AutogradId, AutogradId] | None:
        stack: list[tuple[AutogradId, AutogradId]] = getattr(self._local, "guards", [])
        return stack[-1] if stack else None

    def _handler(self, key: tuple[AutogradId, AutogradId]) -> Handler:
        for h in self._ctn.handlers:
            if (h.ctx, h.req) == key:
                return h
        raise RuntimeError(f"the request {key[1]} of context {key[0]} is no longer running")

    # ------------------------------------------------------------------ steps

    def _commit(self, step: Step, stamp: int | None = None) -> int:
        """Apply ``step`` (taking a message stamped ``stamp``, or a local step): the new state,
        the clock, the trace event; returns the event's Lamport time (the stamp of what it
        sends)."""
        before = self._ctn
        self._ctn = step.state
        seq, lamport = self._clock.local() if stamp is None else self._clock.receive(stamp)
        if self.sink.enabled:
            self.sink.emit(
                make_event(step.action, self.node_name, seq, lamport, step.state, before)
            )
        for c in before.ctxs - step.state.ctxs:
            self._data.pop(c, None)
        return lamport

    def _send_control(
        self, step: Step, lamport: int, grads: dict[AutogradId, tuple[float, ...]] | None = None
    ) -> None:
        for m in step.sent:
            data = self._data.get(m.ctx)
            frame = control_frame(
                m,
                lamport,
                (grads or {}).get(m.mid, ()) if m.mid is not None else (),
                max(data.pass_no, 1) if data is not None else 1,
                data.retain_graph if data is not None else False,
                data.error if (data is not None and m.type == "BWD_ACK") else "",
            )
            self.transport.send(m.dst, frame)

    def _batch(self) -> AbstractContextManager[object]:
        """The transport's batching of what one step sends (one write per peer), if any."""
        batch = getattr(self.transport, "batch", None)
        return nullcontext() if batch is None else batch()

    def _data_of(self, c: AutogradId) -> ContextData:
        data = self._data.get(c)
        if data is None:
            data = self._data[c] = ContextData(c)
        return data

    def _progress(self) -> None:
        """Everything the protocol can do now without an input: fire ready recv functions,
        end complete graph tasks, run cleanups that waited for a handler."""
        moved = True
        while moved:
            moved = False
            for c, _, state in sorted(self._ctn.bstate):
                if state not in ("run", "err") or c not in self._ctn.ctxs:
                    continue
                for r in bw.ready_recvs(self._ctn, c):
                    recv = self._data_of(c).recvs.get(r.mid)
                    values = tuple(recv.grads) if recv is not None else ()
                    step = bw.recv_rpc_backward_apply(self._ctn, c, r)
                    self._send_control(step, self._commit(step), {r.mid: values})
                    moved = True
                dead = frozenset(self._dead)
                if bw.complete(self._ctn, c, dead):
                    step = bw.cleanup_backward_pass(self._ctn, c, dead)
                    self._data_of(c).free_ran()  # the part of the pass is over
                    self._send_control(step, self._commit(step))
                    moved = True
            moved = self._release_orphans() or moved
            waiting, self._deferred = self._deferred, []
            for msg, stamp in waiting:
                try:
                    step = fw.process_cleanup_autograd_context_req(self._ctn, msg)
                except NotYetError:
                    self._deferred.append((msg, stamp))
                    continue
                self._send_control(step, self._commit(step, stamp))
                moved = True
        self._changed.notify_all()

    def _release_orphans(self) -> bool:
        """``ReleaseOrphanedContext``: erase each context whose creator died, once no
        handler of it runs here (the Reference's "orphan"); True if one was released."""
        moved = False
        if not self._dead:
            return moved
        for c in sorted(self._ctn.ctxs):
            if c.worker not in self._dead or c.worker == self.rank:
                continue
            try:
                step = fw.release_orphaned_context(self._ctn, c, creator_dead=True)
            except NotYetError:  # a handler of it still runs here: after it (defer)
                continue
            self._send_control(step, self._commit(step))
            moved = True
        return moved

    def peer_died(self, rank: int, name: str) -> None:
        """The failure detector declared worker ``rank`` (``name``) dead (``Crash(w)`` with
        ``Detect``, as a survivor sees it): each graph task here whose flood child it was gets
        the failed ``BWD_ACK`` the agents make up for it (an error naming it, so the root's
        backward raises), send functions whose recv functions died with it count as run
        (``Complete``), and contexts it created are released here (``ReleaseOrphanedContext``)."""
        with self._lock:
            if rank == self.rank or rank in self._dead:
                return
            self._dead.add(rank)
            self._commit(fw.peer_died(self._ctn, rank))
            for c, child in sorted(self._ctn.echo_wait):
                if child != rank or not self._ctn.running(c):
                    continue
                data = self._data.get(c)
                if data is not None and not data.error:
                    data.error = (
                        f"Error on Node {self.rank}: worker {name} (rank {rank}) died during "
                        f"the backward pass of context {c.to_int()}"
                    )
                ack = Msg.bwd("BWD_ACK", c, None, self._ctn.pass_of(c), rank, self.rank, False)
                self._commit(bw.process_backward_ack(self._ctn, ack))
            self._progress()

    def _wait(self, ready: object, what: str) -> None:
        deadline = time.monotonic() + WAIT_SECONDS
        while not ready():  # type: ignore[operator]
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(
                    f"worker {self.rank}: {what} did not finish in {WAIT_SECONDS:.0f} s"
                )
            self._changed.wait(min(left, 1.0))

    # ------------------------------------------------------------------ application

    def new_context(self) -> AutogradId:
        """``_new_context``: a context current for the calling thread (refused inside a UDF,
        whose thread runs under its caller's context, as torch's guard makes it)."""
        if self._guard() is not None:
            raise RuntimeError(fw.ALREADY_HAVE)
        with self._lock:
            t = self._thread()
            if t in self._ctn.threads:  # NewContextRefused: traced, then torch's error
                self._commit(self._step(fw.new_context_refused, self._ctn, t))
                raise RuntimeError(fw.ALREADY_HAVE)
            step = self._step(fw.new_context, self._ctn, t)
            self._commit(step)
            c = step.state.threads[self._thread()]
            self._data[c] = ContextData(c)
            return c

    def release(self, c: AutogradId) -> None:
        """``_release_context``: erase ``c`` here and send the cleanups; waits for this
        worker's running handlers of it (the Reference's "defer")."""
        with self._lock:
            t = self._thread()

            def step_now() -> Step | None:
                try:
                    return fw.release_context(self._ctn, c, t)
                except NotYetError:
                    return None
                except ProtocolError as exc:
                    raise RuntimeError(exc.reason) from None

            found: list[Step] = []

            def ready() -> bool:
                step = step_now()
                if step is not None:
                    found.append(step)
                return step is not None

            self._wait(ready, f"releasing context {c.to_int()}")
            step = found[-1]
            self._send_control(step, self._commit(step))
            self._progress()

    @staticmethod
    def _step(fn: object, *args: object) -> Step:
        try:
            return fn(*args)  # type: ignore[operator, no-any-return]
        except ProtocolError as exc:
            raise RuntimeError(exc.reason) from None

    def backward(self, c: AutogradId, roots: Sequence[Tensor], retain_graph: bool) -> None:
        """``dist_autograd.backward``: pass ``p`` of ``c`` starts here (``DistEngineExecute``),
        this worker's root runs, the flood starts, and the call returns when every worker's
        part of the pass is over (Echo); it raises if a part failed. A pass over a graph an
        earlier pass freed fails at once and adds nothing."""
        with self._lock:
            self.late_call(c)
            starts = [t.grad_fn for t in roots if t.grad_fn is not None]
            self._wait(lambda: not self._ctn.pending_of(c), "the context's calls")
            data = self._data_of(c)
            if self._ctn.running(c):
                raise RuntimeError(f"a backward pass of context {c.to_int()} is running")
            t = self._thread()
            step = self._step(bw.dist_engine_execute, self._ctn, c, t, retain_graph)
            p = step.state.pass_of(c)
            if step.state.task_in(c, "fail"):  # the graph was freed
                self._commit(step)
                raise RuntimeError(f"Error on Node {self.rank}: {FREED}")
            try:
                check_not_freed(starts)
            except RuntimeError:  # an engine graph freed outside the spec's view (no event)
                raise RuntimeError(f"Error on Node {self.rank}: {FREED}") from None
            data.new_pass(p, retain_graph)
            with self._batch():  # the flood and the first gradient requests in one write
                lamport = self._commit(step)
                self._run_local(c, [(s, 1.0) for s in starts])
                self._send_control(step, lamport)
                self._progress()

            def over() -> bool:
                return c not in self._ctn.ctxs or not self._ctn.running(c)

            self._wait(over, f"the backward pass of context {c.to_int()}")
            if (c, p, "fail") in self._ctn.results:
                error = data.error or f"the backward pass of context {c.to_int()} failed"
                raise RuntimeError(
                    error
                    if error.startswith("Error on Node")
                    else f"Error on Node {self.rank}: {error}"
                )

    def _run_local(self, c: AutogradId, starts: list[tuple[object, float]]) -> None:
        """The engine's part of a step: run the local graph from ``starts``; an error of a
        backward function fails the graph task (``BackwardError``), remembered for the root."""
        data = self._data_of(c)
        try:
            run_local(
                starts,  # type: ignore[arg-type]
                data.accumulate,
                retain_graph=data.retain_graph,
                release=data.ran_node,
            )
        except (RuntimeError, ValueError) as exc:
            if not data.error:
                data.error = f"Error on Node {self.rank}: {exc}"
            if self._ctn.task_in(c, "run"):
                self._commit(bw.backward_error(self._ctn, c))

    def late_call(self, c: AutogradId) -> None:
        """``backward`` / ``get_gradients`` begin with ``retrieveContext``: for a context this
        worker created and released, the first such call is the spec's ``RetrieveContext``
        (#40880); it raises torch's error, as for any id not held here."""
        with self._lock:
            if c in self._ctn.ctxs:
                return
            if c.worker == self.rank and self._ctn.refused(c) and c not in self._ctn.late:
                self._commit(fw.retrieve_context(self._ctn, c))
            raise RuntimeError(NOT_FOUND.format(c.to_int()))

    # ------------------------------------------------------------------ RPC: the caller

    def wrap_request(self, dst: int, args: object) -> Wrapped | None:
        """A call the calling thread makes: wrapped if it runs under a context (torch forces
        recording for every Python UDF); a send function for the tensors that require grad."""
        guard = self._guard()
        with self._lock:
            # a request's UDF calls under its guard; only application threads get a number
            t = -1 if guard is not None else self._thread()
            if guard is None and t not in self._ctn.threads:
                return None
            tensors = grad_tensors(args)
            grad = bool(tensors)
            if guard is not None:
                h = self._handler(guard)
                if h.wait is not None:  # an earlier rpc_async of this UDF is unanswered
                    self._unawaited(h)
                extra = reachable_recvs(tensors, h.ctx)
                h = self._fetch_stored(h, extra)
                step = self._step(
                    fw.nested_send_message_with_autograd, self._ctn, h, dst, grad, True, extra
                )
                c = h.ctx
            else:
                c = self._ctn.threads[t]
                extra = reachable_recvs(tensors, c)
                step = self._step(fw.send_message_with_autograd, self._ctn, dst, grad, t, extra)
            (msg,) = step.sent
            lamport = self._commit(step)
            if grad and msg.mid is not None:
                self._data_of(c).sends[msg.mid] = SendRpcBackward(c, msg.mid, tensors)
            self._progress()
            return Wrapped(AutogradMeta.of(msg, lamport), tensors)

    def on_answer(self, request: Wrapped, meta: AutogradMeta | None, result: object) -> None:
        """The answer to a wrapped call arrived (``deserializeResponse``): a wrapped answer's
        tensors become outputs of a recv function (unless the context was released here: the
        tombstone drops the autograd part); ``meta`` None is an answer made up by the RPC layer
        for a call that failed before the callee answered."""
        with self._lock:
            if meta is None:  # the agent failed the future without an answer
                req = request.meta.msg.req
                if req is not None and self._ctn.someone_waits(request.meta.msg.ctx, req):
                    self._commit(self._step(fw.poll_timeout_rpcs, self._ctn, req))
                self._progress()
                return
            msg, stamp = meta.msg, meta.stamp
            if not self._ctn.someone_waits(msg.ctx, msg.req):  # its future is gone: dropped
                from protoref.autograd.trace import args as a  # noqa: PLC0415 - only on this rare path

                self._commit(Step(self._ctn, (), a.DiscardArgs.of(msg=msg)), stamp)
                return
            if msg.type == "FWD_RESP":
                # an answer to a call after the context's pass misses that pass's loss (the
                # spec's ForwardAfterPass); any other may feed it (divergence 65)
                after = (msg.ctx, msg.req) in self._ctn.pending and self._ctn.started(msg.ctx)
                step = self._step(fw.deserialize_forward_autograd_resp, self._ctn, msg, not after)
                if msg.mid is not None and any(
                    r.mid == msg.mid for r in step.state.recvs_of(msg.ctx)
                ):
                    self._attach(msg.ctx, msg.mid, msg.src, result)
            else:
                step = self._step(fw.deserialize_response, self._ctn, msg)
            self._commit(step, stamp)
            self._progress()

    def _attach(self, c: AutogradId, mid: AutogradId, src: int, value: object) -> None:
        tensors = grad_tensors(value)
        recv = RecvRpcBackward(c, mid, src, len(tensors))
        for t, out in zip(tensors, recv.outputs, strict=True):
            t.grad_fn = out
            t.requires_grad = True
        self._data_of(c).recvs[mid] = recv

    # ------------------------------------------------------------------ RPC: the callee

    def on_request(self, meta: AutogradMeta, args: object) -> tuple[AutogradId, AutogradId]:
        """A wrapped request arrived (``processForwardAutogradReq``): the context is created
        here if need be, the tensors become outputs of a recv function; returns the key of the
        handler to run the UDF under (:meth:`guard`). Raises :class:`Refused` for a context
        this worker released."""
        msg = meta.msg
        with self._lock:
            step = self._step(fw.process_forward_autograd_req, self._ctn, msg)
            lamport = self._commit(step, meta.stamp)
            if step.sent:  # the tombstone refused it
                (refusal,) = step.sent
                raise Refused(AutogradMeta.of(refusal, lamport), msg.ctx)
            if msg.flag and msg.mid is not None:
                self._attach(msg.ctx, msg.mid, msg.src, args)
            if msg.mid is None:
                raise RuntimeError("a wrapped request without a message id")
            return msg.ctx, msg.mid

    @contextmanager
    def guard(self, key: tuple[AutogradId, AutogradId]) -> Iterator[None]:
        """``DistAutogradContextGuard``: the UDF of request ``key`` runs under its context."""
        stack: list[tuple[AutogradId, AutogradId]] = getattr(self._local, "guards", None) or []
        self._local.guards = stack
        stack.append(key)
        try:
            yield
        finally:
            stack.pop()

    def finish_request(
        self, key: tuple[AutogradId, AutogradId], result: object, raised: bool
    ) -> AutogradMeta:
        """The UDF returned (or raised): the answer, wrapped if its tensors require grad."""
        with self._lock:
            h = self._handler(key)
            if h.wait is not None:  # the UDF returned with its rpc_async unanswered
                h = self._unawaited(h)
                raised = True
            tensors = [] if raised else grad_tensors(result)
            extra = reachable_recvs(tensors, h.ctx)
            if raised and not h.err:  # the UDF itself raised: UdfRaises, then the error answer
                h = self._udf_raised(h)
            h = self._fetch_stored(h, extra)
            step = fw.finish_forward_autograd_req(self._ctn, h, bool(tensors), extra, raised=raised)
            (answer,) = step.sent
            lamport = self._commit(step)
            if answer.type == "FWD_RESP" and answer.mid is not None:
                self._data_of(h.ctx).sends[answer.mid] = SendRpcBackward(h.ctx, answer.mid, tensors)
            self._progress()  # a cleanup may have waited for this handler
            return AutogradMeta.of(answer, lamport)

    def _fetch_stored(self, h: Handler, extra: frozenset[AutogradId]) -> Handler:
        """``FetchStoredValue`` for each recv function the handler's outgoing tensors reach
        beyond its request's and its nested answers' (a value an earlier request stored here:
        ``remote``, then ``to_here``); the handler as it is then. Under the lock."""
        known = h.nr | ({h.req} if h.grad else set())
        for mid in sorted(extra - known):
            r = next((x for x in self._ctn.recvs_of(h.ctx) if x.mid == mid), None)
            if r is None or mid == h.req:
                continue  # not a recv function of this worker's context: the spec's formula
            self._commit(self._step(fw.fetch_stored_value, self._ctn, h, r))
            h = self._handler((h.ctx, h.req))
        return h

    def _unawaited(self, h: Handler) -> Handler:
        """The UDF of ``h`` left a nested call unawaited (``h.wait`` still unanswered): logged
        as the shape it is, outside the spec (every nested call was logged as awaited); the
        handler stops waiting and fails, so its answer is an error rather than no answer at
        all. Under the lock."""
        if self.sink.enabled:
            args = UnawaitedRpcAsyncArgs.of(w=self.rank, h=h)
            seq, lamport = self._clock.local()
            self.sink.emit(make_event(args, self.node_name, seq, lamport, self._ctn, self._ctn))
        failed = h.evolve(wait=None, err=True)
        self._ctn = self._ctn.evolve(handlers=(self._ctn.handlers - {h}) | {failed})
        return failed

    def _udf_raised(self, h: Handler) -> Handler:
        """``UdfRaises``: the handler's UDF raised by itself. Under the lock."""
        self._commit(self._step(fw.udf_raises, self._ctn, h))
        return self._handler((h.ctx, h.req))

    # ------------------------------------------------------------------ control frames

    def on_frame(self, frame: AutogradFrame) -> None:
        """A cleanup or a backward-pass message arrived."""
        msg = frame.msg
        with self._lock:
            if msg.dst != self.rank:
                raise ProtocolError(self.node_name, "frame", f"{msg} delivered to {self.rank}")
            if msg.type == "CLEANUP":
                self._deferred.append((msg, frame.stamp))
            elif msg.type in ("BWD_REQ", "BWD_START"):
                self._backward_message(frame)
            elif msg.type == "BWD_ACK":
                data = self._data.get(msg.ctx)
                if data is not None and frame.error and not data.error:
                    data.error = frame.error
                self._commit(bw.process_backward_ack(self._ctn, msg), frame.stamp)
            elif msg.type == "BWD_RESP":
                step = bw.process_backward_autograd_resp(self._ctn, msg)
                self._send_control(step, self._commit(step, frame.stamp))
            else:
                raise ProtocolError(self.node_name, "frame", f"a {msg.type} is no control frame")
            self._progress()

    def _backward_message(self, frame: AutogradFrame) -> None:
        """A ``BWD_START`` or ``BWD_REQ``: the core decides (a stale pass is dropped, a new
        pass's task starts); the engine's values follow: a new task starts its recv functions
        from zero, and a request that applies runs the send function's local graph."""
        msg, c = frame.msg, frame.msg.ctx
        before = self._ctn
        if msg.type == "BWD_START":
            step = bw.process_backward_start(self._ctn, msg)
        else:
            step = bw.process_backward_autograd_req(self._ctn, msg)
        task = step.state.task(c)
        data = self._data.get(c)
        if data is not None and task is not None and task != before.task(c):
            data.new_pass(task[1], frame.retain_graph)
        lamport = self._commit(step, frame.stamp)
        self._send_control(step, lamport)
        mid = msg.mid
        applied = mid is not None and (c, msg.pass_, mid) in step.state.grads - before.grads
        send = data.sends.get(mid) if (data is not None and mid is not None) else None
        if applied and send is not None:
            self._run_local(c, send.roots(frame.grads))  # type: ignore[arg-type]

    def discard(self, frame: AutogradFrame) -> None:
        """``Discard``: a control message to a dead worker; a gradient request's sender then
        gets an error answer (its pass fails)."""
        from protoref.autograd.core.network import discard  # noqa: PLC0415
        from protoref.autograd.trace import args as a  # noqa: PLC0415 - only on this rare path

        with self._lock:
            made = discard(frame.msg, dst_alive=False)
            step = Step(self._ctn, made, a.DiscardArgs.of(msg=frame.msg))
            lamport = self._commit(step)
            for m in made:
                if m.type == "BWD_RESP":
                    answer = bw.process_backward_autograd_resp(self._ctn, m)
                    self._send_control(answer, self._commit(answer, lamport))
                elif m.type == "BWD_ACK":
                    data = self._data.get(m.ctx)
                    if data is not None and not data.error:  # the root's error names it
                        data.error = (
                            f"Error on Node {self.rank}: worker {m.src} cannot be reached: "
                            f"the backward pass of context {m.ctx.to_int()} failed there"
                        )
                    self._commit(bw.process_backward_ack(self._ctn, m), lamport)
            self._progress()


def context_id(value: int) -> AutogradId:
    """A torch context id (an int) as the core's pair."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"a context id is an int, not {type(value).__name__}")
    return from_int(value)
