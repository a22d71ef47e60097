"""torch's rendezvous state as the spec's values, in ticks (the encoding of
:mod:`protoref.rendezvous.trace.events`).

torch keeps heartbeats and the last-call deadline as UTC datetimes and op deadlines as
``time.monotonic()`` seconds; on the adapter's clock (:mod:`protoref.torch.timing`) both count
whole torch seconds = ticks. The spec keeps them relative to now: a heartbeat as its age in
ticks (saturated at ``HeartbeatExpiry + 1``), the last-call deadline as ticks left (``-1`` once
passed; ``[]`` for None), an op deadline as ticks left (saturated at ``-(RollbackPeriod + 1)``).
Nodes are torch's descriptor strings, ``repr(_NodeDesc)`` = ``addr_pid_localid``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from pydantic import JsonValue

from protoref.tracing import sort_key, tla_set

__all__ = [
    "ROLLBACK_PERIOD",
    "TorchSettings",
    "desc_order",
    "node_name",
    "op_deadline",
    "state_value",
]

#: ``_RendezvousJoinOp``'s rollback window after the op deadline: 5 s, hard-coded in 2.13.
ROLLBACK_PERIOD: Final = 5


@dataclass(frozen=True, slots=True)
class TorchSettings:
    """The settings of a traced run in ticks (= torch seconds), as the header states them."""

    min_nodes: int
    max_nodes: int
    join: int = 60
    last_call: int = 2
    close: int = 10
    heartbeat: int = 5
    keep_alive_interval: int = 2
    #: expiry = interval x attempts = 10 ticks: longer than a busy 2-core machine stalls a
    #: process (a node whose own heartbeat expires while it is descheduled sanitizes itself
    #: out, which is torch's behaviour but not what a scenario means to show)
    keep_alive_max_attempt: int = 5

    @property
    def heartbeat_cap(self) -> int:
        """A heartbeat's saturated age: ``HeartbeatExpiry + 1``."""
        return self.keep_alive_interval * self.keep_alive_max_attempt + 1


def node_name(desc: Any) -> str:
    """A torch ``_NodeDesc`` as the trace names it (its repr: ``addr_pid_localid``)."""
    return f"{desc.addr}_{desc.pid}_{desc.local_id}"


def desc_order(descs: Iterable[Any]) -> list[str]:
    """Node names in torch's ``_NodeDesc`` order: addr as a string, pid and local id as
    integers (the order of ``sorted(participants)`` in ``_mark_rendezvous_complete``)."""
    return [node_name(d) for d in sorted(descs, key=lambda d: (d.addr, d.pid, d.local_id))]


def _seconds(t: datetime, now: datetime) -> int:
    """Whole seconds from ``now`` to ``t`` (on the tick clock both are whole seconds)."""
    diff = (t - now).total_seconds()
    if diff != math.floor(diff):
        raise ValueError(f"{t} is not a whole number of seconds from {now}: not on the tick clock")
    return int(diff)


def _map(items: Mapping[str, int]) -> JsonValue:
    pairs: list[JsonValue] = [[k, v] for k, v in items.items()]
    return {"#map": sorted(pairs, key=sort_key)} if pairs else []


def state_value(state: Any, now: datetime, cfg: TorchSettings) -> JsonValue:
    """The spec's record for torch's ``_RendezvousState`` ``state`` at UTC time ``now``."""
    deadline: JsonValue = []
    if state.deadline is not None:
        deadline = [max(_seconds(state.deadline, now), -1)]
    ages = {
        node_name(k): min(-_seconds(t, now), cfg.heartbeat_cap)
        for k, t in state.last_heartbeats.items()
    }
    return {
        "round": state.round,
        "complete": state.complete,
        "deadline": deadline,
        "closed": state.closed,
        "participants": _map({node_name(k): v for k, v in state.participants.items()}),
        "waitList": tla_set([node_name(k) for k in state.wait_list]),
        "redundancyList": tla_set([node_name(k) for k in state.redundancy_list]),
        "lastHeartbeats": _map(ages),
    }


def op_deadline(deadline: float | None, now: float) -> int:
    """The spec's ``opDl``: ticks left until an op deadline (0 when no op runs)."""
    if deadline is None:
        return 0
    left = deadline - now
    if left != math.floor(left):
        raise ValueError(f"op deadline {deadline} is not a whole number of ticks from {now}")
    return max(int(left), -(ROLLBACK_PERIOD + 1))
