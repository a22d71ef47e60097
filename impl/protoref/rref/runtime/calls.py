"""The application's calls on one worker: rpc.remote, rpc_async, to_here, RRef(value), drops.

The RRef plug-in runs every call of a worker (rpc_async's too: any payload may carry RRefs,
which the protocol forks, under the same lock and clock as its other steps). Each runs on the
calling application thread under the core's lock (``act``): the core step happens there and
the step's frames leave from there, the loop only reads and times. Timeouts
follow torch's: ``None`` or a negative value (torch's ``UNSET_RPC_TIMEOUT``, -1) means the
worker's ``rpc_timeout``, 0 means none.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from protoref.ids import GloballyUniqueId
from protoref.rpc.agent import Agent
from protoref.rpc.codec import copy_value
from protoref.rpc.current import WorkerInfo
from protoref.rpc.errors import (
    PeerDeadError,
    RemoteError,
    RPCError,
    RPCTimeoutError,
)
from protoref.rpc.futures import Future, outcome
from protoref.rpc.link import corked
from protoref.rpc.udf import is_async, qualified_name, resolve
from protoref.rref.core import events as ev
from protoref.rref.runtime import frames as rf
from protoref.rref.runtime.handle import RRef
from protoref.rref.runtime.node import Node
from protoref.rref.runtime.node_core import settle
from protoref.rref.runtime.proxy import invoke

__all__ = ["Calls", "RpcFuture"]

T = TypeVar("T")

Gid = GloballyUniqueId


def _is_rref(value: object) -> bool:
    return isinstance(value, RRef)


class RpcFuture(Future[T]):
    """rpc_async's future: torch.futures.Future's API (protoref.rpc.futures.Future); ``wait``'s
    optional timeout raises :class:`RPCTimeoutError`."""

    def wait(self, timeout: float | None = None) -> T:
        try:
            return self.result(timeout)
        except RPCTimeoutError:
            raise  # the call's own timeout fired (cf.TimeoutError is TimeoutError: 3.11)
        except cf.TimeoutError as err:
            raise RPCTimeoutError(f"no result within {timeout} s") from err


class Calls:
    """The API plumbing of a worker (torch's rpc.api functions, RRef methods' backends), on
    ``agent``'s RPC layer, stepping ``node``."""

    def __init__(self, agent: Agent, node: Node) -> None:
        self.agent = agent
        self.node = node
        self.wraps = node.wraps

    @property
    def name(self) -> str:
        return self.agent.name

    @property
    def closed(self) -> bool:
        return self.agent.closed

    def worker_info(self, name: str | int | None = None) -> WorkerInfo:
        return self.agent.worker_info(name)

    def act(self, fn: Callable[[], T]) -> T:
        """Run an application operation on the calling thread under the core's lock: the step
        happens here, only the socket writes go to the loop. (Waking the loop thread and
        waiting for it doubled the latency of every call on a busy machine.)"""
        self.agent.check_open()
        node = self.node
        with corked(), node.lock:  # its frames (and the drops') leave in one write per peer
            node.apply_drops()  # a safe point: RRefs the application dropped go first
            return fn()

    def _limit(self, timeout: float | None) -> float:
        """A call's timeout in seconds, 0 for none (torch: None/negative = the default)."""
        return self.agent.options.rpc_timeout if timeout is None or timeout < 0 else timeout

    def _check_call(self, to: str) -> None:
        if self.agent.stopping:
            raise RPCError(f"{self.name} is shutting down: no new calls")
        if to not in self.agent.ranks:
            raise RPCError(  # torch's text
                f"name:{self.name},rank:{self.agent.rank} could not find destination name {to}"
            )
        self.agent.liveness.check_alive(to)

    def create_local(self, value: Any, *, ready: bool = True) -> tuple[Gid, cf.Future[Any]]:
        """``CreateLocalRRef``: an OwnerRRef of ``value`` (``ready=False``: a value the caller
        sets later on the returned box)."""

        def run() -> tuple[Gid, cf.Future[Any]]:
            r = self.node.ctx.new_id()
            self.node.apply(ev.CreateLocalRRef())
            box: cf.Future[Any] = cf.Future()
            if ready:
                box.set_result(value)
            self.node.boxes[r] = box
            return r, box

        return self.act(run)

    def remote(
        self,
        to: str,
        fn: Callable[..., Any] | str,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        timeout: float | None = None,
    ) -> RRef[Any]:
        name = qualified_name(fn)
        limit = self._limit(timeout)

        def run() -> RRef[Any]:
            self._check_call(to)
            node = self.node
            body = node.encode_call(name, args, kwargs, to)
            r = node.ctx.new_id()
            f = node.ctx.new_id(1) if to != self.name else r
            wrapped = self.wraps.wrap(to, (args, kwargs))  # under a context: wrapped (autograd)
            if wrapped is not None:
                self.wraps.remotes[r] = wrapped
            step = node.apply(ev.Remote(dst=to), send=False)
            meta = None if wrapped is None else wrapped.meta
            for m in step.sent:
                node.emit(m, node.clock.lamport, call=body, meta=meta)
            node.remote_timer(r, f, limit)
            if to == self.name:
                box = node.boxes.setdefault(r, cf.Future())
                return RRef._owner_side(self, r, box, held=True)
            return RRef._user_side(self, to, r, f)

        return self.act(run)

    def rpc_async(
        self,
        to: str,
        fn: Callable[..., Any] | str,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        timeout: float | None,
    ) -> RpcFuture[Any]:
        name = qualified_name(fn)
        future: RpcFuture[Any] = RpcFuture()
        limit = self._limit(timeout)

        def run() -> None:
            self._check_call(to)
            node = self.node
            if to == self.name:  # a copy, its RRefs as they are (no fork to oneself): run here
                a, k = copy_value(
                    (list(args), dict(kwargs)), node.codecs, path="args", is_rref=_is_rref
                )
                wrapped = self.wraps.wrap(to, (args, kwargs))  # under a context: wrapped (autograd)
                self._call_self(name, a, k, wrapped, future)
                return
            body = node.encode_call(name, args, kwargs, to)
            wrapped = self.wraps.wrap(to, (args, kwargs))  # under a context: wrapped (autograd)
            call_id = node.add_call(to, future)
            if wrapped is not None:
                self.wraps.calls[call_id] = wrapped
            meta = None if wrapped is None else wrapped.meta
            ext = self.wraps.ext(meta)
            self.agent.send_frame(
                to, rf.UserCall, stamp=node.clock.lamport, call_id=call_id, body=body, ext=ext
            )
            self._expire(call_id, limit)

        self.act(run)
        return future

    def _call_self(
        self,
        name: str,
        args: list[Any],
        kwargs: dict[str, Any],
        wrapped: Any,
        future: RpcFuture[Any],
    ) -> None:
        """A call to this very worker: its UDF on the pool, under the caller's context when
        the call is wrapped (request and answer go through the autograd node as a remote
        call's would, without frames)."""
        key = None
        if wrapped is not None:
            try:
                key = self.wraps.request(wrapped.meta, (args, kwargs))
            except self.wraps.refused as refused:
                self.wraps.answered(wrapped, refused.meta, None)  # type: ignore[attr-defined]
                settle(future, None, RemoteError("RuntimeError", str(refused)))
                return
        fn_ = resolve(name)
        udf = self.agent.pool.run_udf(
            self.wraps.guarded(key, lambda: fn_(*args, **kwargs)), is_async(fn_)
        )

        def done(d: cf.Future[Any]) -> None:
            value, error = outcome(d)
            meta = self.wraps.finish(key, value, raised=error is not None)
            if self.wraps.answer_copied(meta):
                value = self._copy_answer(value)
            self.wraps.answered(wrapped, meta, value)
            settle(future, value, error)

        udf.add_done_callback(done)

    def _copy_answer(self, value: Any) -> Any:
        """A wrapped answer to oneself is a copy, as torch's serialized one is: its tensors
        become the caller's recv function's outputs, while the callee's send function keeps
        the originals (one object cannot be both)."""
        return copy_value(value, self.node.codecs, path="result", is_rref=_is_rref)

    def run_local(self, fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """Run ``fn`` on this worker's RPC pool with these very objects (no encoding): an RRef
        helper's call on the RRef's own owner (the core refuses to share an RRef with itself)."""
        self.agent.check_open()
        future: RpcFuture[Any] = RpcFuture()
        udf = self.agent.pool.run_udf(lambda: fn(*args, **kwargs), is_async(fn))
        udf.add_done_callback(lambda d: settle(future, *outcome(d)))
        return future

    def proxy_call(
        self,
        rref: RRef[Any],
        mode: str,
        method: str,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        *,
        timeout: float | None,
    ) -> Any:
        """``rref.rpc_sync().method(...)`` and its rpc_async / remote forms (torch's
        RRefProxy): ``method`` of the value runs on the owner (proxy.invoke)."""
        call = (rref, method, tuple(args), dict(kwargs))
        if rref.is_owner():
            future = self.run_local(invoke, call, {})
            if mode == "remote":
                r, box = self.create_local(None, ready=False)
                future.add_done_callback(lambda d: settle(box, *outcome(d)))
                return RRef._owner_side(self, r, box, held=True)
            return future.wait() if mode == "sync" else future
        owner = rref.owner_name()
        if mode == "remote":
            return self.remote(owner, invoke, call, {}, timeout)
        future = self.rpc_async(owner, invoke, call, {}, timeout)
        return future.wait() if mode == "sync" else future

    def _expire(self, call_id: int, limit: float) -> None:
        def fire() -> None:
            with self.node.lock:
                future = self.node.pop_call(call_id)
                if future is not None:  # no answer: its autograd part fails too
                    self.wraps.call_done(call_id, None, None)
            settle(future, None, RPCTimeoutError(f"call {call_id} timed out after {limit} s"))
            self.node.on_step()

        if limit > 0:
            self.node.later(lambda: self.agent.loop.call_later(limit, fire))

    def fetch(self, f: Gid, r: Gid, timeout: float | None) -> Any:
        limit = self._limit(timeout)
        future: cf.Future[Any] = cf.Future()
        owner: list[str] = []

        def run() -> None:
            node = self.node
            user = node.ctx.users[f]
            owner.append(user.owner)
            self.agent.liveness.check_alive(user.owner)
            wrapped = self.wraps.wrap(user.owner, ())  # under a context: wrapped (autograd)
            meta = None if wrapped is None else wrapped.meta
            if f in node.ctx.fetched:  # the spec's bound: later fetches are plain calls
                call_id = node.add_call(user.owner, future)
                if wrapped is not None:
                    self.wraps.calls[call_id] = wrapped
                self.agent.send_frame(
                    user.owner,
                    rf.Refetch,
                    stamp=node.clock.lamport,
                    call_id=call_id,
                    rref=tuple(r),
                    ext=self.wraps.ext(meta),
                )
                self._expire(call_id, limit)
                return
            if wrapped is not None:
                self.wraps.fetches[f] = wrapped
            step = node.apply(ev.ToHere(f=f), send=False)
            for m in step.sent:
                node.emit(m, node.clock.lamport, meta=meta)
            node.fetches[f] = future

        self.act(run)
        try:
            return future.result(limit if limit > 0 else None)
        except (RPCTimeoutError, PeerDeadError):
            raise
        except cf.TimeoutError as err:
            raise RPCTimeoutError(
                f"to_here of {f} (owner {owner[0]}) timed out after {limit} s"
            ) from err

    def backward(self, rref: RRef[Any], context_id: int, retain_graph: bool) -> None:
        """RRef.backward: the call hook's pass (distributed autograd's), see wraps.py."""
        self.wraps.rref_backward(rref, context_id, retain_graph)

    def confirmed(self, f: Gid) -> bool:
        """UserRRef ``f`` left pendingUsers_ (the owner knows it)."""
        return f not in self.node.ctx.pending_users

    def release_user(self, f: Gid) -> None:
        """weakref.finalize of a UserRRef handle (any thread): DropRRef on the loop."""
        if not self.closed:  # else nothing is left to tell
            self.node.note_drop(self.node.drop_user, f)

    def release_owner(self, r: Gid) -> None:
        if not self.closed:
            self.node.note_drop(self.node.drop_owner, r)
