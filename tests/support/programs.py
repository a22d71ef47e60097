"""Run torch-style RPC programs (tests/rref/programs/) as separate processes, one per rank.

A program is a script taking its rank as its only argument, configured as torch's are: by
``MASTER_ADDR``/``MASTER_PORT``. It runs with a clean environment for the secret (no
``PROTOREF_RPC_SECRET``) and its own ``XDG_CONFIG_HOME``, so the per-user secret file is made
for it; :func:`torch_text` gives the same program with torch's import instead of ours.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

from protoref.rpc.options import free_port
from protoref.torch.quiet_reactor import preload_env

PROGRAMS: Final = Path(__file__).resolve().parent.parent / "rref" / "programs"
OURS: Final = "import protoref.rpc as rpc\n"
TORCH: Final = "import torch.distributed.rpc as rpc\n"
HAS_TORCH: Final = importlib.util.find_spec("torch") is not None


def torch_text(program: str) -> str:
    """The program with torch's import in place of ours: the only line that changes."""
    text = (PROGRAMS / program).read_text(encoding="utf-8")
    assert text.count(OURS) == 1, f"{program} must import protoref.rpc exactly once, as rpc"
    return text.replace(OURS, TORCH)


def program_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROTOREF_RPC_")}
    env.update(XDG_CONFIG_HOME=str(home), MASTER_ADDR="127.0.0.1", **extra)
    # torch's own runs: TensorPipe's idle shm reactor sleeps instead of spinning (same protocol)
    return preload_env(env)


def start(
    script: Path, ranks: int, env: dict[str, str], **popen: Any
) -> list[subprocess.Popen[str]]:
    port = str(free_port())
    return [
        subprocess.Popen(
            [sys.executable, str(script), str(rank)],
            env={**env, "MASTER_PORT": port},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            **popen,
        )
        for rank in range(ranks)
    ]


def finish(procs: list[subprocess.Popen[str]], timeout: float = 180.0) -> list[str]:
    """Each process's stdout; fails with its stderr's tail if one exits non-zero."""
    outs = []
    try:
        for rank, proc in enumerate(procs):
            out, err = proc.communicate(timeout=timeout)
            if proc.returncode != 0:
                tail = (err or "")[-3000:]
                raise AssertionError(f"process {rank} exited {proc.returncode}:\n{tail}")
            outs.append(out)
    finally:
        stop(procs)
    return outs


def stop(procs: list[subprocess.Popen[str]]) -> None:
    """Kill what still runs and close every pipe."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def run(script: Path, ranks: int, env: dict[str, str]) -> list[dict[str, Any]]:
    """Run ``script`` with ``ranks`` processes; each rank's last stdout line as JSON (or {})."""
    outs = finish(start(script, ranks, env))
    return [json.loads(o.strip().splitlines()[-1]) if o.strip() else {} for o in outs]
