"""The handler's heartbeat timer (torch: ``_PeriodicTimer``), one thread per handler for its life.

torch starts a timer thread at the end of every ``next_rendezvous`` and joins it at the start of
the next. Starting a thread waits for it to run, which under the GIL is a hand-off per node: at
N = 64 handler threads in one process that alone took tens of milliseconds of the time to the
last node's return. This timer's thread starts with the handler, and ``next_rendezvous`` only
pauses and resumes it (same semantics: after ``pause()`` returns no callback runs until
``resume()``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from protoref.rendezvous.runtime.clock import MonotonicClock

__all__ = ["HeartbeatTimer"]


class HeartbeatTimer:
    """Calls ``callback`` every ``interval`` seconds while resumed."""

    def __init__(self, interval: float, callback: Callable[[], None], name: str) -> None:
        self._interval = interval
        self._callback = callback
        self._clock = MonotonicClock()  # real time, as torch's timer: not the handler's clock
        self._cond = threading.Condition()
        self._running = False
        self._closed = False
        self._busy = False  # a callback is running
        self._next = 0.0
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def resume(self) -> None:
        """Start beating: the first callback one interval from now."""
        with self._cond:
            self._running, self._next = True, self._clock.now() + self._interval
            self._cond.notify_all()

    def pause(self) -> None:
        """Stop beating; wait for a running callback to end (unless called from it)."""
        with self._cond:
            self._running = False
            self._cond.notify_all()
            if threading.current_thread() is not self._thread:
                self._cond.wait_for(lambda: not self._busy)

    def close(self) -> None:
        """End the thread."""
        with self._cond:
            self._closed, self._running = True, False
            self._cond.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _due(self) -> float | None:
        """Seconds until the next beat (<= 0: now), None while paused."""
        return self._next - self._clock.now() if self._running else None

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed and ((due := self._due()) is None or due > 0):
                    self._cond.wait(due)
                if self._closed:
                    return
                self._busy, self._next = True, self._next + self._interval
            try:
                self._callback()
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
