"""The worker's RPC thread pool: user functions (UDFs) and the callbacks of RPC futures.

torch runs both on its RPC agent's thread pool; so does this one. A UDF's future completes on
the pool thread that ran it, so the reply leaves from there without a trip through the loop.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import threading
from collections.abc import Callable
from typing import Any

from protoref.rpc.errors import RPCError
from protoref.rpc.futures import outcome

__all__ = ["UdfPool"]

log = logging.getLogger("protoref.rpc")


class UdfPool:
    """``threads`` pool threads, each bound to the worker by ``initializer``; counts the UDFs
    running (graceful shutdown waits for them)."""

    def __init__(self, name: str, threads: int, initializer: Callable[[], None]) -> None:
        self.name = name
        self.executor = cf.ThreadPoolExecutor(threads, f"udf-{name}", initializer=initializer)
        self.running = 0
        # Its own lock: a pool thread must not wait for a protocol's lock, which the loop may
        # hold while it applies frames.
        self._lock = threading.Lock()

    def run_callback(self, callback: Callable[[], None]) -> None:
        """A future's callback, on the pool (futures.divert_callbacks)."""

        def run() -> None:
            try:
                callback()
            except Exception:  # as concurrent.futures and torch do: logged, not raised
                log.exception("%s: exception calling a future's callback", self.name)

        try:
            self.executor.submit(run)
        except RuntimeError:  # the pool is shut down: nobody else will run it
            run()

    def run_udf(self, fn: Callable[[], Any], asynchronous: bool = False) -> cf.Future[Any]:
        """Run a UDF on the pool (as torch's RPC thread pool); its future completes on the pool
        thread, so its callbacks (the reply) run there too. (Submitting it only once the frames
        that came with its call were applied, to keep the loop from holding the GIL while the
        pool thread wakes, measured slower.)

        ``asynchronous`` (rpc.functions.async_execution): ``fn`` returns a Future and the UDF is
        done when that completes; the pool thread is free meanwhile."""
        with self._lock:
            self.running += 1
        future: cf.Future[Any] = cf.Future()
        try:
            self.executor.submit(self._body, fn, future, asynchronous)
        except RuntimeError as err:  # the pool is shut down
            self._settle(future, None, err)
        return future

    def _body(self, fn: Callable[[], Any], future: cf.Future[Any], asynchronous: bool) -> None:
        try:
            result = fn()
        except BaseException as err:  # the UDF's own failure goes to its caller
            self._settle(future, None, err)
            return
        if not asynchronous:
            self._settle(future, result, None)
        elif not callable(getattr(result, "add_done_callback", None)):
            kind = f"{type(result).__module__}.{type(result).__qualname__}"
            self._settle(
                future,
                None,
                RPCError(
                    "Functions decorated with @rpc.functions.async_execution must return a "
                    f"Future object (protoref's, torch's or concurrent's), but got {kind}"
                ),
            )
        else:
            result.add_done_callback(lambda done: self._settle(future, *outcome(done)))

    def _settle(self, future: cf.Future[Any], result: Any, exc: BaseException | None) -> None:
        with self._lock:
            self.running -= 1
        if exc is None:
            future.set_result(result)
        else:
            future.set_exception(exc)

    def shutdown(self, wait: bool, *, cancel: bool = False) -> None:
        self.executor.shutdown(wait=wait, cancel_futures=cancel)
