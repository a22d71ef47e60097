"""Benchmark of the RRef simulator: protocol events per second, tracing off versus on.

    python -m benches.rref_sim --out docs/performance.md

One workload, run twice per round in the same process: seeded random runs of the simulator
(3 workers, the default faults: any delivery order, delays, duplicated retried control
messages, rpc.remote timeouts; each run ends with graceful shutdown and the drain), once with
the null sink (tracing off) and once writing JSON-lines trace files through
:class:`protoref.tracing.JsonlSink` (tracing on; new files every pass, as a real run writes).
Rounds alternate the two so that a noisy neighbour slows both; each figure is the best round.
Time is the process's CPU time (the machines are shared), with wall time beside it. A
calibration loop, timed in the same process, says how fast this machine runs plain Python at
the moment, so figures from different machines or loads can be compared.

An event is one trace event, i.e. one protocol transition (spec action), whether or not it is
logged. With ``--out``, the figures replace the block between this module's markers in that file.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from protoref.rref.sim.simulator import SimConfig, Simulator
from protoref.tracing import JsonlSink, NullSink, TraceSink

__all__ = ["END", "START", "Figures", "Round", "main", "measure", "render"]

START: Final = "<!-- bench:rref-sim:start -->"
END: Final = "<!-- bench:rref-sim:end -->"
#: Iterations of the calibration loop (plain integer additions).
CALIBRATION: Final = 2_000_000


@dataclass(frozen=True)
class Round:
    """One timed pass over the workload."""

    events: int
    cpu: float
    wall: float

    @property
    def rate(self) -> float:
        """Events per CPU second."""
        return self.events / self.cpu


@dataclass(frozen=True)
class Figures:
    runs: int
    steps: int
    rounds: int
    off: Round  # the best round with tracing off
    on: Round  # the best round with tracing on
    trace_bytes: int  # size of the trace files one traced pass writes
    calibration_ns: float  # CPU nanoseconds per calibration-loop iteration

    @property
    def ratio(self) -> float:
        """Tracing on over tracing off, CPU time of the best rounds."""
        return self.on.cpu / self.off.cpu


def _calibrate() -> float:
    start = time.process_time()
    total = 0
    for i in range(CALIBRATION):
        total += i
    elapsed = time.process_time() - start
    if total != CALIBRATION * (CALIBRATION - 1) // 2:  # keeps the loop from being elided
        raise AssertionError("calibration loop miscounted")
    return elapsed / CALIBRATION * 1e9


def _pass(runs: int, steps: int, sink_for: Callable[[int], TraceSink]) -> Round:
    config = SimConfig(shutdown=True)
    events = 0
    cpu, wall = time.process_time(), time.perf_counter()
    for seed in range(runs):
        events += Simulator(seed, config, sink_for(seed)).run(steps).events
    return Round(events, time.process_time() - cpu, time.perf_counter() - wall)


def measure(runs: int = 100, steps: int = 200, rounds: int = 3) -> Figures:
    """Time the workload ``rounds`` times with tracing off and on, alternating."""
    if runs < 1 or steps < 1 or rounds < 1:
        raise ValueError(f"runs, steps and rounds must be >= 1, got {runs}, {steps}, {rounds}")
    offs: list[Round] = []
    ons: list[Round] = []
    trace_bytes = 0
    with tempfile.TemporaryDirectory(prefix="rref-bench-") as tmp:
        folder = Path(tmp)

        def jsonl(seed: int) -> TraceSink:
            return JsonlSink(folder / f"seed{seed}.ndjson")

        for _ in range(rounds):
            offs.append(_pass(runs, steps, lambda _seed: NullSink()))
            ons.append(_pass(runs, steps, jsonl))
            trace_bytes = 0
            # Untimed: every traced pass writes new files, as a real run does. Opening the last
            # round's files again truncated 13 MB each pass, about 0.5 us of system time per
            # event that the first round never paid (and tracing never pays outside a bench).
            for p in list(folder.iterdir()):
                trace_bytes += p.stat().st_size
                p.unlink()
    off, on = min(offs, key=lambda r: r.cpu), min(ons, key=lambda r: r.cpu)
    if off.events != on.events:
        # Same seeds, same runs: tracing must not change what the simulator does.
        raise AssertionError(f"tracing changed the run: {off.events} vs {on.events} events")
    return Figures(runs, steps, rounds, off, on, trace_bytes, _calibrate())


def render(fig: Figures, command: str) -> str:
    """The Markdown block written between the markers."""
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    rows = [
        ("tracing off (null sink)", fig.off),
        ("tracing on (JSON lines through `JsonlSink`)", fig.on),
    ]
    table = [
        "| mode | events | CPU s | events / CPU s | wall s | events / wall s |",
        "|---|---|---|---|---|---|",
    ]
    table += [
        f"| {name} | {r.events:,} | {r.cpu:.2f} | {r.rate:,.0f} | {r.wall:.2f} | "
        f"{r.events / r.wall:,.0f} |"
        for name, r in rows
    ]
    return "\n".join(
        [
            START,
            f"Measured {when} by `{command}`: {fig.runs} seeded runs of {fig.steps}",
            "workload steps each (3 workers, default faults, graceful shutdown, drain), best of",
            f"{fig.rounds} alternating rounds per mode, on {os.cpu_count()} cores with load "
            f"average {load} at the end.",
            f"Calibration: {fig.calibration_ns:.0f} ns of CPU per iteration of a plain "
            "`total += i` loop in the same process.",
            "",
            *table,
            "",
            f"Tracing on / off: **{fig.ratio:.2f}x** CPU time. One traced pass writes "
            f"{fig.trace_bytes / 1e6:.1f} MB ({fig.trace_bytes / fig.on.events:.0f} bytes per "
            "event).",
            END,
        ]
    )


def write_block(path: Path, block: str) -> None:
    """Replace the block between :data:`START` and :data:`END` in ``path`` (or append it)."""
    from tracecheck.campaigns.bench import write_marked  # noqa: PLC0415 - only --out needs tracecheck

    write_marked(path, block, START, END)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benches.rref_sim", description=__doc__.splitlines()[0]
    )
    p.add_argument("--runs", type=int, default=100, help="seeded runs per pass")
    p.add_argument("--steps", type=int, default=200, help="workload steps per run")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds per mode")
    p.add_argument("--out", type=Path, default=None, help="Markdown file to write the block into")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        fig = measure(args.runs, args.steps, args.rounds)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    command = "python -m benches.rref_sim" + (f" --out {args.out}" if args.out else "")
    block = render(fig, command)
    print(block)
    if args.out is not None:
        write_block(args.out, block)
        print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
