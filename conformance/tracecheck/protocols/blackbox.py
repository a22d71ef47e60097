"""Black-box traces of torch's own RPC protocols: what a torch program observed, as data.

A black-box trace is JSON lines: a header ``{"kind": "header", ...}`` and one line per
user-visible operation of one worker (``{"kind": "event", "op": ..., "node": ..., "lamport":
..., "seq": ...}``). The events of all workers are merged in Lamport order (ties by node, then
per-node seq); the clocks come from the programs' own messages (every call the scenario
conductor makes carries its clock, every reply carries the callee's). torch's internal steps
are not in the trace: the trace spec (spec/<p>/Trace*Torch.tla) searches them, at most
``hidden`` of them between two observed events (:mod:`tracecheck.replay.hidden`).

Each protocol says which ops it knows and which fields each op needs (:class:`OpTable`); a
line with an unknown op, a missing or extra field, or a clock that goes backwards on its node
is a :class:`BlackBoxTraceError` naming the line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tracecheck.errors import TracecheckError

__all__ = [
    "RREF_OPS",
    "BlackBoxEvent",
    "BlackBoxTrace",
    "BlackBoxTraceError",
    "OpTable",
    "load_blackbox",
    "parse_blackbox",
]

#: The largest trace file read (bytes): traces are bounded input.
MAX_BYTES: Final = 16 * 1024 * 1024
_BASE: Final = frozenset({"kind", "op", "node", "lamport", "seq"})


class BlackBoxTraceError(TracecheckError):
    """A black-box trace is malformed: the message names the line and what was wrong."""


#: op -> {field: type} beyond the base fields (kind, op, node, lamport, seq).
OpTable = Mapping[str, Mapping[str, type]]

RREF_OPS: Final[OpTable] = {
    "CreateLocalRRef": {"label": str},
    "Remote": {"peer": str, "label": str},
    "PrepareChildFork": {"peer": str, "label": str, "child": str},
    "GetOrCreateRRef": {"label": str},
    "ToHere": {"label": str},
    "ToHereOk": {"label": str},
    "ToHereTimeout": {"label": str},
    "ToHereRefused": {"label": str},
    "DropRRef": {"label": str},
    "RemoteDone": {"label": str, "outcome": str},
    "Counters": {"owners": int, "users": int, "forks": int, "futures": int},
    "ShutdownCalled": {},
    "ShutdownDone": {},
    "ShutdownFailed": {"error": str},
}


@dataclass(frozen=True)
class BlackBoxEvent:
    """One observed operation; ``fields`` holds the op's own fields."""

    op: str
    node: str
    lamport: int
    seq: int
    fields: Mapping[str, Any]
    line: int


@dataclass(frozen=True)
class BlackBoxTrace:
    """A merged black-box trace: its header and its events in Lamport order."""

    protocol: str
    workers: tuple[str, ...]
    seed: int
    header: Mapping[str, Any]
    events: tuple[BlackBoxEvent, ...]


def load_blackbox(path: Path, ops: OpTable) -> BlackBoxTrace:
    """Read and check the trace file at ``path``."""
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise BlackBoxTraceError(f"{path}: {size} bytes, more than the {MAX_BYTES} read")
    return parse_blackbox(path.read_text(encoding="utf-8").splitlines(), ops, str(path))


def parse_blackbox(lines: Sequence[str], ops: OpTable, where: str = "<trace>") -> BlackBoxTrace:
    """Parse the lines of a black-box trace (header first) and merge them in Lamport order."""
    records = [(_json(text, f"{where}:{i}"), i) for i, text in enumerate(lines, 1) if text.strip()]
    if not records or records[0][0].get("kind") != "header":
        raise BlackBoxTraceError(f"{where}:1: the first line must be the header")
    header = records[0][0]
    workers = header.get("workers")
    if not isinstance(workers, list) or not all(isinstance(w, str) for w in workers) or not workers:
        raise BlackBoxTraceError(f"{where}:1: header.workers must be a list of worker names")
    seed = header.get("seed")
    if not isinstance(seed, int):
        raise BlackBoxTraceError(f"{where}:1: header.seed must be an integer")
    events = [_event(rec, line, ops, set(workers), where) for rec, line in records[1:]]
    _clocks_grow(events, where)
    events.sort(key=lambda e: (e.lamport, workers.index(e.node), e.seq))
    return BlackBoxTrace(
        protocol=str(header.get("protocol", "")),
        workers=tuple(workers),
        seed=seed,
        header=header,
        events=tuple(events),
    )


def _json(text: str, where: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise BlackBoxTraceError(f"{where}: not JSON: {err.msg}") from err
    if not isinstance(value, dict):
        raise BlackBoxTraceError(f"{where}: a line must be a JSON object")
    return value


def _event(
    rec: Mapping[str, Any], line: int, ops: OpTable, workers: set[str], where: str
) -> BlackBoxEvent:
    at = f"{where}:{line}"
    if rec.get("kind") != "event":
        raise BlackBoxTraceError(f"{at}: kind must be 'event', not {rec.get('kind')!r}")
    op = rec.get("op")
    if not isinstance(op, str) or op not in ops:
        raise BlackBoxTraceError(f"{at}: unknown op {op!r} (known: {', '.join(sorted(ops))})")
    node = rec.get("node")
    if node not in workers:
        raise BlackBoxTraceError(f"{at}: node {node!r} is not a worker of the header")
    for key in ("lamport", "seq"):
        if not isinstance(rec.get(key), int) or isinstance(rec.get(key), bool) or rec[key] < 0:
            raise BlackBoxTraceError(f"{at}: {key} must be a natural number")
    wanted = ops[op]
    extra = set(rec) - _BASE - set(wanted)
    if extra:
        raise BlackBoxTraceError(f"{at}: {op} has no field {', '.join(sorted(extra))}")
    fields: dict[str, Any] = {}
    for key, kind in wanted.items():
        value = rec.get(key)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise BlackBoxTraceError(f"{at}: {op}.{key} must be {kind.__name__}, not {value!r}")
        if key == "peer" and value not in workers:
            raise BlackBoxTraceError(f"{at}: {op}.peer {value!r} is not a worker")
        fields[key] = value
    return BlackBoxEvent(
        op=op, node=str(node), lamport=rec["lamport"], seq=rec["seq"], fields=fields, line=line
    )


def _clocks_grow(events: Sequence[BlackBoxEvent], where: str) -> None:
    """Per node, seq counts up from 1 and the Lamport clock strictly increases with it."""
    last: dict[str, BlackBoxEvent] = {}
    for e in events:
        before = last.get(e.node)
        seq = 1 if before is None else before.seq + 1
        if e.seq != seq:
            raise BlackBoxTraceError(f"{where}:{e.line}: {e.node}'s seq {e.seq}, expected {seq}")
        if before is not None and e.lamport <= before.lamport:
            raise BlackBoxTraceError(
                f"{where}:{e.line}: {e.node}'s Lamport clock {e.lamport} does not exceed "
                f"{before.lamport} (line {before.line})"
            )
        last[e.node] = e
