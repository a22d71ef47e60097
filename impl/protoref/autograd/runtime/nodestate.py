"""The state one worker's distributed autograd parts share, and the plumbing of a step.

:class:`NodeState` holds the worker's :class:`~protoref.autograd.core.state.Container` and the
engine's values of its contexts (:class:`~protoref.autograd.runtime.contextdata.ContextData`)
under one lock, its Lamport clock and trace sink, the application threads' numbers and the
request guards; :meth:`NodeState.commit` applies a core step (the new state, the clock, one trace
event) and :meth:`NodeState.send_control` hands what a step sends to the :class:`Transport`. The
parts composed over it are :class:`~protoref.autograd.runtime.node.AutogradNode` (the
application's calls and the RPC layer's calls) and
:class:`~protoref.autograd.runtime.passes.Passes` (backward passes and control frames).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Final, Protocol

from protoref.autograd.core.events import Msg
from protoref.autograd.core.ids import AutogradId
from protoref.autograd.core.state import Container, Handler
from protoref.autograd.core.transition import Step
from protoref.autograd.runtime.contextdata import ContextData
from protoref.autograd.runtime.frames import AutogradFrame, AutogradMeta, control_frame
from protoref.autograd.runtime.torch_engine import encode_grads, is_tensor
from protoref.autograd.trace.events import make_event
from protoref.errors import ProtocolError
from protoref.tracing import NodeClock, NullSink, TraceSink

__all__ = [
    "NOT_FOUND",
    "WAIT_SECONDS",
    "HandlerKey",
    "NodeState",
    "Refused",
    "Transport",
    "Wrapped",
]

#: How long a backward pass or a release may wait before it reports being stuck (torch waits
#: for ever; the Reference's pass always ends, so this only turns a bug into an error).
WAIT_SECONDS: Final = 300.0
NOT_FOUND: Final = "Could not find autograd context with id: {}"
HandlerKey = tuple[AutogradId, AutogradId]


class Transport(Protocol):
    """Where a worker's cleanups and backward-pass messages go (fire and forget; cleanups are
    retried until acknowledged by the transport). A transport may also offer ``batch()``, a
    context manager that sends what is sent inside it together (one write per peer)."""

    def send(self, dst: int, frame: AutogradFrame) -> None: ...


class Wrapped:
    """A call the current thread makes under a context: its message, to put in the frame."""

    __slots__ = ("meta", "tensors")

    def __init__(self, meta: AutogradMeta, tensors: list[Any]) -> None:
        self.meta = meta
        self.tensors = tensors


class Refused(Exception):  # noqa: N818 - a request the callee refuses, not an error of ours
    """The callee refuses a request (a context it released: the Reference's tombstone); the
    RPC layer answers with this error and the message :attr:`meta`."""

    def __init__(self, meta: AutogradMeta, context: AutogradId) -> None:
        self.meta = meta
        super().__init__(NOT_FOUND.format(context.to_int()))


class NodeState:
    """Worker ``rank``'s container, context values, clock, sink and threads, under one lock."""

    def __init__(self, rank: int, transport: Transport, sink: TraceSink | None = None) -> None:
        if not 0 <= rank < (1 << 15):
            raise ValueError(f"a worker id is below 2^15 (torch's int16), got {rank}")
        self.rank = rank
        self.transport = transport
        self.sink: TraceSink = sink if sink is not None else NullSink()
        self.node_name = str(rank)
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.ctn = Container(me=rank)
        self.data: dict[AutogradId, ContextData] = {}
        self.clock = NodeClock()
        self.local = threading.local()
        self.threads = 0
        #: Cleanups waiting for a handler of their context (the Reference's "defer").
        self.deferred: list[tuple[Msg, int]] = []
        #: The workers the RPC layer's failure detector declared dead (the spec's ``~alive``
        #: as the survivors see it, with ``Detect``).
        self.dead: set[int] = set()

    # ------------------------------------------------------------------ threads

    def thread(self) -> int:
        """The calling application thread's number (the spec's ``Threads``)."""
        t: int | None = getattr(self.local, "t", None)
        if t is None:
            with self.lock:
                t = self.threads
                self.threads += 1
            self.local.t = t
        return t

    def guard(self) -> HandlerKey | None:
        """The request whose UDF the calling thread runs, if any."""
        stack: list[HandlerKey] = getattr(self.local, "guards", [])
        return stack[-1] if stack else None

    def handler(self, key: HandlerKey) -> Handler:
        for h in self.ctn.handlers:
            if (h.ctx, h.req) == key:
                return h
        raise RuntimeError(f"the request {key[1]} of context {key[0]} is no longer running")

    # ------------------------------------------------------------------ steps

    def commit(self, step: Step, stamp: int | None = None) -> int:
        """Apply ``step`` (taking a message stamped ``stamp``, or a local step): the new state,
        the clock, the trace event; returns the event's Lamport time (the stamp of what it
        sends)."""
        before = self.ctn
        self.ctn = step.state
        seq, lamport = self.clock.local() if stamp is None else self.clock.receive(stamp)
        if self.sink.enabled:
            self.sink.emit(
                make_event(step.action, self.node_name, seq, lamport, step.state, before)
            )
        for c in before.ctxs - step.state.ctxs:
            self.data.pop(c, None)
        return lamport

    def send_control(
        self, step: Step, lamport: int, grads: dict[AutogradId, tuple[Any, ...]] | None = None
    ) -> None:
        """Send what ``step`` sent; a ``BWD_REQ`` carries ``grads`` of its message (floats, or
        torch tensors in the tensor codec's form)."""
        for m in step.sent:
            data = self.data.get(m.ctx)
            values = (grads or {}).get(m.mid, ()) if m.mid is not None else ()
            tensors = encode_grads(values) if values and is_tensor(values[0]) else ()
            frame = control_frame(
                m,
                lamport,
                () if tensors else values,
                max(data.pass_no, 1) if data is not None else 1,
                data.retain_graph if data is not None else False,
                data.error if (data is not None and m.type == "BWD_ACK") else "",
                tensors,
            )
            self.transport.send(m.dst, frame)

    def batch(self) -> AbstractContextManager[object]:
        """The transport's batching of what one step sends (one write per peer), if any."""
        batch = getattr(self.transport, "batch", None)
        return nullcontext() if batch is None else batch()

    def data_of(self, c: AutogradId) -> ContextData:
        data = self.data.get(c)
        if data is None:
            data = self.data[c] = ContextData(c)
        return data

    @staticmethod
    def step(fn: Callable[..., Step], *args: object) -> Step:
        """A core transition for an application call: its protocol error as torch's
        RuntimeError."""
        try:
            return fn(*args)
        except ProtocolError as exc:
            raise RuntimeError(exc.reason) from None

    def wait(self, ready: Callable[[], bool], what: str) -> None:
        """Wait on the lock's condition until ``ready()`` (at most :data:`WAIT_SECONDS`)."""
        deadline = time.monotonic() + WAIT_SECONDS
        while not ready():
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(
                    f"worker {self.rank}: {what} did not finish in {WAIT_SECONDS:.0f} s"
                )
            self.changed.wait(min(left, 1.0))
