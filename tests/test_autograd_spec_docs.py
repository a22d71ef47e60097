"""docs/autograd.md against the autograd spec's files (issue #18): the counterexample step lists
are the recorded TLC counterexamples rendered, the recordings are TLC's (one model re-run here;
``render_autograd_cex.py --verify`` re-runs them all), the models and teeth tables are the
manifest's, and section 6 has one heading per must-fail model. Each checker is also shown to
reject a planted stale or missing block.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from support.scripts import load_script
from tracecheck.tla.cfgfile import checked

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec" / "autograd"
MANIFEST = json.loads((SPEC / "models.json").read_text(encoding="utf-8"))
MUST_FAIL = [m for m in MANIFEST["models"] if m["expect"] != "pass"]


def _load(name: str) -> ModuleType:
    return load_script(SPEC / f"{name}.py", name)


cex = _load("render_autograd_cex")
gen = _load("gen_autograd_docs")


def _planted(
    tmp_path: Path, text: str, module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> Path:
    docs = tmp_path / "autograd.md"
    docs.write_text(text, encoding="utf-8")
    monkeypatch.setattr(module, "DOCS", docs)
    return docs


def test_every_must_fail_model_has_a_recording_of_its_verdict() -> None:
    for model in MUST_FAIL:
        data = cex.load(model["name"])
        assert (data["verdict"], data["violated"]) == (model["expect"], model["violates"])
        assert data["states"][0]["action"] == "Init"
        assert all(s["action"] in cex.ACTIONS for s in data["states"][1:]), model["name"]


def test_docs_step_lists_are_the_recordings_rendered() -> None:
    assert cex.main(["--check"]) == 0


def test_docs_tables_and_sections_are_the_manifests() -> None:
    assert gen.main(["--check"]) == 0


def test_a_stale_step_list_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (ROOT / "docs" / "autograd.md").read_text(encoding="utf-8")
    stale = text.replace(" 4. ReleaseContext\n", " 4. NewContext\n", 1)
    assert stale != text
    docs = _planted(tmp_path, stale, cex, monkeypatch)
    assert cex.main(["--check"]) == 1
    assert "steps are stale" in capsys.readouterr().out
    assert cex.main(["--write"]) == 0
    assert docs.read_text(encoding="utf-8") == text


def test_a_missing_step_list_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (ROOT / "docs" / "autograd.md").read_text(encoding="utf-8")
    _planted(tmp_path, text.replace("<!-- CEX MCDistAutograd_noCascade -->", ""), cex, monkeypatch)
    assert cex.main(["--check"]) == 1
    assert "no <!-- CEX MCDistAutograd_noCascade --> block" in capsys.readouterr().out


def test_a_stale_table_and_a_misplaced_section_are_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (ROOT / "docs" / "autograd.md").read_text(encoding="utf-8")
    first = MUST_FAIL[0]["name"]
    stale = text.replace(f"| `{first}` | quick |", f"| `{first}` | deep |", 1)
    stale = stale.replace(f"### 6.1 `{first}`", f"### 6.1 `{first}x`", 1)
    assert stale.count("x`:") >= 1
    _planted(tmp_path, stale, gen, monkeypatch)
    assert gen.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "a generated table is stale" in err
    assert "section 6 headings" in err


def test_a_property_without_teeth_is_reported() -> None:
    manifest = {
        **MANIFEST,
        "models": [m for m in MANIFEST["models"] if m["violates"] != "ErrorsReachRootInv"],
    }
    table, missing = gen.teeth_table(manifest)
    assert missing == ["ErrorsReachRootInv"]
    assert "| `ErrorsReachRootInv` | **missing** |" in table
    planted = {**MANIFEST.get("no_teeth", {}), "ErrorsReachRootInv": "a planted reason"}
    reasons = {**manifest, "no_teeth": planted}
    table, missing = gen.teeth_table(reasons)
    assert missing == []
    assert "none can: a planted reason" in table


def test_cfg_reader_skips_comments() -> None:
    text = "\\* INVARIANT Hidden\n(* PROPERTY Gone *)\nINVARIANTS\n  TypeOK SafeInv\n"
    text += "PROPERTY LiveProp\n"
    assert gen.checked(text) == ["TypeOK", "SafeInv", "LiveProp"]


def test_a_recording_is_tlcs_counterexample() -> None:
    """One must-fail model re-run through TLC (seconds); --verify does all of them."""
    assert cex.main(["--verify", "MCDistAutograd_pytorch38513"]) == 0


def test_cfg_reader_agrees_with_the_teeth_rules() -> None:
    """The docs' teeth table reads the cfgs as tests/test_teeth.py's rule does."""
    for cfg in sorted(SPEC.glob("*.cfg")):
        text = cfg.read_text(encoding="utf-8")
        assert gen.checked(text) == list(dict.fromkeys(checked(text))), cfg.name
