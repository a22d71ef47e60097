"""Scenarios: torch 2.13's handlers driven by agent threads, each run one trace.

Every scenario is a function of a :class:`~protoref.torch.stage.Stage` and a seeded generator;
the seed fixes every choice the scenario makes (who does what, when, with which waits), so a
run is reproducible in its schedule choices (the interleaving of real threads is not).
``SCENARIOS`` lists them with their settings and store; :mod:`protoref.torch.processes` adds
the ones that run each node in its own process, :mod:`protoref.torch.defects` the forced
schedules of two torch defects.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from protoref.torch.agents import random_agents
from protoref.torch.stage import LIMIT, Agent, Joined, Stage
from protoref.torch.values import TorchSettings

__all__ = ["SCENARIOS", "Scenario"]


@dataclass(frozen=True, slots=True)
class Scenario:
    """A named scenario: what it drives, on which store, with which settings (in ticks)."""

    name: str
    drive: Callable[[Stage, random.Random], None]
    cfg: TorchSettings
    store: str = "hash"  # hash | tcp | file (threads share one store object)
    #: the torch defect the scenario's forced schedule reproduces (None: a plain run)
    defect: str | None = None
    #: checks of torch's own results (what the handler returned): problems found
    check: Callable[[Stage], list[str]] | None = None


def _addrs(n: int) -> list[str]:
    return [f"127.0.0.{i + 1}" for i in range(n)]


def _wind_down(stage: Stage, closer: Agent, ticks: int = 6) -> None:
    """``closer`` shuts the rendezvous down; the others see it closed and shut down too."""
    others = [a for a in stage.agents if a is not closer and not a.crashed]
    stage.go(closer.shutdown, *[lambda a=a: (a.poll_closed(ticks), a.shutdown()) for a in others])


def min_equals_max(stage: Stage, rng: random.Random) -> None:
    """min = max = 3 on one host (one address, one pid: only the local ids differ, so the
    rank order is theirs as integers): all join at once, ask num_nodes_waiting(), one
    closes, all shut down."""
    agents = [stage.add("127.0.0.1") for _ in range(3)]
    stage.go(*[lambda a=a: (a.join(), a.poll_waiting(rng.randint(1, 3))) for a in agents])
    _wind_down(stage, rng.choice(agents))


def last_call_rejoin(stage: Stage, rng: random.Random) -> None:
    """min 2, max 3: two complete after the last call; the third waits in the wait list; the
    members see num_nodes_waiting() > 0 and re-rendezvous: round 1 has all three."""
    a, b, c = (stage.add(x) for x in _addrs(3))
    stage.go(a.join, b.join)

    def member(m: Agent) -> None:
        if m.poll_waiting(20) > 0:
            m.join()

    stage.go(c.join, lambda: member(a), lambda: member(b))
    _wind_down(stage, rng.choice([a, b, c]))


def crash_after_completion(stage: Stage, rng: random.Random) -> None:
    """min 2, max 3: three complete; one crashes (no more heartbeats); the survivors' sanitize
    drops it after keep_alive_interval x keep_alive_max_attempt, num_nodes_waiting() stays 0;
    the survivors' workers fail on the dead peer, so their agents re-rendezvous: round 1."""
    agents = [stage.add(x) for x in _addrs(3)]
    stage.go(*[a.join for a in agents])
    dead = rng.choice(agents)
    dead.crash()
    survivors = [a for a in agents if a is not dead]
    expiry = stage.run.cfg.keep_alive_interval * stage.run.cfg.keep_alive_max_attempt
    stage.go(*[lambda a=a: (a.poll_waiting(expiry + 3), a.join()) for a in survivors])
    _wind_down(stage, rng.choice(survivors))


def crash_during_join(stage: Stage, rng: random.Random) -> None:
    """min = max = 3: two join, one of them crashes while it waits (in its SYNC sleep); after
    its heartbeat expired two more join and the round completes without it."""
    a, b, c, d = (stage.add(x) for x in _addrs(4))
    victim = rng.choice([a, b])
    victim.crash_at_sleep = True
    survivor = b if victim is a else a
    expiry = stage.run.cfg.keep_alive_interval * stage.run.cfg.keep_alive_max_attempt

    def late(agent: Agent) -> None:
        agent.sleep(expiry + 4)
        agent.join()

    stage.go(survivor.join, victim.join, lambda: late(c), lambda: late(d))
    _wind_down(stage, rng.choice([survivor, c, d]))


def close_and_shutdown(stage: Stage, rng: random.Random) -> None:
    """min 2, max 3: three complete; one calls set_closed(); the others call next_rendezvous
    again and get RendezvousClosedError, then shutdown() (as torchrun's launcher does)."""
    agents = [stage.add(x) for x in _addrs(3)]
    stage.go(*[a.join for a in agents])
    closer = rng.choice(agents)
    closer.set_closed()
    others = [a for a in agents if a is not closer]
    stage.go(closer.closed, *[lambda a=a: (a.join(), a.shutdown()) for a in others])
    closer.shutdown()


