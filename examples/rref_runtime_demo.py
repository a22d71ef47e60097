"""The design note's four scenarios (and a self remote) across 3 OS processes on loopback.

``python -m examples.rref_runtime_demo --out DIR`` starts workers ``w0`` (A), ``w1`` (B, the
owner) and ``w2`` (C) as separate processes with a fresh shared secret (passed in the
environment, not on the command line), runs the scenarios from A (B's own steps run as UDFs on
B), shuts every worker down gracefully and writes ``DIR/w0.ndjson`` ... ``DIR/w2.ndjson``:
per-process traces that ``tracecheck validate --merge DIR/*.ndjson`` checks against RRef.tla.
Exit status 0 means every worker finished with a leak-free shutdown report.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from protoref import rpc
from protoref.rpc.options import free_port
from protoref.rref.runtime.scenarios import NAMES, SCENARIOS

__all__ = ["SCENARIOS", "main", "run_workers"]

SECRET_ENV: Final = "PROTOREF_RPC_SECRET"


def worker(rank: int, port: int, out: Path | None, scenarios: Sequence[str]) -> dict[str, Any]:
    rpc.init_rpc(
        NAMES[rank],
        rank=rank,
        world_size=len(NAMES),
        master_port=port,
        options=rpc.RpcOptions(
            secret=os.environ[SECRET_ENV].encode(),
            master_port=port,
            trace=None if out is None else out / f"{NAMES[rank]}.ndjson",
            workload="+".join(scenarios),
            rpc_timeout=30.0,
        ),
    )
    if rank == 0:
        for name in scenarios:
            SCENARIOS[name]()
            gc.collect()
    report = rpc.shutdown(graceful=True)
    return {"worker": report.worker, "leaks": report.leaks, "problems": list(report.problems)}


def run_workers(
    out: Path | None, scenarios: Sequence[str], timeout: float = 120.0
) -> list[dict[str, Any]]:
    """Start the 3 worker processes, wait for them, return their shutdown reports."""
    port = free_port()
    env = {**os.environ, SECRET_ENV: secrets.token_hex(16)}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "examples.rref_runtime_demo",
                "--worker",
                str(rank),
                "--port",
                str(port),
                "--scenarios",
                ",".join(scenarios),
            ]
            + ([] if out is None else ["--out", str(out)]),
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for rank in range(len(NAMES))
    ]
    reports = []
    try:
        for proc in procs:
            stdout, _ = proc.communicate(timeout=timeout)
            if proc.returncode != 0:
                raise RuntimeError(f"worker exited with {proc.returncode}: {stdout[-2000:]}")
            reports.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return reports


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m examples.rref_runtime_demo", description=__doc__)
    p.add_argument("--out", type=Path, default=None, help="write the per-process traces here")
    p.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated names")
    p.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    scenarios = [s for s in args.scenarios.split(",") if s]
    unknown = sorted(set(scenarios) - set(SCENARIOS))
    if unknown:
        print(f"unknown scenario(s) {unknown}; known: {', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    if args.worker is not None:
        print(json.dumps(worker(args.worker, args.port, args.out, scenarios)), flush=True)
        return 0
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    reports = run_workers(args.out, scenarios)
    for report in reports:
        print(json.dumps(report))
    clean = all(not r["leaks"] and not r["problems"] for r in reports)
    if args.out is not None:
        files = " ".join(str(args.out / f"{n}.ndjson") for n in NAMES)
        print(f"traces written; check them with: tracecheck validate --merge {files}")
    print("every worker shut down leak-free" if clean else "LEAKS or problems reported above")
    return 0 if clean else 1


if __name__ == "__main__":
    raise SystemExit(main())
