"""protoref's rendezvous implementation as tracecheck's ``rendezvous`` plug-in: its event
schema (``protoref.rendezvous.trace.EVENT_ADAPTER``, which torch's handler's traces are
validated against too) and its seeded simulator (``protoref.rendezvous.sim.simulator``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from protoref.rendezvous.sim.simulator import SimConfig, Simulator
from protoref.tracing import JsonlSink
from tracecheck.plugins import Plugin

__all__ = ["PLUGIN", "simulate"]


def simulate(seed: int, steps: int, out: Path) -> None:
    """One seeded random run of protoref's rendezvous simulator, its trace written to ``out``.

    Four nodes, min 2, max 3, any node may close from tick 6, agents asking ``is_closed()``,
    a join timeout of 6 ticks: 20 runs of 150 steps exercise every spec action (last call and
    completion, the wait and redundancy lists, close, graceful exit of a redundant node,
    read-only syncs, the rollback of a waiting node). (With the Reference epilogue a leave ends
    the complete round, so waiters rarely wait long; at the default 12 ticks no waiter's join
    timed out in 50 runs.)
    """
    config = SimConfig(
        nodes=4,
        min_nodes=2,
        max_nodes=3,
        closers=4,
        close_after=6,
        read_only_syncs=True,
        join_timeout=6,
        # An exit op that times out (issue #21's rare paths): a participant that rejoins may
        # stall past its op deadline (7 ticks), so its heartbeat must outlive that (4 x 2),
        # or its own sync finds it dead and the exit op just finishes.
        stalls=True,
        keep_alive_max_attempt=4,
    )
    sink = JsonlSink(str(out))
    try:
        Simulator(seed, config, sink=sink).run(steps)
    finally:  # a run that raised keeps what it logged (the campaign validates it)
        sink.close()


def _events() -> TypeAdapter[Any]:
    from protoref.rendezvous.trace.events import EVENT_ADAPTER  # noqa: PLC0415 - when a trace is checked

    return EVENT_ADAPTER


PLUGIN = Plugin(
    protocol="rendezvous", implementation="protoref", event_schema=_events, simulate=simulate
)
