"""One worker's distributed autograd: the core's container driven by real threads.

:class:`AutogradNode` is composed of two parts over one
:class:`~protoref.autograd.runtime.nodestate.NodeState` (the worker's
:class:`~protoref.autograd.core.state.Container`, the engine's values of its contexts, the lock,
clock and trace sink): itself, the application's calls (:mod:`protoref.autograd.runtime.api`)
and the RPC layer's (a wrapped call or reply carries the spec's message in its frame), and
:class:`~protoref.autograd.runtime.passes.Passes`, the backward passes and the control frames
(cleanups, the backward pass's messages, sent through its
:class:`~protoref.autograd.runtime.nodestate.Transport`). Each applies the core's transitions
and logs one trace event per transition; after every step the protocol progresses as far as it
can (:meth:`Passes.progress`). Waiting (a release while a handler of the context runs, a
backward pass) is on a condition of the lock. Tensors are protoref's scalars or torch's
(:mod:`protoref.autograd.runtime.dispatch`).

Threads: each application thread has its own current context (torch's thread-local), numbered
in the order threads first use the worker (the spec's ``Threads``: ``cur[w][t]``). A
request's UDF runs under the caller's context (``DistAutogradContextGuard``): the RPC layer
calls :meth:`AutogradNode.guard` around it, and calls the UDF makes are nested calls.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from protoref.autograd.core import forward as fw
from protoref.autograd.core.ids import MAX_LOCAL_ID, WORKER_BITS, AutogradId, from_int
from protoref.autograd.core.state import Container, Handler
from protoref.autograd.core.transition import NotYetError, Step
from protoref.autograd.runtime import dispatch
from protoref.autograd.runtime.contextdata import ContextData
from protoref.autograd.runtime.frames import AutogradFrame, AutogradMeta
from protoref.autograd.runtime.nodestate import (
    NOT_FOUND,
    HandlerKey,
    NodeState,
    Refused,
    Transport,
    Wrapped,
)
from protoref.autograd.runtime.passes import Passes
from protoref.autograd.runtime.payload import grad_tensors
from protoref.autograd.trace.args import UnawaitedRpcAsyncArgs
from protoref.autograd.trace.events import make_event
from protoref.errors import ProtocolError
from protoref.tracing import TraceSink

__all__ = ["AutogradNode", "Refused", "Transport", "Wrapped", "context_id"]


class AutogradNode:
    """Distributed autograd on worker ``rank`` (``DistAutogradContainer`` and ``DistEngine``)."""

    def __init__(self, rank: int, transport: Transport, sink: TraceSink | None = None) -> None:
        self._s = NodeState(rank, transport, sink)
        self._passes = Passes(self._s)

    # ------------------------------------------------------------------ reading

    @property
    def rank(self) -> int:
        return self._s.rank

    @property
    def node_name(self) -> str:
        return self._s.node_name

    @property
    def transport(self) -> Transport:
        return self._s.transport

    @property
    def sink(self) -> TraceSink:
        return self._s.sink

    @sink.setter
    def sink(self, sink: TraceSink) -> None:
        self._s.sink = sink

    @property
    def container(self) -> Container:
        return self._s.ctn

    @property
    def _data(self) -> dict[AutogradId, ContextData]:
        return self._s.data

    def max_id(self) -> int:
        """``_get_max_id()``: the largest id this worker may draw."""
        return (self.rank << WORKER_BITS) + MAX_LOCAL_ID

    def debug_info(self) -> dict[str, int]:
        """``_get_debug_info()``: torch's two counters."""
        with self._s.lock:
            ctn = self._s.ctn
            running = sum(1 for _, _, st in ctn.bstate if st in ("run", "err"))
            return {"num_autograd_contexts": len(ctn.ctxs), "num_current_backward_passes": running}

    def is_held(self, c: AutogradId) -> bool:
        with self._s.lock:
            return c in self._s.ctn.ctxs

    def check_held(self, c: AutogradId) -> None:
        if not self.is_held(c):
            raise RuntimeError(NOT_FOUND.format(c.to_int()))

    def current(self) -> AutogradId | None:
        """The calling thread's context: its own, or the one a request runs under."""
        guard = self._s.guard()
        if guard is not None:
            return guard[0]
        with self._s.lock:
            return self._s.ctn.threads.get(self._s.thread())

    def gradients(self, c: AutogradId) -> dict[Any, Any]:
        """``get_gradients``: this worker's leaves of ``c`` and their gradients."""
        with self._s.lock:
            self.late_call(c)
            data = self._s.data.get(c)
            if data is None or c not in self._s.ctn.ctxs:
                raise RuntimeError(NOT_FOUND.format(c.to_int()))
            return data.gradients()

    def functions(
        self, c: AutogradId
    ) -> tuple[dict[int, dispatch.Send], dict[int, dispatch.Recv], set[int]]:
        """A context's send and recv functions by message id, and its known workers."""
        with self._s.lock:
            self.check_held(c)
            data = self._s.data[c]
            sends = {m.to_int(): f for m, f in data.sends.items()}
            recvs = {m.to_int(): f for m, f in data.recvs.items()}
            return sends, recvs, set(self._s.ctn.known_of(c))

    # ------------------------------------------------------------------ application

    def new_context(self) -> AutogradId:
        """``_new_context``: a context current for the calling thread (refused inside a UDF,
        whose thread runs under its caller's context, as torch's guard makes it)."""
        s = self._s
        if s.guard() is not None:
            raise RuntimeError(fw.ALREADY_HAVE)
        with s.lock:
            t = s.thread()
            if t in s.ctn.threads:  # NewContextRefused: traced, then torch's error
                s.commit(s.step(fw.new_context_refused, s.ctn, t))
                raise RuntimeError(fw.ALREADY_HAVE)
            step = s.step(fw.new_context, s.ctn, t)
            s.commit(step)
            c = step.state.threads[t]
            s.data[c] = ContextData(c)
            return c

    def release(self, c: AutogradId) -> None:
        """``_release_context``: erase ``c`` here and send the cleanups; waits for this
        worker's running handlers of it (the Reference's "defer")."""
        s = self._s
        with s.lock:
            t = s.thread()
            found: list[Step] = []

            def ready() -> bool:
                try:
                    found.append(fw.release_context(s.ctn, c, t))
                except NotYetError:
                    return False
                except ProtocolError as exc:
                    raise RuntimeError(exc.reason) from None
                return True

            s.wait(ready, f"releasing context {c.to_int()}")
            step = found[-1]
            s.send_control(step, s.commit(step))
            self._passes.progress()

    def backward(self, c: AutogradId, roots: Sequence[Any], retain_graph: bool) -> None:
        """``dist_autograd.backward`` (:meth:`Passes.backward`)."""
        self._passes.backward(c, roots, retain_graph)

    def late_call(self, c: AutogradId) -> None:
        """``retrieveContext`` of a late call (:meth:`Passes.late_call`)."""
        self._passes.late_call(c)

    # ------------------------------------------------------------------ RPC: the caller

    def wrap_request(self, dst: int, args: object) -> Wrapped | None:
        """A call the calling thread makes: wrapped if it runs under a context (torch forces
        recording for every Python UDF); a send function for the tensors that require grad."""
        s = self._s
        guard = s.guard()
        with s.lock:
            # a request's UDF calls under its guard; only application threads get a number
            t = -1 if guard is not None else s.thread()
            if guard is None and t not in s.ctn.threads:
                return None
            tensors = grad_tensors(args)
            grad = bool(tensors)
            if guard is not None:
                h = s.handler(guard)
                if h.wait is not None:  # an earlier rpc_async of this UDF is unanswered
                    self._unawaited(h)
                extra = dispatch.reachable(tensors, h.ctx)
                h = self._fetch_stored(h, extra)
                step = s.step(
                    fw.nested_send_message_with_autograd, s.ctn, h, dst, grad, True, extra
                )
                c = h.ctx
            else:
                c = s.ctn.threads[t]
                extra = dispatch.reachable(tensors, c)
                step = s.step(fw.send_message_with_autograd, s.ctn, dst, grad, t, extra)
            (msg,) = step.sent
            lamport = s.commit(step)
            if grad and msg.mid is not None:
                s.data_of(c).sends[msg.mid] = dispatch.make_send(c, msg.mid, tensors)
            self._passes.progress()
            return Wrapped(AutogradMeta.of(msg, lamport), tensors)

    def on_answer(self, request: Wrapped, meta: AutogradMeta | None, result: object) -> None:
        """The answer to a wrapped call arrived (``deserializeResponse``): a wrapped answer's
        tensors become outputs of a recv function (unless the context was released here: the
        tombstone drops the autograd part); ``meta`` None is an answer made up by the RPC layer
        for a call that failed before the callee answered."""
        s = self._s
        with s.lock:
            if meta is None:  # the agent failed the future without an answer
                req = request.meta.msg.req
                if req is not None and s.ctn.someone_waits(request.meta.msg.ctx, req):
                    s.commit(s.step(fw.poll_timeout_rpcs, s.ctn, req))
                self._passes.progress()
                return
            msg, stamp = meta.msg, meta.stamp
            if not s.ctn.someone_waits(msg.ctx, msg.req):  # its future is gone: dropped
                from protoref.autograd.trace import args as a  # noqa: PLC0415 - only on this rare path

                s.commit(Step(s.ctn, (), a.DiscardArgs.of(msg=msg)), stamp)
                return
            if msg.type == "FWD_RESP":
                # an answer to a call after the context's pass misses that pass's loss (the
                # spec's ForwardAfterPass); any other may feed it (divergence 65)
                after = (msg.ctx, msg.req) in s.ctn.pending and s.ctn.started(msg.ctx)
                step = s.step(fw.deserialize_forward_autograd_resp, s.ctn, msg, not after)
                if msg.mid is not None and any(
                    r.mid == msg.mid for r in step.state.recvs_of(msg.ctx)
                ):
                    self._attach(msg.ctx, msg.mid, msg.src, result)
            else:
                step = s.step(fw.deserialize_response, s.ctn, msg)
            s.commit(step, stamp)
            self._passes.progress()

    def _attach(self, c: AutogradId, mid: AutogradId, src: int, value: object) -> None:
        self._s.data_of(c).recvs[mid] = dispatch.attach(c, mid, src, grad_tensors(value))

    # ------------------------------------------------------------------ RPC: the callee

    def on_request(self, meta: AutogradMeta, args: object) -> HandlerKey:
        """A wrapped request arrived (``processForwardAutogradReq``): the context is created
        here if need be, the tensors become outputs of a recv function; returns the key of the
        handler to run the UDF under (:meth:`guard`). Raises :class:`Refused` for a context
        this worker released."""
        s = self._s
        msg = meta.msg
        with s.lock:
            step = s.step(fw.process_forward_autograd_req, s.ctn, msg)
            lamport = s.commit(step, meta.stamp)
            if step.sent:  # the tombstone refused it
                (refusal,) = step.sent
                raise Refused(AutogradMeta.of(refusal, lamport), msg.ctx)
            if msg.flag and msg.mid is not None:
                self._attach(msg.ctx, msg.mid, msg.src, args)
            if msg.mid is None:
                raise RuntimeError("a wrapped request without a message id")
            return msg.ctx, msg.mid

    @contextmanager
    def guard(self, key: HandlerKey) -> Iterator[None]:
        """``DistAutogradContextGuard``: the UDF of request ``key`` runs under its context."""
        local = self._s.local
        stack: list[HandlerKey] = getattr(local, "guards", None) or []
        local.guards = stack
        stack.append(key)
        try:
            yield
        finally:
            stack.pop()

    def finish_request(self, key: HandlerKey, result: object, raised: bool) -> AutogradMeta:
        """The UDF returned (or raised): the answer, wrapped if its tensors require grad."""
        s = self._s
        with s.lock:
            h = s.handler(key)
            if h.wait is not None:  # the UDF returned with its rpc_async unanswered
                h = self._unawaited(h)
                raised = True
            tensors = [] if raised else grad_tensors(result)
            extra = dispatch.reachable(tensors, h.ctx)
            if raised and not h.err:  # the UDF itself raised: UdfRaises, then the error answer
                h = self._udf_raised(h)
            h = self._fetch_stored(h, extra)
            step = fw.finish_forward_autograd_req(s.ctn, h, bool(tensors), extra, raised=raised)
            (answer,) = step.sent
            lamport = s.commit(step)
            if answer.type == "FWD_RESP" and answer.mid is not None:
                s.data_of(h.ctx).sends[answer.mid] = dispatch.make_send(h.ctx, answer.mid, tensors)
            self._passes.progress()  # a cleanup may have waited for this handler
            return AutogradMeta.of(answer, lamport)

    def _fetch_stored(self, h: Handler, extra: frozenset[AutogradId]) -> Handler:
        """``FetchStoredValue`` for each recv function the handler's outgoing tensors reach
        beyond its request's and its nested answers' (a value an earlier request stored here:
        ``remote``, then ``to_here``); the handler as it is then. Under the lock."""
        s = self._s
        known = h.nr | ({h.req} if h.grad else set())
        for mid in sorted(extra - known):
            r = next((x for x in s.ctn.recvs_of(h.ctx) if x.mid == mid), None)
            if r is None or mid == h.req:
                continue  # not a recv function of this worker's context: the spec's formula
            s.commit(s.step(fw.fetch_stored_value, s.ctn, h, r))
            h = s.handler((h.ctx, h.req))
        return h

    def _unawaited(self, h: Handler) -> Handler:
        """The UDF of ``h`` left a nested call unawaited (``h.wait`` still unanswered): logged
        as the shape it is, outside the spec (every nested call was logged as awaited); the
        handler stops waiting and fails, so its answer is an error rather than no answer at
        all. Under the lock."""
        s = self._s
        if s.sink.enabled:
            args = UnawaitedRpcAsyncArgs.of(w=s.rank, h=h)
            seq, lamport = s.clock.local()
            s.sink.emit(make_event(args, s.node_name, seq, lamport, s.ctn, s.ctn))
        failed = h.evolve(wait=None, err=True)
        s.ctn = s.ctn.evolve(handlers=(s.ctn.handlers - {h}) | {failed})
        return failed

    def _udf_raised(self, h: Handler) -> Handler:
        """``UdfRaises``: the handler's UDF raised by itself. Under the lock."""
        s = self._s
        s.commit(s.step(fw.udf_raises, s.ctn, h))
        return s.handler((h.ctx, h.req))

    # ------------------------------------------------------------------ control frames

    def on_frame(self, frame: AutogradFrame) -> None:
        """A cleanup or a backward-pass message arrived (:meth:`Passes.on_frame`)."""
        self._passes.on_frame(frame)

    def peer_died(self, rank: int, name: str) -> None:
        """The failure detector declared ``rank`` dead (:meth:`Passes.peer_died`)."""
        self._passes.peer_died(rank, name)

    def discard(self, frame: AutogradFrame) -> None:
        """A control message to a dead worker (:meth:`Passes.discard`)."""
        self._passes.discard(frame)


def context_id(value: int) -> AutogradId:
    """A torch context id (an int) as the core's pair."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"a context id is an int, not {type(value).__name__}")
    return from_int(value)
