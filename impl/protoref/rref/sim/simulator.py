"""Deterministic simulator of the Reference RRef protocol: N workers, one thread, virtual time.

A seeded :class:`random.Random` owns every choice: which enabled step happens next (deliver any
ready message in any order, duplicate a retried control message once as RRef.tla's ``RetrySend``
does, fire an rpc.remote timeout whose deadline passed, run a UserRRef destructor, or an
application action), and each message's delivery delay. User calls are never retried. A run is a
workload phase (random application actions, or a scripted scenario), optionally a graceful
shutdown phase (rpc.shutdown(graceful=True): the barrier, each worker's sweep and destroy,
interleaved with deliveries and with the application dropping some references), then a drain
phase in which the application drops every reference and the network empties; it ends with the
leak-free quiescence check (R9) and, in test mode, checks the spec's invariants after every step.

Every run is reproducible from its seed: ``python -m protoref.rref.sim.simulator --seed N``.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence

from protoref.rref.sim import Envelope, RunSummary, SimConfig, Simulator
from protoref.rref.sim.scenarios import SCENARIOS
from protoref.tracing import JsonlSink, NullSink, TraceSink

__all__ = ["Envelope", "RunSummary", "SimConfig", "Simulator", "main"]

# ---------------------------------------------------------------------- CLI


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m protoref.rref.sim.simulator",
        description="Simulate the Reference RRef protocol.",
    )
    p.add_argument("--seed", type=int, default=None, help="scheduler seed (random if omitted)")
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--steps", type=int, default=200, help="workload-phase scheduler steps")
    p.add_argument(
        "--scenario", default=None, help="a scripted scenario instead of a random workload"
    )
    p.add_argument("--out", default=None, help="write the trace (JSON lines) here")
    p.add_argument("--no-duplicates", action="store_true")
    p.add_argument("--no-timeouts", action="store_true")
    p.add_argument("--check", action="store_true", help="check every invariant after every step")
    p.add_argument(
        "--shutdown", action="store_true", help="end with a graceful shutdown (rpc.shutdown)"
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print(f"seed {seed}", flush=True)  # first, so a crashing run can be replayed
    config = SimConfig(
        workers=args.workers,
        duplicates=not args.no_duplicates,
        timeouts=not args.no_timeouts,
        check_invariants=args.check,
        shutdown=args.shutdown,
    )
    sink: TraceSink = JsonlSink(args.out) if args.out else NullSink()
    if args.scenario is None:
        summary = Simulator(seed, config, sink).run(args.steps)
    else:
        if args.scenario not in SCENARIOS:
            print(
                f"unknown scenario {args.scenario!r}; known: {', '.join(SCENARIOS)}",
                file=sys.stderr,
            )
            return 2
        sim = Simulator(seed, config, sink, workload=args.scenario)
        SCENARIOS[args.scenario](sim)
        if config.shutdown:
            sim.shutdown()
        summary = sim.finish()
    for w, leak in summary.leaks:
        print(f"shutdown on {w}: {leak}")
    print(f"{summary.events} events, virtual time {summary.now}, leak-free")
    if args.out:
        print(f"trace written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
