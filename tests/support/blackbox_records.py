"""Editing a golden black-box torch trace (tests/against_torch/golden/*.jsonl): the records of
the file, the one record or merged event that matches, and the per-node ``seq`` counted again
after an event was planted or removed. The RRef and autograd black-box tests plant wrong
observations the same way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tracecheck.protocols.blackbox import OpTable, parse_blackbox

__all__ = ["event_index", "find_record", "golden_records", "renumber"]


def golden_records(path: Path) -> list[dict[str, Any]]:
    """The trace file's records (its header first), one dict a line."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def find_record(records: list[dict[str, Any]], **match: object) -> int:
    """The index of the one record whose fields match ``match``."""
    found = [i for i, r in enumerate(records) if all(r.get(k) == v for k, v in match.items())]
    assert len(found) == 1, match
    return found[0]


def renumber(records: list[dict[str, Any]]) -> list[str]:
    """Per node, seq 1, 2, ... again (after an event was added or removed), in place; the
    records as trace lines."""
    seq: dict[object, int] = {}
    for r in records[1:]:
        seq[r["node"]] = seq.get(r["node"], 0) + 1
        r["seq"] = seq[r["node"]]
    return [json.dumps(r) for r in records]


def event_index(lines: list[str], ops: OpTable, **match: object) -> int:
    """The 1-based position of the event matching ``match`` in the merged trace."""
    trace = parse_blackbox(lines, ops)
    found = [
        i
        for i, e in enumerate(trace.events, 1)
        if all(
            (dict(e.fields) | {"op": e.op, "node": e.node, "lamport": e.lamport}).get(k) == v
            for k, v in match.items()
        )
    ]
    assert len(found) == 1, match
    return found[0]
