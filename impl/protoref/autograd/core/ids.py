"""Ids of distributed autograd: context ids and autograd message ids, as torch lays them out.

torch 2.13 (``DistAutogradContainer``, ``torch/csrc/distributed/autograd/context/container.cpp``)
draws both kinds of id from two counters per worker that start at ``worker_id << 48``: an id is
``worker_id << 48 | n``, so ``id >> 48`` is the worker that drew it. DistAutograd.tla writes the
same id as the pair ``<<w, n>>``; :class:`AutogradId` is that pair (a NamedTuple: immutable,
hashable, ordered, and JSON ``[w, n]`` as the trace contract prescribes for TLA+ tuples), and
:meth:`AutogradId.to_int` / :func:`from_int` convert to torch's integer.
"""

from __future__ import annotations

from typing import Final, NamedTuple

__all__ = [
    "MAX_LOCAL_ID",
    "NO_WORKER",
    "ROOT_FN",
    "WORKER_BITS",
    "AutogradId",
    "from_int",
]

#: Low bits of an id: torch's ``kAutoIncrementBits``.
WORKER_BITS: Final = 48
#: The largest low part torch allows (``kMaxAutoIncrement``, 2^48 - 1): drawing past it is
#: torch's internal assertion, never a wrap-around into the next worker's range.
MAX_LOCAL_ID: Final = (1 << WORKER_BITS) - 1
#: DistAutograd.tla ``NoWorker``: no worker (the ``trig`` of a message that is no cleanup).
NO_WORKER: Final = -1


class AutogradId(NamedTuple):
    """``<<worker, n>>``: a context id or an autograd message id (separate namespaces)."""

    worker: int
    n: int

    def to_int(self) -> int:
        """torch's integer ``worker << 48 | n``."""
        return (self.worker << WORKER_BITS) | self.n

    def __str__(self) -> str:
        return f"{self.worker}.{self.n}"


#: DistAutograd.tla ``RootFn == <<-1, 0>>``: the graph root (the loss) among a context's
#: functions, next to the send functions named by their message ids.
ROOT_FN: Final = AutogradId(-1, 0)


def from_int(value: int) -> AutogradId:
    """The pair of torch's integer id (``value >> 48``, the low 48 bits)."""
    if value < 0:
        raise ValueError(f"an autograd id is never negative, got {value}")
    return AutogradId(value >> WORKER_BITS, value & MAX_LOCAL_ID)
