"""replay-on-torch end to end on the installed torch: TLC's counterexample of the resurrection
model, then torch driven along it, reproduces the resurrected context; a model whose recipe says
why no torch run can follow it reports that reason without running anything."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tracecheck.campaigns.replay_on_torch.run import replay_model
from tracecheck.cli import main

SPEC_ROOT = Path(__file__).resolve().parents[2] / "spec"


def test_the_resurrection_reproduces_from_its_counterexample(torch_dr: ModuleType) -> None:
    del torch_dr  # (torch must be installed)
    result = replay_model("MCDistAutograd_pytorch38513", SPEC_ROOT)
    assert result.verdict == "reproduced", result.detail
    assert result.facts["released_context_found"] is True
    assert result.plan["delays"] == {"1": {"CLEANUP_AUTOGRAD_CONTEXT_REQ": 4.0}}


def test_a_not_reproducible_model_reports_its_reason(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay-on-torch", "MCDistAutograd_pytorch26379"]) == 0
    out = capsys.readouterr().out
    assert "not reproducible" in out
    assert "crash" in out
