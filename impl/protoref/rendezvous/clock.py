"""Clocks: the only place time is read. The core takes ``now`` from a driver's clock."""

from __future__ import annotations

import math
import threading
import time
from typing import Protocol

__all__ = ["Clock", "FakeClock", "MonotonicClock", "TickClock"]


class Clock(Protocol):
    def now(self) -> float:
        """Seconds; only differences matter."""
        ...

    def until(self, t: float) -> float:
        """Real seconds to wait until ``now()`` reads at least ``t`` (<= 0: it does)."""
        ...


class MonotonicClock:
    """``time.monotonic()``: system-wide on Linux, so processes of one host agree on it.

    (Several hosts need a wall clock, as torch's UTC timestamps; the etcd store would use one.)
    """

    def now(self) -> float:
        return time.monotonic()

    def until(self, t: float) -> float:
        return t - time.monotonic()


class TickClock:
    """``time.monotonic()`` rounded down to a multiple of ``tick`` (traced handler runs).

    DynamicRendezvous.tla counts time in ticks; a handler whose clock only moves in whole ticks
    takes every time-based decision (deadline passed, heartbeat due or expired, read cache
    fresh: ``cache_duration`` = one tick) exactly as the spec does at that tick, so its trace
    can be replayed. ``tick`` must be a power of two (``2**-4`` s): multiples are then exact
    binary fractions and sums of them compare exactly.
    """

    def __init__(self, tick: float = 2.0**-4) -> None:
        mantissa, _ = math.frexp(tick)
        if tick <= 0 or mantissa != 0.5:
            raise ValueError(f"TickClock: tick must be a power of two, got {tick}")
        self.tick = tick

    def now(self) -> float:
        return math.floor(time.monotonic() / self.tick) * self.tick

    def until(self, t: float) -> float:
        return math.ceil(t / self.tick) * self.tick - time.monotonic()


class FakeClock:
    """A clock tests move by hand."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def until(self, t: float) -> float:
        return t - self.now()

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds
