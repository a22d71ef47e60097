"""Change notification for the file store: waiters register a datagram socket, writers ping them.

Polling the value file costs every waiting process a read per poll and, under contention, the CPU
the writers need. Instead a waiter binds a Unix datagram socket in Linux's abstract namespace (no
file to clean up when the process dies) and registers its name as an empty file in
``<key>.waiters/``. After every successful compare-and-set the writer sends one byte to each
registered name; a name nobody listens on any more (its process died) answers
``ConnectionRefusedError`` and is unregistered by the writer. Waiters still re-read the value at a
bounded interval, so a lost ping (a writer that died between its write and its pings, a full
socket buffer) costs latency, never progress. Where abstract sockets do not exist (not Linux),
:func:`supported` is False and the file store only polls.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import select
import socket
import sys
import threading
from pathlib import Path

__all__ = ["Waiter", "notify", "registered", "supported"]

_names = itertools.count()
_PREFIX = "protoref-rdzv"


def supported() -> bool:
    """Abstract Unix sockets (Linux) are available."""
    return sys.platform == "linux"


class Waiter:
    """One thread's registered socket; ``wait(timeout)`` is True when pinged.

    Call ``drain()`` before reading the value a wait is about: a ping that arrives after the
    read then wakes the wait, one from before it is not mistaken for a new change.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def __del__(self) -> None:
        # The thread ended (its thread-local registrations went): close the socket, so the next
        # writer's ping is refused and removes the entry.
        self._sock.close()

    def wait(self, timeout: float) -> bool:
        ready, _, _ = select.select([self._sock], [], [], max(timeout, 0.0))
        if not ready:
            return False
        self.drain()
        return True

    def drain(self) -> None:
        """Discard queued pings (several writes wake a waiter once)."""
        with contextlib.suppress(BlockingIOError):
            while True:
                self._sock.recv(64)


_local = threading.local()


def registered(directory: Path) -> Waiter:
    """This thread's socket, registered in ``directory`` (once per thread and directory).

    The registration stays while the thread lives: a write pings it even when it is not waiting
    (one datagram, drained before its next wait), which is cheaper than registering and
    unregistering around every wait. When the thread or process ends the socket closes, and the
    next writer that pings it gets ``ConnectionRefusedError`` and removes the entry.
    """
    waiters: dict[Path, Waiter] = _local.__dict__.setdefault("waiters", {})
    waiter = waiters.get(directory)
    if waiter is None:
        name = f"{_PREFIX}-{os.getpid()}-{threading.get_ident()}-{next(_names)}"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.bind("\0" + name)
            sock.setblocking(False)
            directory.mkdir(exist_ok=True)
            (directory / name).touch()
        except OSError:
            sock.close()
            raise
        waiter = waiters[directory] = Waiter(sock)
    return waiter


def notify(directory: Path) -> int:
    """Ping every waiter registered in ``directory``; how many were pinged."""
    try:
        entries = os.listdir(directory)  # noqa: PTH208 - names only, no Path per entry
    except FileNotFoundError:
        return 0
    pinged = 0
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as out:
        out.setblocking(False)
        for name in entries:
            if not name.startswith(_PREFIX):
                continue
            try:
                out.sendto(b"!", "\0" + name)
                pinged += 1
            except BlockingIOError:  # its queue is full: it has a ping pending already
                pinged += 1
            except (ConnectionRefusedError, FileNotFoundError):  # nobody listens: stale entry
                (directory / name).unlink(missing_ok=True)
    return pinged
