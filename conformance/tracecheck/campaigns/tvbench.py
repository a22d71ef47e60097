"""`make bench` for trace validation: RRef traces from protoref's simulator through TLC.

Three figures, measured side by side in one invocation because the machine is shared:

- one long trace validated alone, and its first quarter and half, so that the cost per event
  can be read against the trace's length (the RRef spec's state grows along a trace: every
  UserRRef ever created, every tombstone);
- a batch of equal-sized traces validated in one TLC run, and the same traces with one TLC run
  each; batch and singles must agree on every verdict (otherwise the checker has a bug);
- the issue's goals, each marked met or not with the measured figure.

The block goes into ``docs/performance.md`` between ``TV_START`` and ``TV_END``.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tracecheck.protocols import load_mapping
from tracecheck.replay.javareader import READER_ENV
from tracecheck.replay.tlcrun import CheckerError
from tracecheck.replay.validate import validate_files

__all__ = ["Row", "TVFigures", "measure", "prefix_file", "tv_block"]

TV_START = "<!-- bench:tv:start -->"
TV_END = "<!-- bench:tv:end -->"
#: Seed of the long trace (the batch uses seeds 1..runs).
LONG_SEED = 1000
#: How many of the batch's traces are also validated without the Java reader: SANY did not
#: finish parsing the 45 MB module of 100 traces of 2,000 events in 20 minutes.
READER_TRACES = 10


@dataclass(frozen=True)
class Row:
    """One validation measured: what, how many events and TLC runs, seconds end to end."""

    label: str
    events: int
    runs: int
    seconds: float
    accepted: bool
    traces: int = 1

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0


@dataclass(frozen=True)
class TVFigures:
    long: list[Row]
    batch: Row | None
    singles: Row | None
    #: (variant, the same traces with everything on): the batch without the simulation pass,
    #: and a few of its traces without the Java reader (SANY takes too long on all of them).
    variants: list[tuple[Row, Row]]
    traces: int
    steps: int
    long_steps: int
    simulate_seconds: float


def _timed(
    label: str,
    paths: list[Path],
    spec_root: Path,
    *,
    one_run_each: bool,
    simulate: bool = True,
    reader: bool = True,
) -> Row:
    """Validate trace files end to end, the clock running from loading them to the verdicts."""
    mapping = load_mapping("rref")
    before = os.environ.get(READER_ENV)
    if not reader:
        os.environ[READER_ENV] = "0"
    started = time.monotonic()
    try:
        batches = [[p] for p in paths] if one_run_each else [paths]
        reports, events = [], 0
        for batch in batches:
            # loading overlaps checking: each file is read just before its chunk is rendered
            traces, report = validate_files(
                batch, mapping, spec_root, explain=False, simulate=simulate
            )
            events += sum(len(t.events) for t in traces)
            reports.append(report)
    finally:
        if before is None:
            os.environ.pop(READER_ENV, None)
        else:
            os.environ[READER_ENV] = before
    seconds = time.monotonic() - started
    return Row(
        label=label,
        traces=len(paths),
        events=events,
        runs=sum(r.tlc_runs for r in reports),
        seconds=seconds,
        accepted=all(r.all_accepted for r in reports),
    )


def prefix_file(path: Path, count: int, out: Path) -> Path:
    """The header and the first ``count`` events of a trace file, written to ``out`` (a prefix
    of a spec behaviour is one too)."""
    with path.open(encoding="utf-8") as src, out.open("w", encoding="utf-8") as dst:
        for number, line in enumerate(src):
            if number > count:
                break
            dst.write(line)
    return out


def measure(
    spec_root: Path, runs: int, steps: int, long_steps: int, *, singles: bool = True
) -> TVFigures:
    """Simulate the traces, then validate: the long one (and its prefixes), the batch, and
    (when ``singles``) every batch trace in its own TLC run. The long trace's workload keeps
    the simulator's network bounded (:data:`STEADY_APP_WEIGHT`), as a long run of a real
    system does; the batch's traces are the campaign's."""
    # the RRef plug-in (protoref's simulator): imported only when the bench runs
    from tracecheck.plugins.rref import STEADY_APP_WEIGHT, simulate  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="bench-tv-") as tmp:
        started = time.monotonic()
        paths = [Path(tmp) / f"s{seed}.ndjson" for seed in range(1, runs + 1)]
        for seed, path in enumerate(paths, start=1):
            simulate(seed, steps, path)
        long_path = Path(tmp) / "long.ndjson"
        if long_steps:
            simulate(LONG_SEED, long_steps, long_path, app_weight=STEADY_APP_WEIGHT)
        simulated = time.monotonic() - started
        long_rows: list[Row] = []
        if long_steps:
            with long_path.open(encoding="utf-8") as f:
                total = sum(1 for _ in f) - 1  # events: every line after the header
            for part, name in ((4, "first quarter"), (2, "first half"), (1, "whole")):
                piece = long_path
                if part > 1:
                    piece = prefix_file(long_path, total // part, Path(tmp) / f"long-{part}")
                row = _timed(f"long trace, {name}", [piece], spec_root, one_run_each=False)
                long_rows.append(row)
        batch_row = single_row = None
        variants: list[tuple[Row, Row]] = []
        if runs:
            batch_row = _timed("batch", paths, spec_root, one_run_each=False)
            few = paths[:READER_TRACES]
            variants = [
                (
                    _timed(
                        "batch, breadth-first search only",
                        paths,
                        spec_root,
                        one_run_each=False,
                        simulate=False,
                    ),
                    batch_row,
                ),
                (
                    _timed(
                        f"first {len(few)}, TLA+ data module (no Java reader)",
                        few,
                        spec_root,
                        one_run_each=False,
                        reader=False,
                    ),
                    _timed(f"first {len(few)}, Java reader", few, spec_root, one_run_each=False),
                ),
            ]
            if any(v.accepted != r.accepted for v, r in variants):
                raise CheckerError("the batch's variants disagree on a verdict: a checker bug")
            if singles:
                single_row = _timed("one TLC run per trace", paths, spec_root, one_run_each=True)
                if single_row.accepted != batch_row.accepted:
                    raise CheckerError("batch and single-trace runs disagree: a checker bug")
    return TVFigures(long_rows, batch_row, single_row, variants, runs, steps, long_steps, simulated)


def _goal(met: bool, text: str) -> str:
    return f"- {'met' if met else '**not met**'}: {text}"


def _goals(fig: TVFigures) -> list[str]:
    out = []
    rows = [*fig.long, *(r for r in (fig.batch,) if r is not None)]
    best = max(rows, key=lambda r: r.rate, default=None)
    if best is not None:
        out.append(
            _goal(
                best.rate >= 10_000,
                f">= 10,000 events/s end to end: best {best.rate:,.0f} events/s ({best.label})",
            )
        )
    if fig.long:
        whole = fig.long[-1]
        if whole.events >= 100_000:
            out.append(
                _goal(whole.seconds < 30, f"100,000-event trace < 30 s: {whole.seconds:.1f} s")
            )
        else:
            out.append(
                "- **not measured**: a 100,000-event trace < 30 s (the long trace here has "
                f"{whole.events:,} events, {whole.seconds:.1f} s)"
            )
    if fig.batch is not None:
        size = fig.batch.events / max(fig.traces, 1)
        if fig.traces >= 100 and size >= 2_000:
            out.append(
                _goal(
                    fig.batch.seconds < 15,
                    f"100 traces of 2,000 events in batch < 15 s: {fig.batch.seconds:.1f} s",
                )
            )
        else:
            out.append(
                f"- **not measured**: 100 traces of 2,000 events < 15 s (here {fig.traces} "
                f"traces of about {size:,.0f} events: {fig.batch.seconds:.1f} s)"
            )
    if fig.batch is not None and fig.singles is not None:
        ratio = fig.singles.seconds / fig.batch.seconds
        out.append(_goal(ratio >= 10, f"batch >= 10x faster than one run per trace: {ratio:.1f}x"))
    return out


def tv_block(fig: TVFigures) -> str:
    """The Markdown block for docs/performance.md."""
    from tracecheck.plugins.rref import STEADY_APP_WEIGHT  # noqa: PLC0415 - as measure()

    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        TV_START,
        f"Measured {stamp} by `tracecheck bench` (`--tv-runs {fig.traces} --tv-steps "
        f"{fig.steps} --tv-long-steps {fig.long_steps}`): RRef traces of protoref's seeded "
        f"simulator (simulating them took {fig.simulate_seconds:.1f} s, not counted below), "
        "validated end to end (loading, schema check, rendering, TLC), one after the other. "
        f"The long trace's workload keeps the network bounded (application weight "
        f"{STEADY_APP_WEIGHT}); the batch's is the campaign's.",
        "",
        "| what | traces | events | TLC runs | seconds | events/s | all accepted |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    extra = [row for pair in fig.variants for row in (pair[0], pair[1]) if row is not fig.batch]
    for row in [*fig.long, *(r for r in (fig.batch, fig.singles) if r is not None), *extra]:
        lines.append(_table_row(row))
    if fig.variants:
        lines += ["", "Side by side, the same traces:"]
        for variant, reference in fig.variants:
            lines.append(
                f"- {variant.label}: {variant.seconds / reference.seconds:.1f}x the time of "
                f"{reference.label}"
            )
    lines += ["", "Goals of the conformance issue on this machine:", *_goals(fig), TV_END]
    return "\n".join(lines)


def _table_row(row: Row) -> str:
    return (
        f"| {row.label} | {row.traces} | {row.events:,} | {row.runs} | {row.seconds:.1f} | "
        f"{row.rate:,.0f} | {'yes' if row.accepted else '**no**'} |"
    )
