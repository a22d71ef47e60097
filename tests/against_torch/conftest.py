"""torch 2.13's own rendezvous handler under the checker: one campaign per test session.

torch is a required test dependency (``make test`` installs it into ``.venv``): without torch
2.13 the tests that need it FAIL with the install hint. ``PROTOREF_SKIP_TORCH=1`` turns that into
a skip for a developer who knowingly runs without torch; CI never sets it.

The session's campaign runs every scenario kind once (threads on a HashStore, TCPStore and
FileStore; the two defect schedules; processes on a TCPStore and a FileStore, with SIGKILL)
and checks every trace with the invariants; the test modules read its verdicts.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from protoref.torch.compat import TorchUnavailableError, require_torch
from support.torch_runs import FIRST_SEED, SESSION_SCENARIOS
from tracecheck.campaigns.torch_rendezvous import TorchCampaignResult, run_torch_campaign
from tracecheck.replay.artifacts import ARTIFACTS_ENV

ROOT = Path(__file__).resolve().parents[2]
SPEC_ROOT = ROOT / "spec"


@pytest.fixture(scope="session")
def torch_dr() -> ModuleType:
    """torch's ``dynamic_rendezvous`` (torch 2.13 must be installed)."""
    try:
        return require_torch()
    except TorchUnavailableError as err:
        if os.environ.get("PROTOREF_SKIP_TORCH") == "1":
            pytest.skip(f"PROTOREF_SKIP_TORCH=1: {err}")
        pytest.fail(f"{err} (make test installs it; PROTOREF_SKIP_TORCH=1 skips these tests)")


@pytest.fixture(autouse=True, scope="session")
def _artifacts_out_of_the_tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    if os.environ.get(ARTIFACTS_ENV):
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ARTIFACTS_ENV, str(tmp_path_factory.getbasetemp() / "tracecheck-artifacts"))
        yield


@pytest.fixture(scope="session")
def campaign(torch_dr: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> TorchCampaignResult:
    """The session's campaign (its traces kept in a temporary folder)."""
    # The first scenario puts three nodes on one host, so only their local ids differ; move
    # torch's id counter (ids need only be unique in the process) so that they are
    # 10**k - 2, 10**k - 1 and 10**k, which order differently as strings and as integers.
    generator = torch_dr.DynamicRendezvousHandler._node_desc_generator
    with generator._lock:
        boundary = 10
        while boundary - 2 < generator._local_id:
            boundary *= 10
        generator._local_id = boundary - 2
    return run_torch_campaign(
        len(SESSION_SCENARIOS),
        FIRST_SEED,
        SPEC_ROOT,
        out=tmp_path_factory.mktemp("torch-campaign"),
        names=SESSION_SCENARIOS,
    )
