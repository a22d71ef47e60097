"""torch.futures for protoref: :class:`Future` (``then``, ``add_done_callback``, ``done``,
``value``, ``wait``, ``set_result``, ``set_exception``), :func:`collect_all` and :func:`wait_all`.

A :class:`Future` is a ``concurrent.futures.Future`` with torch.futures.Future's methods on top,
behaving as torch 2.13's does where a program can tell (checked against torch with small
programs; docs/divergences.md lists the rest):

- a callback added to a completed future runs at once, inline; otherwise on the thread that
  completes the future, except a worker's event-loop thread: an RPC reply completes its future
  there, and a callback that blocked it (a ``wait()`` on another RPC) would stall every call of
  that worker, so such callbacks run on the worker's RPC thread pool instead (torch runs them
  on its RPC threads too);
- ``then``'s future holds the callback's return value; if the callback raises, it holds a
  ``RuntimeError("Got the following error when running the callback: <Type>: <message>")``
  whose ``__cause__`` is the callback's exception (torch's text, without its C++ stack);
- ``set_result``/``set_exception`` on a completed future raise torch's ``RuntimeError``;
  ``set_exception`` takes an ``Exception`` only (torch's ``AssertionError`` otherwise);
- ``value()`` before completion raises ``RuntimeError`` (torch fails an internal assert);
- :func:`collect_all` completes when every future has, holding the list of futures, or the
  first failed future's exception in list order; :func:`wait_all` waits for all of them, then
  returns their values or raises that exception (torch 2.13 waits for all too, although its
  docstring says it exits early).

``wait(timeout)`` is ours (torch's ``wait`` takes none). The futures handed to collect_all and
wait_all may also be torch's or concurrent's: anything with ``add_done_callback`` and ``wait``
or ``result``.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final, Generic, TypeVar

__all__ = ["Future", "as_torch_future", "collect_all", "divert_callbacks", "wait_all"]

T = TypeVar("T")
S = TypeVar("S")

_TWICE: Final = (
    "Attempting to mark a completed Future as complete again. Note that a Future can only be "
    "marked completed once."
)


class _Diverted(threading.local):
    #: Where callbacks go when a future completes on this thread (None: run them inline).
    run: Callable[[Callable[[], None]], None] | None = None


_diverted = _Diverted()


def divert_callbacks(run: Callable[[Callable[[], None]], None] | None) -> None:
    """Futures completed on the calling thread from now on hand their callbacks to ``run``
    (a worker's loop thread passes its RPC pool's submit); ``None`` runs them inline again."""
    _diverted.run = run


class Future(cf.Future[T], Generic[T]):
    """torch.futures.Future's API on a ``concurrent.futures.Future`` (``result()`` works too)."""

    def __init__(self, *, devices: Sequence[Any] | None = None) -> None:
        if devices:
            raise ValueError("protoref has no CUDA support: Future(devices=...) must be empty")
        super().__init__()

    def wait(self, timeout: float | None = None) -> T:
        """Block until the value is ready and return it, or raise the future's exception."""
        return self.result(timeout)

    def value(self) -> T:
        """The value of a completed future (raises its exception); before completion an error."""
        if not self.done():
            raise RuntimeError(
                "Future.value() on a future that is not completed yet: call wait() first, or "
                "read it in a callback passed to then()"
            )
        return self.result(0)

    def then(self, callback: Callable[[Future[T]], S]) -> Future[S]:
        """A future of ``callback(self)``, run once this future completes."""
        child: Future[S] = Future()

        def run(done: Future[T]) -> None:
            try:
                out = callback(done)
            except Exception as err:
                wrapped = RuntimeError(
                    f"Got the following error when running the callback: "
                    f"{type(err).__name__}: {err}"
                )
                wrapped.__cause__ = err
                child._settle(None, wrapped)
            else:
                child._settle(out, None)

        self.add_done_callback(run)
        return child

    def add_done_callback(self, fn: Callable[[Future[T]], object]) -> None:
        """Run ``fn(self)`` once completed (at once if it is; see the module's note on threads).
        An exception ``fn`` raises is logged, as torch and concurrent.futures do."""

        def call_fn() -> None:
            fn(self)

        def call(done: cf.Future[T]) -> None:
            run = _diverted.run
            if run is None:
                call_fn()
            else:
                run(call_fn)

        super().add_done_callback(call)

    def set_result(self, result: T) -> None:
        """Complete with ``result`` (once: a second completion raises RuntimeError)."""
        try:
            super().set_result(result)
        except cf.InvalidStateError as err:
            raise RuntimeError(_TWICE) from err

    def set_exception(self, result: BaseException | None) -> None:
        """Complete with the exception ``result`` (an ``Exception``, as torch requires)."""
        if not isinstance(result, Exception):
            raise AssertionError(f"{result} is of type {type(result)}, not an Exception.")
        try:
            super().set_exception(result)
        except cf.InvalidStateError as err:
            raise RuntimeError(_TWICE) from err

    def _settle(self, result: Any, error: BaseException | None) -> bool:
        """Complete unless already completed (the runtime's races: a reply against its
        timeout); False if it was. Any BaseException may be stored here."""
        try:
            if error is None:
                cf.Future.set_result(self, result)
            else:
                cf.Future.set_exception(self, error)
        except cf.InvalidStateError:
            return False
        return True


