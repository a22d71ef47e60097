"""A failed check leaves the traces, the generated modules and the report where it says."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from support.ledger import GOOD, LEDGER, SPEC_ROOT, event, header
from tracecheck.campaigns import campaign
from tracecheck.cli import main
from tracecheck.protocols import load_simulator
from tracecheck.replay.artifacts import ARTIFACTS_ENV, failure_note
from tracecheck.replay.batches import furthest_cursors
from tracecheck.replay.validate import validate_traces
from tracecheck.runner.tlc import TLCOptions, run_tlc
from tracecheck.traces.load import load_trace

LEDGER_ARGS = ["--mapping", "support.ledger:LEDGER", "--spec-root", str(SPEC_ROOT)]
ROOT = Path(__file__).resolve().parent.parent.parent
AUDIT_ARGS = ["--mapping", "support.ledger_audit:LEDGER_AUDIT", "--spec-root", str(SPEC_ROOT)]


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _printed_folder(out: str) -> Path:
    found = re.search(r"generated modules and report are in (\S+)", out)
    assert found, out
    return Path(found[1])


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "artifacts"
    monkeypatch.setenv(ARTIFACTS_ENV, str(folder))
    return folder


def test_a_rejected_trace_leaves_trace_modules_and_report_at_the_printed_path(
    tmp_path: Path, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _write(tmp_path / "good.ndjson", [header(), *GOOD])
    bad = _write(tmp_path / "bad.ndjson", [header(), GOOD[0], event("Receive", "b", 1, 2, a=2)])
    assert main(["validate", str(good), str(bad), *LEDGER_ARGS]) == 1
    folder = _printed_folder(capsys.readouterr().out)
    assert folder.parent == root
    names = {p.name for p in folder.iterdir()}
    assert names == {
        "bad.ndjson",  # only the rejected trace, byte for byte
        "TraceData.tla",
        "TraceSpec.tla",
        "TraceLedger.tla",  # the trace spec (for a protocol of this project, its checked-in one)
        "TraceOps.tla",
        "TraceSpec.cfg",
        "report.txt",
        "report.json",
        "rerun.txt",
    }
    assert (folder / "bad.ndjson").read_bytes() == bad.read_bytes()
    assert "event 2 (line 3) Receive by b has no spec step" in (folder / "report.txt").read_text()
    report = json.loads((folder / "report.json").read_text())
    assert [v["accepted"] for v in report["report"]["verdicts"]] == [True, False]
    # The kept modules replay the rejection on their own: the furthest cursor is event 2.
    result = run_tlc(
        folder / "TraceSpec.tla",
        folder / "TraceSpec.cfg",
        TLCOptions(check_deadlock=False, library=(SPEC_ROOT / "ledger",)),
    )
    assert furthest_cursors(result, 1) == [2]


def test_an_accepted_run_leaves_nothing(
    tmp_path: Path, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _write(tmp_path / "good.ndjson", [header(), *GOOD])
    assert main(["validate", str(good), *LEDGER_ARGS]) == 0
    assert "generated modules and report are in" not in capsys.readouterr().out
    assert not root.exists()


def test_an_invariant_breach_also_leaves_the_witness_module(
    tmp_path: Path, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _write(tmp_path / "good.ndjson", [header(), *GOOD])
    assert main(["validate", str(good), "--invariants", "--json", *AUDIT_ARGS]) == 1
    printed = json.loads(capsys.readouterr().out)
    folder = Path(printed["artifacts"])
    assert folder.parent == root
    names = {p.name for p in folder.iterdir()}
    assert {"good.ndjson", "TraceSpec.tla", "TraceWitness.tla", "TraceWitness.cfg"} <= names
    assert "SingleHolderInv false after event 3" in (folder / "report.txt").read_text()


def test_the_option_overrides_the_environment(
    tmp_path: Path, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _write(tmp_path / "bad.ndjson", [header(), event("Receive", "b", 1, 2, a=2)])
    chosen = tmp_path / "chosen"
    args = ["validate", str(bad), "--no-explain", "--artifacts", str(chosen), *LEDGER_ARGS]
    assert main(args) == 1
    assert _printed_folder(capsys.readouterr().out).parent == chosen
    assert not root.exists()


def test_the_failure_note_of_a_test_points_at_the_artefacts(tmp_path: Path, root: Path) -> None:
    bad = load_trace(_write(tmp_path / "bad.ndjson", [header(), GOOD[0], GOOD[2]]))
    report = validate_traces([bad], LEDGER, SPEC_ROOT, explain=False)
    note = failure_note([bad], report, LEDGER, SPEC_ROOT)
    assert f"{bad.source}: event 2 (Receive)" in note
    folder = Path(note.rsplit(" in ", 1)[1])
    assert folder.parent == root
    assert {"bad.ndjson", "TraceSpec.tla", "report.txt"} <= {p.name for p in folder.iterdir()}


def test_a_rejected_campaign_run_leaves_its_artefacts_at_the_printed_path(
    tmp_path: Path,
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    simulate = load_simulator("rref")

    def corrupted(seed: int, steps: int, out: Path) -> None:
        # The real simulator's trace, with seed 2's first id draw logged one too high.
        simulate(seed, steps, out)
        if seed != 2:
            return
        rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
        first = next(r for r in rows[1:] if "nextId" in r["post"])
        first["post"]["nextId"] += 1
        _write(out, rows)

    monkeypatch.setattr(campaign, "load_simulator", lambda protocol: corrupted)
    args = ["campaign", "rref", "--runs", "2", "--seed", "1", "--steps", "30"]
    args += ["--out", str(tmp_path / "traces")]
    assert main([*args, "--spec-root", str(ROOT / "spec")]) == 1
    folder = _printed_folder(capsys.readouterr().out)
    assert folder.parent == root
    names = {p.name for p in folder.iterdir()}
    assert {"rref-seed2.ndjson", "TraceData.tla", "TraceSpec.tla", "TraceSpec.cfg"} <= names
    assert {"report.txt", "report.json"} <= names
    assert "rref-seed1.ndjson" not in names  # the accepted run is not kept


def test_rejected_traces_with_different_constants_each_get_their_verdict(
    tmp_path: Path, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue #17: two rejected traces whose constants differ (any two real runs) stopped the
    # command with "ValueError: its constants differ" while their artefacts were written.
    bad = [GOOD[0], event("Receive", "b", 1, 2, a=2)]
    first = _write(tmp_path / "max3.ndjson", [header(maximum=3), *bad])
    second = _write(tmp_path / "max4.ndjson", [header(maximum=4), *bad])
    good = _write(tmp_path / "good.ndjson", [header(maximum=5), *GOOD])
    assert main(["validate", str(first), str(second), str(good), *LEDGER_ARGS]) == 1
    out = capsys.readouterr().out
    assert "rejected max3.ndjson: event 2" in out.replace(str(tmp_path) + "/", "")
    assert "rejected max4.ndjson: event 2" in out.replace(str(tmp_path) + "/", "")
    assert f"accepted {good} " in out
    folder = _printed_folder(out)
    for batch in ("batch-1", "batch-2"):
        assert {"TraceData.tla", "TraceSpec.tla", "TraceSpec.cfg"} <= {
            p.name for p in (folder / batch).iterdir()
        }
    constants = {(folder / b / "TraceSpec.tla").read_text() for b in ("batch-1", "batch-2")}
    assert any("TV_Max == 3" in text for text in constants)
    assert any("TV_Max == 4" in text for text in constants)
    # each batch's trace spec replays its own trace: TLC stops at the rejected event there too
    for batch in ("batch-1", "batch-2"):
        result = run_tlc(
            folder / batch / "TraceSpec.tla",
            options=TLCOptions(check_deadlock=False, library=(SPEC_ROOT / "ledger",)),
        )
        assert furthest_cursors(result, 1) == [2]
