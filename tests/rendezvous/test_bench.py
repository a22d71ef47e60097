"""The rendezvous benchmark's machinery: process workers really rendezvous, the doc section is
replaced in place (timings themselves are never asserted)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from benches import rendezvous as bench
from benches.rendezvous import END, START, write_section
from benches.rendezvous_procs import measure_processes


def test_processes_rendezvous_on_the_file_store(tmp_path: Path) -> None:
    took = measure_processes("ours", 3, f"file:{tmp_path}", "bench-test")
    assert took > 0  # ranks 0..2 were checked inside; a failed rendezvous raises instead


def test_a_worker_that_cannot_start_is_reported(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"did not start: ValueError: store 'nosuch:"):
        measure_processes("ours", 1, f"nosuch:{tmp_path}", "bench-test")


def test_section_is_replaced_between_the_markers(tmp_path: Path) -> None:
    doc = tmp_path / "performance.md"
    doc.write_text(f"# P\n\nbefore\n\n{START}\nold figures\n{END}\n\nafter\n", encoding="utf-8")
    args = argparse.Namespace(sizes=[2], process_sizes=[2], repeats=1, process_repeats=1)
    write_section(doc, ["| threads row |"], ["| processes row |"], args)
    text = doc.read_text(encoding="utf-8")
    assert "old figures" not in text
    assert text.startswith("# P\n\nbefore\n\n" + START)
    assert text.endswith(END + "\n\nafter\n")
    assert "| threads row |" in text
    assert "| processes row |" in text


def test_a_run_with_a_failed_measurement_is_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = tmp_path / "performance.md"
    doc.write_text(f"# P\n\n{START}\nold figures\n{END}\n", encoding="utf-8")
    monkeypatch.setattr(bench, "run", lambda sizes, repeats: ["| threads row |"])
    failed = ["| processes row |", "\nfailed: torch, N = 16: not done after 240 s"]
    monkeypatch.setattr(bench, "run_processes", lambda sizes, repeats, timeout: failed)
    assert bench.main(["--sizes", "16", "--process-sizes", "16", "--out", str(doc)]) == 1
    assert "old figures" in doc.read_text(encoding="utf-8")
    assert "not written" in capsys.readouterr().out
    monkeypatch.setattr(bench, "run_processes", lambda sizes, repeats, timeout: failed[:1])
    assert bench.main(["--sizes", "16", "--process-sizes", "16", "--out", str(doc)]) == 0
    assert "| processes row |" in doc.read_text(encoding="utf-8")
