"""The RRef simulator benchmark: it measures what it says, and tracing off builds no event."""

from __future__ import annotations

from pathlib import Path

import pytest
from benches import rref_sim as bench

from protoref.rref.sim import base as sim_module
from protoref.rref.sim.simulator import SimConfig, Simulator
from protoref.tracing import NullSink


def test_measure_runs_both_modes_on_the_same_events() -> None:
    fig = bench.measure(runs=3, steps=20, rounds=1)
    assert fig.off.events == fig.on.events > 0
    assert fig.trace_bytes > 0
    assert fig.calibration_ns > 0
    assert fig.ratio == fig.on.cpu / fig.off.cpu


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="runs, steps and rounds"):
        bench.measure(runs=0)
    assert bench.main(["--runs", "0"]) == 2


def test_block_replaces_only_its_markers(tmp_path: Path) -> None:
    doc = tmp_path / "performance.md"
    doc.write_text(f"# Perf\n\nintro\n\n{bench.START}\nold figures\n{bench.END}\n\nafter\n")
    assert bench.main(["--runs", "2", "--steps", "10", "--rounds", "1", "--out", str(doc)]) == 0
    text = doc.read_text()
    assert "old figures" not in text
    assert text.startswith("# Perf\n\nintro\n\n")
    assert text.endswith(f"{bench.END}\n\nafter\n")
    assert text.count(bench.START) == 1
    assert "| tracing off (null sink) |" in text
    assert "Tracing on / off:" in text


def test_null_sink_builds_no_trace_event(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tracing off costs nothing beyond a flag test: no event object is ever built.
    def refuse(*_args: object, **_kwargs: object) -> object:
        raise AssertionError("make_event called with tracing off")

    monkeypatch.setattr(sim_module, "make_event", refuse)
    monkeypatch.setattr(sim_module.EventEncoder, "line", refuse)
    summary = Simulator(4, SimConfig(shutdown=True), NullSink()).run(60)
    assert summary.events > 0
