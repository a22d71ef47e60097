"""The worker's queue of callbacks for its event-loop thread: one FIFO, one wake-up per batch.

Every thread that must have something run on the loop (a frame to send on a link that must be
dialed first, a protocol step's message to the worker itself, a timer to arm) appends to one
:class:`LoopQueue`, so order is kept across threads and plug-ins; a batch costs one self-pipe
write and one loop iteration.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Final

__all__ = ["PENDING", "LoopQueue", "post"]

#: ``Agent.send_frame``'s answer for a frame it handed to the loop thread (the link must be
#: dialed first): the generation of the link it will go out on is not known yet (its
#: ``written`` callback learns it).
PENDING: Final = -1


def post(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> None:
    """Hand a callback to the worker's loop from any thread; a loop already closed (the worker
    shut down while a UDF was still running) has nobody left to tell."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(fn, *args)


class LoopQueue:
    """Callbacks for the loop thread, in order (``loop`` None: everything runs on one thread,
    as in the node's unit tests, where the running loop serves)."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.loop_thread: int | None = None
        self._queue: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self._drain_pending = False

    def on_loop(self) -> bool:
        return self.loop_thread is None or threading.get_ident() == self.loop_thread

    def later(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn`` on the loop thread soon (now, if this is it: order is kept either way)."""
        if self.on_loop():
            fn(*args)
        else:
            self.handoff(fn, *args)

    def handoff(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn`` on the loop thread after everything handed off before it (any thread).

        One queue in FIFO order for every thread, and one wake-up of the loop for a whole batch:
        a round trip's remote call, its timer, its fetch and the previous RRef's delete, handed
        off by the application thread while the loop sleeps, cost one self-pipe write and one
        loop iteration (whose frames then leave in one socket write, see Link.send) instead of
        one each. Race-free under the GIL: ``_drain`` clears the flag before it pops, so an
        entry appended while the flag is set is popped by a drain that has not started yet."""
        self._queue.append((fn, args))
        if self._drain_pending:
            return
        self._drain_pending = True
        if self.on_loop():
            (self.loop or asyncio.get_running_loop()).call_soon(self._drain)
        else:
            assert self.loop is not None
            post(self.loop, self._drain)

    def _drain(self) -> None:
        self._drain_pending = False
        queue = self._queue
        while queue:
            fn, args = queue.popleft()
            fn(*args)
