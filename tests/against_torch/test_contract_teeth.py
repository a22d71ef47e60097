"""What torch needed from the trace contract, shown on its own traces: each setting the adapter
gives, and torch's node order, is needed (the same trace without it is rejected where torch
does what the contract used to forbid); and a torch with a planted bug is rejected."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from protoref.torch.driver import run_scenario
from protoref.torch.scenarios import SCENARIOS
from tracecheck.campaigns.torch_rendezvous import TorchCampaignResult
from tracecheck.protocols.rendezvous import RENDEZVOUS
from tracecheck.replay.validate import validate_files
from tracecheck.replay.verdicts import TraceVerdict

ROOT = Path(__file__).resolve().parents[2]


def _trace(campaign: TorchCampaignResult, scenario: str) -> Path:
    (run,) = [r for r in campaign.runs if r.scenario == scenario]
    return Path(run.trace)


def _as(path: Path, out: Path, **changes: Any) -> Path:
    """A copy of the trace at ``path`` with header fields or settings changed."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    for key, value in changes.items():
        if key == "nodes":
            header["nodes"] = value
        else:
            header["settings"][key] = value
    out.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    return out


def _verdicts(paths: list[Path]) -> list[TraceVerdict]:
    _, report = validate_files(paths, RENDEZVOUS, ROOT / "spec", explain=False)
    return report.verdicts


def test_each_setting_torch_needs_is_needed(campaign: TorchCampaignResult, tmp_path: Path) -> None:
    # CacheTicks 2: a node waking from its 1 s SYNC sleep in the next tick gets torch's
    # inclusive cache hit; with a cache shorter than a tick the spec has no such step.
    # CloseAnyTime: the nodes of a wound-down run shut down a rendezvous that is closed already.
    # Together in one TLC run per distinct header.
    cache = _as(_trace(campaign, "min_equals_max"), tmp_path / "cache.ndjson", CacheTicks=1)
    close = _as(
        _trace(campaign, "close_and_shutdown"), tmp_path / "close.ndjson", CloseAnyTime=False
    )
    for verdict, action in zip(_verdicts([cache, close]), ("SyncCached", "SetClosed"), strict=True):
        assert not verdict.accepted
        assert verdict.rejection is not None
        assert verdict.rejection.event.event == action


def test_the_header_gives_torchs_node_order_and_string_order_is_rejected(
    campaign: TorchCampaignResult, tmp_path: Path
) -> None:
    path = _trace(campaign, "min_equals_max")
    nodes = json.loads(path.read_text(encoding="utf-8").splitlines()[0])["nodes"]

    def desc(name: str) -> tuple[str, int, int]:
        addr, pid, local = name.rsplit("_", 2)
        return addr, int(pid), int(local)

    assert nodes == sorted(nodes, key=desc)
    assert nodes != sorted(nodes), "the session's fixture gives local ids across a power of ten"
    (verdict,) = _verdicts([_as(path, tmp_path / "strings.ndjson", nodes=sorted(nodes))])
    assert not verdict.accepted
    assert verdict.rejection is not None
    # the completing join (count = max) is where the ranks follow the node order
    assert verdict.rejection.event.event == "AddToParticipants"
    assert verdict.rejection.event.post["local"]["complete"] is True


def _reversed_ranks(self: Any) -> None:
    """Planted bug in torch's _mark_rendezvous_complete: ranks in the reverse node order."""
    state = self._state
    state.complete = True
    state.deadline = None
    for rank, node in enumerate(sorted(state.participants, reverse=True)):
        state.participants[node] = rank


def test_a_torch_with_reversed_ranks_is_rejected_at_the_completing_join(
    torch_dr: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        torch_dr._DistributedRendezvousOpExecutor, "_mark_rendezvous_complete", _reversed_ranks
    )
    run = run_scenario(SCENARIOS["min_equals_max"], 7, tmp_path)
    ranks = sorted(o[0] for o in run.outcomes.values())
    assert ranks == ["0/3@0", "1/3@0", "2/3@0"]  # torch still returns a rank to each node
    (verdict,) = _verdicts([run.trace])
    assert not verdict.accepted
    assert verdict.rejection is not None
    assert verdict.rejection.event.event == "AddToParticipants"
    assert verdict.rejection.event.post["local"]["complete"] is True
