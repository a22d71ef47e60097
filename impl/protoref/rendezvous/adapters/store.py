"""The store protocol (compare-and-set on a token) and the in-memory and file stores.

A value is opaque bytes with a token (a version number, bumped by every write). ``compare_set``
writes only if the caller's token is still current (``None``: the key must be absent) and
returns what the store holds afterwards, like torch's ``C10dRendezvousBackend.set_state`` over
``Store.compare_set``. ``wait_for_change`` blocks until the token moves on or the timeout ends:
it is how a waiting node learns of a change at once instead of sleeping 1 s (torch's SYNC).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from protoref.rendezvous.adapters import wakeup
from protoref.rendezvous.core.codec import MAX_STATE_BYTES
from protoref.rendezvous.core.errors import RendezvousConnectionError, RendezvousStateError

__all__ = ["FileStore", "InMemoryStore", "RendezvousStore", "Versioned"]


@dataclass(frozen=True, slots=True)
class Versioned:
    """A stored value and its token."""

    value: bytes
    token: int


class RendezvousStore(Protocol):
    """What the state holder needs from a store."""

    def get(self, key: str) -> Versioned | None:
        """The value under ``key``, or ``None`` if there is none."""
        ...

    def compare_set(self, key: str, token: int | None, value: bytes) -> tuple[bool, Versioned]:
        """Write ``value`` iff ``token`` is current; (written?, the value now stored)."""
        ...

    def wait_for_change(self, key: str, token: int | None, timeout: float) -> bool:
        """Block until ``key``'s token differs from ``token`` (True) or ``timeout`` ends."""
        ...

    def describe(self) -> str:
        """A short name for messages and benchmark tables."""
        ...


class InMemoryStore:
    """Threads of one process (and the simulator): a dict under a Condition."""

    def __init__(self) -> None:
        self._values: dict[str, Versioned] = {}
        self._changed = threading.Condition()
        self.cas_won = 0
        self.cas_lost = 0

    def get(self, key: str) -> Versioned | None:
        with self._changed:
            return self._values.get(key)

    def compare_set(self, key: str, token: int | None, value: bytes) -> tuple[bool, Versioned]:
        with self._changed:
            current = self._values.get(key)
            if (current.token if current else None) != token:
                self.cas_lost += 1
                assert current is not None  # a None token only mismatches an existing value
                return False, current
            new = Versioned(value, (current.token if current else 0) + 1)
            self._values[key] = new
            self.cas_won += 1
            self._changed.notify_all()
            return True, new

    def put_raw(self, key: str, value: bytes) -> None:
        """Write without a token (tests: plant a foreign or corrupted value)."""
        with self._changed:
            current = self._values.get(key)
            self._values[key] = Versioned(value, (current.token if current else 0) + 1)
            self._changed.notify_all()

    def wait_for_change(self, key: str, token: int | None, timeout: float) -> bool:
        def moved() -> bool:
            current = self._values.get(key)
            return (current.token if current else None) != token

        with self._changed:
            return self._changed.wait_for(moved, timeout)

    def describe(self) -> str:
        return "in-memory"


# File layout: one file per key, b"<token>\n" + value, replaced atomically under an flock.
#: A token line longer than this is not ours (2**63 - 1 has 19 digits): refused before int().
_MAX_TOKEN_DIGITS = 19
#: A file larger than this is not a state (the codec's limit plus the token line).
_MAX_FILE_BYTES = MAX_STATE_BYTES + _MAX_TOKEN_DIGITS + 1
_MIN_POLL = 0.0005
_MAX_POLL = 0.01
#: With notifications on, a waiter still re-reads this often (a lost ping costs latency only).
_NOTIFIED_POLL = 0.05


class FileStore:
    """Several processes on one host: one file per key in ``directory``.

    Writers take an exclusive ``fcntl.flock`` on ``<file>.lock``, check the token, write a
    temporary file and ``os.replace`` it, so readers (no lock) always see a whole value. Waiters
    register a datagram socket that every successful write pings (:mod:`.wakeup`) and re-read
    the token when pinged or every 50 ms; with ``notify=False`` (or off Linux) they poll the
    token with an adaptive backoff from 0.5 ms to 10 ms instead.
    """

    def __init__(self, directory: Path | str, *, notify: bool = True) -> None:
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise RendezvousConnectionError(f"file store: {self.directory} is not a directory")
        self.notify = notify and wakeup.supported()

    def _path(self, key: str) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_." else f"%{ord(c):02x}" for c in key)
        return self.directory / f"{safe}.rdzv"

    def _read(self, key: str) -> Versioned | None:
        path = self._path(key)
        try:
            with path.open("rb") as f:
                data = f.read(_MAX_FILE_BYTES + 1)  # bounded: a huge file is refused unread
        except FileNotFoundError:
            return None
        except OSError as err:
            raise RendezvousConnectionError(f"file store: cannot read {path}: {err}") from err
        if len(data) > _MAX_FILE_BYTES:
            raise RendezvousStateError(key, f"{path.name}: more than {_MAX_FILE_BYTES} bytes")
        head, sep, value = data.partition(b"\n")
        if not sep or not head.isdigit() or not head.isascii():
            raise RendezvousStateError(key, f"{path.name}: no token line (not a file store value)")
        if len(head) > _MAX_TOKEN_DIGITS:
            raise RendezvousStateError(
                key, f"{path.name}: a token of {len(head)} digits (at most {_MAX_TOKEN_DIGITS})"
            )
        return Versioned(value, int(head))

    @contextlib.contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        lock = self._path(key).with_suffix(".lock")
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as err:
            raise RendezvousConnectionError(f"file store: cannot open {lock}: {err}") from err
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def get(self, key: str) -> Versioned | None:
        return self._read(key)

    def compare_set(self, key: str, token: int | None, value: bytes) -> tuple[bool, Versioned]:
        with self._locked(key):
            current = self._read(key)
            if (current.token if current else None) != token:
                assert current is not None
                return False, current
            new = Versioned(value, (current.token if current else 0) + 1)
            path = self._path(key)
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_bytes(b"%d\n" % new.token + value)
            tmp.replace(path)
        if self.notify:
            wakeup.notify(self._waiters(key))
        return True, new

    def _waiters(self, key: str) -> Path:
        return self._path(key).with_suffix(".waiters")

    def put_raw(self, key: str, value: bytes) -> None:
        """Overwrite the whole file (tests: plant a corrupted value)."""
        with self._locked(key):
            self._path(key).write_bytes(value)

    def wait_for_change(self, key: str, token: int | None, timeout: float) -> bool:
        if self.notify:
            return self._wait_notified(key, token, timeout)
        end = time.monotonic() + timeout
        pause = _MIN_POLL
        while True:
            current = self._read(key)
            if (current.token if current else None) != token:
                return True
            left = end - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(pause, left))
            pause = min(pause * 2, _MAX_POLL)

    def _moved(self, key: str, token: int | None) -> bool:
        current = self._read(key)
        return (current.token if current else None) != token

    def _wait_notified(self, key: str, token: int | None, timeout: float) -> bool:
        end = time.monotonic() + timeout
        try:
            waiter = wakeup.registered(self._waiters(key))
        except OSError as err:
            raise RendezvousConnectionError(
                f"file store: cannot register a waiter in {self.directory}: {err}"
            ) from err
        waiter.drain()
        # Registered and drained before this read: a write after it pings us, one before it
        # is seen by the read.
        while not self._moved(key, token):
            left = end - time.monotonic()
            if left <= 0:
                return False
            waiter.wait(min(left, _NOTIFIED_POLL))
        return True

    def describe(self) -> str:
        return "file"
