"""`tracecheck bench`: the ceiling runs first and every deep model gets a ratio to it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tracecheck.campaigns.bench import END, START, bench_table, run_bench, write_block
from tracecheck.runner.manifest import load_manifest

ROOT = Path(__file__).resolve().parent.parent.parent


def _entry(name: str, module: str, cfg: str, klass: str = "deep") -> dict[str, object]:
    return {
        "name": name,
        "module": module,
        "cfg": cfg,
        "class": klass,
        "expect": "pass",
        "description": name,
    }


def test_bench_reports_ratios_and_rewrites_its_block(tmp_path: Path, specs: Path) -> None:
    bench = tmp_path / "spec" / "bench"
    toy = tmp_path / "spec" / "toy"
    bench.mkdir(parents=True)
    toy.mkdir()
    shutil.copy(ROOT / "spec" / "bench" / "Ceiling.tla", bench)
    (bench / "Small.cfg").write_text("CONSTANT N = 10\nINIT Init\nNEXT Next\n", "utf-8")
    (bench / "models.json").write_text(
        json.dumps(
            {"protocol": "bench", "models": [_entry("Ceiling", "Ceiling.tla", "Small.cfg")]}
        ),
        "utf-8",
    )
    for path in specs.glob("Counter*"):
        shutil.copy(path, toy)
    (toy / "models.json").write_text(
        json.dumps(
            {
                "protocol": "toy",
                "models": [
                    _entry("Counter", "Counter.tla", "Counter_pass.cfg"),
                    _entry("Quick", "Counter.tla", "Counter_pass.cfg", klass="quick"),
                ],
            }
        ),
        "utf-8",
    )
    checks = run_bench(load_manifest(tmp_path / "spec"), workers=1)
    assert [(c.protocol, c.entry.name) for c in checks] == [
        ("bench", "Ceiling"),
        ("toy", "Counter"),
    ]
    assert all(c.ok for c in checks)
    table = bench_table(checks, 1)
    ceiling_row = next(r for r in table.splitlines() if r.startswith("| bench/Ceiling"))
    assert ceiling_row.endswith("| 1.000 |")
    assert "| toy/Counter | success | yes | 15 | 4 |" in table
    doc = tmp_path / "performance.md"
    doc.write_text("# Performance\n\nprose stays\n", "utf-8")
    write_block(doc, table)
    write_block(doc, table.replace("toy/Counter", "toy/Renamed"))
    text = doc.read_text("utf-8")
    assert text.count(START) == 1
    assert text.count(END) == 1
    assert "prose stays" in text
    assert "toy/Renamed" in text
    assert "toy/Counter" not in text


def test_trace_validation_block_measures_long_batch_and_singles_side_by_side(
    tmp_path: Path,
) -> None:
    from tracecheck.campaigns.tvbench import (  # noqa: PLC0415
        TV_END,
        TV_START,
        measure,
        prefix_file,
        tv_block,
    )

    figures = measure(ROOT / "spec", runs=2, steps=15, long_steps=30)
    assert [r.label for r in figures.long] == [
        "long trace, first quarter",
        "long trace, first half",
        "long trace, whole",
    ]
    quarter, half, whole = (r.events for r in figures.long)
    assert 0 < quarter <= half <= whole
    assert figures.batch is not None
    assert figures.singles is not None
    assert (figures.batch.runs, figures.singles.runs) == (1, 2)
    assert figures.batch.events == figures.singles.events
    assert all(r.accepted for r in [*figures.long, figures.batch, figures.singles])
    (bfs, batch), (literal, with_reader) = figures.variants
    assert batch is figures.batch
    assert bfs.label == "batch, breadth-first search only"
    assert bfs.runs == 1  # breadth-first search alone, no simulation pass
    assert literal.label == "first 2, TLA+ data module (no Java reader)"
    assert with_reader.label == "first 2, Java reader"
    assert bfs.events == literal.events == with_reader.events == figures.batch.events
    assert bfs.accepted
    assert literal.accepted
    block = tv_block(figures)
    assert "batch, breadth-first search only" in block
    assert "| first 2, Java reader | 2 |" in block
    assert block.startswith(TV_START)
    assert block.endswith(TV_END)
    assert "| batch | 2 |" in block
    assert "**not measured**: a 100,000-event trace" in block  # said, never faked
    assert "batch >= 10x faster than one run per trace" in block
    # a prefix file is the header and the first events, a trace that loads as such
    from support.ledger import GOOD, header  # noqa: PLC0415
    from tracecheck.traces.load import load_trace  # noqa: PLC0415

    whole = tmp_path / "whole.ndjson"
    whole.write_text("".join(json.dumps(x) + "\n" for x in [header(), *GOOD]), "utf-8")
    cut = load_trace(prefix_file(whole, 2, tmp_path / "cut.ndjson"))
    assert (len(cut.events), cut.lines) == (2, (2, 3))
    assert [e.event for e in cut.events] == ["Deposit", "Transfer"]
