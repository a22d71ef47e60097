"""Forced schedules: real torch 2.13 reproducing two real torch defects (timing hooks only).

- ``rank_world`` (the notes, Findings of 2026-11-26): min = max = 2. Node A joins first and
  sleeps in SYNC; its sleep is held (a delay hook, nothing else) until node B has completed
  the round with its own write, returned rank 0 of world 2, called ``next_rendezvous()`` again
  at once (an agent restarting after an immediate worker failure) and written itself into the
  wait list: its exit op removed it from the *complete* round, which stays complete at the
  same number. A wakes, finishes, and ``_get_world()`` returns **rank 1 in a world of size 1**.
  The spec states "a returned rank is below the returned world size; nodes returning from the
  same round agree on membership and ranks" (``RankBelowWorldInv``, ``WorldAgreementInv``): the
  checker's invariant pass flags A's ``Finish``.
- ``pytorch_111646``: min = max = 2; both return; B dies (no more heartbeats). A's agent asks
  ``num_nodes_waiting()`` every tick: after keep_alive_interval x keep_alive_max_attempt A's
  sanitize drops B (the round stays complete with A alone, PyTorch's epilogue), and the answer
  stays 0, so an elastic agent never re-rendezvouses. The trace is what the spec's ``PyTorch``
  variant allows; the ``Reference`` variant (survivors move to the wait list) rejects it at the
  sync whose sanitize dropped B.
"""

from __future__ import annotations

import random
import threading
from typing import Final

from protoref.torch.observe import NodeObserver
from protoref.torch.scenarios import Scenario
from protoref.torch.stage import LIMIT, Agent, Joined, Stage
from protoref.torch.values import TorchSettings

__all__ = ["DEFECTS", "DEFECT_SCENARIOS", "PYTORCH_111646", "RANK_WORLD"]

RANK_WORLD: Final = "torch-rank-world"
PYTORCH_111646: Final = "pytorch#111646"

#: defect tag -> what it is, for reports.
DEFECTS: Final = {
    RANK_WORLD: (
        "next_rendezvous returns a rank not below its world size: a node still in its join op "
        "finishes in a complete round that another node already left (the notes, Findings of "
        "2026-11-26; no PyTorch issue)"
    ),
    PYTORCH_111646: (
        "pytorch#111646: a dead participant is sanitized out of a complete round, "
        "num_nodes_waiting() stays 0 and the survivors never re-rendezvous"
    ),
}


def _after(agent: Agent, *names: str) -> threading.Event:
    """An event set once ``agent``'s observer logged ``names`` in this order."""
    seen = threading.Event()
    todo = list(names)

    def listen(event: str, _: NodeObserver) -> None:
        if todo and event == todo[0]:
            todo.pop(0)
            if not todo:
                seen.set()

    agent.observer.listeners.append(listen)
    return seen


def rank_world(stage: Stage, rng: random.Random) -> None:
    """The forced schedule of :data:`RANK_WORLD` (see the module docstring)."""
    b = stage.add("127.0.0.1")  # first in the _NodeDesc order: rank 0
    a = stage.add("127.0.0.2")
    a_sleeps = _after(a, "AddToParticipants", "SyncWriteWon", "Delay")
    b_waits = _after(b, "AddToWaitList", "SyncWriteWon")

    def hold_a() -> None:
        b_waits.wait(LIMIT / 4)

    stage.holds[a.name] = hold_a

    def node_b() -> None:
        a_sleeps.wait(LIMIT / 4)
        b.join()
        b.join()  # at once: its exit op leaves the complete round, its join waits

    def node_a() -> None:
        a.join()
        if a.poll_waiting(10) > 0:  # B waits: A's agent restarts, round 1 forms
            a.join()

    stage.go(node_a, node_b)
    closer = rng.choice([a, b])
    other = b if closer is a else a
    stage.go(closer.shutdown, lambda: (other.poll_closed(6), other.shutdown()))


def _rank_world_check(stage: Stage) -> list[str]:
    a = stage.agents[1]
    first = a.outcomes[0] if a.outcomes else None
    if first != Joined(rank=1, world=1, round=0):
        return [f"{RANK_WORLD} not reproduced: the held node returned {first}, not rank 1 of 1"]
    return []


def pytorch_111646(stage: Stage, rng: random.Random) -> None:
    """The schedule of :data:`PYTORCH_111646` (see the module docstring)."""
    agents = [stage.add(f"127.0.0.{i + 1}") for i in range(2)]
    stage.go(*[x.join for x in agents])
    dead = rng.choice(agents)
    survivor = agents[1] if dead is agents[0] else agents[0]
    dead.crash()
    cfg = stage.run.cfg
    ticks = 3 * cfg.keep_alive_interval * cfg.keep_alive_max_attempt
    for _ in range(ticks):  # an elastic agent's monitor loop
        if survivor.waiting() > 0:
            survivor.join()
            break
        survivor.sleep(1)
    survivor.shutdown()


def _pytorch_111646_check(stage: Stage) -> list[str]:
    survivor = next(a for a in stage.agents if not a.crashed)
    state = survivor.handler._state_holder.state
    members = {f"{d.addr}_{d.pid}_{d.local_id}" for d in state.participants}
    problems = []
    if members != {survivor.name} or not state.complete:
        problems.append(f"{PYTORCH_111646} not reproduced: the survivor's round is {members}")
    if any(survivor.waiting_seen) or len(survivor.outcomes) != 1:
        problems.append(f"{PYTORCH_111646} not reproduced: the survivor re-rendezvoused")
    return problems


DEFECT_SCENARIOS: Final[dict[str, Scenario]] = {
    s.name: s
    for s in (
        Scenario(
            "defect_rank_world",
            rank_world,
            TorchSettings(min_nodes=2, max_nodes=2),
            defect=RANK_WORLD,
            check=_rank_world_check,
        ),
        Scenario(
            "defect_pytorch_111646",
            pytorch_111646,
            TorchSettings(min_nodes=2, max_nodes=2),
            store="tcp",
            defect=PYTORCH_111646,
            check=_pytorch_111646_check,
        ),
    )
}
