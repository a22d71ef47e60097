"""The shared state and the settings (torch's ``_RendezvousState``, ``RendezvousSettings``).

The state is what every node keeps a copy of and writes to the store by compare-and-set. It is
immutable here: the business functions (:mod:`protoref.rendezvous.core.actions`) return a new state.
Times are seconds on the driver's clock (the handler's monotonic clock, the simulator's integer
ticks); torch keeps aware UTC datetimes instead (DynamicRendezvous.tla ages them in ticks).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["EMPTY_STATE", "NodeDesc", "RendezvousSettings", "RendezvousState", "View"]


class NodeDesc(NamedTuple):
    """torch's ``_NodeDesc(addr, pid, local_id)``: ordered as a tuple, ``addr`` as a string.

    The spec's ``Nodes`` are naturals ordered by ``<``; this order is the one they stand for
    (so ``127.0.0.10`` sorts before ``127.0.0.8``, as in torch).
    """

    addr: str
    pid: int
    local_id: int

    def __str__(self) -> str:
        return f"{self.addr}_{self.pid}_{self.local_id}"


@dataclass(frozen=True, slots=True)
class View:
    """The spec's ``view[n]``: what the last successful ``next_rendezvous`` returned."""

    round: int
    ranks: Mapping[NodeDesc, int]


@dataclass(frozen=True, slots=True)
class RendezvousState:
    """torch's ``_RendezvousState`` (spec record fields in parentheses).

    ``deadline`` (``deadline``) is the last-call deadline or ``None``; ``participants``
    (``participants``) maps a node to its rank (0 until completion); ``last_heartbeats``
    (``lastHeartbeats``) to the time of its last keep-alive.
    """

    round: int = 0
    complete: bool = False
    deadline: float | None = None
    closed: bool = False
    participants: Mapping[NodeDesc, int] = field(default_factory=lambda: MappingProxyType({}))
    wait_list: frozenset[NodeDesc] = frozenset()
    redundancy_list: frozenset[NodeDesc] = frozenset()
    last_heartbeats: Mapping[NodeDesc, float] = field(default_factory=lambda: MappingProxyType({}))

    def replace(self, **changes: object) -> RendezvousState:
        """A copy with ``changes`` (mappings are wrapped read-only)."""
        for name in ("participants", "last_heartbeats"):
            if name in changes:
                changes[name] = MappingProxyType(dict(changes[name]))  # type: ignore[call-overload]
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RendezvousState):
            return NotImplemented
        return (
            self.round == other.round
            and self.complete == other.complete
            and self.deadline == other.deadline
            and self.closed == other.closed
            and dict(self.participants) == dict(other.participants)
            and self.wait_list == other.wait_list
            and self.redundancy_list == other.redundancy_list
            and dict(self.last_heartbeats) == dict(other.last_heartbeats)
        )

    __hash__ = None  # type: ignore[assignment]


#: ``_RendezvousState()``: what a node starts from and what the store's sentinel decodes to.
EMPTY_STATE = RendezvousState()


class RendezvousSettings(BaseModel):
    """torch's ``RendezvousSettings`` plus its timeouts; seconds (ticks in the simulator).

    ``rollback_period`` is the join op's hard-coded 5 s (``RollbackPeriod`` in the spec).
    ``cache_duration`` is the state holder's read cache (1 s in torch). ``poll_interval`` bounds
    how long a node that must wait (the SYNC action) waits for a store change before it looks
    again (torch sleeps a fixed 1 s instead).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str = Field(default="default", min_length=1)
    min_nodes: int = Field(default=1, ge=1)
    max_nodes: int = Field(default=1, ge=1)
    join_timeout: float = Field(default=600.0, gt=0)
    last_call_timeout: float = Field(default=30.0, ge=0)
    close_timeout: float = Field(default=30.0, gt=0)
    heartbeat_timeout: float = Field(default=5.0, gt=0)
    keep_alive_interval: float = Field(default=5.0, gt=0)
    keep_alive_max_attempt: int = Field(default=3, ge=1)
    rollback_period: float = Field(default=5.0, ge=0)
    cache_duration: float = Field(default=1.0, ge=0)
    poll_interval: float = Field(default=1.0, gt=0)

    @model_validator(mode="after")
    def _min_le_max(self) -> Self:
        if self.min_nodes > self.max_nodes:
            raise ValueError(
                f"min_nodes ({self.min_nodes}) must not exceed max_nodes ({self.max_nodes})"
            )
        return self

    @property
    def heartbeat_expiry(self) -> float:
        """``HeartbeatExpiry``: a heartbeat older than this is dead (``_sanitize``)."""
        return self.keep_alive_interval * self.keep_alive_max_attempt
