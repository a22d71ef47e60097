"""protoref's distributed-autograd implementation as tracecheck's ``autograd`` plug-in: its
event schema (``protoref.autograd.trace.events.EVENT_ADAPTER``) and its seeded simulator
(``protoref.autograd.sim.simulator``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from protoref.autograd.sim.simulator import SimConfig, Simulator
from protoref.tracing import JsonlSink
from tracecheck.plugins import Plugin

__all__ = ["PLUGIN", "simulate"]


def simulate(seed: int, steps: int, out: Path) -> None:
    """One seeded random run of protoref's autograd simulator, its trace written to ``out``.

    Three workers, two of them opening contexts, nesting, late forward messages, duplicated
    cleanups and outputs that miss the loss in every run; every fourth seed worker 0 alone
    opens contexts and may crash (during a pass, too: a gradient request then meets a dead
    worker). All runs share one configuration of the spec's constants (worker 0 may crash),
    so a campaign validates in one batch.
    """
    crash = seed % 4 == 0
    config = SimConfig(crash=crash, creators=(0,) if crash else (0, 1))
    with JsonlSink(str(out)) as sink:  # closed also when a (planted) bug stops the run
        Simulator(seed, config, sink=sink).run(steps)


def _events() -> TypeAdapter[Any]:
    from protoref.autograd.trace.events import EVENT_ADAPTER  # noqa: PLC0415 - when a trace is checked

    return EVENT_ADAPTER


PLUGIN = Plugin(
    protocol="autograd", implementation="protoref", event_schema=_events, simulate=simulate
)
