"""One session: start the worker processes, wait for them, merge their traces into one file.

The merged file is a black-box trace (tracecheck.protocols.blackbox): a header with the
workers, the seed, the fault plan and what ran, then every worker's events (the checker sorts
them by Lamport clock). A worker that fails or outlives the timeout fails the session with
its stderr, never a silent partial trace.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict

from protoref.errors import ProtorefError
from protoref.torch.compat import require_torch
from protoref.torch.quiet_reactor import preload_env
from protoref.torch.rpc.faults import plan_for

__all__ = ["SessionError", "SessionResult", "run_session"]

WORLD: Final = 3
#: seconds a whole session may take (three torch processes start in 5-15 s on two cores)
SESSION_TIMEOUT: Final = 400.0


class SessionError(ProtorefError):
    """A worker process failed or timed out."""


class SessionResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    protocol: str
    seed: int
    trace: str
    scenarios: list[str]
    faults: str
    seconds: float


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_session(
    protocol: str, seed: int, trace: Path, scenarios: tuple[str, ...] = ()
) -> SessionResult:
    """Run one session with ``seed`` and write its merged trace to ``trace``."""
    require_torch()
    plan = plan_for(protocol, seed)
    start = time.monotonic()
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="protoref-rpc-") as tmp:
        out = Path(tmp)
        # quiet_reactor: TensorPipe's idle shm reactor sleeps instead of spinning (same protocol)
        env = preload_env(os.environ | {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "protoref.torch.rpc.worker",
                    "--protocol",
                    protocol,
                    "--rank",
                    str(rank),
                    "--world",
                    str(WORLD),
                    "--port",
                    str(port),
                    "--seed",
                    str(seed),
                    "--out",
                    str(out),
                    "--scenarios",
                    ",".join(scenarios),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            for rank in range(WORLD)
        ]
        errors = _wait(procs, start)
        if errors:
            raise SessionError(f"{protocol} session seed {seed} ({plan.describe()}): {errors}")
        ran = json.loads((out / "ran.json").read_text(encoding="utf-8"))
        header = {
            "kind": "header",
            "protocol": f"torch-{protocol}",
            "workers": [f"w{i}" for i in range(WORLD)],
            "seed": seed,
            "faults": plan.model_dump(mode="json"),
            "scenarios": ran,
        }
        lines = [json.dumps(header, sort_keys=True) + "\n"]
        for rank in range(WORLD):
            lines.append((out / f"w{rank}.jsonl").read_text(encoding="utf-8"))
        trace.write_text("".join(lines), encoding="utf-8")
    return SessionResult(
        protocol=protocol,
        seed=seed,
        trace=str(trace),
        scenarios=ran,
        faults=plan.describe(),
        seconds=time.monotonic() - start,
    )


def _wait(procs: list[subprocess.Popen[str]], start: float) -> str:
    """Wait for every worker; the failures' stderr tails (empty when all succeeded)."""
    failures = []
    for rank, proc in enumerate(procs):
        left = max(1.0, SESSION_TIMEOUT - (time.monotonic() - start))
        try:
            _, err = proc.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            for p in procs:
                p.communicate()
            return f"w{rank} did not finish in {SESSION_TIMEOUT:.0f} s"
        if proc.returncode != 0:
            failures.append(f"w{rank} exited {proc.returncode}: {err.strip()[-600:]}")
    return "; ".join(failures)
