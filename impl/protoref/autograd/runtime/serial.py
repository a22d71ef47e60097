"""One thread per worker that runs its autograd frames in arrival order, off the RPC loop.

The RPC layer's event loop reads a worker's links; a backward-pass message makes the engine run
a local pass (torch's autograd for torch tensors), which must not hold the loop up (issue 26 §1:
"the engine must not run on the RPC event-loop thread"). :class:`Serial` takes what the loop
hands it and runs it on its own thread, one item after the other in the order handed (so the
frames of a link stay in their order, as when the loop ran them). :meth:`Serial.run` runs a
call at once on the caller's thread instead when nothing handed earlier is still waiting or
running (the order is the same) and the caller says the call is short (a frame that runs no
local pass): one thread hop fewer on the backward's acknowledgements.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, Final

__all__ = ["Serial"]

_STOP: Final = object()
log = logging.getLogger("protoref.autograd.runtime")


class Serial:
    """A FIFO of calls run on one daemon thread (started on the first :meth:`submit`)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._pending = 0  # handed to the thread and not yet finished

    def submit(self, fn: Callable[..., object], *args: object) -> None:
        self.run(False, fn, *args)

    def run(self, short: bool, fn: Callable[..., object], *args: object) -> None:
        """``fn(*args)`` after what was handed before: here and now if ``short`` and nothing
        is pending, else on the thread."""
        with self._lock:
            if self._closed:
                return
            now = short and self._pending == 0
            if not now:
                self._pending += 1
                if self._thread is None:
                    self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                    self._thread.start()
                self._queue.put((fn, args))
        if now:
            self._call(fn, args)

    def _call(self, fn: Callable[..., object], args: tuple[object, ...]) -> None:
        try:
            fn(*args)
        except Exception as err:  # one frame's failure must not stop the others
            log.warning("%s: %s failed: %s", self.name, getattr(fn, "__name__", fn), err)

    def _loop(self) -> None:
        while (item := self._queue.get()) is not _STOP:
            fn, args = item
            self._call(fn, args)
            with self._lock:
                self._pending -= 1

    def close(self, timeout: float = 5.0) -> None:
        """Run what was handed so far, then stop the thread."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            self._queue.put(_STOP)
            thread.join(timeout)
