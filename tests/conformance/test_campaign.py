"""A campaign survives its implementation: a run that raises keeps its partial trace, which is
validated; the run is reported with its seed and exception, and the campaign goes on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protoref.rref.sim.simulator import Simulator
from tracecheck.campaigns import campaign
from tracecheck.campaigns.campaign import run_campaign
from tracecheck.cli import main
from tracecheck.protocols import load_simulator

ROOT = Path(__file__).resolve().parents[2]
SPEC_ROOT = ROOT / "spec"


@pytest.fixture
def flaky(monkeypatch: pytest.MonkeyPatch) -> None:
    """The RRef campaign's simulator, except that seed 2 raises before its shutdown (its trace
    has the workload's events), seed 3 raises before logging anything, and seed 4's trace logs
    a post field the checker does not expect."""
    simulate = load_simulator("rref")
    real_shutdown = Simulator.shutdown

    def shutdown(self: Simulator) -> None:
        if self.seed == 2:
            raise RuntimeError("boom in the shutdown")
        real_shutdown(self)

    def simulate_flaky(seed: int, steps: int, out: Path) -> None:
        if seed == 3:
            out.write_text("", encoding="utf-8")
            raise ValueError("nothing logged")
        simulate(seed, steps, out)
        if seed == 4:
            rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
            rows[1]["post"]["bogus"] = 1
            out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    monkeypatch.setattr(Simulator, "shutdown", shutdown)
    monkeypatch.setattr(campaign, "load_simulator", lambda protocol: simulate_flaky)


@pytest.mark.usefixtures("flaky")
def test_a_run_that_raises_is_reported_and_its_partial_trace_validated(tmp_path: Path) -> None:
    result = run_campaign("rref", 4, 1, 30, SPEC_ROOT, out=tmp_path, explain=False)
    assert not result.ok
    assert result.raised_seeds == [2, 3]
    failures = {f.seed: f for f in result.failures}
    assert failures[2].exception == "RuntimeError: boom in the shutdown"
    assert failures[2].unreadable is None  # its trace was read and validated
    assert failures[3].exception == "ValueError: nothing logged"
    assert failures[3].unreadable is not None
    assert "empty trace" in failures[3].unreadable
    assert failures[4].exception is None
    assert failures[4].unreadable is not None
    assert "bogus" in failures[4].unreadable
    # seeds 1 and 2 have verdicts: the partial trace of 2 is a spec behaviour as far as it goes
    assert result.verdict_seeds == [1, 2]
    assert [v.accepted for v in result.report.verdicts] == [True, True]
    assert result.summary() == (
        "4 runs, 2 accepted, 0 rejected, 2 raised (0 of their traces rejected), 2 unreadable"
    )


@pytest.mark.usefixtures("flaky")
def test_the_campaign_command_reports_failed_runs_and_a_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["campaign", "rref", "--runs", "3", "--seed", "1", "--steps", "30"]
    assert main([*args, "--out", str(tmp_path), "--spec-root", str(SPEC_ROOT)]) == 1
    out = capsys.readouterr().out
    assert "seed 2: RuntimeError: boom in the shutdown" in out
    assert "seed 3: ValueError: nothing logged" in out
    assert "3 runs, 2 accepted, 0 rejected, 2 raised" in out
    assert "raised: seeds [2, 3]" in out
    assert "Traceback" not in out


def test_explain_only_the_first_rejections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    simulate = load_simulator("rref")

    def corrupted(seed: int, steps: int, out: Path) -> None:
        simulate(seed, steps, out)
        rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
        first = next(r for r in rows[1:] if "nextId" in r["post"])
        first["post"]["nextId"] += 1  # every run's first id draw logged one too high
        out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    monkeypatch.setattr(campaign, "load_simulator", lambda protocol: corrupted)
    result = run_campaign("rref", 3, 1, 20, SPEC_ROOT, out=tmp_path, explain_limit=1)
    assert [v.accepted for v in result.report.verdicts] == [False] * 3
    assert [v.explanation is not None for v in result.report.verdicts] == [True, False, False]
    args = ["campaign", "rref", "--runs", "2", "--seed", "1", "--steps", "20", "--no-explain"]
    assert main([*args, "--spec-root", str(SPEC_ROOT)]) == 1
    out = capsys.readouterr().out
    assert "2 rejection(s) not explained" in out
    assert "2 runs, 0 accepted, 2 rejected (2 spec), 0 raised" in out
