"""Where the time of one ``remote(w1, add, (i, 1)).to_here()`` round trip goes, stage by stage.

``python -m benches.rref_stages --rounds 2000`` runs the round trip of ``benches.rref_runtime``
between 2 processes with a timestamp probe in both (``time.perf_counter_ns``: the system-wide
monotonic clock, so the two processes' stamps compare): the call's start and end on the
application thread, every frame's arrival at and return from ``Agent.on_frame`` (the loop
thread), a UDF's start on a pool thread, every socket write. Per round the first of each stage
counts; the table gives each stage's median time since the call started, and beside it both
processes' CPU and voluntary context switches per round trip (:mod:`benches.procstat`). The
probe costs time of its own (a few µs per stage): its figures say where the time goes, the
bench says how fast. Nothing is written to the docs.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from benches.procstat import per_round, sample
from protoref.rpc.options import free_port

__all__ = ["main", "stages"]

SECRET_ENV: Final = "PROTOREF_RPC_SECRET"
Events = list[tuple[int, str]]


def _install(tag: str, events: Events) -> None:
    """Wrap the stages' functions of this process's runtime to stamp ``events``."""
    from protoref.rpc import agent, link, pool  # noqa: PLC0415 - the measured side only

    now = time.perf_counter_ns
    on_frame = agent.Agent.on_frame
    body = pool.UdfPool._body
    write = link.Link._write_locked

    def frame_label(frame: Any) -> str:
        msg = getattr(frame, "msg", None)
        return str(msg.type if msg is not None else frame.kind)

    def stamped_on_frame(self: Any, lk: Any, frame: Any) -> None:
        label = frame_label(frame)
        events.append((now(), f"{tag} loop: {label} arrives"))
        on_frame(self, lk, frame)
        events.append((now(), f"{tag} loop: {label} applied"))

    def stamped_body(self: Any, *args: Any) -> None:
        events.append((now(), f"{tag} pool: UDF starts"))
        body(self, *args)

    def stamped_write(self: Any) -> None:
        if self._out:
            events.append((now(), f"{tag}: socket write"))
        write(self)

    setattr(agent.Agent, "on_frame", stamped_on_frame)  # noqa: B010 - a probe, on purpose
    setattr(pool.UdfPool, "_body", stamped_body)  # noqa: B010
    setattr(link.Link, "_write_locked", stamped_write)  # noqa: B010


def stages(events: Events) -> tuple[int, list[tuple[str, float, int]]]:
    """(rounds, [(stage, median µs since the round's start, rounds it occurred in)]): each
    round runs from one ``call starts`` to the next; the first of each stage in it counts."""
    rounds: list[dict[str, int]] = []
    current: dict[str, int] | None = None
    for stamp, label in sorted(events):
        if label == "caller app: call starts":
            current = {label: stamp}
            rounds.append(current)
        elif current is not None and label not in current:
            current[label] = stamp
    rounds = [r for r in rounds if "caller app: call returns" in r]
    seen = Counter(label for r in rounds for label in r)
    rows = [
        (
            label,
            statistics.median(
                (r[label] - r["caller app: call starts"]) / 1000 for r in rounds if label in r
            ),
            count,
        )
        for label, count in seen.items()
        if count >= 0.9 * len(rounds)  # stages of nearly every round (not the odd timer)
    ]
    return len(rounds), sorted(rows, key=lambda row: row[1])


def _worker(port: int, dump: Path) -> int:
    from protoref import rpc  # noqa: PLC0415

    events: Events = []
    _install("owner", events)
    atexit.register(lambda: dump.write_text(json.dumps(events), encoding="utf-8"))
    opts = rpc.RpcOptions(secret=os.environ[SECRET_ENV].encode(), master_port=port)
    rpc.init_rpc("w1", rank=1, world_size=2, options=opts)
    rpc.shutdown()
    return 0


def _drive(rounds: int, warmup: int) -> int:
    from protoref import rpc  # noqa: PLC0415
    from protoref.rref.runtime.udfs import add  # noqa: PLC0415

    os.environ.setdefault(SECRET_ENV, secrets.token_hex(16))
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        dump = Path(tmp) / "owner.json"
        cmd = [sys.executable, "-m", "benches.rref_stages", "--role", "worker"]
        child = subprocess.Popen([*cmd, "--port", str(port), "--dump", str(dump)])
        try:
            opts = rpc.RpcOptions(secret=os.environ[SECRET_ENV].encode(), master_port=port)
            rpc.init_rpc("w0", rank=0, world_size=2, options=opts)
            for i in range(warmup):
                assert rpc.remote("w1", add, (i, 1)).to_here() == i + 1
            events: Events = []
            _install("caller", events)
            now = time.perf_counter_ns
            mine, theirs = sample(os.getpid()), sample(child.pid)
            started = time.perf_counter()
            for i in range(rounds):
                events.append((now(), "caller app: call starts"))
                value = rpc.remote("w1", add, (i, 1)).to_here()
                events.append((now(), "caller app: call returns"))
                assert value == i + 1
            seconds = time.perf_counter() - started
            cpu, switches = per_round(mine, sample(os.getpid()), rounds)
            owner_cpu, owner_switches = per_round(theirs, sample(child.pid), rounds)
            rpc.shutdown()
        finally:
            child.wait(120)
        events += [(t, label) for t, label in json.loads(dump.read_text(encoding="utf-8"))]
    counted, rows = stages(events)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{counted} round trips, {1000 * seconds / rounds:.2f} ms each (load {load})")
    for who, c, s in (("caller", cpu, switches), ("owner", owner_cpu, owner_switches)):
        if c is not None and s is not None:
            print(f"{who}: {1000 * c:.2f} ms CPU, {s:.1f} voluntary context switches per trip")
    print("median µs since the call started (stage: rounds it occurred in):")
    for label, micros, count in rows:
        print(f"{micros:9.1f}  {label} ({count})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benches.rref_stages", description=__doc__)
    p.add_argument("--rounds", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--role", default=None, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--dump", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.role == "worker":
        return _worker(args.port, args.dump)
    return _drive(args.rounds, args.warmup)


if __name__ == "__main__":
    raise SystemExit(main())
