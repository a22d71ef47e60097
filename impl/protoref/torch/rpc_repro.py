"""Drive unchanged torch RPC along a counterexample: worker processes on FAULTY_TENSORPIPE.

``torch.distributed.rpc._testing`` ships a fault-injecting TensorPipe agent in the CPU wheel:
``FaultyTensorPipeRpcBackendOptions(messages_to_fail, messages_to_delay, num_fail_sends)``. A
delayed message type makes the *sending thread* sleep before the message is written (measured on
torch 2.13: ``del rref`` with RREF_USER_DELETE delayed 1.5 s returns after 1.67 s), so a delay
orders the messages of one thread after what other threads send meanwhile; a failed type fails
its first ``num_fail_sends`` sends of each payload, which ``sendWithRetries`` retries. The type
names it accepts are :data:`FAULT_TYPES` (``messageStringToType`` rejects others).

:func:`run_program` starts ``world`` processes on loopback, each with its own :class:`FaultPlan`
row (faults belong to the sender), runs the named program of :mod:`protoref.torch.rpc_programs`
on rank 0 and returns what rank 0 observed (one JSON line). Other ranks serve until rank 0 is
done; the parent kills every process it started, so a program that leaves torch hung (the
symptom of several defects) still ends in bounded time.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from protoref.torch.compat import TorchUnavailableError, torch_version
from protoref.torch.quiet_reactor import preload_env

__all__ = ["FAULT_TYPES", "FaultPlan", "Observation", "run_program"]

#: The message-type names FaultyTensorPipeAgent's ``messageStringToType`` accepts.
FAULT_TYPES: Final = frozenset(
    {
        "RREF_FORK_REQUEST",
        "RREF_CHILD_ACCEPT",
        "RREF_USER_DELETE",
        "CLEANUP_AUTOGRAD_CONTEXT_REQ",
        "PYTHON_REMOTE_CALL",
        "SCRIPT_REMOTE_CALL",
        "PYTHON_CALL",
        "SCRIPT_CALL",
        "PYTHON_RREF_FETCH_CALL",
        "SCRIPT_RREF_FETCH_CALL",
    }
)
_MARK: Final = "OBSERVED "


class FaultPlan(BaseModel):
    """What the agents inject and the program's own timing, chosen from a counterexample."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: rank -> message type -> seconds the sending thread sleeps before writing it
    delays: dict[int, dict[str, float]] = Field(default_factory=dict)
    #: rank -> message types whose first ``num_fail_sends`` sends fail
    fails: dict[int, list[str]] = Field(default_factory=dict)
    num_fail_sends: int = 0
    #: the program's timing knobs (UDF seconds, timeouts, how long a hang is waited for)
    knobs: dict[str, float] = Field(default_factory=dict)

    def model_post_init(self, _context: Any) -> None:
        named = {t for row in self.delays.values() for t in row}
        named |= {t for row in self.fails.values() for t in row}
        unknown = sorted(named - FAULT_TYPES)
        if unknown:
            raise ValueError(f"FaultyTensorPipeAgent cannot inject {unknown}")


class Observation(BaseModel):
    """What rank 0 saw (``facts``), or why the run produced nothing."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    program: str
    torch: str
    facts: dict[str, JsonValue] = Field(default_factory=dict)
    #: empty when the run finished; else what went wrong with the run itself
    problem: str = ""
    seconds: float = 0.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _errors(text: str) -> list[str]:
    """The lines of a worker's stderr that report an error (torch's asserts, a terminate)."""
    keys = ("terminate", "what()", "Error", "error", "ASSERT")
    return [
        ln[:300]
        for ln in text.splitlines()
        if any(k in ln for k in keys) and not ln.startswith(("frame #", "  File"))
    ]


def run_program(
    program: str, plan: FaultPlan, *, world: int = 2, limit: float = 90.0
) -> Observation:
    """Run ``program`` on ``world`` fresh processes with ``plan``; at most ``limit`` seconds."""
    version = torch_version()
    if version is None:
        raise TorchUnavailableError("torch is not installed; pip install the [torch] extra")
    port = _free_port()
    started = time.monotonic()
    # the other ranks' stderr, kept for the report when the run itself went wrong
    logs = {rank: tempfile.TemporaryFile(mode="w+") for rank in range(1, world)}  # noqa: SIM115 - closed below, after the processes
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "protoref.torch.rpc_worker"],
            # quiet_reactor: the idle shm reactor sleeps instead of spinning (same protocol)
            env=preload_env(
                dict(
                    os.environ,
                    PROTOREF_RPC_WORKER=json.dumps(
                        {
                            "rank": rank,
                            "world": world,
                            "port": port,
                            "program": program,
                            "plan": plan.model_dump(mode="json"),
                        }
                    ),
                )
            ),
            stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL,
            stderr=subprocess.PIPE if rank == 0 else logs[rank],
            text=True,
        )
        for rank in range(world)
    ]
    try:
        out, err = procs[0].communicate(timeout=limit)
        problem = ""
    except subprocess.TimeoutExpired:
        procs[0].kill()
        out, err = procs[0].communicate()
        problem = f"rank 0 did not finish within {limit:.0f} s"
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    others: dict[int, list[str]] = {}
    for rank, log in logs.items():
        log.seek(0)
        others[rank] = _errors(log.read())
        log.close()
    seconds = time.monotonic() - started
    lines = [line for line in out.splitlines() if line.startswith(_MARK)]
    if not lines:
        tail = " | ".join(err.strip().splitlines()[-3:])
        return Observation(
            program=program,
            torch=version,
            problem=problem or f"rank 0 printed no observation (stderr: {tail})",
            seconds=seconds,
        )
    facts = json.loads(lines[-1][len(_MARK) :])
    others[0] = _errors(err)
    facts["errors_logged"] = {f"w{r}": errs[:4] for r, errs in sorted(others.items()) if errs}
    return Observation(program=program, torch=version, facts=facts, seconds=seconds)
