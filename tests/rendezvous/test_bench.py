"""The rendezvous benchmark's machinery: process workers really rendezvous, the doc section is
replaced in place (timings themselves are never asserted)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from protoref.rendezvous import bench
from protoref.rendezvous.bench import END, START, write_section
from protoref.rendezvous.procbench import measure_processes


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


def test_a_failed_run_is_not_written_into_the_docs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "performance.md"
    out.write_text("previous figures\n", encoding="utf-8")
    monkeypatch.setattr(bench, "run", lambda sizes, repeats: ["| N |", "| 2 | 0.1 |"])
    failed = ["| N |", f"{bench.FAILED}torch, N = 2: stalled"]
    monkeypatch.setattr(bench, "run_processes", lambda *args: failed)
    argv = ["--sizes", "2", "--process-sizes", "2", "--out", str(out)]
    assert bench.main(argv) == 1
    assert out.read_text(encoding="utf-8") == "previous figures\n"
    assert "torch, N = 2: stalled" in capsys.readouterr().out
    monkeypatch.setattr(bench, "run_processes", lambda *args: ["| N |", "| 2 | 0.2 |"])
    assert bench.main(argv) == 0
    assert "| 2 | 0.2 |" in out.read_text(encoding="utf-8")
