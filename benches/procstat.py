"""CPU time and context switches of a whole process (every thread), for the runtime benches.

The wall time of a round trip between Python threads moves with the machine's load; what one
costs does much less: the CPU both processes spend on it and how often their threads block and
are woken (voluntary context switches: a thread waiting for a frame, a lock, a future or the
GIL). Read from ``/proc/<pid>`` (Linux); elsewhere :func:`sample` gives None and the benches
leave those columns empty.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Sample", "per_round", "sample"]


@dataclass(frozen=True)
class Sample:
    cpu: float  # seconds, user + system, every thread
    switches: int  # voluntary context switches, every thread


def sample(pid: int) -> Sample | None:
    """Process ``pid``'s CPU seconds and voluntary context switches so far (None: no /proc)."""
    proc = Path(f"/proc/{pid}")
    try:
        fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        switches = 0
        for task in (proc / "task").iterdir():
            try:
                for line in (task / "status").read_text().splitlines():
                    if line.startswith("voluntary_ctxt_switches:"):
                        switches += int(line.split()[1])
            except FileNotFoundError:  # a thread that ended meanwhile
                continue
    except (OSError, IndexError, ValueError):
        return None
    return Sample(cpu, switches)


def per_round(
    before: Sample | None, after: Sample | None, rounds: int
) -> tuple[float | None, float | None]:
    """(CPU seconds, voluntary switches) per round between two samples (None: not known)."""
    if before is None or after is None or rounds <= 0:
        return None, None
    return (after.cpu - before.cpu) / rounds, (after.switches - before.switches) / rounds
