"""The two remaining rendezvous counterexamples on torch's own handler (issue 27, §2): the
bootstrap one end to end (TLC's counterexample, then the forced schedule), the wait-list one
with its recorded entry (its TLC run alone takes about 100 s)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from tracecheck.campaigns.replay_on_torch.recorded import replay_recorded
from tracecheck.campaigns.replay_on_torch.run import replay_model

SPEC_ROOT = Path(__file__).resolve().parents[2] / "spec"


def test_a_late_rank_waits_for_a_master_addr_nobody_writes(torch_dr: ModuleType) -> None:
    del torch_dr  # (torch must be installed)
    result = replay_model("MCDynamicRendezvousBootstrap_d7", SPEC_ROOT)
    assert result.verdict == "reproduced", result.detail
    outcomes = result.facts["outcomes"]
    assert isinstance(outcomes, dict)
    late = next(o for node, o in sorted(outcomes.items()) if node.startswith("127.0.0.2"))
    assert isinstance(late, list)
    assert "MASTER_ADDR" in str(late[-1])


def test_a_wait_listed_node_stays_in_a_full_round(torch_dr: ModuleType) -> None:
    del torch_dr
    result = replay_recorded("MCDynamicRendezvous_waitlist_full", SPEC_ROOT)
    assert result.verdict == "reproduced", result.detail
    waiting = result.facts["waiting"]
    assert isinstance(waiting, dict)
    first = next(w for node, w in sorted(waiting.items()) if node.startswith("127.0.0.1"))
    assert isinstance(first, list)
    assert first[-1] >= 1  # asked after round 1 completed full
