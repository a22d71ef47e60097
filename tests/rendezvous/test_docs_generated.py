"""docs/rendezvous.md's generated parts are what their scripts make of the spec now: the join-op
diagram (from the spec's text) and the counterexample tables (from TLC runs of the must-fail
models), so that the design reference cannot drift from the spec it explains."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from support.scripts import load_script

SCRIPTS = Path(__file__).resolve().parents[2] / "spec" / "rendezvous"
#: The models whose tables are checked here (a few seconds of TLC each). The other tables,
#: MCDynamicRendezvous_waitlist_full and MCDynamicRendezvous_pytorch111646, take TLC about 45 s
#: each: `render_cex.py --check` covers them.
FAST = (
    "MCDynamicRendezvous_pytorch_leave_complete_rank",
    "MCDynamicRendezvousClocks_heartbeat_skew3",
    "MCDynamicRendezvousClocks_last_call_early",
    "MCDynamicRendezvous_lost_update",
    "MCDynamicRendezvous_arrival_ranks",
    "MCDynamicRendezvous_below_min",
    "MCDynamicRendezvous_live_lastcall_long",
    "MCDynamicRendezvousBootstrap_d7",
    "MCDynamicRendezvousClocksDomains_first_sight",
)


def _script(name: str) -> ModuleType:
    return load_script(SCRIPTS / f"{name}.py", f"rendezvous_{name}")


def test_the_join_op_diagram_is_current() -> None:
    assert _script("gen_join_diagram").main(["--check"]) == 0


def test_the_counterexample_tables_are_current() -> None:
    assert _script("render_cex").main(["--check", "--only", *FAST]) == 0


def test_a_stale_table_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    render_cex = _script("render_cex")
    docs = tmp_path / "rendezvous.md"
    text = render_cex.DOCS.read_text(encoding="utf-8")
    # step 19 of the lost update, the stale write that should have lost, now claims it lost
    start = text.index("<!-- CEX MCDynamicRendezvous_lost_update -->")
    block = text[start:]
    wrong_block = block.replace("| 19 | SyncWriteWon | 2 |", "| 19 | SyncWriteLost | 2 |", 1)
    assert wrong_block != block
    wrong = text[:start] + wrong_block
    docs.write_text(wrong, encoding="utf-8")
    monkeypatch.setattr(render_cex, "DOCS", docs)
    assert render_cex.main(["--check", "--only", "MCDynamicRendezvous_lost_update"]) == 1
    assert render_cex.main(["--write", "--only", "MCDynamicRendezvous_lost_update"]) == 0
    assert docs.read_text(encoding="utf-8") == text


def test_the_golden_diagrams_and_the_model_table_are_current() -> None:
    assert _script("gen_rendezvous_docs").main(["--check"]) == 0


def test_a_stale_model_table_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gen = _script("gen_rendezvous_docs")
    docs = tmp_path / "rendezvous.md"
    text = gen.DOCS.read_text(encoding="utf-8")
    wrong = text.replace("| `MCDynamicRendezvous_quick` | quick | pass |", "| `x` | quick | pass |")
    assert wrong != text
    docs.write_text(wrong, encoding="utf-8")
    monkeypatch.setattr(gen, "DOCS", docs)
    assert gen.main(["--check"]) == 1
    assert gen.main([]) == 0
    assert docs.read_text(encoding="utf-8") == text
