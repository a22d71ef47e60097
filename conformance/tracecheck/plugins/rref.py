"""protoref's RRef implementation as tracecheck's ``rref`` plug-in: its event schema
(``protoref.rref.trace.EVENT_ADAPTER``) and its seeded simulator (``protoref.rref.sim.simulator``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from protoref.rref.sim.simulator import SimConfig, Simulator
from protoref.tracing import JsonlSink
from tracecheck.plugins import Plugin

__all__ = ["PLUGIN", "STEADY_APP_WEIGHT", "simulate"]

#: The share of application steps at which the simulator's network keeps up: measured on
#: seed 1000, the messages in flight stay under about 100 over 40,000 steps at 0.2 and 0.25,
#: while at the default 0.35 they grow without bound (818 after 10,000 steps, 6,911 after
#: 80,000: the application sends faster than the scheduler delivers), and with them the
#: forks and pending children waiting on those messages. A long run of a real system is in
#: the first regime; the bench's long trace uses it (docs/performance.md).
STEADY_APP_WEIGHT = 0.2


def simulate(seed: int, steps: int, out: Path, *, app_weight: float | None = None) -> None:
    """One seeded random run of protoref's RRef simulator, its trace written to ``out``.

    Every run ends with the graceful-shutdown phase (``SimConfig(shutdown=True)``): Shutdown is
    TRUE in the headers, so WaitAllWorkers, DelAllUsersAndUnforkedOwners and DestroyInstance
    occur. All runs share one configuration, so a campaign's traces still validate in one TLC
    run (traces with different constants cannot share one); the workload phase before the
    barrier is the same as without shutdown. Retried first attempts may be lost
    (``lose_first_attempts``, RRef.tla ``LoseFirstAttempt``), as the runtime's are when a
    connection breaks. ``app_weight`` is the share of application steps (the simulator's
    default when None; :data:`STEADY_APP_WEIGHT` for a run whose state stays bounded).
    """
    # rare_paths: the application sometimes misuses a timed-out RRef (the core must refuse)
    # and shares one whose rpc.remote call is slow (the owner-creation race), issue #21.
    config = SimConfig(shutdown=True, lose_first_attempts=True, rare_paths=True)
    if app_weight is not None:
        config = replace(config, app_weight=app_weight)
    sink = JsonlSink(str(out))
    try:
        Simulator(seed, config, sink=sink).run(steps)
    finally:  # a run that raised keeps what it logged (the campaign validates it)
        sink.close()


def _events() -> TypeAdapter[Any]:
    from protoref.rref.trace import EVENT_ADAPTER  # noqa: PLC0415 - when a trace is checked

    return EVENT_ADAPTER


PLUGIN = Plugin(protocol="rref", implementation="protoref", event_schema=_events, simulate=simulate)
