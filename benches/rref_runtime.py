"""remote + to_here round trips per second between 2 processes on loopback: ours vs torch.

``python -m benches.rref_runtime --out docs/performance.md`` measures, in one invocation
and one after the other (never at the same time: they would share the cores), our runtime
(tracing off) and ``torch.distributed.rpc`` with its TensorPipe backend when torch is installed.
Each side: worker ``w1`` in a child process, ``w0`` here calls ``rref = remote(w1, add, (i, 1))``,
``rref.to_here()``, drops the RRef (so deletes flow as in real use), ``--rounds`` times after a
warm-up; the figure is rounds over the wall time of the timed loop, with the CPU time the
calling process (all its threads) spent in it per round trip, which a loaded machine distorts
less than the wall time, and (from ``/proc``, :mod:`benches.procstat`) the owner process's CPU
and both processes' voluntary context switches per round trip: how often a thread blocked and
had to be woken, a figure the load hardly moves. ``--repeat`` pairs (5 by default) are
measured alternately and the median ratio torch / ours is reported against issue 25's goal
(at least TensorPipe's rate: at most 1.0). The block between this module's markers in
``--out`` is replaced.
"""

from __future__ import annotations

import argparse
import importlib
import json
import operator
import os
import platform
import secrets
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Final

from benches import alternation
from benches.procstat import per_round, sample
from protoref.rpc.options import free_port

__all__ = ["BenchResult", "main", "run_ours", "run_torch"]

START: Final = "<!-- bench:rref-runtime:start -->"
END: Final = "<!-- bench:rref-runtime:end -->"
SECRET_ENV: Final = "PROTOREF_RPC_SECRET"
#: The note of a run that failed (a skip, torch not installed, is no failure).
NOT_MEASURED: Final = "not measured: "


@dataclass(frozen=True)
class BenchResult:
    name: str
    rounds: int
    seconds: float | None  # None: not measured (``note`` says why)
    note: str = ""
    cpu: float | None = None  # CPU seconds of the calling process over the timed loop
    #: Per round trip, over the timed loop: the owner process's CPU seconds, and the voluntary
    #: context switches of the caller's and the owner's threads (None: not known).
    owner_cpu: float | None = None
    switches: float | None = None
    owner_switches: float | None = None

    @property
    def rate(self) -> float | None:
        return None if self.seconds is None else self.rounds / self.seconds


def _child(role: str, port: int) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "benches.rref_runtime", "--role", role, "--port", str(port)]
    return subprocess.Popen(cmd, env=os.environ.copy(), text=True)


