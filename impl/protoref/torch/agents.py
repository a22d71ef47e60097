"""Seeded random agents: four nodes (min 2, max 3 in the scenario list) that join, poll,
re-rendezvous, crash (after completion or in the middle of a join) and shut down.

Each agent draws its choices from its own generator, seeded from the scenario's, so a run's
choices are fixed by its seed; when and in which order the threads' steps land is up to the
machine. At most two nodes crash. The first agent to reach its last tick shuts the rendezvous
down, which ends every join still running (closed, or a graceful exit of a redundant node).
"""

from __future__ import annotations

import random
import threading

from protoref.torch.stage import Agent, Stage

__all__ = ["random_agents"]

_NODES = 4
_MAX_CRASHES = 2
#: ticks an agent acts before it winds down
_LIFETIME = (25, 45)


class _Budget:
    """Crashes left, shared by the agents of a run."""

    def __init__(self, crashes: int) -> None:
        self._left = crashes
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self._left == 0:
                return False
            self._left -= 1
            return True


def _life(agent: Agent, rng: random.Random, budget: _Budget, end_tick: int) -> None:
    """One agent's script: join, then act once every tick or so until its end tick."""
    clock = agent.stage.run.clock
    agent.sleep(rng.uniform(0, 3))
    outcome = agent.join()
    while not agent.crashed and clock.tick() < end_tick:
        if outcome in ("closed", "gracefulExit"):
            agent.shutdown()
            return
        if outcome == "timeout":
            outcome = agent.join()  # keep joining, as an agent whose rendezvous timed out
            continue
        roll = rng.random()
        if roll < 0.05 and budget.take():
            if rng.random() < 0.5:
                agent.crash()  # after completion: heartbeats stop
                return
            agent.crash_at_sleep = True  # in the middle of the next join
            outcome = agent.join()
            if agent.crashed:
                return
            agent.crash_at_sleep = False  # returned without sleeping; give the crash back
        elif roll < 0.12:
            outcome = agent.join()  # its workers failed: re-rendezvous
        elif roll < 0.7:
            if agent.waiting() > 0:
                outcome = agent.join()  # as torch's elastic agent: nodes wait, restart
        elif roll < 0.85 and agent.closed():
            outcome = "closed"
            continue
        agent.sleep(rng.choice((0.5, 1, 1, 2)))
    if not agent.crashed:
        agent.shutdown()


def random_agents(stage: Stage, rng: random.Random) -> None:
    """Four seeded agents (the scenario's settings say min and max)."""
    agents = [stage.add(f"127.0.0.{i + 1}") for i in range(_NODES)]
    budget = _Budget(rng.randint(0, _MAX_CRASHES))
    start = stage.run.clock.tick()
    plans = [(a, random.Random(rng.random()), start + rng.randint(*_LIFETIME)) for a in agents]
    stage.go(*[lambda p=p: _life(p[0], p[1], budget, p[2]) for p in plans])
