"""torch 2.13's own ``DynamicRendezvousHandler``, observed: one trace event per spec step.

Nothing of torch's decision logic is replaced. :class:`NodeObserver` wraps, on one handler's
objects (instance attributes, the classes are untouched):

- the backend's ``get_state`` / ``set_state``: counts store calls, so a sync that made none
  is told apart as a cache hit (``SyncCached``) from a read (``SyncRead``);
- the state holder's ``sync``: inside an op it opens a step (takes the step lock, pins the
  clock) and logs the sync (``SyncRead``, ``SyncCached``, ``SyncWriteWon`` with the state it
  wrote, ``SyncWriteLost``); outside an op (``is_closed()``, ``num_nodes_waiting()``) it is
  one ``ReadOnlySync`` step;
- the op passed to the executor's ``run``: logs torch's decision (the ``_Action``, or the join
  op's ``RendezvousGracefulExitError``) as the spec action of the same meaning; a mutating
  action's step closes at the holder's ``mark_dirty``, after torch's business function changed
  the copy, so the event logs the copy torch will write;
- ``_get_deadline``: an op starts (``NextRendezvous``, ``SetClosed``, ``KeepAliveTimer``, told
  apart by which of ``next_rendezvous``, ``_close``, ``_keep_alive`` is running), or the join
  op restarts its deadline after ``REMOVE_FROM_REDUNDANCY_LIST``.

The spec's control state (``pc``, ``op``, ``opDl``, ``result``, ``view``) is where torch's thread
is; the observer mirrors it from the calls it sees. ``local``, ``dirty``, ``fresh`` are read off
torch's holder (``_state``, ``_dirty``, and torch's own cache test on ``_last_sync_time``).
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Callable, Iterator
from typing import Any, Final

from pydantic import JsonValue

from protoref.errors import ProtorefError
from protoref.rendezvous.runtime.handler_trace import HandlerTracer
from protoref.rendezvous.trace.events import POST_FIELDS
from protoref.torch.timing import TickTime, set_acting_node
from protoref.torch.values import TorchSettings, node_name, op_deadline, state_value

__all__ = ["AdapterError", "NodeCrash", "NodeObserver", "StepContext"]

#: torch's ``_Action`` member -> the spec action that logs it.
_ACTIONS: Final = {
    "KEEP_ALIVE": "KeepAlive",
    "ADD_TO_PARTICIPANTS": "AddToParticipants",
    "ADD_TO_WAIT_LIST": "AddToWaitList",
    "ADD_TO_REDUNDANCY_LIST": "AddToRedundancyList",
    "REMOVE_FROM_PARTICIPANTS": "RemoveFromParticipants",
    "REMOVE_FROM_WAIT_LIST": "RemoveFromWaitList",
    "REMOVE_FROM_REDUNDANCY_LIST": "RemoveFromRedundancyList",
    "MARK_RENDEZVOUS_COMPLETE": "MarkRendezvousComplete",
    "MARK_RENDEZVOUS_CLOSED": "MarkRendezvousClosed",
    "SYNC": "Delay",
    "ERROR_CLOSED": "ErrorClosed",
    "ERROR_TIMEOUT": "ErrorTimeout",
    "FINISH": "Finish",
}
_MUTATING: Final = frozenset(_ACTIONS.values()) - {"Delay", "ErrorClosed", "ErrorTimeout", "Finish"}
#: torch's op class -> the spec's ``op``.
_OPS: Final = {
    "_RendezvousExitOp": "exit",
    "_RendezvousJoinOp": "join",
    "_RendezvousCloseOp": "close",
    "_RendezvousKeepAliveOp": "keepalive",
}
#: The handler method running -> the spec action its ``_get_deadline`` starts.
_STARTS: Final = {
    "next_rendezvous": "NextRendezvous",
    "_close": "SetClosed",
    "_keep_alive": "KeepAliveTimer",
}
_START_OP: Final = {"NextRendezvous": "exit", "SetClosed": "close", "KeepAliveTimer": "keepalive"}


class AdapterError(ProtorefError):
    """torch did something the observer cannot map to one spec step (names node and step)."""


class NodeCrash(BaseException):
    """Raised by a scenario's timing hook to crash a node's thread mid-operation.

    A BaseException, so torch's ``except Exception`` clauses let it through like a process
    death: the handler stops where it is, nothing of torch handles it."""


class StepContext:
    """What every observer of a run shares: the tracer (step lock, records), the clock, the
    settings in ticks."""

    def __init__(self, tracer: HandlerTracer, clock: TickTime, cfg: TorchSettings) -> None:
        self.tracer = tracer
        self.clock = clock
        self.cfg = cfg

    @contextlib.contextmanager
    def step(self) -> Iterator[int]:
        """Hold the step lock with this thread's clock pinned; yields the step's tick."""
        with self.tracer.step(), self.clock.pinned() as tick:
            yield tick

    def record(self, event: dict[str, Any], token: str | None = None) -> None:
        tick = self.clock.pinned_tick()
        if tick is None:
            raise AdapterError(f"{event['node']}: {event['event']} logged outside a step")
        self.tracer.record(event, tick, token)


def _digest(token: Any) -> str | None:
    """The store token torch holds (the stored base64 value), as a short digest."""
    if token is None:
        return None
    raw = token if isinstance(token, bytes) else str(token).encode()
    return hashlib.blake2b(raw, digest_size=8).hexdigest()


class NodeObserver:
    """The observer of one torch handler (see the module docstring)."""

    def __init__(self, ctx: StepContext, handler: Any, backend: Any) -> None:
        self.ctx = ctx
        self.handler = handler
        self.holder = handler._state_holder
        self.node = node_name(handler._this_node)
        self.pc, self.op, self.result = "idle", "none", "none"
        self.deadline: float | None = None
        self.view: JsonValue = {"round": -1, "ranks": []}
        #: called with each event's name after it is recorded (scenario hooks)
        self.listeners: list[Callable[[str, NodeObserver], None]] = []
        self._store_calls = 0
        self._thread = threading.local()  # .starting: the op starts running in this thread
        self._held: contextlib.ExitStack | None = None
        self._pending: str | None = None
        self._op_thread: int | None = None
        self._written: Any = None  # the state a won write stored
        self._last_sync = "SyncRead"
        self._install(backend)

    # ------------------------------------------------------------------ wrapping

    def _install(self, backend: Any) -> None:
        for name in ("get_state", "set_state"):
            setattr(backend, name, self._counted(getattr(backend, name)))
        holder, handler = self.holder, self.handler
        holder.sync = self._sync_wrapper(holder.sync)
        holder.mark_dirty = self._mark_dirty_wrapper(holder.mark_dirty)
        executor = handler._op_executor
        executor.run = self._run_wrapper(executor.run)
        handler._get_deadline = self._deadline_wrapper(handler._get_deadline)
        for method in _STARTS:
            setattr(handler, method, self._method_wrapper(method, getattr(handler, method)))

    def _counted(self, call: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self._store_calls += 1
            return call(*args, **kwargs)

        return counted

    def _starting(self) -> list[str]:
        starting: list[str] = self._thread.__dict__.setdefault("starting", [])
        return starting

    def _method_wrapper(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            set_acting_node(self.node)
            self._starting().append(_STARTS[name])
            try:
                return method(*args, **kwargs)
            except NodeCrash:
                if name == "next_rendezvous":
                    self.crash()
                raise
            finally:
                self._starting().pop()

        return wrapped

    def _deadline_wrapper(self, get_deadline: Callable[[Any], float]) -> Callable[[Any], float]:
        def wrapped(timeout: Any) -> float:
            if self._pending == "RemoveFromRedundancyList":  # run()'s update_deadline
                self.deadline = get_deadline(timeout)
                return self.deadline
            starting = self._starting()
            if not starting:
                raise AdapterError(f"{self.node}: _get_deadline outside any op start")
            start = starting[-1]
            with self.ctx.step():
                self.deadline = get_deadline(timeout)
                self.pc, self.op = "sync", _START_OP[start]
                if start == "NextRendezvous":
                    self.result = "none"
                self._emit(start)
            return self.deadline

        return wrapped

    def _run_wrapper(self, run: Callable[..., None]) -> Callable[..., None]:
        def wrapped(state_handler: Any, deadline: float, update_deadline: Any = None) -> None:
            op = _OPS[type(state_handler).__name__]
            if op != self.op:
                raise AdapterError(
                    f"{self.node}: torch runs the {op} op while the spec's is {self.op}"
                )
            self._op_thread = threading.get_ident()

            def decide(ctx: Any, dl: float) -> Any:
                return self._decide(state_handler, ctx, dl)

            try:
                run(decide, deadline, update_deadline)
            finally:
                self._op_thread = None
                self._release()

        return wrapped

    # ------------------------------------------------------------------ steps

    def _sync_wrapper(self, sync: Callable[[], bool | None]) -> Callable[[], bool | None]:
        def wrapped() -> bool | None:
            if self._op_thread not in (None, threading.get_ident()):
                raise AdapterError(f"{self.node}: a sync from another thread while an op runs")
            if self._op_thread is None:
                with self.ctx.step():
                    result = self._sync(sync)
                    self._emit("ReadOnlySync")
                return result
            self._hold()
            result = self._sync(sync)
            self.pc = "decide"
            self._emit(self._last_sync)
            return result

        return wrapped

    def _sync(self, sync: Callable[[], bool | None]) -> bool | None:
        holder = self.holder
        dirty, written, calls = holder._dirty, holder._state, self._store_calls
        has_set = sync()
        self._written = written if has_set else None
        if dirty:
            self._last_sync = "SyncWriteWon" if has_set else "SyncWriteLost"
        else:
            self._last_sync = "SyncRead" if self._store_calls > calls else "SyncCached"
        return has_set

    def _decide(self, state_handler: Any, ctx: Any, deadline: float) -> Any:
        self.deadline = deadline
        try:
            action = state_handler(ctx, deadline)
        except Exception as err:
            if type(err).__name__ != "RendezvousGracefulExitError":
                raise
            self._stop("gracefulExit")
            self._emit("GracefulExit")
            self._release()
            raise
        name = _ACTIONS[action.name]
        if name in _MUTATING:
            self._pending = name  # logged at mark_dirty, after torch's business function
            return action
        if name == "Delay":
            self.pc = "sleep"
        elif name == "Finish":
            self._finish()
        elif name == "ErrorClosed":
            self._stop("closed")
        else:  # ErrorTimeout
            if self.op in ("exit", "join"):
                self.result = "timeout"
            self.pc, self.op, self.deadline = "idle", "none", None
        self._emit(name)
        self._release()
        return action

    def _mark_dirty_wrapper(self, mark_dirty: Callable[[], None]) -> Callable[[], None]:
        def wrapped() -> None:
            mark_dirty()
            name, self._pending = self._pending, None
            if name is None:
                raise AdapterError(f"{self.node}: mark_dirty without a mutating decision")
            self.pc = "sync"
            self._emit(name)
            self._release()

        return wrapped

    def _finish(self) -> None:
        if self.op == "exit":
            self.op, self.pc = "join", "sync"
            return
        if self.op == "join":
            s = self.holder._state
            ranks = {node_name(k): v for k, v in s.participants.items()}
            pairs: list[JsonValue] = [[k, v] for k, v in sorted(ranks.items())]
            self.view = {"round": s.round, "ranks": {"#map": pairs} if pairs else []}
            self.result = "ok"
        self.pc, self.op, self.deadline = "idle", "none", None

    def _stop(self, result: str) -> None:
        self.pc, self.op, self.deadline, self.result = "stopped", "none", None, result

    def crash(self) -> None:
        """The node's process dies here: no more steps, heartbeats stopped (a thread's crash;
        a SIGKILLed process's Crash is logged by its driver, :func:`crash_event`)."""
        self.handler._stop_heartbeats()
        with self.ctx.step():
            self.pc, self.op, self.deadline = "crashed", "none", None
            self.ctx.record(crash_event(self.node))
        for listener in self.listeners:
            listener("Crash", self)

    # ------------------------------------------------------------------ the step lock

    def _hold(self) -> None:
        if self._held is not None:
            raise AdapterError(f"{self.node}: a sync while its previous step is open")
        stack = contextlib.ExitStack()
        stack.enter_context(self.ctx.step())
        self._held = stack

    def _release(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held.close()

    # ------------------------------------------------------------------ events

    def _fresh(self, now: float) -> bool:
        """torch's own cache test (``_BackendRendezvousStateHolder.sync``) at ``now``."""
        holder = self.holder
        return bool(
            holder._cache_duration > 0
            and holder._last_sync_time >= max(now - holder._cache_duration, 0)
        )

    def _emit(self, name: str) -> None:
        clock = self.ctx.clock
        now, utc = clock.now(), clock.utc()
        values: dict[str, Callable[[], JsonValue]] = {
            "local": lambda: state_value(self.holder._state, utc, self.ctx.cfg),
            "dirty": lambda: bool(self.holder._dirty),
            "fresh": lambda: self._fresh(now),
            "pc": lambda: self.pc,
            "op": lambda: self.op,
            "opDl": lambda: op_deadline(self.deadline, now),
            "result": lambda: self.result,
            "view": lambda: self.view,
            "store": lambda: state_value(self._written, utc, self.ctx.cfg),
        }
        post = {f: values[f]() for f in POST_FIELDS[name]}
        token = _digest(self.holder._token) if name.startswith("Sync") else None
        self.ctx.record(_event(name, self.node, post), token)
        for listener in self.listeners:
            listener(name, self)


def _event(name: str, node: str, post: dict[str, JsonValue]) -> dict[str, Any]:
    return {
        "kind": "event",
        "event": name,
        "node": node,
        "seq": 1,
        "lamport": 1,
        "args": {"n": node},
        "post": post,
    }


def crash_event(node: str) -> dict[str, Any]:
    """The ``Crash`` event of ``node``: the node is gone, so nothing of it is observed (the
    contract asks no post-state; the spec forgets the node's copy)."""
    return _event("Crash", node, {})
