"""The state as stored: JSON validated by pydantic (torch pickles it; never pickle here).

The stored document names its schema and run id, so a value left by another program or another
run is recognised as foreign. Nodes are ``[addr, pid, local_id]`` triples; mappings are lists of
``[node, value]`` pairs (JSON objects only have string keys). Encoding is deterministic (sorted),
so equal states give equal bytes, as torch's ``set_state`` success test needs.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from protoref.rendezvous.errors import RendezvousStateError
from protoref.rendezvous.state import NodeDesc, RendezvousState

__all__ = ["SCHEMA", "decode_state", "encode_state"]

SCHEMA: Final = "protoref.rendezvous/1"

_Node = tuple[str, int, int]


class _Stored(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    schema_: Literal["protoref.rendezvous/1"] = Field(alias="schema")
    run_id: str
    round: int = Field(ge=0)
    complete: bool
    deadline: float | None
    closed: bool
    participants: list[tuple[_Node, int]]
    wait_list: list[_Node]
    redundancy_list: list[_Node]
    last_heartbeats: list[tuple[_Node, float]]


def _t(n: NodeDesc) -> _Node:
    return (n.addr, n.pid, n.local_id)


def encode_state(state: RendezvousState, run_id: str) -> bytes:
    """The stored bytes of ``state`` (compact JSON, collections sorted by node)."""
    doc = _Stored(
        schema=SCHEMA,
        run_id=run_id,
        round=state.round,
        complete=state.complete,
        deadline=state.deadline,
        closed=state.closed,
        participants=sorted((_t(n), r) for n, r in state.participants.items()),
        wait_list=sorted(_t(n) for n in state.wait_list),
        redundancy_list=sorted(_t(n) for n in state.redundancy_list),
        last_heartbeats=sorted((_t(n), t) for n, t in state.last_heartbeats.items()),
    )
    return doc.model_dump_json(by_alias=True).encode()


def _where(err: ValidationError) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "<document>"
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{loc}: {first['msg']}{more}"


@lru_cache(maxsize=256)
def decode_state(raw: bytes, key: str, run_id: str) -> RendezvousState:
    """Parse stored bytes; :class:`RendezvousStateError` names what is wrong.

    Cached: states are immutable, so the threads of a process that read the same version share
    one decoded copy (N waiting nodes would otherwise decode every write N times).
    """
    try:
        doc = _Stored.model_validate_json(raw)
    except ValidationError as err:
        raise RendezvousStateError(key, _where(err)) from err
    if doc.run_id != run_id:
        raise RendezvousStateError(key, f"run_id is {doc.run_id!r}, expected {run_id!r}")
    participants = {NodeDesc(*n): r for n, r in doc.participants}
    if len(participants) != len(doc.participants):
        raise RendezvousStateError(key, "participants: a node is listed twice")
    return RendezvousState(
        round=doc.round,
        complete=doc.complete,
        deadline=doc.deadline,
        closed=doc.closed,
    ).replace(
        participants=participants,
        wait_list=frozenset(NodeDesc(*n) for n in doc.wait_list),
        redundancy_list=frozenset(NodeDesc(*n) for n in doc.redundancy_list),
        last_heartbeats={NodeDesc(*n): t for n, t in doc.last_heartbeats},
    )