def outcome(future: Any) -> tuple[Any, BaseException | None]:
    """(value, None) or (None, exception) of a completed future of any kind."""
    try:
        wait = getattr(future, "wait", None)
        value = future.result() if isinstance(future, cf.Future) or wait is None else wait()
    except Exception as err:
        return None, err
    return value, None


def collect_all(futures: Sequence[Any]) -> Future[list[Any]]:
    """One future completed when all of ``futures`` are: the list of them, or the exception of
    the first failed one in list order (torch 2.13's ``collect_all``)."""
    futures = list(futures)
    combined: Future[list[Any]] = Future()
    if not futures:
        combined.set_result([])
        return combined
    lock = threading.Lock()
    remaining = [len(futures)]

    def one_done(_done: Any) -> None:
        with lock:
            remaining[0] -= 1
            if remaining[0]:
                return
        for f in futures:
            _, error = outcome(f)
            if error is not None:
                combined._settle(None, error)
                return
        combined._settle(futures, None)

    for f in futures:
        f.add_done_callback(one_done)
    return combined


def wait_all(futures: Sequence[Any]) -> list[Any]:
    """Wait for every future, then return their values, or raise the first failed one's
    exception in list order (torch 2.13: it, too, waits for all)."""
    done = collect_all(futures).wait()
    return [outcome(f)[0] for f in done]


def as_torch_future(ours: Future[T]) -> Any:
    """``ours`` as a ``torch.futures.Future`` when torch is loaded in this process (a program
    that calls ``torch.futures.wait_all``/``collect_all`` has imported it), else ``ours``.

    torch's ``wait_all`` and ``collect_all`` accept only torch's C++ futures, so rpc_async
    returns one of those, completed with ``ours``'s outcome; it keeps our ``wait(timeout)``
    and ``result()``, and its ``then`` gives such a future too. torch is never imported here."""
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "futures"):
        return ours
    return _torch_future_class(torch.futures.Future)(ours)


@functools.cache
def _torch_future_class(base: type) -> type:
    class TorchRpcFuture(base):  # type: ignore[misc]
        """torch.futures.Future completed by one of ours (see :func:`as_torch_future`)."""

        def __init__(self, ours: Future[Any]) -> None:
            super().__init__()
            self._ours = ours
            ours.add_done_callback(self._complete)

        def _complete(self, done: Future[Any]) -> None:
            value, error = outcome(done)
            if error is None:
                self.set_result(value)
            else:
                self.set_exception(error)

        def wait(self, timeout: float | None = None) -> Any:
            if timeout is not None:
                self._ours.wait(timeout)  # raises on timeout (an RPC future: RPCTimeoutError)
            return super().wait()

        def result(self, timeout: float | None = None) -> Any:
            return self.wait(timeout)

        def then(self, callback: Callable[[Any], Any]) -> Any:
            # ours does what torch's then does (its callback-error text); the child is such
            # a future too, run once this one is complete (torch's add_done_callback)
            child: Future[Any] = Future()

            def run(_fut: Any) -> None:
                try:
                    child._settle(callback(self), None)
                except Exception as err:
                    wrapped = RuntimeError(
                        "Got the following error when running the callback: "
                        f"{type(err).__name__}: {err}"
                    )
                    wrapped.__cause__ = err
                    child._settle(None, wrapped)

            super().add_done_callback(run)
            return TorchRpcFuture(child)

    return TorchRpcFuture
