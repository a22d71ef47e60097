"""Three workers acting at once (seeded random calls on three threads): every interleaving the
runtime produces must be one the spec allows, and shutdown must find nothing left behind."""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

from protoref import rpc
from protoref.rpc.agent import Agent
from protoref.rref.runtime import udfs
from support.rref_runtime import TIMEOUT, merged_trace, start_world, stop_world, validate_rref

NAMES = ("w0", "w1", "w2")


def workload(agent: Agent, seed: int, errors: list[str]) -> None:
    rng = random.Random(seed)
    others = [n for n in NAMES if n != agent.name]
    held: list[Any] = []
    try:
        with agent.use():
            for _ in range(20):
                op = rng.random()
                if op < 0.35 or not held:
                    held.append(rpc.remote(rng.choice(NAMES), udfs.add, (1, 2)))
                elif op < 0.6:  # share: an argument forks the RRef to another worker
                    assert rpc.rpc_sync(rng.choice(others), udfs.fetch, (rng.choice(held),)) in (
                        3,
                        5,
                    )
                elif op < 0.75:
                    assert rng.choice(held).to_here() in (3, 5)
                elif op < 0.85:  # an RRef as a return value
                    held.append(rpc.rpc_sync(rng.choice(others), udfs.make_rref, (5,)))
                else:
                    held.pop(rng.randrange(len(held)))
    except Exception as err:  # reported below with the worker's name
        errors.append(f"{agent.name}: {err!r}")


def test_concurrent_workers_produce_traces_the_spec_accepts(tmp_path: Path) -> None:
    agents = start_world(3, tmp_path)
    errors: list[str] = []
    threads = [
        threading.Thread(target=workload, args=(a, 100 + i, errors)) for i, a in enumerate(agents)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    reports = stop_world(agents)
    assert errors == []
    assert all(r.leak_free for r in reports), reports
    report = validate_rref(merged_trace(tmp_path, len(NAMES)))
    assert report.all_accepted, [v.rejection for v in report.verdicts]
    assert report.coverage.get("AddForkOfOwnerIfNotPresent", 0) > 0  # user-to-user forks
