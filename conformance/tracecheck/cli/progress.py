"""Progress of a long run, one plain line per finished item: ``[k/N] name ... verdict time`` and
an ETA, then a total. The ETA comes from the times recorded for the items (the manifest's
``recorded.seconds``), scaled by how the finished items compared with their records, and divided
by the jobs that run at once. The lines are the same on a terminal and in a pipe (a CI log)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from rich.console import Console
from rich.markup import escape

__all__ = ["ProgressLog", "duration"]


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


class ProgressLog:
    """Counts finished items of a run of ``total`` and prints a line for each.

    ``expected`` maps item names to the seconds recorded for them (missing: the mean of the
    others); ``jobs`` is how many run at the same time. Thread-safe: items finish in any order.
    """

    def __init__(
        self,
        console: Console,
        total: int,
        *,
        expected: Mapping[str, float | None] | None = None,
        jobs: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console, self.total, self.jobs, self._clock = console, total, max(1, jobs), clock
        known = [s for s in (expected or {}).values() if s]
        fallback = sum(known) / len(known) if known else 0.0
        self._expected = {name: (s or fallback) for name, s in (expected or {}).items()}
        self._fallback = fallback
        self._lock = threading.Lock()
        self._started = clock()
        self.done = 0
        self._recorded_done = 0.0
        self._actual_done = 0.0
        self._remaining = sum(self._expected.values())

    def eta(self) -> float | None:
        """Seconds left, from the records of the items not finished (None: nothing to go on)."""
        if self.done >= self.total:
            return None
        if not self._expected and not self._remaining:  # no records: the finished items' mean
            return self._actual_done / self.done * (self.total - self.done) / self.jobs
        if not self._remaining:
            return None
        scale = self._actual_done / self._recorded_done if self._recorded_done else 1.0
        return self._remaining * scale / self.jobs

    def finished(self, name: str, text: str, seconds: float, *, quiet: bool = False) -> None:
        """Item ``name`` is done after ``seconds``: print ``[k/N] text time ETA`` (unless
        ``quiet``: counted, not printed)."""
        with self._lock:
            self.done += 1
            if self._expected or self._remaining:
                recorded = self._expected.pop(name, self._fallback)
                self._remaining = max(0.0, self._remaining - recorded)
                if recorded:
                    self._recorded_done += recorded
                    self._actual_done += seconds
            else:
                self._actual_done += seconds
            if quiet:
                return
            eta = self.eta()
            width = len(str(self.total))
            line = f"[{self.done:>{width}}/{self.total}] {text} {duration(seconds)}"
            if eta is not None:
                line += f"  [dim](ETA {duration(eta)})[/]"
            self.console.print(line, soft_wrap=True)

    def every_tenth(self) -> bool:
        """Whether the next item to finish ends a tenth of the run (or the run): for runs of
        many short items, a line for each would bury the rest."""
        step = max(1, self.total // 10)
        nxt = self.done + 1
        return nxt == self.total or nxt % step == 0

    def elapsed(self) -> float:
        return self._clock() - self._started

    def total_line(self, what: str) -> str:
        """``N what in T`` (markup-free text, for the caller's closing line)."""
        return f"{self.done} {escape(what)} in {duration(self.elapsed())}"
