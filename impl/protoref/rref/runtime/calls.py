"""The application's calls on one worker: rpc.remote, rpc_async, to_here, RRef(value), drops.

Each runs on the calling application thread under the core's lock (``act``): the core step
happens there and the step's frames leave from there, the loop only reads and times.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from protoref.ids import GloballyUniqueId
from protoref.rref import events as ev
from protoref.rref.runtime import frames as fr
from protoref.rref.runtime.errors import RPCError, RPCTimeoutError
from protoref.rref.runtime.handle import RRef
from protoref.rref.runtime.udf import qualified_name, resolve
from protoref.rref.runtime.worker import WorkerCore

__all__ = ["Calls", "RpcFuture"]

Gid = GloballyUniqueId
T = TypeVar("T")


class RpcFuture(cf.Future[T]):
    """rpc_async's future: ``wait()`` as torch.futures.Future, ``result()`` as concurrent's."""

    def wait(self, timeout: float | None = None) -> T:
        try:
            return self.result(timeout)
        except RPCTimeoutError:
            raise  # the call's own timeout fired (cf.TimeoutError is TimeoutError: 3.11)
        except cf.TimeoutError as err:
            raise RPCTimeoutError(f"no result within {timeout} s") from err


class Calls(WorkerCore):
    """The API plumbing of a worker (torch's rpc.api functions, RRef methods' backends)."""

    def _check_call(self, to: str) -> None:
        if self.stopping:
            raise RPCError(f"{self.name} is shutting down: no new calls")
        if to not in self.ranks:
            raise RPCError(f"unknown worker {to!r}; known: {sorted(self.ranks)}")

    def create_local(self, value: Any) -> tuple[Gid, cf.Future[Any]]:
        def run() -> tuple[Gid, cf.Future[Any]]:
            r = self.node.ctx.new_id()
            self.node.apply(ev.CreateLocalRRef())
            box: cf.Future[Any] = cf.Future()
            box.set_result(value)
            self.node.boxes[r] = box
            return r, box

        return self.act(run)

    def remote(
        self, to: str, fn: Callable[..., Any] | str, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> RRef[Any]:
        name = qualified_name(fn)

        def run() -> RRef[Any]:
            self._check_call(to)
            node = self.node
            body = node.encode_call(name, args, kwargs, to)
            r = node.ctx.new_id()
            f = node.ctx.new_id(1) if to != self.name else r
            step = node.apply(ev.Remote(dst=to), send=False)
            for m in step.sent:
                node.emit(m, node.clock.lamport, call=body)
            node.remote_timer(r, f)
            if to == self.name:
                box = node.boxes.setdefault(r, cf.Future())
                return RRef._owner_side(self, r, box, held=True)  # type: ignore[arg-type]
            return RRef._user_side(self, to, r, f)  # type: ignore[arg-type]

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
        limit = self.options.rpc_timeout if timeout is None else timeout

        def run() -> None:
            self._check_call(to)
            node = self.node
            body = node.encode_call(name, args, kwargs, to)
            if to == self.name:  # no RRefs (the core refuses sharing with oneself): run here
                a, k = node.decode_call(body, node.clock.lamport)
                fn_ = resolve(name)
                udf = self._run_udf(lambda: fn_(*a, **k))
                udf.add_done_callback(lambda d: self._settle(future, d))
                return
            call_id = node.next_id()
            node.calls[call_id] = future
            self._send_frame(to, fr.UserCall, stamp=node.clock.lamport, call_id=call_id, body=body)
            self._expire(call_id, limit)

        self.act(run)
        return future

    @staticmethod
    def _settle(target: cf.Future[Any], done: cf.Future[Any]) -> None:
        exc = done.exception()
        if exc is None:
            target.set_result(done.result())
        else:
            target.set_exception(exc)

    def _expire(self, call_id: int, limit: float) -> None:
        def fire() -> None:
            with self.node.lock:
                future = self.node.calls.pop(call_id, None)
            if future is not None and not future.done():
                future.set_exception(RPCTimeoutError(f"call {call_id} timed out after {limit} s"))
            self.node.on_step()

        if limit > 0:
            self.node.later(lambda: self.loop.call_later(limit, fire))

    def fetch(self, f: Gid, r: Gid, timeout: float | None) -> Any:
        limit = self.options.rpc_timeout if timeout is None else timeout
        future: cf.Future[Any] = cf.Future()
        owner: list[str] = []

        def run() -> None:
            node = self.node
            user = node.ctx.users[f]
            owner.append(user.owner)
            if f in node.ctx.fetched:  # the spec's bound: later fetches are plain calls
                call_id = node.next_id()
                node.calls[call_id] = future
                self._send_frame(
                    user.owner, fr.Refetch, stamp=node.clock.lamport, call_id=call_id, rref=tuple(r)
                )
                self._expire(call_id, limit)
                return
            node.apply(ev.ToHere(f=f))
            node.fetches[f] = future

        self.act(run)
        try:
            return future.result(limit if limit > 0 else None)
        except RPCTimeoutError:
            raise
        except cf.TimeoutError as err:
            raise RPCTimeoutError(
                f"to_here of {f} (owner {owner[0]}) timed out after {limit} s"
            ) from err

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
