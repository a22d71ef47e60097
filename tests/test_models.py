"""The project's own models: every quick model's TLC verdict matches spec/*/models.json.

This is what `make check` runs, as tests: a must-fail model that passes fails here just like a
pass model that fails. Deep models run in `make bench`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tracecheck.runner.manifest import Manifest, ModelEntry, load_manifest, run_model

SPEC_ROOT = Path(__file__).resolve().parent.parent / "spec"
MANIFEST: Manifest = load_manifest(SPEC_ROOT)
QUICK: list[tuple[str, ModelEntry]] = MANIFEST.select(klass="quick")


def test_manifest_lists_models() -> None:
    assert QUICK, "no quick models in spec/*/models.json"


def test_every_cfg_in_spec_is_in_the_manifest() -> None:
    listed = {(p, m.cfg) for p, m in MANIFEST.entries()}
    on_disk = {
        (cfg.parent.name, cfg.name)
        for cfg in SPEC_ROOT.glob("*/*.cfg")
        if not cfg.name.startswith("Trace")  # trace-validation cfgs are generated per trace
    }
    assert on_disk - listed == set(), "cfg files that no manifest entry runs"


def test_every_must_fail_model_says_what_it_breaks() -> None:
    for _, entry in MANIFEST.entries():
        if entry.expect.value != "pass":
            assert entry.description
            assert entry.expect.value == "deadlock" or entry.violates


@pytest.mark.parametrize(("protocol", "entry"), QUICK, ids=[m.name for _, m in QUICK])
def test_quick_model_matches_manifest(protocol: str, entry: ModelEntry) -> None:
    check = run_model(MANIFEST, protocol, entry)
    assert check.ok, f"{protocol}/{entry.name}: {check.problem}"
