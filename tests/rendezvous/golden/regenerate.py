"""Regenerate the golden rendezvous traces: seeded runs of protoref's rendezvous simulator.

    .venv/bin/python tests/rendezvous/golden/regenerate.py [--out DIR]

Writes ``<scenario>.ndjson`` next to this script (or into DIR) and prints what it wrote. Each
scenario is a simulator configuration and a fixed seed, chosen so that the trace shows what the
scenario is named for. tests/conformance/test_rendezvous_golden.py asserts that the committed
files equal what the simulator produces now (a change in its scheduling shows up as a diff),
that TLC accepts each, and that mutated copies are rejected at the mutated event.
Stdlib and protoref only.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from protoref.rendezvous.sim.simulator import SimConfig, Simulator
from protoref.tracing import JsonlSink

HERE: Final = Path(__file__).resolve().parent

#: Scenario -> (what it shows, the simulator's configuration, seed, steps).
SCENARIOS: Final[dict[str, tuple[str, SimConfig, int, int]]] = {
    "two_join": (
        "two nodes (min = max = 2) join and complete a round",
        SimConfig(nodes=2, min_nodes=2, max_nodes=2, closers=0, max_crashes=0, late_max=2),
        1,
        40,
    ),
    "last_call": (
        "three nodes, min 2, max 3: the last call passes, the round completes with two, "
        "and the late node goes to the wait list",
        SimConfig(nodes=3, min_nodes=2, max_nodes=3, closers=0, max_crashes=0, late_max=6),
        11,
        60,
    ),
    "redundant_close": (
        "three nodes, min = max = 2: the third is redundant; a close ends every join",
        SimConfig(nodes=3, min_nodes=2, max_nodes=2, closers=1, max_crashes=0, close_after=4),
        3,
        80,
    ),
}


def write(name: str, path: Path) -> int:
    """Run scenario ``name`` and write its trace to ``path``; returns the number of events."""
    _, config, seed, steps = SCENARIOS[name]
    sink = JsonlSink(str(path))
    try:
        return Simulator(seed, config, sink=sink).run(steps).events
    finally:
        sink.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write into")
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    for name, (_, _, seed, _) in SCENARIOS.items():
        path = out / f"{name}.ndjson"
        events = write(name, path)
        print(f"wrote {path.name} ({events} events, seed {seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
