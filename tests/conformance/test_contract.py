"""`tracecheck contract`: the trace contract read off the mapping, checked against real traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import JsonValue

from tracecheck.cli import main
from tracecheck.protocols import load_mapping
from tracecheck.protocols.contract import contract_markdown, contract_of
from tracecheck.protocols.mapping import ActionMap, ProtocolMap
from tracecheck.replay.tracedata import header_constants
from tracecheck.traces.load import TraceFormatError, TraceHeader

GOLDEN = Path(__file__).parents[1] / "rref" / "golden"


def test_golden_rref_traces_carry_exactly_what_the_contract_asks() -> None:
    found = contract_of(load_mapping("rref"))
    by_event = {e.event: e for e in found.events}
    files = sorted(GOLDEN.glob("*.ndjson"))
    assert files
    for path in files:
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        header, events = lines[0], lines[1:]
        assert set(found.settings) <= set(header["settings"]), path.name
        for ev in events:
            wanted = by_event[ev["event"]]
            assert set(ev["args"]) == set(wanted.args), (path.name, ev)
            assert set(wanted.post) <= set(ev["post"]), (path.name, ev)


def test_settings_come_from_the_constant_templates() -> None:
    mapping = ProtocolMap(
        protocol="toy",
        module="Toy",
        constants={"N": "{nodes}", "Max": "{settings[Max]}", "Pair": "<<{settings[A]}, 1>>"},
        actions=(ActionMap(event="Put", params=("node", "k"), post={"r": "[k |-> r'[@]]"}),),
        hidden={"Tick": "time is not logged"},
    )
    found = contract_of(mapping)
    assert found.settings == ("A", "Max")
    assert found.events[0].args == ("k",)
    text = contract_markdown(found)
    # |-> inside a table cell is escaped, or the row would split into more columns
    assert "`r` = `[k \\|-> r'[@]]`" in text
    row = next(line for line in text.splitlines() if line.startswith("| `Put`"))
    assert row.replace("\\|", "").count("|") == 5
    assert "- `Tick`: time is not logged" in text


def test_cli_json_and_unknown_protocol(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["contract", "rendezvous", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["protocol"] == "rendezvous"
    assert "MinNodes" in data["settings"]
    assert {e["event"] for e in data["events"]} >= {"AddToParticipants", "Tick"}
    assert main(["contract", "nope"]) == 2
    assert "no mapping for protocol 'nope'" in capsys.readouterr().err


def test_the_rendezvous_contract_states_its_time_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["contract", "rendezvous"]) == 0
    text = capsys.readouterr().out
    for heading in (
        "Whole ticks",
        "One step at a time",
        "The read cache and the tick",
        "Steps that find nothing to do",
        "Only state the implementation has",
        "Node order",
        "Library pieces",
    ):
        assert f"**{heading}" in text
    assert "`CacheTicks` = `1`, `TimerFiresAnyTime` = `false`, `CloseAnyTime` = `false`" in text
    assert main(["contract", "rendezvous", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["setting_defaults"] == {
        "CacheTicks": 1,
        "TimerFiresAnyTime": False,
        "CloseAnyTime": False,
    }
    assert len(data["notes"]) == 7
    # the node is gone: a Crash asks no post-state; a stop only the control state
    events = {e["event"]: e for e in data["events"]}
    assert events["Crash"]["post"] == {}
    assert set(events["ErrorClosed"]["post"]) == {"pc", "op", "opDl", "result"}


def test_a_left_out_setting_takes_its_default_and_a_required_one_is_named() -> None:
    mapping = load_mapping("rendezvous")
    required = [s for s in contract_of(mapping).settings if s not in mapping.setting_defaults]
    settings: dict[str, JsonValue] = dict.fromkeys(required, 1)
    header = TraceHeader(protocol="rendezvous", nodes=("a",), settings=settings, seed=1)
    found = header_constants(header, "t.ndjson", mapping)
    assert (found["CacheTicks"], found["TimerFiresAnyTime"], found["CloseAnyTime"]) == (
        "1",
        "FALSE",
        "FALSE",
    )
    given = header.model_copy(update={"settings": settings | {"CacheTicks": 2}})
    assert header_constants(given, "t.ndjson", mapping)["CacheTicks"] == "2"
    del settings["MinNodes"]
    short = header.model_copy(update={"settings": settings})
    with pytest.raises(TraceFormatError, match="the spec constant MinNodes needs 'MinNodes'"):
        header_constants(short, "t.ndjson", mapping)