def _finish(child: subprocess.Popen[str]) -> None:
    try:
        child.wait(120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def _loop(remote: Any, warmup: int, rounds: int, owner: int) -> dict[str, float | None]:
    """Wall and CPU seconds (this process, every thread) of ``rounds`` timed round trips, and
    per round trip the owner process's CPU and both processes' voluntary context switches."""
    for i in range(warmup):
        assert remote(i).to_here() == i + 1
    mine, theirs = sample(os.getpid()), sample(owner)
    started, cpu = time.perf_counter(), time.process_time()
    for i in range(rounds):
        assert remote(i).to_here() == i + 1
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    _, switches = per_round(mine, sample(os.getpid()), rounds)
    owner_cpu, owner_switches = per_round(theirs, sample(owner), rounds)
    return {
        "seconds": seconds,
        "cpu": cpu,
        "owner_cpu": owner_cpu,
        "switches": switches,
        "owner_switches": owner_switches,
    }


def run_ours(rounds: int, warmup: int) -> BenchResult:
    from protoref import rpc  # noqa: PLC0415
    from protoref.rref.runtime.udfs import add  # noqa: PLC0415

    os.environ.setdefault(SECRET_ENV, secrets.token_hex(16))
    port = free_port()
    child = _child("ours-worker", port)
    try:
        opts = rpc.RpcOptions(secret=os.environ[SECRET_ENV].encode(), master_port=port)
        agent = rpc.init_rpc("w0", rank=0, world_size=2, options=opts)
        loop = type(agent.loop).__module__.split(".")[0]  # asyncio or uvloop (RpcOptions)
        got = _loop(lambda i: rpc.remote("w1", add, (i, 1)), warmup, rounds, child.pid)
        report = rpc.shutdown()
    finally:
        _finish(child)
    note = "" if report.leak_free else f"shutdown reported {report.leaks} {report.problems}"
    name = f"protoref runtime ({loop} TCP, JSON+HMAC frames)"
    return _result(name, rounds, got, note)


def _result(name: str, rounds: int, got: dict[str, Any], note: str = "") -> BenchResult:
    def opt(key: str) -> float | None:
        value = got.get(key)
        return None if value is None else float(value)

    return BenchResult(
        name,
        rounds,
        float(got["seconds"]),
        note,
        opt("cpu"),
        opt("owner_cpu"),
        opt("switches"),
        opt("owner_switches"),
    )


def _torch_init(rank: int, port: int) -> Any:
    # Imported by name, so type-checking needs no torch (it is optional).
    trpc: Any = importlib.import_module("torch.distributed.rpc")
    options = trpc.TensorPipeRpcBackendOptions(
        init_method=f"tcp://127.0.0.1:{port}", num_worker_threads=4
    )
    trpc.init_rpc(f"w{rank}", rank=rank, world_size=2, rpc_backend_options=options)
    return trpc


def run_torch(rounds: int, warmup: int, limit: float = 300.0) -> BenchResult:
    """torch's side in two child processes (rank 0 drives), killed if it exceeds ``limit``: a
    hung TensorPipe init or shutdown (seen once on the loaded machine) cannot hang the run."""
    name = "torch.distributed.rpc (TensorPipe)"
    try:
        torch: Any = importlib.import_module("torch")
    except ImportError as err:
        return BenchResult(name, rounds, None, f"skipped: torch is not installed ({err})")
    name = f"{name}, torch {torch.__version__}"
    port = free_port()
    worker = _child("torch-worker", port)
    cmd = [
        sys.executable, "-m", "benches.rref_runtime", "--role", "torch-driver",
        "--port", str(port), "--rounds", str(rounds), "--warmup", str(warmup),
        "--owner-pid", str(worker.pid),
    ]  # fmt: skip
    driver = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        out, _ = driver.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        return BenchResult(
            name, rounds, None, f"{NOT_MEASURED}the torch run exceeded {limit:.0f} s"
        )
    finally:
        for proc in (driver, worker):
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    if driver.returncode != 0 or not out.strip():
        return BenchResult(
            name, rounds, None, f"{NOT_MEASURED}torch driver exit {driver.returncode}"
        )
    return _result(name, rounds, json.loads(out.strip().splitlines()[-1]))


def _worker(role: str, port: int, rounds: int, warmup: int, owner: int) -> int:
    if role == "torch-driver":
        trpc = _torch_init(0, port)
        got = _loop(lambda i: trpc.remote("w1", operator.add, (i, 1)), warmup, rounds, owner)
        trpc.shutdown()
        print(json.dumps(got), flush=True)
    elif role == "ours-worker":
        from protoref import rpc  # noqa: PLC0415

        opts = rpc.RpcOptions(secret=os.environ[SECRET_ENV].encode(), master_port=port)
        rpc.init_rpc("w1", rank=1, world_size=2, options=opts)
        rpc.shutdown()
    else:
        _torch_init(1, port).shutdown()
    return 0


def table(results: Sequence[BenchResult]) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    cpu = f"{os.cpu_count()} cores, load average {load}, Python {platform.python_version()}"
    lines = [
        START,
        f"Measured {stamp} by `python -m benches.rref_runtime` ({cpu}): `remote(w1, "
        "add, (i, 1)).to_here()` round trips between 2 processes on loopback, the RRef dropped "
        "after each (deletes flow), one implementation after the other in the same run.",
        "",
        "| implementation | rounds | seconds | round trips/s | caller CPU ms / round trip "
        "| owner CPU ms / round trip | context switches / round trip (caller + owner) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{1000 * value:.2f}"

    for r in results:
        if r.seconds is None:
            lines.append(f"| {r.name} | - | - | {r.note} | - | - | - |")
        else:
            note = f" ({r.note})" if r.note else ""
            per_rt = ms(None if r.cpu is None else r.cpu / r.rounds)
            switches = (
                "-"
                if r.switches is None or r.owner_switches is None
                else f"{r.switches:.1f} + {r.owner_switches:.1f}"
            )
            lines.append(
                f"| {r.name}{note} | {r.rounds} | {r.seconds:.2f} | {r.rate:,.0f} | {per_rt} "
                f"| {ms(r.owner_cpu)} | {switches} |"
            )
    # Results come in (ours, torch) pairs, one pair per repetition.
    ratios = alternation.ratios(results, lambda r: r.rate, inverse=True)
    if ratios:
        ratio = statistics.median(ratios)
        verdict = "meets" if ratio <= 1 else "misses"
        each = ", ".join(f"{x:.2f}x" for x in ratios)
        lines += [
            "",
            f"torch / ours per repetition: {each}; median **{ratio:.2f}x** over {len(ratios)} "
            f"alternated pairs ({verdict} issue 25's goal of at least TensorPipe's rate, at most "
            "1.0x). On a machine shared with other jobs the ratio moves with the load: every "
            "round trip of ours runs on Python threads (the caller's application and event-loop "
            "threads, the owner's event-loop and UDF threads) that wait for a core and for the "
            "GIL, where TensorPipe's are C++ threads; the CPU and context-switch columns move "
            "much less.",
        ]
    lines.append(END)
    return "\n".join(lines)


def write_marked(path: Path, block: str) -> None:
    """Replace the marked block in ``path``, or append it under its heading."""
    from tracecheck.campaigns.bench import write_marked as write  # noqa: PLC0415 - only --out

    text = path.read_text(encoding="utf-8") if path.exists() else ""
    write(
        path,
        block if START in text else "## RRef runtime: remote + to_here round trips\n\n" + block,
        START,
        END,
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benches.rref_runtime", description=__doc__)
    p.add_argument("--rounds", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--repeat", type=int, default=5, help="(ours, torch) pairs to measure")
    p.add_argument("--out", type=Path, default=None, help="replace the marked block here")
    p.add_argument("--role", default=None, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--owner-pid", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.role is not None:
        return _worker(args.role, args.port, args.rounds, args.warmup, args.owner_pid)
    pairs = alternation.alternate(
        args.repeat,
        partial(run_ours, args.rounds, args.warmup),
        partial(run_torch, args.rounds, args.warmup),
    )
    results = [r for pair in pairs for r in pair]
    block = table(results)
    print(block)
    failed = [
        f"{r.name}: {r.note}"
        for r in results
        if r.seconds is None and r.note.startswith(NOT_MEASURED)
    ]
    if failed and args.out is not None:
        # A benchmark never writes a failed run into the docs: the previous figures stay.
        print(f"{len(failed)} run(s) failed ({'; '.join(failed)}): {args.out} unchanged")
        return 1
    if args.out is not None:
        write_marked(args.out, block)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
