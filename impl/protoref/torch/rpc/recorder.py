"""What one worker's program did and saw, with a Lamport clock from the program's own messages.

The conductor passes its clock with every step it asks of a worker and every reply returns the
callee's clock (:meth:`Recorder.merge`); a worker's clock ticks once per logged event, so the
merged trace's Lamport order extends the order of the programs' own messages.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

__all__ = ["Recorder"]


class Recorder:
    """The event log of one worker (thread-safe: UDFs run on torch's RPC threads)."""

    def __init__(self, node: str) -> None:
        self.node = node
        self._clock = 0
        self._seq = 0
        self._lines: list[str] = []
        self._lock = threading.Lock()

    @property
    def clock(self) -> int:
        with self._lock:
            return self._clock

    def merge(self, clock: int) -> None:
        """A message carrying ``clock`` arrived."""
        with self._lock:
            self._clock = max(self._clock, clock)

    def log(self, op: str, **fields: Any) -> int:
        """Record one observed operation; returns the clock after it."""
        with self._lock:
            self._clock += 1
            self._seq += 1
            record: dict[str, Any] = {"kind": "event", "op": op, "node": self.node}
            record |= {"lamport": self._clock, "seq": self._seq, **fields}
            self._lines.append(json.dumps(record, sort_keys=True))
            return self._clock

    def write(self, path: Path) -> None:
        with self._lock:
            path.write_text("".join(line + "\n" for line in self._lines), encoding="utf-8")
