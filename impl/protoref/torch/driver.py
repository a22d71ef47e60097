"""Run a threaded scenario: one :class:`~protoref.torch.run.TorchRun`, its stage, its trace.

:func:`run_scenario` builds the store the scenario names (a ``HashStore``, a ``TCPStore``
server on loopback, or a ``FileStore`` in the run's folder), runs the scenario's agents,
merges the records into ``<folder>/<name>-seed<seed>.ndjson`` and returns a
:class:`ScenarioRun`: the trace, what every agent got from torch, and the problems found
(a thread that failed, a forced schedule that did not reproduce its defect).
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict

from protoref.torch.run import TorchRun, torch_header, write_trace
from protoref.torch.scenarios import Scenario
from protoref.torch.stage import Joined, Stage

__all__ = ["TICK_REAL", "ScenarioRun", "run_scenario"]

#: Real seconds per tick (= torch second): runs go 10 times faster than real time.
TICK_REAL: Final = 0.1


class ScenarioRun(BaseModel):
    """One scenario run: its trace and what torch returned to each agent."""

    model_config = ConfigDict(frozen=True)

    scenario: str
    seed: int
    store: str
    trace: Path
    events: int
    defect: str | None
    #: node -> what each next_rendezvous returned ("rank/world@round", "closed", ...)
    outcomes: dict[str, list[str]]
    #: node -> every num_nodes_waiting() answer
    waiting: dict[str, list[int]]
    #: what went wrong in the run itself (not the checker's verdict)
    problems: list[str]


def _label(outcome: Joined | str) -> str:
    if isinstance(outcome, Joined):
        return f"{outcome.rank}/{outcome.world}@{outcome.round}"
    return outcome


def run_scenario(
    scenario: Scenario, seed: int, folder: Path, *, tick_real: float = TICK_REAL
) -> ScenarioRun:
    """Run ``scenario`` with ``seed``; its files go to ``folder / <name>-seed<seed>/``."""
    work = folder / f"{scenario.name}-seed{seed}"
    shutil.rmtree(work, ignore_errors=True)  # the same run made again replaces its files
    work.mkdir(parents=True)
    servers: list[object] = []  # a TCPStore server outlives every handler of the run
    with TorchRun(work, scenario.cfg, seed=seed, tick_real=tick_real) as run:
        stage = Stage(run, _stores(run, scenario.store, work, servers))
        run.hook = stage.on_delay
        problems: list[str] = []
        try:
            scenario.drive(stage, random.Random(seed))
        except TimeoutError as err:
            problems.append(str(err))
        problems += [f"{type(e).__name__}: {e}" for e in stage.errors]
        if scenario.check is not None:
            problems += scenario.check(stage)
        descs = [a.handler._this_node for a in stage.agents]
    header = torch_header(
        scenario.cfg,
        descs,
        seed=seed,
        tick_real=tick_real,
        store=scenario.store,
        scenario=scenario.name,
    )
    out = folder / f"{scenario.name}-seed{seed}.ndjson"
    events = write_trace([work / "raw.jsonl"], header, out)
    return ScenarioRun(
        scenario=scenario.name,
        seed=seed,
        store=scenario.store,
        trace=out,
        events=events,
        defect=scenario.defect,
        outcomes={a.name: [_label(o) for o in a.outcomes] for a in stage.agents},
        waiting={a.name: list(a.waiting_seen) for a in stage.agents},
        problems=problems,
    )


def _stores(run: TorchRun, kind: str, work: Path, servers: list[object]) -> Callable[[], Any]:
    """Each new handler's store: one ``HashStore`` shared by the threads (it lives in this
    process), or a client of its own (a ``TCPStore`` client of one server on loopback, a
    ``FileStore`` on one file), as the nodes of a real run have."""
    if kind == "hash":
        store = run.hash_store()
        return lambda: store
    if kind == "tcp":
        server = run.tcp_server()
        servers.append(server)
        return lambda: run.tcp_client(server.port)
    if kind == "file":
        path = work / "store"
        return lambda: run.file_store(path)
    raise ValueError(f"unknown store {kind!r} (hash, tcp, file)")
