"""`tracecheck contract`: the trace contract read off the mapping, checked against real traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracecheck.cli import main
from tracecheck.protocols import load_mapping
from tracecheck.protocols.contract import contract_markdown, contract_of
from tracecheck.protocols.mapping import ActionMap, ProtocolMap

GOLDEN = Path(__file__).parents[1] / "rref" / "golden"


def test_golden_rref_traces_carry_exactly_what_the_contract_asks() -> None:
    found = contract_of(load_mapping("rref"))
    by_event = {e.event: e for e in found.events}
    files = sorted(GOLDEN.glob("*.ndjson"))
    assert files
    for path in files:
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        header, events = lines[0], lines[1:]
        if events and events[-1]["kind"] == "end":  # the run finished: its end line
            assert set(events.pop()) == {"kind", "seqs"}, path.name
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


def test_the_contract_states_what_a_trace_claims_about_itself(
    capsys: pytest.CaptureFixture[str],
) -> None:
    found = contract_of(load_mapping("rref"))
    by_event = {e.event: e for e in found.events}
    assert by_event["RetrySend"].actor == "m.src"
    assert by_event["WaitAllWorkers"].actor == "env:barrier"
    assert by_event["DelUser"].actor == "w"
    assert by_event["AssignOwnerRRef"].receives
    assert not by_event["Remote"].receives
    assert found.arg_kinds["m"] == "message"
    assert "nothing in flight (net = {})" in found.quiescence
    assert main(["contract", "rref"]) == 0
    text = capsys.readouterr().out
    assert "### What a trace claims about itself" in text
    assert '"sent_by": [sender, its lamport at the send]' in text
    assert '{"kind": "end", "seqs": {node: last seq, ...}}' in text
    assert "`RetrySend`, `LoseFirstAttempt`: `args.m.src`" in text
