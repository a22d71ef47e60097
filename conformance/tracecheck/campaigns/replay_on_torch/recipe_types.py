"""The kinds of replay recipe (:mod:`.recipes`) and the helpers their symptom checks share.

A recipe reads the model's counterexample (:mod:`.steps`) and either derives the torch run from
it (the fault agent's delays from the order in which message types are taken, the program's own
timing for what the agent cannot order), returning a string when the counterexample lacks the
order the program realizes; or it says why no torch run can follow the counterexample.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tracecheck.campaigns.replay_on_torch.steps import Step

__all__ = [
    "ABLATION",
    "Facts",
    "NotReplayed",
    "NotReproducible",
    "Planner",
    "Recipe",
    "RendezvousReplay",
    "RpcReplay",
    "Symptom",
    "fact",
    "waiting",
]

Facts = Mapping[str, Any]
#: the plan (FaultPlan fields) derived from the steps, or why the steps do not fit the program
Planner = Callable[[Sequence[Step]], "dict[str, Any] | str"]
#: the symptom torch showed, or None when the facts do not show it
Symptom = Callable[[Facts], "str | None"]


@dataclass(frozen=True)
class RpcReplay:
    """A program of :mod:`protoref.torch.rpc_programs` on FAULTY_TENSORPIPE workers."""

    program: str
    plan: Planner
    symptom: Symptom
    world: int = 2


@dataclass(frozen=True)
class RendezvousReplay:
    """A forced schedule of :mod:`protoref.torch.defects` (its own check decides)."""

    scenario: str
    shape: Callable[[Sequence[Step]], str | None]
    #: what the schedule's own check established when it passes (before the returns)
    shown: str = ""


@dataclass(frozen=True)
class NotReproducible:
    """No torch run can follow the counterexample: why."""

    reason: str


@dataclass(frozen=True)
class NotReplayed:
    """A torch run could follow the counterexample, but no program does yet: what it needs."""

    reason: str


Recipe = RpcReplay | RendezvousReplay | NotReproducible | NotReplayed


def fact(facts: Facts, *path: str) -> Any:
    """``facts[path[0]][path[1]]...``, or None where a key is missing."""
    cur: Any = facts
    for key in path:
        if not isinstance(cur, Mapping) or key not in cur:
            return None
        cur = cur[key]
    return cur


def waiting(value: Any) -> bool:
    """Is ``value`` a program's report that a call was still waiting (a hang)?"""
    return isinstance(value, str) and value.startswith("still waiting")


ABLATION: Final = (
    "an ablation of a check torch ships (the model removes it to show its teeth); "
    "unchanged torch keeps the check, so it has no run to follow"
)
