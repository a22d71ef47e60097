"""The rendezvous checker on golden traces: ``tests/rendezvous/golden/`` holds seeded simulator
runs (``regenerate.py``) that TLC accepts, and mutated copies of them are rejected at the
mutated event (issue 25 section 2: golden traces per slice, as tests/rref/ has).

Mutations whose verdict follows from the spec without running it:

- a changed post-state field (``dirty`` flipped on a sync: every sync step sets it to FALSE,
  a write sets it TRUE) is rejected at its own event, the events before it being unchanged;
- the first ``NextRendezvous`` repeated right after itself is rejected there: the action needs
  ``pc = "idle"`` and the first one left ``"sync"``;
- a ``Finish`` of the join op with another round in its ``view`` than its copy's is rejected
  there (``Finish`` sets ``view`` from the copy).
"""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from tracecheck.protocols.rendezvous import RENDEZVOUS
from tracecheck.replay.validate import validate_traces
from tracecheck.traces.load import Trace, load_trace, parse_trace_lines

ROOT = Path(__file__).resolve().parent.parent.parent
SPEC_ROOT = ROOT / "spec"
GOLDEN = ROOT / "tests" / "rendezvous" / "golden"
NAMES = ("two_join", "last_call", "redundant_close")

Event = dict[str, Any]


def _regenerate_module() -> Any:
    spec = importlib.util.spec_from_file_location("rendezvous_golden", GOLDEN / "regenerate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows(name: str) -> list[Event]:
    lines = (GOLDEN / f"{name}.ndjson").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def _trace(rows: list[Event], label: str) -> Trace:
    """The rows as a trace (the end line dropped: a mutant is a run that did not say it
    ended), per-node ``seq`` and Lamport clocks renumbered in file order so that only the
    spec decides the mutant."""
    seqs: dict[str, int] = {}
    lines = [json.dumps(rows[0])]
    position = 0
    for row in rows[1:]:
        if row.get("kind") != "event":
            continue
        position += 1
        seqs[row["node"]] = seqs.get(row["node"], 0) + 1
        lines.append(json.dumps({**row, "seq": seqs[row["node"]], "lamport": position}))
    return parse_trace_lines(lines, label)


def _events(rows: list[Event]) -> list[int]:
    """Indices (into rows) of the event rows."""
    return [i for i, r in enumerate(rows) if r.get("kind") == "event"]


def _flip_dirty(rows: list[Event]) -> tuple[list[Event], int]:
    out = copy.deepcopy(rows)
    events = _events(out)
    k = next(
        n for n, i in enumerate(events, 1) if n > len(events) // 2 and "dirty" in out[i]["post"]
    )
    out[events[k - 1]]["post"]["dirty"] = not out[events[k - 1]]["post"]["dirty"]
    return out, k


def _repeat_first_start(rows: list[Event]) -> tuple[list[Event], int]:
    out = copy.deepcopy(rows)
    events = _events(out)
    k = next(n for n, i in enumerate(events, 1) if out[i]["event"] == "NextRendezvous")
    out.insert(events[k - 1] + 1, copy.deepcopy(out[events[k - 1]]))
    return out, k + 1


def _finish_other_round(rows: list[Event]) -> tuple[list[Event], int]:
    out = copy.deepcopy(rows)
    events = _events(out)
    k = next(
        n
        for n, i in enumerate(events, 1)
        if out[i]["event"] == "Finish" and out[i]["post"].get("view", {}).get("round", -1) >= 0
    )
    out[events[k - 1]]["post"]["view"]["round"] += 1
    return out, k


MUTATIONS = {"flip-dirty": _flip_dirty, "repeat-start": _repeat_first_start}


def test_golden_files_are_what_the_simulator_produces_now(tmp_path: Path) -> None:
    module = _regenerate_module()
    assert set(module.SCENARIOS) == set(NAMES)
    assert module.main(["--out", str(tmp_path)]) == 0
    for name in NAMES:
        committed = (GOLDEN / f"{name}.ndjson").read_text(encoding="utf-8")
        now = (tmp_path / f"{name}.ndjson").read_text(encoding="utf-8")
        assert now == committed, f"{name}: run tests/rendezvous/golden/regenerate.py, review"


def test_each_golden_trace_shows_its_scenario() -> None:
    names = {n: {r.get("event") for r in _rows(n)} for n in NAMES}
    assert {"AddToParticipants", "Finish"} <= names["two_join"]
    assert {"MarkRendezvousComplete", "AddToWaitList"} <= names["last_call"]
    assert {"AddToRedundancyList", "MarkRendezvousClosed", "GracefulExit"} <= names[
        "redundant_close"
    ]


def test_tlc_accepts_every_golden_trace_and_rejects_each_mutant_where_it_is() -> None:
    traces = [load_trace(GOLDEN / f"{name}.ndjson") for name in NAMES]
    expected: list[int | None] = [None] * len(NAMES)
    for name in NAMES:
        rows = _rows(name)
        for kind, mutate in [*MUTATIONS.items(), ("finish-round", _finish_other_round)]:
            if kind == "finish-round" and name == "redundant_close":
                continue  # one Finish mutant per config suffices; keeps the batch small
            mutant, k = mutate(rows)
            traces.append(_trace(mutant, f"{name}:{kind}"))
            expected.append(k)
    report = validate_traces(traces, RENDEZVOUS, SPEC_ROOT, explain=False)
    got = [None if v.accepted else v.matched + 1 for v in report.verdicts]
    assert got == expected


@pytest.mark.parametrize("name", NAMES)
def test_a_mutant_changes_exactly_one_event(name: str) -> None:
    """The mutants are what their names say (so the verdicts above test the checker)."""
    rows = _rows(name)
    flipped, k = _flip_dirty(rows)
    diff = [i for i, (a, b) in enumerate(zip(rows, flipped, strict=True)) if a != b]
    assert len(diff) == 1
    assert _events(rows).index(diff[0]) + 1 == k
