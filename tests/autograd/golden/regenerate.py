"""Regenerate the golden distributed autograd traces: seeded simulator runs, one file each.

    .venv/bin/python tests/autograd/golden/regenerate.py [--out DIR]

Writes ``<name>.ndjson`` next to this script (or into DIR) and prints what it wrote. The runs
are the campaign's (``tracecheck campaign autograd``: three workers, nesting, late forward
messages, duplicated cleanups; the ``crash`` run lets worker 0 crash), short enough to read:
contexts from ``NewContext`` to their cleanup cascade, nested calls, a refused context, backward
passes (the Echo flood, ``nested_calls`` and ``crash``) and a worker dying with messages in
flight (``crash``). tests/autograd/test_golden.py
asserts that the committed files equal what the simulator produces now, so a change in the
simulator's scheduling shows up as a diff. Stdlib and protoref only.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from protoref.autograd.sim.simulator import SimConfig, Simulator
from protoref.tracing import JsonlSink

HERE: Final = Path(__file__).resolve().parent

#: Golden name -> (seed, workload steps, worker 0 may crash).
RUNS: Final[dict[str, tuple[int, int, bool]]] = {
    "two_creators": (1, 40, False),
    "nested_calls": (3, 40, False),
    "crash": (4, 40, True),
}


def write(seed: int, steps: int, crash: bool, path: Path) -> int:
    """One run as the campaign makes it (tracecheck.protocols.autograd.simulate); returns the
    number of events."""
    config = SimConfig(crash=crash, creators=(0,) if crash else (0, 1))
    with JsonlSink(path) as sink:
        return Simulator(seed, config, sink=sink).run(steps).events


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write into")
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    for name, (seed, steps, crash) in RUNS.items():
        path = out / f"{name}.ndjson"
        events = write(seed, steps, crash, path)
        print(f"wrote {path} ({events} events, seed {seed}, {steps} steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
