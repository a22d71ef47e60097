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

from tracecheck.manifest import Manifest, ModelCheck, run_model
from tracecheck.tlc import ProgressCallback

__all__ = [
    "CEILING",
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


TV_START = "<!-- bench:tv:start -->"
TV_END = "<!-- bench:tv:end -->"


def trace_validation_table(spec_root: Path, runs: int, steps: int) -> str:
    """RRef trace validation: one batch run against one TLC run per trace, same traces."""
    import tempfile  # noqa: PLC0415 - only the benchmark needs these
    import time  # noqa: PLC0415

    from tracecheck.protocols import load_mapping, load_simulator  # noqa: PLC0415
    from tracecheck.traces import load_trace  # noqa: PLC0415
    from tracecheck.validate import CheckerError, validate_traces  # noqa: PLC0415

    simulate, mapping = load_simulator("rref"), load_mapping("rref")
    with tempfile.TemporaryDirectory(prefix="bench-tv-") as tmp:
        paths = [Path(tmp) / f"s{seed}.ndjson" for seed in range(1, runs + 1)]
        for seed, path in enumerate(paths, start=1):
            simulate(seed, steps, path)
        traces = [load_trace(p) for p in paths]
    events = sum(len(t.events) for t in traces)
    started = time.monotonic()
    batch = validate_traces(traces, mapping, spec_root, explain=False)
    batch_s = time.monotonic() - started
    started = time.monotonic()
    singles = [validate_traces([t], mapping, spec_root, explain=False) for t in traces]
    single_s = time.monotonic() - started
    accepted = sum(v.accepted for v in batch.verdicts)
    if [v.accepted for v in batch.verdicts] != [r.all_accepted for r in singles]:
        raise CheckerError("batch and single-trace runs disagree: a checker bug")
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join(
        [
            TV_START,
            f"Measured {stamp} by `make bench`: {runs} seeded RRef simulator runs ({steps} "
            f"workload steps each, {events:,} events, {accepted} accepted), validated once as one "
            "batch (one TLC run) and once with one TLC run per trace, in the same invocation.",
            "",
            "| mode | TLC runs | seconds | events/s |",
            "|---|---:|---:|---:|",
            f"| batch | {batch.tlc_runs} | {batch_s:.1f} | {events / batch_s:,.0f} |",
            f"| one run per trace | {runs} | {single_s:.1f} | {events / single_s:,.0f} |",
            "",
            f"Batch is {single_s / batch_s:.1f}x faster than one TLC run per trace.",
            TV_END,
        ]
    )


def write_marked(path: Path, block: str, start: str, end: str) -> None:
    """Replace the block between ``start`` and ``end`` in ``path`` (or append it)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + block + "\n"
    path.write_text(text, encoding="utf-8")
