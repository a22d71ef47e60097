"""Clocks: the only place time is read. The core takes ``now`` from a driver's clock.

Every clock names its **domain**: two readings are comparable (their difference is elapsed time)
exactly when their clocks share a domain. ``time.monotonic()`` is CLOCK_MONOTONIC, system-wide on
Linux, so every process of one host (one boot, one time namespace) shares the domain
:func:`host_clock_domain`; another host's monotonic clock counts from its own boot and is a
different domain. The state holder writes a stamp with its clock's domain and trusts a stamp's
value only when the domain is its own (:mod:`protoref.rendezvous.core.stamps`); other stamps it only
observes changing, on its own clock.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import threading
import time
import uuid
from functools import cache
from pathlib import Path
from typing import Protocol

__all__ = [
    "Clock",
    "FakeClock",
    "MonotonicClock",
    "OffsetClock",
    "TickClock",
    "host_clock_domain",
]


class Clock(Protocol):
    @property
    def domain(self) -> str:
        """Readings of two clocks compare iff their domains are equal (short, printable)."""
        ...

    def now(self) -> float:
        """Seconds; only differences within one domain matter."""
        ...

    def until(self, t: float) -> float:
        """Real seconds to wait until ``now()`` reads at least ``t`` (<= 0: it does)."""
        ...


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="ascii").strip()
    except OSError:
        return None


@cache
def host_clock_domain() -> str:
    """The domain of this host's CLOCK_MONOTONIC: the boot id and the time namespace.

    Linux keeps one CLOCK_MONOTONIC per boot, offset per time namespace (Linux 5.6+), so
    processes sharing both read the same clock. Where neither can be read (not Linux), the
    domain is this process's own: no other process's stamp is then trusted, which is slower
    to detect a dead node but never wrong.
    """
    boot = _read("/proc/sys/kernel/random/boot_id")
    if boot is None:
        return f"p{uuid.uuid4().hex[:15]}"
    try:
        namespace = str(Path("/proc/self/ns/time").readlink())
    except OSError:
        namespace = ""
    return "m" + hashlib.sha256(f"{boot}|{namespace}".encode()).hexdigest()[:15]


class MonotonicClock:
    """``time.monotonic()``: one domain per host (:func:`host_clock_domain`)."""

    @property
    def domain(self) -> str:
        return host_clock_domain()

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
    binary fractions and sums of them compare exactly. The domain is the host's monotonic one.
    """

    def __init__(self, tick: float = 2.0**-4) -> None:
        mantissa, _ = math.frexp(tick)
        if tick <= 0 or mantissa != 0.5:
            raise ValueError(f"TickClock: tick must be a power of two, got {tick}")
        self.tick = tick

    @property
    def domain(self) -> str:
        return host_clock_domain()

    def now(self) -> float:
        return math.floor(time.monotonic() / self.tick) * self.tick

    def until(self, t: float) -> float:
        return math.ceil(t / self.tick) * self.tick - time.monotonic()


_fake_ids = itertools.count()


class FakeClock:
    """A clock tests move by hand; its own domain unless ``domain`` is given."""

    def __init__(self, start: float = 1000.0, *, domain: str | None = None) -> None:
        self._now = start
        self._lock = threading.Lock()
        self._domain = domain or f"fake{next(_fake_ids)}"

    @property
    def domain(self) -> str:
        return self._domain

    def now(self) -> float:
        with self._lock:
            return self._now

    def until(self, t: float) -> float:
        return t - self.now()

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds


class OffsetClock:
    """``base`` read ``offset`` seconds ahead: another host's clock, for tests of skew.

    The domain is a fresh one (the clock stands for another host, whose readings nobody else
    can compare with theirs) unless ``domain`` is given: passing ``base.domain`` makes the
    skewed readings look comparable, which is what trusting a skewed wall clock amounts to.
    """

    def __init__(self, base: Clock, offset: float, *, domain: str | None = None) -> None:
        if not math.isfinite(offset):
            raise ValueError(f"OffsetClock: offset must be finite, got {offset}")
        self.base = base
        self.offset = offset
        self._domain = domain or f"x{uuid.uuid4().hex[:15]}"

    @property
    def domain(self) -> str:
        return self._domain

    def now(self) -> float:
        return self.base.now() + self.offset

    def until(self, t: float) -> float:
        return self.base.until(t - self.offset)
