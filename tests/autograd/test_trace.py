"""Autograd trace events: one per step, named after the spec action, parsed back by the schema
to the same records, with per-worker sets as deltas that rebuild the worker's state."""

from __future__ import annotations

import json
from typing import Any

from protoref.autograd.sim.simulator import SimConfig, Simulator
from protoref.autograd.trace.args import ACTION_NAMES
from protoref.autograd.trace.events import EVENT_ADAPTER, EVENT_MODELS, WHOLE_FIELDS
from protoref.tracing import TraceHeader, encode_line, read_trace
from tracecheck.protocols.autograd import AUTOGRAD


def _lines(seed: int, crash: bool = False) -> list[str]:
    from protoref.tracing import MemorySink  # noqa: PLC0415

    sink = MemorySink()
    Simulator(seed, SimConfig(crash=crash, creators=(0,) if crash else (0, 1)), sink).run(150)
    return sink.lines()


def test_event_names_are_the_spec_actions() -> None:
    # and one marker of a shape the spec leaves out on purpose, which the mapping names
    assert tuple(EVENT_MODELS) == (*ACTION_NAMES, "UnawaitedRpcAsync")
    assert set(AUTOGRAD.outside) == {"UnawaitedRpcAsync"}


def test_every_line_parses_back_to_the_same_record() -> None:
    seen: set[str] = set()
    for seed in range(12):
        lines = _lines(seed, crash=seed % 4 == 0)
        trace = read_trace(lines, EVENT_ADAPTER)
        assert isinstance(trace.header, TraceHeader)
        assert trace.header.protocol == "autograd"
        for line, event in zip(lines[1:], trace.events, strict=True):
            assert encode_line(event) == line
            seen.add(event.event)
    assert len(seen) >= 15


def test_deltas_rebuild_each_workers_sets() -> None:
    """Applying each event's deltas to what the worker logged before gives a state in which
    every handler's record the trace names as a parameter is the one the worker holds."""
    lines = _lines(3)
    state: dict[str, dict[str, set[str]]] = {}
    for line in lines[1:]:
        event: dict[str, Any] = json.loads(line)
        mine = state.setdefault(event["node"], {})
        for field, value in event["post"].items():
            if isinstance(value, dict) and "#add" in value:
                now = mine.setdefault(field, set())
                now -= {json.dumps(v, sort_keys=True) for v in value["#del"]}
                now |= {json.dumps(v, sort_keys=True) for v in value["#add"]}
            elif isinstance(value, dict) and "#set" in value:
                assert field in WHOLE_FIELDS
                mine[field] = {json.dumps(v, sort_keys=True) for v in value["#set"]}
        if event["event"] == "FinishForwardAutogradReq":
            handler = json.dumps(event["args"]["h"], sort_keys=True)
            assert handler not in mine["handlers"]  # finished: gone from the post-state
