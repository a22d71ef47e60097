"""torch 2.13's own rendezvous handler, run by protoref's harness (:mod:`protoref.torch`): the
plug-in the ``torch-rendezvous`` campaign reaches torch through. Its traces are of the
``rendezvous`` protocol (validated against the ``rendezvous`` plug-in's event schema); what
this module adds is how to run them: the scenarios, the two forced defect schedules, and the
check that the installed torch is 2.13."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from protoref.torch.compat import TorchUnavailableError, require_torch, torch_version
from protoref.torch.defects import DEFECT_SCENARIOS, PYTORCH_111646, RANK_WORLD
from protoref.torch.driver import run_scenario
from protoref.torch.processes import PROCESS_SCENARIOS, node_processes, run_processes
from protoref.torch.replay_schedules import REPLAY_SCENARIOS
from protoref.torch.run import next_local_id, restart_local_ids
from protoref.torch.scenarios import SCENARIOS

__all__ = [
    "DEFECT_SCENARIOS",
    "PYTORCH_111646",
    "RANK_WORLD",
    "REPLAY_SCENARIOS",
    "TorchUnavailableError",
    "next_local_id",
    "node_processes",
    "require_torch",
    "restart_local_ids",
    "run",
    "run_scenario",
    "scenario_names",
    "torch_version",
]


def scenario_names(*, processes: bool = True) -> list[str]:
    """Every scenario, in campaign order: threads, then the defect schedules, then processes."""
    names = [*SCENARIOS, *DEFECT_SCENARIOS]
    return names + list(PROCESS_SCENARIOS) if processes else names


def run(name: str, seed: int, folder: Path) -> Any:
    """Run the scenario ``name`` with ``seed``, its trace in ``folder``: the harness's record of
    the run (its ``trace``, ``store``, ``events``, ``defect``, ``problems``, ``outcomes``)."""
    if name in PROCESS_SCENARIOS:
        return run_processes(PROCESS_SCENARIOS[name], seed, folder)
    return run_scenario({**SCENARIOS, **DEFECT_SCENARIOS}[name], seed, folder)
