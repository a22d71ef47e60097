"""Forced schedules that follow rendezvous counterexamples on real torch (timing hooks only).

Beside :mod:`protoref.torch.defects` (the two defects the campaign's known-defect verdicts
name): schedules that ``tracecheck replay-on-torch`` drives along a PyTorch-variant
counterexample, each with its own check of what torch's handlers then hold.

- ``waitlist_full`` (``MCDynamicRendezvous_waitlist_full``; the notes, Difference 6): min 1,
  max 2, three nodes. A completes round 0 alone (after the last call); C joins its wait list
  (the round is complete and not full) and C's SYNC sleep is held (a delay hook, nothing
  else); A sees ``num_nodes_waiting() > 0`` and re-rendezvouses, its exit op empties the
  complete round (round 1, incomplete, the wait list kept), and B and A fill round 1 (two =
  max: complete at once). C wakes in the wait list of a complete, full round: the join op's
  rule "a node of a complete round with room goes to the wait list" has nothing for a full
  round and a node already wait-listed, so C stays there and ``num_nodes_waiting()`` stays 1
  although nobody can be admitted (the spec's ``WaitListHasRoomInv``).
- ``bootstrap_d7`` (``MCDynamicRendezvousBootstrap_d7``; the notes, Difference 7): TCPStore
  sharing on (torch's default, which :class:`~protoref.torch.run.TorchRun` turns off for the
  other scenarios), min 1, max 2. A completes round 0 alone as rank 0 and builds its bootstrap
  info (``RendezvousStoreInfo.build`` writes MASTER_ADDR under round 0's prefix) and its
  TCPStore server; B joins the wait list, A re-rendezvouses, and round 1 completes with both,
  A rank 0 again. A returns its cached info and writes nothing under round 1's prefix; B, whose
  first round is 1, builds its info as rank 1 and blocks in ``get(MASTER_ADDR)`` until its
  store's timeout (shortened to :data:`BOOTSTRAP_WAIT` seconds here; torch's default is 30 s
  on a TCPStore client, 300 s in torchrun): a ``DistStoreError``, while B is a participant.
"""

from __future__ import annotations

import os
import random
import threading
from datetime import timedelta
from typing import Any, Final

from protoref.torch.defects import _after
from protoref.torch.scenarios import Scenario
from protoref.torch.stage import LIMIT, Stage
from protoref.torch.values import TorchSettings, node_name

__all__ = ["BOOTSTRAP_D7", "BOOTSTRAP_WAIT", "REPLAY_SCENARIOS", "WAITLIST_FULL"]

WAITLIST_FULL: Final = "waitlist_full"
BOOTSTRAP_D7: Final = "bootstrap_d7"
#: real seconds B's bootstrap store waits for MASTER_ADDR (the run's own setting)
BOOTSTRAP_WAIT: Final = 4.0

#: id(stage) -> what the schedule read from torch's state while C waited (for its check)
_SEEN: dict[int, dict[str, Any]] = {}


def waitlist_full(stage: Stage, rng: random.Random) -> None:
    """The forced schedule of :data:`WAITLIST_FULL` (see the module docstring)."""
    a, b, c = (stage.add(f"127.0.0.{i}") for i in (1, 2, 3))
    a.join()  # round 0: A alone, complete after the last call (min 1)
    c_listed = _after(c, "AddToWaitList", "SyncWriteWon")
    a_left = _after(a, "RemoveFromParticipants", "SyncWriteWon")
    round1 = threading.Event()

    def hold_c() -> None:
        round1.wait(LIMIT / 4)

    stage.holds[c.name] = hold_c
    seen: dict[str, Any] = {}

    def node_a() -> None:
        c_listed.wait(LIMIT / 4)
        if a.poll_waiting(10) > 0:  # C waits: A's agent re-rendezvouses
            a.join()

    def node_b() -> None:
        a_left.wait(LIMIT / 4)  # round 1 is open: B joins it
        b.join()

    def node_c() -> None:
        c.join()

    def observe() -> None:
        while not all(len(x.outcomes) >= (2 if x is a else 1) for x in (a, b)):
            a.sleep(1)
            if a.stage.errors:
                return
        round1.set()  # C's held SYNC sleep ends
        c.sleep(3)  # C has synced in the full round (its SYNC sleeps are 1 tick)
        seen["waiting"] = a.waiting()
        state = c.handler._state_holder.state
        seen["round"] = state.round
        seen["complete"] = state.complete
        seen["participants"] = sorted(node_name(d) for d in state.participants)
        seen["wait_list"] = sorted(node_name(d) for d in state.wait_list)
        seen["c"] = c.name
        closer = rng.choice([a, b])
        other = b if closer is a else a
        stage.go(closer.shutdown, lambda: (other.poll_closed(6), other.shutdown()))

    stage.go(node_a, node_b, node_c, observe)
    c.shutdown()
    _SEEN[id(stage)] = seen


