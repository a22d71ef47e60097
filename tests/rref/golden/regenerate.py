"""Regenerate the golden RRef traces: each scenario of protoref.rref.sim.scenarios, one fixed seed.

    .venv/bin/python tests/rref/golden/regenerate.py [--out DIR]

Writes ``<scenario>.ndjson`` next to this script (or into DIR) and prints what it wrote. The
seeds were chosen so that each trace shows a retried control message (RetrySend) where the
scenario has one. tests/conformance/test_rref_mutations.py asserts that the committed files equal
what the simulator produces now, so a change in the simulator's scheduling shows up as a diff.
Stdlib and protoref only.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from protoref.rref.sim.scenarios import SCENARIOS
from protoref.rref.sim.simulator import Simulator
from protoref.tracing import JsonlSink

HERE: Final = Path(__file__).resolve().parent

#: Scenario -> the seed of its golden trace.
SEEDS: Final[dict[str, int]] = {
    "user_to_owner_return": 1,
    "user_to_owner_arg": 0,
    "owner_to_user": 0,
    "user_to_user": 1,
    "self_remote": 1,
}


def write(scenario: str, seed: int, path: Path) -> int:
    """Run ``scenario`` with ``seed`` (default settings), write its trace to ``path``; returns
    the number of events."""
    sim = Simulator(seed, sink=JsonlSink(path), workload=scenario)
    SCENARIOS[scenario](sim)
    return sim.finish().events


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write into")
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    for scenario, seed in SEEDS.items():
        path = out / f"{scenario}.ndjson"
        events = write(scenario, seed, path)
        print(f"wrote {path} ({events} events, seed {seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
