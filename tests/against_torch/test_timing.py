"""The timing hooks: one clock of whole ticks, pinned inside a step; what they replace in torch's
module and that they put it back (a stand-in module, no torch needed)."""

from __future__ import annotations

import random
import threading
import time
from datetime import UTC, timedelta
from types import ModuleType
from typing import Any

import pytest

from protoref.torch.timing import BASE_TICK, EPOCH, TickTime, set_acting_node, torch_timing


def test_ticks_count_from_the_origin_and_a_step_reads_one_tick() -> None:
    clock = TickTime(time.monotonic_ns() - 5_500_000, 0.001)  # 5.5 ticks ago
    assert clock.tick() >= BASE_TICK + 5
    with clock.pinned() as tick:
        time.sleep(0.003)
        assert clock.now() == float(tick)  # every reading of the step is the step's tick
        assert clock.utc() == EPOCH + timedelta(seconds=tick)
        with clock.pinned() as inner:  # nested: the outer pin holds
            assert inner == tick
        seen: list[float] = []
        other = threading.Thread(target=lambda: seen.append(clock.now()))
        other.start()
        other.join()
        assert seen[0] > tick  # other threads are not pinned
    assert clock.pinned_tick() is None
    assert clock.now() > tick


class _Timer:
    def __init__(self, interval: timedelta, function: Any, *args: Any) -> None:
        self.interval = interval


def _fake_module() -> ModuleType:
    dr = ModuleType("fake_dynamic_rendezvous")
    dr.time = time  # type: ignore[attr-defined]
    dr.datetime = object()  # type: ignore[attr-defined]
    dr._delay = lambda seconds: None  # type: ignore[attr-defined]
    dr._PeriodicTimer = _Timer  # type: ignore[attr-defined]
    return dr


def test_torch_timing_replaces_four_names_and_puts_them_back() -> None:
    dr = _fake_module()
    before = dict(vars(dr))
    clock = TickTime(time.monotonic_ns(), 0.001)
    held: list[tuple[str | None, float]] = []

    def hook(node: str | None, seconds: float) -> bool:
        held.append((node, seconds))
        return seconds == 1  # a forced schedule takes over the SYNC sleep

    with torch_timing(dr, clock, random.Random(1), hook):
        with clock.pinned() as tick:
            assert dr.time.monotonic() == tick
            assert dr.datetime.now(UTC) == EPOCH + timedelta(seconds=tick)
            with pytest.raises(RuntimeError, match="serves UTC only"):
                dr.datetime.now()
        assert dr._PeriodicTimer(timedelta(seconds=5), print).interval == timedelta(seconds=0.005)
        set_acting_node("n1")
        dr._delay(1)
        dr._delay((0, 0.3))  # torch's random start delay, drawn from the run's generator
        set_acting_node(None)
        with (
            pytest.raises(RuntimeError, match="already active"),
            torch_timing(dr, clock, random.Random(1)),
        ):
            pass
    assert held[0] == ("n1", 1)
    assert held[1][0] == "n1"
    assert 0 <= held[1][1] <= 0.3
    assert dict(vars(dr)) == before
