"""docs/rref.md's generated parts are what their scripts make of the project now: the sequence
diagrams of the sharing scenarios (from the golden traces), the models table (from models.json)
and the counterexamples (from TLC runs of the must-fail models), so that the design reference
cannot drift from the spec and the traces it explains."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from support.scripts import load_script

SCRIPTS = Path(__file__).resolve().parent.parent / "spec" / "rref"
#: Counterexamples checked here (a few seconds of TLC each); `render_rref_cex.py --check`
#: covers all of them.
FAST = ("MCRRef_reuseIds", "MCRRef_noG2_parentHeld", "MCRRef_pytorch71029", "MCRRef_pytorch31893")


def _script(name: str) -> ModuleType:
    return load_script(SCRIPTS / f"{name}.py", f"rref_{name}")


def test_the_diagrams_and_the_models_table_are_current() -> None:
    assert _script("gen_rref_docs").main(["--check"]) == 0


def test_every_arrow_names_the_step_that_sent_it() -> None:
    gen = _script("gen_rref_docs")
    for name in gen.SCENARIOS:
        text = gen.diagram(gen.GOLDEN / f"{name}.ndjson")
        arrows = [line for line in text.splitlines() if "-)" in line]
        assert arrows, name
        assert all("(sent at " in line for line in arrows), name


def test_a_retry_copy_is_credited_to_its_retry_send() -> None:
    gen = _script("gen_rref_docs")
    text = gen.diagram(gen.GOLDEN / "user_to_user.ndjson")
    # step 6 is w2's RetrySend of its fork request; the copy is taken at step 8
    assert "Note over w2: 6. RetrySend(RREF_FORK_REQUEST to w1, fork w0.3)" in text
    assert "w2-)w1: RREF_FORK_REQUEST fork w0.3, retry copy (sent at 6)" in text
    # the ack of the original request (step 9) is not the ack of the copy (step 8)
    assert "w1-)w2: RREF_ACK fork w0.3 (sent at 9)" in text
    assert "w1-)w2: RREF_ACK fork w0.3, retry copy (sent at 8)" in text


def test_a_stale_diagram_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gen = _script("gen_rref_docs")
    docs = tmp_path / "rref.md"
    text = gen.DOCS.read_text(encoding="utf-8")
    wrong = text.replace("Note over w2: 6. RetrySend", "Note over w2: 6. LoseFirstAttempt", 1)
    assert wrong != text
    docs.write_text(wrong, encoding="utf-8")
    monkeypatch.setattr(gen, "DOCS", docs)
    assert gen.main(["--check"]) == 1
    assert gen.main([]) == 0
    assert docs.read_text(encoding="utf-8") == text


def test_the_quick_counterexamples_are_current() -> None:
    assert _script("render_rref_cex").main(["--check", "--only", *FAST]) == 0


def test_a_stale_counterexample_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    render_cex = _script("render_rref_cex")
    docs = tmp_path / "rref.md"
    text = render_cex.DOCS.read_text(encoding="utf-8")
    start = text.index("<!-- CEX MCRRef_reuseIds -->")
    wrong = text[:start] + text[start:].replace("Remote(w1 -> w2", "Remote(w2 -> w1", 1)
    assert wrong != text
    docs.write_text(wrong, encoding="utf-8")
    monkeypatch.setattr(render_cex, "DOCS", docs)
    assert render_cex.main(["--check", "--only", "MCRRef_reuseIds"]) == 1
    assert render_cex.main(["--write", "--only", "MCRRef_reuseIds"]) == 0
    assert docs.read_text(encoding="utf-8") == text
