"""Where a round's agent store is: rank 0 publishes its TCPStore's address through our store.

torch's c10d backend keeps its rendezvous in a TCPStore that exists before the rendezvous, and
hands the agents that same store (``RendezvousInfo.store``). Our rendezvous lives in a file
store or etcd, which are not c10d stores, so as torch does with TCPStore sharing on, the node
that returns as rank 0 hosts a TCPStore server and everyone else connects to it. Its address
travels through our store, under ``torch.rendezvous.<run_id>.agent_store``: one schema-checked
JSON record ``{round, addr, port}`` per run, overwritten by each round's rank 0 with a
compare-and-set (never by an older round's), awaited by the other ranks until it names their
round. Every round's rank 0 publishes, also when it already hosts a server from an earlier
round: torch 2.13 does not, and a node whose first round is a later one then waits for an
address nobody writes (Difference 7 in docs/rendezvous.md; ``MCDynamicRendezvousBootstrap_d7``
and its ``_fixed`` model, whose fix this is).

No torch import here: :mod:`protoref.torch.torchrun` creates the TCPStores.
"""

from __future__ import annotations

import time
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from protoref.rendezvous.adapters.store import RendezvousStore, Versioned
from protoref.rendezvous.core.errors import (
    RendezvousError,
    RendezvousStateError,
    RendezvousTimeoutError,
)

__all__ = [
    "AgentStoreAddress",
    "RoundSupersededError",
    "agent_store_key",
    "await_address",
    "publish_address",
]

_MAX_BYTES: Final = 4096


class AgentStoreAddress(BaseModel):
    """The TCPStore of round ``round``: rank 0's ``addr`` and ``port``."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    schema_: Literal["protoref.agent_store/1"] = Field(
        default="protoref.agent_store/1", alias="schema"
    )
    run_id: Annotated[str, Field(max_length=1024)]
    round: Annotated[int, Field(ge=0, le=2**63 - 1)]
    addr: Annotated[str, Field(min_length=1, max_length=255)]
    port: Annotated[int, Field(gt=0, lt=65536)]


def agent_store_key(run_id: str) -> str:
    return f"torch.rendezvous.{run_id}.agent_store"


def _decode(got: Versioned | None, key: str, run_id: str) -> AgentStoreAddress | None:
    if got is None:
        return None
    if len(got.value) > _MAX_BYTES:
        raise RendezvousStateError(key, f"{len(got.value)} bytes, more than {_MAX_BYTES}")
    try:
        record = AgentStoreAddress.model_validate_json(got.value)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "<document>"
        raise RendezvousStateError(key, f"{where}: {first['msg']}") from err
    if record.run_id != run_id:
        raise RendezvousStateError(key, f"run_id is {record.run_id!r}, expected {run_id!r}")
    return record


class RoundSupersededError(RendezvousError):
    """A later round's rank 0 published first: this round is over (its members were moved to
    the next round's wait list when one of them left); the node joins the next round."""


def _superseded(run_id: str, round_: int, newer: int) -> RoundSupersededError:
    return RoundSupersededError(
        f"rendezvous {run_id!r}: round {round_} was superseded by round {newer} before its "
        "agent store was set up"
    )


def publish_address(
    store: RendezvousStore, run_id: str, round_: int, *, addr: str, port: int, timeout: float
) -> None:
    """Rank 0 of ``round_``: record its TCPStore's address (unless a later round already did)."""
    key = agent_store_key(run_id)
    mine = AgentStoreAddress(run_id=run_id, round=round_, addr=addr, port=port)
    raw = mine.model_dump_json(by_alias=True).encode()
    end = time.monotonic() + timeout
    got = store.get(key)
    while True:
        current = _decode(got, key, run_id)
        if current is not None and current.round > round_:
            raise _superseded(run_id, round_, current.round)
        if current is not None and current.round == round_:
            if (current.addr, current.port) != (addr, port):
                raise RendezvousStateError(
                    key, f"round {round_}'s agent store is claimed by {current.addr}:{current.port}"
                )
            return
        won, now = store.compare_set(key, None if got is None else got.token, raw)
        if won:
            return
        got = now
        if time.monotonic() > end:
            raise RendezvousTimeoutError(
                f"rendezvous {run_id!r}: could not publish round {round_}'s agent store "
                f"within {timeout:g} s"
            )


def await_address(
    store: RendezvousStore, run_id: str, round_: int, timeout: float
) -> AgentStoreAddress:
    """Ranks but 0 of ``round_``: wait until rank 0 has published its TCPStore's address."""
    key = agent_store_key(run_id)
    end = time.monotonic() + timeout
    while True:
        got = store.get(key)
        current = _decode(got, key, run_id)
        if current is not None and current.round == round_:
            return current
        if current is not None and current.round > round_:
            raise _superseded(run_id, round_, current.round)
        left = end - time.monotonic()
        if left <= 0:
            raise RendezvousTimeoutError(
                f"rendezvous {run_id!r}: rank 0 of round {round_} did not publish its agent "
                f"store within {timeout:g} s (read_timeout)"
            )
        store.wait_for_change(key, None if got is None else got.token, left)