def _waitlist_full_check(stage: Stage) -> list[str]:
    seen = _SEEN.pop(id(stage), {})
    if not seen:
        return [f"{WAITLIST_FULL} not reproduced: the schedule did not reach round 1"]
    full = seen["complete"] and len(seen["participants"]) == stage.run.cfg.max_nodes
    if not full or seen["c"] not in seen["wait_list"] or seen["waiting"] < 1:
        return [f"{WAITLIST_FULL} not reproduced: torch's state while C waited was {seen}"]
    return []


def bootstrap_d7(stage: Stage, rng: random.Random) -> None:
    """The forced schedule of :data:`BOOTSTRAP_D7` (see the module docstring)."""
    del rng
    # torch's default: the handler shares its TCPStore (TorchRun restores the variable)
    os.environ["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "0"
    a, b = stage.add("127.0.0.1"), stage.add("127.0.0.2")
    b.handler._store.set_timeout(timedelta(seconds=BOOTSTRAP_WAIT))
    a.join()  # round 0: A alone, rank 0: its bootstrap info and server are built and cached
    b_listed = _after(b, "AddToWaitList", "SyncWriteWon")
    seen: dict[str, Any] = {}
    store_error = stage.run.dist.DistStoreError

    def node_a() -> None:
        b_listed.wait(LIMIT / 4)
        if a.poll_waiting(10) > 0:
            a.join()

    def node_b() -> None:
        try:
            b.join()
        except store_error as err:
            seen["b_error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
            state = b.handler._state_holder.state
            seen["b_participant"] = b.handler._this_node in state.participants
            # the run's report: what B's next_rendezvous did instead of returning
            member = "a participant" if seen["b_participant"] else "not a participant"
            b.outcomes.append(f"{seen['b_error']} ({member} of round {state.round})")

    stage.go(node_a, node_b)
    stage.go(a.shutdown, lambda: (b.poll_closed(6), b.shutdown()))
    _SEEN[id(stage)] = seen


def _bootstrap_check(stage: Stage) -> list[str]:
    seen = _SEEN.pop(id(stage), {})
    a = stage.agents[0]
    rank0 = [str(o) for o in a.outcomes[:2]]
    if len(a.outcomes) < 2 or any(getattr(o, "rank", None) != 0 for o in a.outcomes[:2]):
        return [f"{BOOTSTRAP_D7} not reproduced: A's returns were {rank0}, not rank 0 twice"]
    error = str(seen.get("b_error", ""))
    if "MASTER_ADDR" not in error or not seen.get("b_participant"):
        return [f"{BOOTSTRAP_D7} not reproduced: B saw {seen or 'no store error'}"]
    return []


REPLAY_SCENARIOS: Final[dict[str, Scenario]] = {
    WAITLIST_FULL: Scenario(
        WAITLIST_FULL,
        waitlist_full,
        TorchSettings(min_nodes=1, max_nodes=2),
        check=_waitlist_full_check,
    ),
    BOOTSTRAP_D7: Scenario(
        BOOTSTRAP_D7,
        bootstrap_d7,
        TorchSettings(min_nodes=1, max_nodes=2),
        store="tcp",
        check=_bootstrap_check,
    ),
}
