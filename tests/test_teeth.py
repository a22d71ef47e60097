"""The teeth rule (issue #16 section 1): every invariant and property that a cfg of a protocol
checks is violated by a must-fail model of that protocol, or is listed in its manifest's
``no_teeth`` with the reason why no model can. One case per protocol, so each protocol's side
passes or fails on its own; then the rule's checker is shown to reject manifests without teeth.

Whether a must-fail model really fails with the property it names is what ``make check``
(tests/test_models.py) runs TLC for; this test is static and runs in milliseconds.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tracecheck.errors import ManifestError
from tracecheck.runner.manifest import load_manifest
from tracecheck.runner.teeth import problems, teeth, teeth_markdown
from tracecheck.tla.cfgfile import checked, checked_in_folder

SPEC_ROOT = Path(__file__).resolve().parent.parent / "spec"
PROTOCOLS = sorted(load_manifest(SPEC_ROOT).protocols)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_checked_property_has_a_failing_model_or_a_reason(protocol: str) -> None:
    manifest = load_manifest(SPEC_ROOT)
    assert problems(manifest, protocol) == []


def test_the_rule_reads_every_protocol_with_cfgs() -> None:
    with_cfgs = {cfg.parent.name for cfg in SPEC_ROOT.glob("*/*.cfg")}
    assert with_cfgs <= set(PROTOCOLS)
    assert "rref" in PROTOCOLS


# --- the checker on planted input -------------------------------------------------------------


def _model(name: str, cfg: str, expect: str, violates: str | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "module": "Counter.tla",
        "cfg": f"{cfg}.cfg",
        "class": "quick",
        "expect": expect,
        "violates": violates,
        "description": f"{name}: what its counterexample shows",
    }


def _root(tmp_path: Path, specs: Path, **manifest: Any) -> Path:
    """A spec root with one protocol "toy": the Counter spec's cfgs and the given manifest."""
    folder = tmp_path / "spec" / "toy"
    folder.mkdir(parents=True)
    for path in specs.glob("Counter*"):
        shutil.copy(path, folder)
    models = [
        _model("pass", "Counter_pass", "pass"),  # TypeOK, ReachesLimitProp
        _model("inv", "Counter_inv", "invariant", "SmallInv"),  # TypeOK, SmallInv
        _model("temporal", "Counter_temporal", "property", "NeverResetProp"),
        _model("action", "Counter_action", "action_property", "StepProp"),
        _model("dead", "Counter_deadlock", "deadlock"),  # TypeOK
        _model("two", "Counter_two_props", "property", "NeverResetProp"),
    ]
    body = {"protocol": "toy", "models": models} | manifest
    (folder / "models.json").write_text(json.dumps(body), encoding="utf-8")
    return tmp_path / "spec"


def test_cfg_reader_lists_invariants_then_properties() -> None:
    text = "\\* INVARIANT Hidden\nINVARIANTS TypeOK SafeInv\nPROPERTY LiveProp\nINVARIANT OkInv\n"
    assert checked(text) == ["TypeOK", "SafeInv", "OkInv", "LiveProp"]


def test_properties_without_teeth_are_named(tmp_path: Path, specs: Path) -> None:
    root = _root(tmp_path, specs)
    found = problems(load_manifest(root), "toy")
    assert len(found) == 2
    assert found[0].startswith("TypeOK (checked by Counter_deadlock.cfg, Counter_inv.cfg and 1 ")
    assert found[1].startswith("ReachesLimitProp (checked by Counter_pass.cfg, Counter_two_props")
    assert all("has no must-fail model and no no_teeth reason" in p for p in found)


def test_a_written_reason_is_accepted(tmp_path: Path, specs: Path) -> None:
    reasons = {"TypeOK": "a reason", "ReachesLimitProp": "another reason"}
    manifest = load_manifest(_root(tmp_path, specs, no_teeth=reasons))
    assert problems(manifest, "toy") == []
    rows = {t.name: t for t in teeth(manifest, "toy")}
    assert [m.name for m in rows["NeverResetProp"].violated_by] == ["temporal", "two"]
    assert rows["TypeOK"].reason == "a reason"


def test_a_blank_reason_is_refused(tmp_path: Path, specs: Path) -> None:
    root = _root(tmp_path, specs, no_teeth={"TypeOK": "  ", "ReachesLimitProp": "why"})
    with pytest.raises(ManifestError, match=r"no_teeth entries without a reason: \['TypeOK'\]"):
        load_manifest(root)


def test_a_reason_must_name_a_checked_property(tmp_path: Path, specs: Path) -> None:
    root = _root(tmp_path, specs, no_teeth={"TypoInv": "why", "TypeOK": "why"})
    with pytest.raises(ManifestError, match=r"no_teeth names what no cfg checks: \['TypoInv'\]"):
        load_manifest(root)


def test_a_reason_beside_a_failing_model_is_stale(tmp_path: Path, specs: Path) -> None:
    reasons = {"TypeOK": "a", "ReachesLimitProp": "b", "SmallInv": "none can, it says"}
    found = problems(load_manifest(_root(tmp_path, specs, no_teeth=reasons)), "toy")
    assert found == ["SmallInv is listed in no_teeth, but inv must violate it"]


def test_a_model_must_check_what_it_claims_to_violate(tmp_path: Path, specs: Path) -> None:
    root = _root(tmp_path, specs, no_teeth={"TypeOK": "a", "ReachesLimitProp": "b"})
    path = root / "toy" / "models.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw["models"][1]["cfg"] = "Counter_deadlock.cfg"  # checks TypeOK only, not SmallInv
    path.write_text(json.dumps(raw), encoding="utf-8")
    found = problems(load_manifest(root), "toy")
    assert "inv must violate SmallInv, which its cfg Counter_deadlock.cfg omits" in found
    assert any(p.startswith("SmallInv (checked by Counter_inv.cfg)") for p in found) is False


def test_generated_trace_cfgs_are_not_read(tmp_path: Path, specs: Path) -> None:
    root = _root(tmp_path, specs, no_teeth={"TypeOK": "a", "ReachesLimitProp": "b"})
    (root / "toy" / "TraceCounter.cfg").write_text("INVARIANT TraceOnlyInv\n", encoding="utf-8")
    assert "TraceOnlyInv" not in checked_in_folder(root / "toy")
    assert problems(load_manifest(root), "toy") == []


def test_the_table_shows_models_figures_and_reasons(tmp_path: Path, specs: Path) -> None:
    reasons = {"TypeOK": "shape | only", "ReachesLimitProp": "b"}
    text = teeth_markdown(load_manifest(_root(tmp_path, specs, no_teeth=reasons)))
    assert "## toy: teeth" in text
    assert "| `SmallInv` | `inv` (- states, - s) | inv: what its counterexample shows |" in text
    assert "| `TypeOK` | — | *no model can:* shape \\| only |" in text
    missing = teeth_markdown(load_manifest(_root(tmp_path / "bare", specs)))
    assert "| `TypeOK` | — | **missing** |" in missing
