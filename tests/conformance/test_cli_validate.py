"""`tracecheck validate`: exit codes, the readable report, JSON, and typed errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.ledger import GOOD, SPEC_ROOT, event, header
from tracecheck.cli import main

ARGS = ["--mapping", "support.ledger:LEDGER", "--spec-root", str(SPEC_ROOT)]


def _write(path: Path, rows: list[dict[str, object]]) -> str:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return str(path)


def test_accepts_and_rejects_with_exit_codes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _write(tmp_path / "good.ndjson", [header(), *GOOD])
    bad = _write(tmp_path / "bad.ndjson", [header(), GOOD[0], event("Receive", "b", 1, 2, a=2)])
    assert main(["validate", good, *ARGS]) == 0
    assert main(["validate", good, bad, *ARGS]) == 1
    out = capsys.readouterr().out
    assert "event 2 (line 3) Receive by b has no spec step" in out
    assert "conjunct 1 is false: <<n, a>> \\in inbox" in out


def test_json_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _write(tmp_path / "bad.ndjson", [header(), GOOD[0], event("Receive", "b", 1, 2, a=2)])
    assert main(["validate", bad, "--json", *ARGS]) == 1
    report = json.loads(capsys.readouterr().out)
    (verdict,) = report["verdicts"]
    assert verdict["rejection"]["index"] == 2
    assert verdict["explanation"]["frontier"][0]["failed_guard_at"] == "1"


def test_bad_input_is_a_typed_error_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.ndjson"
    broken.write_text(json.dumps(header()) + "\n{oops\n", encoding="utf-8")
    assert main(["validate", str(broken), *ARGS]) == 2
    assert "broken.ndjson:2: bad JSON" in capsys.readouterr().err
    good = _write(tmp_path / "good.ndjson", [header(), *GOOD])
    assert main(["validate", good]) == 2
    assert "no mapping for protocol 'ledger'" in capsys.readouterr().err
