"""The state as stored: JSON validated by pydantic (torch pickles it; never pickle here).

The stored document names its schema and run id, so a value left by another program or another
run is recognised as foreign. Nodes are ``[addr, pid, local_id]`` triples; mappings are lists of
``[node, value]`` pairs (JSON objects only have string keys). Encoding is deterministic (sorted),
so equal states give equal bytes, as torch's ``set_state`` success test needs.

Times are **stamps**: a reading of the writer's clock with that clock's domain
(:mod:`protoref.rendezvous.runtime.clock`). A heartbeat is ``[node, domain, at]``; the last-call
deadline is ``{"clock": domain, "at": t, "left": s}``, the deadline on the armer's clock and the
seconds left when this copy was written. A reader trusts ``at`` only on its own domain
(:mod:`protoref.rendezvous.core.stamps`). Schema 1 stored bare ``time.monotonic()`` values,
which mean nothing on another host; it is refused.

Everything is bounded before it is believed: the document's size, every list, every string,
every integer (no negatives), every float (finite). What the spec's invariants say about a
state is checked by :mod:`protoref.rendezvous.core.statecheck`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from protoref.rendezvous.core.errors import RendezvousStateError
from protoref.rendezvous.core.state import NodeDesc, RendezvousState

__all__ = [
    "MAX_LISTED",
    "MAX_STATE_BYTES",
    "SCHEMA",
    "StoredState",
    "decode_state",
    "decode_stored",
    "encode_state",
    "encode_stored",
]

SCHEMA: Final = "protoref.rendezvous/2"
#: etcd's default request limit (``--max-request-bytes``): no store holds a larger state.
MAX_STATE_BYTES: Final = 1_572_864
#: At most this many nodes in any one collection of the state.
MAX_LISTED: Final = 8192
_MAX_INT: Final = 2**63 - 1

_Nat = Annotated[int, Field(ge=0, le=_MAX_INT)]
_Addr = Annotated[str, Field(min_length=1, max_length=255)]
_Domain = Annotated[str, Field(min_length=1, max_length=32)]
_Node = tuple[_Addr, _Nat, _Nat]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


class _Deadline(_Model):
    clock: _Domain
    at: float
    left: float


class _Stored(_Model):
    schema_: Literal["protoref.rendezvous/2"] = Field(alias="schema")
    run_id: Annotated[str, Field(max_length=1024)]
    round: _Nat
    complete: bool
    deadline: _Deadline | None
    closed: bool
    participants: Annotated[list[tuple[_Node, _Nat]], Field(max_length=MAX_LISTED)]
    wait_list: Annotated[list[_Node], Field(max_length=MAX_LISTED)]
    redundancy_list: Annotated[list[_Node], Field(max_length=MAX_LISTED)]
    last_heartbeats: Annotated[list[tuple[_Node, _Domain, float]], Field(max_length=MAX_LISTED)]


def _frozen(d: dict[NodeDesc, str]) -> Mapping[NodeDesc, str]:
    return MappingProxyType(d)


@dataclass(frozen=True, slots=True)
class StoredState:
    """A state as stored: ``state`` holds every time as stamped (the writer clock's reading);
    ``beat_clocks`` the domain of each heartbeat, ``deadline_clock`` and ``deadline_left`` the
    last call's domain and the seconds it had left when written (``None`` without a deadline)."""

    state: RendezvousState
    beat_clocks: Mapping[NodeDesc, str] = field(default_factory=lambda: _frozen({}))
    deadline_clock: str | None = None
    deadline_left: float | None = None


def _t(n: NodeDesc) -> tuple[str, int, int]:
    return (n.addr, n.pid, n.local_id)


def encode_stored(stored: StoredState, run_id: str) -> bytes:
    """The stored bytes (compact JSON, collections sorted by node)."""
    s = stored.state
    deadline = None
    if s.deadline is not None:
        if stored.deadline_clock is None or stored.deadline_left is None:
            raise ValueError("a deadline needs its clock and the seconds it has left")
        deadline = _Deadline(clock=stored.deadline_clock, at=s.deadline, left=stored.deadline_left)
    doc = _Stored(
        schema=SCHEMA,
        run_id=run_id,
        round=s.round,
        complete=s.complete,
        deadline=deadline,
        closed=s.closed,
        participants=sorted((_t(n), r) for n, r in s.participants.items()),
        wait_list=sorted(_t(n) for n in s.wait_list),
        redundancy_list=sorted(_t(n) for n in s.redundancy_list),
        last_heartbeats=sorted(
            (_t(n), stored.beat_clocks[n], t) for n, t in s.last_heartbeats.items()
        ),
    )
    return doc.model_dump_json(by_alias=True).encode()


def encode_state(
    state: RendezvousState, run_id: str, *, clock: str = "shared", now: float = 0.0
) -> bytes:
    """``state`` stored with every time a stamp of one ``clock`` read at ``now`` (tests, tools)."""
    left = None if state.deadline is None else state.deadline - now
    beats = _frozen(dict.fromkeys(state.last_heartbeats, clock))
    dl_clock = None if state.deadline is None else clock
    return encode_stored(StoredState(state, beats, dl_clock, left), run_id)


def _where(err: ValidationError) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "<document>"
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{loc}: {first['msg']}{more}"


def _schema_hint(raw: bytes) -> str:
    if b'"protoref.rendezvous/1"' not in raw[:64]:
        return ""
    return " (schema 1, written by an older protoref: use another run id)"


@lru_cache(maxsize=256)
def decode_stored(raw: bytes, key: str, run_id: str) -> StoredState:
    """Parse stored bytes; :class:`RendezvousStateError` names what is wrong.

    Cached: states are immutable, so the threads of a process that read the same version share
    one decoded copy (N waiting nodes would otherwise decode every write N times).
    """
    if len(raw) > MAX_STATE_BYTES:
        raise RendezvousStateError(key, f"{len(raw)} bytes, more than {MAX_STATE_BYTES}")
    try:
        doc = _Stored.model_validate_json(raw)
    except ValidationError as err:
        raise RendezvousStateError(key, _where(err) + _schema_hint(raw)) from err
    if doc.run_id != run_id:
        raise RendezvousStateError(key, f"run_id is {doc.run_id!r}, expected {run_id!r}")
    participants = {NodeDesc(*n): r for n, r in doc.participants}
    wait_list = frozenset(NodeDesc(*n) for n in doc.wait_list)
    redundancy_list = frozenset(NodeDesc(*n) for n in doc.redundancy_list)
    beats = {NodeDesc(*n): t for n, _, t in doc.last_heartbeats}
    for name, size, listed in (
        ("participants", len(participants), doc.participants),
        ("wait_list", len(wait_list), doc.wait_list),
        ("redundancy_list", len(redundancy_list), doc.redundancy_list),
        ("last_heartbeats", len(beats), doc.last_heartbeats),
    ):
        if size != len(listed):
            raise RendezvousStateError(key, f"{name}: a node is listed twice")
    dl = doc.deadline
    state = RendezvousState(
        round=doc.round,
        complete=doc.complete,
        deadline=None if dl is None else dl.at,
        closed=doc.closed,
    ).replace(
        participants=participants,
        wait_list=wait_list,
        redundancy_list=redundancy_list,
        last_heartbeats=beats,
    )
    clocks = _frozen({NodeDesc(*n): c for n, c, _ in doc.last_heartbeats})
    return StoredState(
        state, clocks, None if dl is None else dl.clock, None if dl is None else dl.left
    )


def decode_state(raw: bytes, key: str, run_id: str) -> RendezvousState:
    """The stored state with every time as stamped (tools and traces of one clock domain)."""
    return decode_stored(raw, key, run_id).state
