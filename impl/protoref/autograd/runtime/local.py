"""An in-process world of workers for distributed autograd: RPC without sockets.

:class:`LocalWorld` runs ``world_size`` workers in one process, each with its
:class:`~protoref.autograd.runtime.node.AutogradNode`, a thread per request (so a UDF may call on),
and a thread for its control frames (cleanups, the backward pass's messages), delivered in order per
worker. Its workers offer the calls a torch program makes (``rpc_sync``, ``rpc_async``, ``remote``
with ``to_here``), and arguments and results are copied as the wire would copy them (a tensor
arrives as a fresh tensor with its value and ``requires_grad``), so the autograd layer sees exactly
what it sees over the network. It is the API's first driver and the test bed of the program shapes;
the multi-process runtime is :mod:`protoref.rpc`'s.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, Final

from protoref.autograd.runtime import current
from protoref.autograd.runtime.engine import Tensor
from protoref.autograd.runtime.frames import AutogradFrame, AutogradMeta
from protoref.autograd.runtime.node import AutogradNode, Refused
from protoref.tracing import TraceSink

__all__ = ["LocalFuture", "LocalRRef", "LocalWorker", "LocalWorld", "active_world"]

_STOP: Final = object()
_acting = threading.local()


def active_world() -> LocalWorld | None:
    """The world the calling thread acts in (None outside :meth:`LocalWorld.acting`)."""
    stack: list[LocalWorld] = getattr(_acting, "worlds", None) or []
    return stack[-1] if stack else None


class LocalFuture(Future[Any]):
    """A call's future with torch's ``wait()`` (the value, or the callee's error raised)."""

    def wait(self) -> Any:
        return self.result()


def _copy(value: object) -> object:
    """What the wire makes of a value: tensors fresh (value, requires_grad), containers
    rebuilt, other values (numbers, strings, RRefs) as they are."""
    if isinstance(value, Tensor):
        return Tensor(value.value, requires_grad=value.requires_grad)
    if isinstance(value, list):
        return [_copy(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_copy(v) for v in value)
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    return value


class LocalRRef:
    """A remote reference to a value owned by a worker of the world (``rpc.remote``)."""

    def __init__(self, world: LocalWorld, owner: int, key: int) -> None:
        self._world = world
        self._owner = owner
        self._key = key

    def owner(self) -> int:
        return self._owner

    def owner_name(self) -> str:
        return self._world.workers[self._owner].name

    def is_owner(self) -> bool:
        return self._world.caller() == self._owner

    def local_value(self) -> Any:
        if not self.is_owner():
            raise RuntimeError("Call it on owner to get the local value of this RRef")
        return self._world.workers[self._owner].values[self._key]

    def to_here(self) -> Any:
        """Fetch the value (a wrapped call to the owner, under the caller's context)."""
        return self._world.call(self._owner, _fetch, (self._owner, self._key), {})

    def __repr__(self) -> str:
        return f"LocalRRef(owner={self._owner}, key={self._key})"


def _fetch(owner: int, key: int) -> Any:
    world = _WORLD.get("world")
    assert isinstance(world, LocalWorld)
    return world.workers[owner].values[key]


def _store(owner: int, key: int, fn: Callable[..., Any], args: Any, kwargs: Any) -> None:
    world = _WORLD.get("world")
    assert isinstance(world, LocalWorld)
    world.workers[owner].values[key] = fn(*args, **kwargs)


_WORLD: dict[str, object] = {}


class LocalWorker:
    """Worker ``rank`` of a :class:`LocalWorld` (its node's transport)."""

    def __init__(self, world: LocalWorld, rank: int, sink: TraceSink | None) -> None:
        self.world = world
        self.rank = rank
        self.name = f"worker{rank}"
        self.node = AutogradNode(rank, self, sink)
        self.values: dict[int, Any] = {}
        self.inbox: queue.Queue[object] = queue.Queue()
        self.thread = threading.Thread(target=self._serve, name=f"{self.name}-control", daemon=True)
        self.thread.start()

    def send(self, dst: int, frame: AutogradFrame) -> None:
        """The node's transport: in order, on the destination's control thread."""
        self.world.workers[dst].inbox.put(AutogradFrame.model_validate(frame.model_dump()))

    def _serve(self) -> None:
        while (item := self.inbox.get()) is not _STOP:
            assert isinstance(item, AutogradFrame)
            self.node.on_frame(item)


class LocalWorld:
    """``world_size`` workers in this process; a thread acts for one inside :meth:`acting`."""

    def __init__(self, world_size: int, sinks: Callable[[int], TraceSink | None] | None = None):
        self.workers = [
            LocalWorker(self, r, sinks(r) if sinks else None) for r in range(world_size)
        ]
        self._local = threading.local()
        self._keys = itertools.count()
        _WORLD["world"] = self

    # ------------------------------------------------------------------ threads

    @contextmanager
    def acting(self, rank: int) -> Iterator[LocalWorker]:
        """The calling thread is worker ``rank``'s (its RPCs and its autograd calls)."""
        stack: list[int] = getattr(self._local, "ranks", None) or []
        self._local.ranks = stack
        worlds: list[LocalWorld] = getattr(_acting, "worlds", None) or []
        _acting.worlds = worlds
        stack.append(rank)
        worlds.append(self)
        try:
            with current.bound(self.workers[rank].node):
                yield self.workers[rank]
        finally:
            stack.pop()
            worlds.pop()

    def caller(self) -> int:
        stack: list[int] = getattr(self._local, "ranks", None) or []
        if not stack:
            raise RuntimeError("this thread acts for no worker of the world (use acting())")
        return stack[-1]

    def _rank(self, to: int | str) -> int:
        if isinstance(to, str):
            for w in self.workers:
                if w.name == to:
                    return w.rank
            raise ValueError(f"unknown worker name {to!r}")
        return to

    # ------------------------------------------------------------------ calls

    def rpc_async(
        self,
        to: int | str,
        fn: Callable[..., Any],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> LocalFuture:
        """``rpc.rpc_async``: the call, wrapped when the calling thread runs under a context."""
        src, dst = self.caller(), self._rank(to)
        node = self.workers[src].node
        request = node.wrap_request(dst, (args, kwargs or {}))
        payload = _copy((args, kwargs or {}))
        future = LocalFuture()

        def run() -> None:
            callee = self.workers[dst].node
            with self.acting(dst):
                meta: AutogradMeta | None = None
                error: BaseException | None = None
                result: Any = None
                if request is None:
                    try:
                        result = fn(*payload[0], **payload[1])  # type: ignore[index]
                    except Exception as exc:
                        error = exc
                else:
                    try:
                        key = callee.on_request(request.meta, payload)
                    except Refused as refused:
                        meta, error = refused.meta, RuntimeError(str(refused))
                    else:
                        try:
                            with callee.guard(key):
                                result = fn(*payload[0], **payload[1])  # type: ignore[index]
                        except Exception as exc:
                            error = exc
                        meta = callee.finish_request(key, result, raised=error is not None)
            answer = _copy(result)
            if request is not None:
                node.on_answer(request, meta, answer)
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(answer)

        threading.Thread(target=run, name=f"call-{src}-{dst}", daemon=True).start()
        return future

    def call(
        self, to: int | str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        return self.rpc_async(to, fn, args, kwargs).result()

    def rpc_sync(
        self,
        to: int | str,
        fn: Callable[..., Any],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        """``rpc.rpc_sync``."""
        return self.call(to, fn, args, kwargs or {})

    def remote(
        self,
        to: int | str,
        fn: Callable[..., Any],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> LocalRRef:
        """``rpc.remote``: the value stays on ``to``; the call runs under the caller's context."""
        owner, key = self._rank(to), next(self._keys)
        self.call(owner, _store, (owner, key, fn, args, kwargs or {}), {})
        return LocalRRef(self, owner, key)

    def RRef(self, value: Any) -> LocalRRef:  # noqa: N802 - rpc.RRef(value)
        """``rpc.RRef(value)``: a reference to a value the calling worker owns."""
        owner, key = self.caller(), next(self._keys)
        self.workers[owner].values[key] = value
        return LocalRRef(self, owner, key)

    def close(self) -> None:
        for w in self.workers:
            w.inbox.put(_STOP)
        for w in self.workers:
            w.thread.join(timeout=5)
            if w.node.sink.enabled:
                w.node.sink.close()
