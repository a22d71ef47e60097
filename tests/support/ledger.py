"""The Ledger toy protocol's mapping and a trace builder, shared by the trace-checker tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tracecheck.protocols.mapping import ActionMap, ProtocolMap
from tracecheck.traces.load import Trace, parse_trace_lines

SPEC_ROOT = Path(__file__).resolve().parent.parent / "specs" / "tv"

LEDGER = ProtocolMap(
    protocol="ledger",
    module="Ledger",
    constants={"Nodes": "{nodes}", "Max": "{settings[max]}"},
    actions=(
        ActionMap(event="Deposit", params=("node", "a"), post={"balance": "balance'[@]"}),
        ActionMap(event="Transfer", params=("node", "to", "a"), post={"balance": "balance'[@]"}),
        ActionMap(event="Receive", params=("node", "a"), post={"balance": "balance'[@]"}),
    ),
)


def header(nodes: tuple[str, ...] = ("a", "b"), maximum: int = 3, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "header",
        "schema_version": 2,
        "protocol": "ledger",
        "nodes": list(nodes),
        "settings": {"max": maximum},
        "seed": 1,
    } | extra


def event(name: str, node: str, seq: int, balance: int, **args: Any) -> dict[str, Any]:
    return {
        "kind": "event",
        "event": name,
        "node": node,
        "seq": seq,
        "lamport": seq,
        "args": args,
        "post": {"balance": balance},
    }


def trace(events: list[dict[str, Any]], source: str = "t.ndjson", **hdr: Any) -> Trace:
    lines = [json.dumps(header(**hdr))] + [json.dumps(e) for e in events]
    return parse_trace_lines(lines, source)


#: a deposits 3, sends 2 to b, b receives 2.
GOOD = [
    event("Deposit", "a", 1, 3, a=3),
    event("Transfer", "a", 2, 1, to="b", a=2),
    event("Receive", "b", 1, 2, a=2),
]
