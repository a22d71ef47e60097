"""The runtime benchmark runs (a few rounds) and writes only between its markers."""

from __future__ import annotations

from pathlib import Path

import pytest
from benches import rref_runtime as bench
from benches.rref_runtime import END, START, BenchResult, run_ours, table, write_marked


def test_a_short_run_of_ours_is_leak_free_and_renders() -> None:
    ours = run_ours(rounds=20, warmup=5)
    assert ours.rounds == 20
    assert ours.seconds is not None
    assert ours.note == ""  # the shutdown report was leak-free
    missing = BenchResult("torch", 20, None, "skipped: torch is not installed")
    block = table([ours, missing])
    assert block.startswith(START)
    assert block.endswith(END)
    assert "| torch | - | - | skipped: torch is not installed | - | - | - |" in block
    assert "goal" not in block  # no ratio without torch's figure
    # the load-independent figures: the owner's CPU and both sides' context switches (Linux)
    assert ours.owner_cpu is not None
    assert ours.switches is not None
    assert ours.owner_switches is not None
    assert ours.owner_switches > 0  # the owner's loop blocks and is woken for every call


def test_the_marked_block_is_replaced_and_the_rest_kept(tmp_path: Path) -> None:
    doc = tmp_path / "performance.md"
    doc.write_text("# Performance\n\nother text\n", encoding="utf-8")
    write_marked(doc, f"{START}\nfirst\n{END}")
    write_marked(doc, f"{START}\nsecond\n{END}")
    text = doc.read_text(encoding="utf-8")
    assert text.count(START) == 1
    assert "second" in text
    assert "first" not in text
    assert text.startswith("# Performance\n\nother text\n")


def test_the_ratio_is_the_median_over_alternating_pairs() -> None:
    pairs = [
        BenchResult("ours", 100, 1.0),
        BenchResult("torch", 100, 0.5),  # 2x
        BenchResult("ours", 100, 1.0),
        BenchResult("torch", 100, 0.25),  # 4x
        BenchResult("ours", 100, 1.0),
        BenchResult("torch", 100, 1 / 3),  # 3x
    ]
    block = table(pairs)
    assert "2.00x, 4.00x, 3.00x; median **3.00x** over 3 alternated pairs (misses" in block
    met = table([BenchResult("ours", 100, 1.0), BenchResult("torch", 100, 1.25)])
    assert "0.80x; median **0.80x** over 1 alternated pairs (meets" in met


def test_a_failed_run_is_not_written_into_the_docs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "performance.md"
    out.write_text("previous figures\n", encoding="utf-8")
    ours = BenchResult("ours", 10, 0.5)
    stalled = BenchResult("torch", 10, None, f"{bench.NOT_MEASURED}the torch run exceeded 9 s")
    monkeypatch.setattr(bench, "run_ours", lambda rounds, warmup: ours)
    monkeypatch.setattr(bench, "run_torch", lambda rounds, warmup: stalled)
    argv = ["--repeat", "1", "--out", str(out)]
    assert bench.main(argv) == 1
    assert out.read_text(encoding="utf-8") == "previous figures\n"
    # torch not installed is a skip, not a failure: the block says so
    skipped = BenchResult("torch", 10, None, "skipped: torch is not installed (x)")
    monkeypatch.setattr(bench, "run_torch", lambda rounds, warmup: skipped)
    assert bench.main(argv) == 0
    assert START in out.read_text(encoding="utf-8")
