"""`make bench` for the specs: every deep model, with TLC's throughput as a ratio to its ceiling.

The ceiling is ``spec/bench/Ceiling.tla``, a spec on which TLC does almost nothing per state.
Both run in the same invocation with the same workers, so the ratio (a model's distinct states
per second over the ceiling's) survives a noisy machine better than absolute rates, and a spec
change that makes TLC slower per state shows up as a lower ratio. The table goes into
``docs/performance.md`` between markers, replacing the previous run's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from tracecheck.campaigns.tvbench import TV_END, TV_START
from tracecheck.replay.tlcrun import CheckerError
from tracecheck.runner.manifest import Manifest, ModelCheck, run_model
from tracecheck.runner.tlc import ProgressCallback

__all__ = [
    "CEILING",
    "TV_END",
    "TV_START",
    "bench_table",
    "run_bench",
    "trace_validation_table",
    "write_block",
    "write_marked",
]

CEILING = ("bench", "Ceiling")
START = "<!-- bench:tlc:start -->"
END = "<!-- bench:tlc:end -->"


def _rate(check: ModelCheck) -> float | None:
    distinct = check.result.stats.distinct
    seconds = check.result.wall_seconds
    return distinct / seconds if distinct and seconds else None


def run_bench(
    manifest: Manifest,
    workers: int | str | None = None,
    on_progress: ProgressCallback | None = None,
    on_done: Callable[[ModelCheck], None] | None = None,
    models: list[str] | None = None,
) -> list[ModelCheck]:
    """Run the ceiling first, then every deep model (the ceiling is itself a deep model), or
    only the named ``models`` (the ceiling always runs: the ratios need it)."""
    if models:
        selected = manifest.select(names=sorted({*models, CEILING[1]}))
    else:
        selected = manifest.select(klass="deep")
    selected.sort(key=lambda pm: (pm[0], pm[1].name) != CEILING)
    checks = []
    for protocol, entry in selected:
        check = run_model(manifest, protocol, entry, on_progress, workers=workers)
        checks.append(check)
        if on_done is not None:
            on_done(check)
    return checks


def bench_table(checks: list[ModelCheck], workers: int | str | None) -> str:
    """The Markdown block: one row per model with its rate and the ratio to the ceiling."""
    ceiling = next((c for c in checks if (c.protocol, c.entry.name) == CEILING), None)
    ceiling_rate = _rate(ceiling) if ceiling else None
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = [
        START,
        f"Measured {stamp} by `make bench`, workers = {workers or 'per manifest'}; ratio = the",
        "model's distinct states per second over the ceiling's in the same run.",
        "",
        "| model | verdict | as expected | distinct | depth | s | distinct/s | ratio to ceiling |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for c in checks:
        rate = _rate(c)
        ratio = f"{rate / ceiling_rate:.3f}" if rate and ceiling_rate else "-"
        got = c.result.verdict.value + (f" {c.result.violated}" if c.result.violated else "")
        rows.append(
            f"| {c.protocol}/{c.entry.name} | {got} | {'yes' if c.ok else '**no**'} | "
            f"{c.result.stats.distinct or 0:,} | {c.result.stats.depth or 0} | "
            f"{c.result.wall_seconds:.1f} | {rate or 0:,.0f} | {ratio} |"
        )
    rows.append(END)
    return "\n".join(rows)


def write_block(path: Path, block: str) -> None:
    """Replace the TLC models' block in ``path`` (or append it)."""
    write_marked(path, block, START, END)


def trace_validation_table(
    spec_root: Path, runs: int, steps: int, long_steps: int = 0, *, singles: bool = True
) -> str:
    """RRef trace validation (:mod:`tracecheck.campaigns.tvbench`): a long trace and its prefixes,
    one batch run against one TLC run per trace, the same traces, in one invocation."""
    from tracecheck.campaigns.tvbench import measure, tv_block  # noqa: PLC0415 - only the benchmark

    figures = measure(spec_root, runs, steps, long_steps, singles=singles)
    rows = [*figures.long, figures.batch, figures.singles]
    rows += [row for pair in figures.variants for row in pair]
    rejected = [row.label for row in rows if row is not None and not row.accepted]
    if rejected:
        # a benchmark never writes a failed run into the docs
        raise CheckerError(
            "trace validation rejected traces of the correct implementation "
            f"({', '.join(rejected)}); the figures are not written"
        )
    return tv_block(figures)


def write_marked(path: Path, block: str, start: str, end: str) -> None:
    """Replace the block between ``start`` and ``end`` in ``path`` (or append it)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + block + "\n"
    path.write_text(text, encoding="utf-8")
