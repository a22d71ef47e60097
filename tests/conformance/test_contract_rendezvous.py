"""`tracecheck contract rendezvous`: the time model and the other rules beyond the table, and
header settings a trace may leave out (torch's handler needs them; protoref's leaves them out)."""

from __future__ import annotations

import json

import pytest
from pydantic import JsonValue

from tracecheck.cli import main
from tracecheck.protocols import load_mapping
from tracecheck.protocols.contract import contract_of
from tracecheck.replay.tracedata import header_constants
from tracecheck.traces.load import TraceFormatError, TraceHeader


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
