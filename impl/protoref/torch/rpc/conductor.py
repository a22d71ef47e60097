"""Worker 0's side of a session: asking workers for steps, with the Lamport clock on each call.

A step on another worker is ``rpc_sync(worker, step, args=(clock, ...))`` (a plain
PYTHON_CALL carrying no RRef, invisible to the spec); a step on worker 0 itself is a direct
call. Either way the reply's clock is merged, so the steps are totally ordered in the trace.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from torch.distributed import rpc

from protoref.torch.rpc.world import world

__all__ = ["Conductor"]

#: seconds a conductor's step may take before the session fails (generous: a loaded machine)
STEP_TIMEOUT = 60.0


class Conductor:
    def __init__(self, workers: Sequence[str], rng: random.Random) -> None:
        self.workers = tuple(workers)
        self.rng = rng
        self.me = world().recorder.node

    def step(self, worker: str, fn: Callable[..., int], *args: Any) -> None:
        rec = world().recorder
        if worker == self.me:
            clock = fn(rec.clock, *args)
        else:
            clock = rpc.rpc_sync(worker, fn, args=(rec.clock, *args), timeout=STEP_TIMEOUT)
        rec.merge(int(clock))

    def quiesce(self, settle: Callable[..., int], sample: Callable[..., int], wait: float) -> None:
        """Let every worker's internal messages drain, then sample every worker's counters."""
        for w in self.workers:
            self.step(w, settle, wait)
        for w in self.workers:
            self.step(w, sample)

    def roles(self, count: int) -> list[str]:
        """``count`` distinct workers in a seeded order."""
        return self.rng.sample(list(self.workers), count)
