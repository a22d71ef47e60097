"""The stage of a threaded scenario: a run, a store, agents that drive torch's handlers.

An :class:`Agent` is what torch's elastic agent does with a handler, reduced to the calls a
scenario makes (``next_rendezvous``, ``num_nodes_waiting``, ``is_closed``, ``set_closed``,
``shutdown``) and a crash. Outcomes are recorded per agent for the scenario's checks. Waits are
in ticks of the run's clock; nothing here changes what torch decides.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from protoref.torch.observe import NodeCrash, NodeObserver
from protoref.torch.run import TorchRun

__all__ = ["LIMIT", "Agent", "Joined", "Stage"]

#: Real seconds a scenario's thread may take before the run is declared stuck.
LIMIT: Final = 120.0


@dataclass(frozen=True, slots=True)
class Joined:
    """What ``next_rendezvous`` returned: ``RendezvousInfo``'s rank and world size, the round."""

    rank: int
    world: int
    round: int


class Agent:
    """One node's agent (a thread of the scenario calls its methods)."""

    def __init__(self, stage: Stage, observer: NodeObserver) -> None:
        self.stage = stage
        self.observer = observer
        self.handler: Any = observer.handler
        self.name = observer.node
        #: outcomes of next_rendezvous: Joined, or "closed" | "gracefulExit" | "timeout" | "crashed"
        self.outcomes: list[Joined | str] = []
        self.waiting_seen: list[int] = []
        #: crash at the next SYNC sleep of an op (a crash in the middle of the join)
        self.crash_at_sleep = False
        self.crashed = False

    def join(self) -> Joined | str:
        """``next_rendezvous()``; the outcome is also appended to :attr:`outcomes`."""
        dr = self.stage.run.dr
        try:
            info = self.handler.next_rendezvous()
            out: Joined | str = Joined(
                info.rank, info.world_size, self.handler._state_holder.state.round
            )
        except NodeCrash:
            self.crashed = True
            out = "crashed"
        except dr.RendezvousGracefulExitError:
            out = "gracefulExit"
        except dr.RendezvousClosedError:
            out = "closed"
        except dr.RendezvousTimeoutError:
            out = "timeout"
        self.outcomes.append(out)
        return out

    def waiting(self) -> int:
        n = int(self.handler.num_nodes_waiting())
        self.waiting_seen.append(n)
        return n

    def closed(self) -> bool:
        return bool(self.handler.is_closed())

    def set_closed(self) -> bool:
        """``set_closed()``; False when it raised (its close op timed out)."""
        try:
            self.handler.set_closed()
        except self.stage.run.dr.RendezvousError:
            return False
        return True

    def shutdown(self) -> bool:
        return bool(self.handler.shutdown())

    def crash(self) -> None:
        """The agent's process dies now (its heartbeats stop, it never calls again)."""
        self.crashed = True
        self.observer.crash()

    def sleep(self, ticks: float) -> None:
        self.stage.run.clock.sleep(ticks)

    def poll_waiting(self, ticks: int) -> int:
        """Ask ``num_nodes_waiting()`` once a tick for ``ticks`` ticks or until it is > 0."""
        for _ in range(ticks):
            if (n := self.waiting()) > 0:
                return n
            self.sleep(1)
        return 0

    def poll_closed(self, ticks: int) -> bool:
        for _ in range(ticks):
            if self.closed():
                return True
            self.sleep(1)
        return False

    @property
    def last(self) -> Joined | str | None:
        return self.outcomes[-1] if self.outcomes else None


@dataclass
class Stage:
    """A threaded scenario's run, store and agents; :meth:`go` runs agent scripts."""

    run: TorchRun
    #: a store for each new handler (see protoref.torch.driver)
    new_store: Callable[[], Any]
    agents: list[Agent] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    #: node -> a wait that replaces its next SYNC sleep (a forced schedule)
    holds: dict[str, Callable[[], None]] = field(default_factory=dict)

    def add(self, addr: str) -> Agent:
        agent = Agent(self, self.run.handler(self.new_store(), addr, self.new_store()))
        self.agents.append(agent)
        return agent

    def on_delay(self, node: str | None, seconds: float) -> bool:
        """The run's delay hook: crash or hold a node at its SYNC sleep (1 s); start delays
        (a random 0-0.3 s) pass."""
        if node is None or seconds != 1:
            return False
        agent = next((a for a in self.agents if a.name == node), None)
        if agent is not None and agent.crash_at_sleep:
            agent.crash_at_sleep = False
            raise NodeCrash(node)
        hold = self.holds.pop(node, None)
        if hold is None:
            return False
        hold()
        return True

    def go(self, *scripts: Callable[[], object]) -> None:
        """Run the scripts in threads and wait for all of them (errors kept in ``errors``)."""

        def guarded(script: Callable[[], object]) -> None:
            try:
                script()
            except BaseException as err:  # reported by the scenario runner
                self.errors.append(err)

        threads = [threading.Thread(target=guarded, args=(s,), daemon=True) for s in scripts]
        for t in threads:
            t.start()
        for t in threads:
            t.join(LIMIT)
            if t.is_alive():
                raise TimeoutError(f"a scenario thread is still running after {LIMIT} s")
