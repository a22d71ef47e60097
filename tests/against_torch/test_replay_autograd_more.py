"""Three more #38513 counterexamples reproduced on torch from TLC's counterexamples (issue 27,
§2), and the measurement behind MCDistAutograd_pytorchRetryAfterError's "not reproducible":
torch's failed FAST pass leaves no gradient and the retry counts its own once."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from protoref.torch.rpc_repro import FaultPlan, run_program
from tracecheck.campaigns.replay_on_torch.run import replay_model

SPEC_ROOT = Path(__file__).resolve().parents[2] / "spec"


@pytest.mark.parametrize(
    ("model", "program"),
    [
        ("MCDistAutograd_pytorch38513_leak", "cleanup_first"),
        ("MCDistAutograd_pytorchTimeout", "timeout_mid_request"),
        ("MCDistAutograd_pytorchFireForget", "fire_and_forget"),
        # issue 26 §4c's must-fail model: FAST mode hangs after a UDF that raised on a request
        # carrying grad (found by the model, then reproduced on torch 2.13 and 2.15)
        ("MCDistAutograd_pytorchUdfRaises", "udf_raises"),
    ],
)
def test_the_counterexample_reproduces(torch_dr: ModuleType, model: str, program: str) -> None:
    del torch_dr  # (torch must be installed)
    result = replay_model(model, SPEC_ROOT)
    assert result.verdict == "reproduced", result.detail
    assert result.program == program


def test_a_retry_after_a_failed_fast_pass_counts_its_gradient_once(torch_dr: ModuleType) -> None:
    del torch_dr
    knobs = {"boom_seconds": 0.3, "root_seconds": 1.5, "settle": 3.0}
    seen = run_program("retry_after_error", FaultPlan(knobs=knobs))
    assert not seen.problem, seen.problem
    facts = seen.facts
    assert str(facts["first"]).startswith("raised"), facts
    assert facts["after_first"] is None  # the failed pass accumulated nothing for p
    assert facts["retry"] == "returned"
    assert facts["at_return"] == facts["later"] == [5.0, 5.0]  # 3 + 2, once
