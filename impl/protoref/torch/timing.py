"""Timing hooks: torch's rendezvous on one clock of whole ticks, faster than real time.

torch's ``dynamic_rendezvous`` reads time in four places: ``time.monotonic()`` (the read cache,
op deadlines), ``datetime.now(timezone.utc)`` (heartbeats, the last-call deadline, the
sanitizer's expiry), ``_delay`` (the SYNC action's fixed 1 s sleep, the random 0-0.3 s start
delay) and ``_PeriodicTimer`` (the heartbeat timer, every ``keep_alive_interval``).
:func:`torch_timing` replaces those four module globals of ``dynamic_rendezvous`` for the
duration of a run, and nothing else: every decision is still torch's own code.

- **One clock, whole ticks.** One torch second is one tick of DynamicRendezvous.tla (torch's
  hard-coded 1 s SYNC sleep, 1 s read cache and 5 s rollback window are then exactly 1, 1 and 5
  ticks). A tick lasts ``tick_real`` real seconds, so a run goes ``1 / tick_real`` times faster
  than real time. :class:`TickTime` counts ticks from an origin on ``CLOCK_MONOTONIC``, which is
  system-wide on Linux: the processes of a run agree on it.
- **Pinned inside a step.** A step (an op start; a sync with the decision and business function
  after it; a read-only sync) reads the clock several times (cache test, sanitize, the op's
  deadline and last-call tests, the heartbeat it writes). :meth:`TickTime.pinned` makes every
  reading of the thread inside a step return the tick at which the step took the step lock, so
  the step is one spec step at one tick, as the spec has it.
- **Delays and timers scaled.** ``_delay(s)`` sleeps ``s`` ticks (torch's rule kept: a random
  range is drawn, here from the run's seeded generator; below 10 ms nothing happens); the
  heartbeat timer's period is ``keep_alive_interval`` ticks. A forced schedule may replace a
  node's delay by a wait for an event of the run (:class:`DelayHook`): a timing hook, no logic.
"""

from __future__ import annotations

import contextlib
import math
import random
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any, Final

__all__ = ["EPOCH", "DelayHook", "TickTime", "acting_node", "set_acting_node", "torch_timing"]

#: What torch's ``datetime.now(timezone.utc)`` reads at tick 0.
EPOCH: Final = datetime(2026, 1, 1, tzinfo=UTC)
#: Tick numbers start here, so torch's ``max(time.monotonic() - cache, 0)`` never clips.
BASE_TICK: Final = 1_000_000

#: ``hook(node, ticks)``: True when it did the waiting itself (a forced schedule), False to let
#: the delay sleep as usual.
DelayHook = Callable[[str | None, float], bool]

_acting = threading.local()


def set_acting_node(node: str | None) -> None:
    """Name the node whose torch code this thread runs (for delay hooks)."""
    _acting.node = node


def acting_node() -> str | None:
    """The node set by :func:`set_acting_node` in this thread, if any."""
    node: str | None = getattr(_acting, "node", None)
    return node


class TickTime:
    """Ticks since ``origin_ns`` (a ``time.monotonic_ns()`` reading), each ``tick_real`` s long."""

    def __init__(self, origin_ns: int, tick_real: float) -> None:
        if tick_real <= 0:
            raise ValueError(f"tick_real must be positive, got {tick_real}")
        self.origin_ns = origin_ns
        self.tick_real = tick_real
        self._tick_ns = tick_real * 1e9
        self._pin = threading.local()

    def tick(self) -> int:
        """The current tick (not pinned)."""
        return BASE_TICK + math.floor((time.monotonic_ns() - self.origin_ns) / self._tick_ns)

    def now(self) -> float:
        """What torch's ``time.monotonic()`` reads: the pinned tick inside a step, else now."""
        pinned: int | None = getattr(self._pin, "tick", None)
        return float(self.tick() if pinned is None else pinned)

    def pinned_tick(self) -> int | None:
        """The tick this thread's current step is pinned to (None outside a step)."""
        pinned: int | None = getattr(self._pin, "tick", None)
        return pinned

    @contextlib.contextmanager
    def pinned(self) -> Iterator[int]:
        """Pin this thread's readings to the current tick (nested: the outer pin holds)."""
        outer: int | None = getattr(self._pin, "tick", None)
        if outer is not None:
            yield outer
            return
        self._pin.tick = self.tick()
        try:
            yield self._pin.tick
        finally:
            self._pin.tick = None

    def utc(self) -> datetime:
        """What torch's ``datetime.now(timezone.utc)`` reads."""
        return EPOCH + timedelta(seconds=self.now())

    def sleep(self, ticks: float) -> None:
        """Sleep ``ticks`` ticks of real time."""
        time.sleep(ticks * self.tick_real)


class _TimeShim:
    """``dynamic_rendezvous.time``: ``monotonic()`` on the tick clock, the rest as ``time``."""

    def __init__(self, clock: TickTime) -> None:
        self._clock = clock

    def monotonic(self) -> float:
        return self._clock.now()

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


class _DatetimeShim:
    """``dynamic_rendezvous.datetime``: ``now(tz)`` on the tick clock (torch passes UTC)."""

    def __init__(self, clock: TickTime) -> None:
        self._clock = clock

    def now(self, tz: Any = None) -> datetime:
        if tz is not UTC:
            raise RuntimeError(f"torch asked for datetime.now({tz!r}); the adapter serves UTC only")
        return self._clock.utc()


_PATCHED = ("time", "datetime", "_delay", "_PeriodicTimer")
_active = threading.Lock()


@contextlib.contextmanager
def torch_timing(
    dr: ModuleType, clock: TickTime, rng: random.Random, hook: DelayHook | None = None
) -> Iterator[None]:
    """Put ``dr`` (torch's ``dynamic_rendezvous``) on ``clock`` until the block ends."""
    if not _active.acquire(blocking=False):
        raise RuntimeError("torch_timing is already active in this process (one run at a time)")
    originals = {name: getattr(dr, name) for name in _PATCHED}
    timer_cls = originals["_PeriodicTimer"]

    def delay(seconds: float | tuple[float, float]) -> None:
        if isinstance(seconds, tuple):  # torch: random.uniform(*seconds)
            seconds = rng.uniform(*seconds)
        start = time.monotonic()
        if hook is not None and hook(acting_node(), seconds):
            # A held delay still lasts at least what torch asked for: a forced schedule only
            # lengthens a sleep. Returning early let a sleeper wake in the tick it fell asleep
            # in, which torch cannot do and DynamicRendezvous.tla's SyncReady forbids (on a
            # quiet machine the other node's steps took less than one tick).
            rest = seconds * clock.tick_real - (time.monotonic() - start)
            if seconds >= 0.01 and rest > 0:
                time.sleep(rest)
            return
        if seconds >= 0.01:  # torch ignores delays under 10 ms
            clock.sleep(seconds)

    def timer(interval: timedelta, function: Callable[..., None], *args: Any) -> Any:
        return timer_cls(
            timedelta(seconds=interval.total_seconds() * clock.tick_real), function, *args
        )

    replacements = {
        "time": _TimeShim(clock),
        "datetime": _DatetimeShim(clock),
        "_delay": delay,
        "_PeriodicTimer": timer,
    }
    try:
        for name, value in replacements.items():
            setattr(dr, name, value)
        yield
    finally:
        for name, value in originals.items():
            setattr(dr, name, value)
        _active.release()
