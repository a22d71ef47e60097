"""Clocks: the only place time is read. The core takes ``now`` from a driver's clock."""

from __future__ import annotations

import threading
import time
from typing import Protocol

__all__ = ["Clock", "FakeClock", "MonotonicClock"]


class Clock(Protocol):
    def now(self) -> float:
        """Seconds; only differences matter."""
        ...


class MonotonicClock:
    """``time.monotonic()``: system-wide on Linux, so processes of one host agree on it.

    (Several hosts need a wall clock, as torch's UTC timestamps; the etcd store would use one.)
    """

    def now(self) -> float:
        return time.monotonic()


class FakeClock:
    """A clock tests move by hand."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds
