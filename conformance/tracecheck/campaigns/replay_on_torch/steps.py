"""A counterexample as the message order a torch program can follow.

For the RPC protocols (rref, autograd) each step of a TLC counterexample takes messages from the
spec's ``net`` and sends others; the order in which message types are *taken* (handled by their
receiver) is what the fault agent's delays must reproduce on torch. Rendezvous has no network:
its steps are the actions TLC labels them with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from tracecheck.runner.results import Counterexample

__all__ = ["Step", "first_taken", "steps_of", "takes_before"]


class Step(BaseModel):
    """One step: TLC's label, the message types it took and sent, the variables it changed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    action: str
    taken: tuple[str, ...] = ()
    sent: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()


def _types(msgs: Any) -> tuple[str, ...]:
    out: list[str] = []
    for m in msgs:
        try:
            out.append(str(m["type"]))
        except (KeyError, TypeError):
            continue
    return tuple(sorted(out))


def steps_of(cex: Counterexample) -> list[Step]:
    """The counterexample's steps after the initial state."""
    out: list[Step] = []
    states = cex.states
    for i in range(1, len(states)):
        p, v = states[i - 1].values, states[i].values
        before, after = p.get("net"), v.get("net")
        taken: tuple[str, ...] = ()
        sent: tuple[str, ...] = ()
        if isinstance(before, frozenset) and isinstance(after, frozenset):
            taken, sent = _types(before - after), _types(after - before)
        changed = tuple(sorted(k for k in v if p.get(k) != v[k]))
        out.append(
            Step(
                index=states[i].index,
                action=states[i].action or "",
                taken=taken,
                sent=sent,
                changed=changed,
            )
        )
    return out


def first_taken(steps: Sequence[Step], kind: str) -> int | None:
    """The position of the first step that takes a message of type ``kind``."""
    return next((i for i, s in enumerate(steps) if kind in s.taken), None)


def takes_before(steps: Sequence[Step], first: str, then: str) -> bool:
    """Is a ``first`` message taken before any ``then`` message (which is taken at all)?"""
    a, b = first_taken(steps, first), first_taken(steps, then)
    return a is not None and b is not None and a < b