def redundancy(stage: Stage, rng: random.Random) -> None:
    """min = max = 2, three nodes: the third is redundant; a member re-rendezvouses, the
    redundant node leaves the redundancy list for the wait list, the other member sees it
    waiting and re-rendezvouses; in round 1 one node is redundant again and, when the
    rendezvous is shut down, exits gracefully."""
    a, b, c = (stage.add(x) for x in _addrs(3))
    stage.go(a.join, b.join)
    first, second = rng.sample([a, b], 2)
    returned: list[Agent] = []
    two_back = threading.Event()
    lock = threading.Lock()

    def joined(agent: Agent) -> None:
        if isinstance(agent.last, Joined) and agent.last.round > 0:
            with lock:
                returned.append(agent)
                if len(returned) == 2:
                    two_back.set()

    def leave_first() -> None:
        first.sleep(4)  # the third is in the redundancy list by now
        first.join()
        joined(first)

    def second_member() -> None:
        if second.poll_waiting(30) > 0:
            second.join()
            joined(second)

    def third() -> None:
        c.join()
        joined(c)

    def close() -> None:
        if two_back.wait(LIMIT / 2):
            closer, other = returned
            closer.shutdown()
            other.poll_closed(6)
            other.shutdown()

    stage.go(third, leave_first, second_member, close)
    for agent in (a, b, c):
        if agent.last in ("gracefulExit", "closed", "timeout"):
            agent.shutdown()


def redundant_graceful_exit(stage: Stage, rng: random.Random) -> None:
    """min = max = 2, three nodes: the third lands in the redundancy list of the full round;
    one member shuts the rendezvous down; the redundant node's join op raises
    RendezvousGracefulExitError."""
    a, b, c = (stage.add(x) for x in _addrs(3))
    stage.go(a.join, b.join)
    redundant = threading.Event()

    def listen(event: str, _: object) -> None:
        if event == "AddToRedundancyList":
            redundant.set()

    c.observer.listeners.append(listen)
    closer = rng.choice([a, b])
    other = b if closer is a else a

    def close() -> None:
        if redundant.wait(LIMIT / 2):
            closer.sleep(2)  # its write has landed; it waits in the full round
            closer.shutdown()

    stage.go(c.join, close, lambda: (other.poll_closed(10), other.shutdown()))
    c.shutdown()


def rollback_participant(stage: Stage, rng: random.Random) -> None:
    """min = max = 3, a join timeout of 6: two join, nobody else; past the deadline each rolls
    back (REMOVE_FROM_PARTICIPANTS within the 5 s window) and times out."""
    agents = [stage.add(x) for x in _addrs(2)]
    stage.go(*[a.join for a in agents])
    _wind_down(stage, rng.choice(agents))


def rollback_waiter(stage: Stage, rng: random.Random) -> None:
    """min 2, max 3, a join timeout of 8: two complete after the last call; the third waits in
    the wait list, nobody re-rendezvouses, it rolls back (REMOVE_FROM_WAIT_LIST) and times out."""
    a, b, c = (stage.add(x) for x in _addrs(3))
    stage.go(a.join, b.join)
    stage.go(c.join, lambda: a.poll_waiting(4), lambda: b.sleep(3))
    _wind_down(stage, rng.choice([a, b]))


_QUICK: Final = TorchSettings(min_nodes=2, max_nodes=3)

SCENARIOS: Final[dict[str, Scenario]] = {
    s.name: s
    for s in (
        Scenario("min_equals_max", min_equals_max, TorchSettings(min_nodes=3, max_nodes=3)),
        Scenario("last_call_rejoin", last_call_rejoin, _QUICK),
        Scenario("crash_after_completion", crash_after_completion, _QUICK, store="tcp"),
        Scenario("crash_during_join", crash_during_join, TorchSettings(min_nodes=3, max_nodes=3)),
        Scenario("close_and_shutdown", close_and_shutdown, _QUICK, store="tcp"),
        Scenario("redundancy", redundancy, TorchSettings(min_nodes=2, max_nodes=2), store="file"),
        Scenario(
            "redundant_graceful_exit",
            redundant_graceful_exit,
            TorchSettings(min_nodes=2, max_nodes=2),
            store="tcp",
        ),
        Scenario(
            "rollback_participant",
            rollback_participant,
            TorchSettings(min_nodes=3, max_nodes=3, join=6),
            store="file",
        ),
        Scenario(
            "rollback_waiter", rollback_waiter, TorchSettings(min_nodes=2, max_nodes=3, join=8)
        ),
        Scenario("random_agents", random_agents, TorchSettings(min_nodes=2, max_nodes=3)),
        Scenario(
            "random_agents_tcp", random_agents, TorchSettings(min_nodes=2, max_nodes=3), store="tcp"
        ),
    )
}
