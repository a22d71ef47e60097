"""One long-lived etcd watch per key, shared by every thread of a process that waits on that key.

``wait_for_change`` is called after every write a waiting node sees (N waiters x N writes in a
round). Opening a watch per call costs a connection, a thread and etcd's set-up each time; one
stream per key costs that once. A daemon thread reads the stream (grpc-gateway's JSON lines,
``POST /v3/watch``) and keeps the key's token (``mod_revision``, ``None`` once deleted) under a
Condition that waiters wait on: a write wakes them as soon as etcd sends its event.

The stream starts at the revision after a read, so no write between the read and the watch is
missed. When it ends (etcd restarted, the revision was compacted, the connection broke) the
watch is marked dead and wakes its waiters; the store then opens a new one (after a new read).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from typing import Literal

import requests
from pydantic import BaseModel, ConfigDict, ValidationError

__all__ = ["KeyWatch"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class _Kv(_Model):
    mod_revision: int


class _Event(_Model):
    type: Literal["PUT", "DELETE"] = "PUT"  # proto3 JSON omits the default (PUT)
    kv: _Kv


class _Result(_Model):
    created: bool = False
    canceled: bool = False
    cancel_reason: str = ""
    compact_revision: int = 0
    events: list[_Event] = []


class _Message(_Model):
    result: _Result


class KeyWatch:
    """The token of one key as etcd's watch stream reports it.

    ``token`` and ``revision`` start from a read at ``revision`` (the read's header revision);
    ``open_stream(revision + 1)`` opens the stream and returns it with its own HTTP session,
    closed with it (it raises what the store maps to a connection error). ``stop`` ends the
    stream from any thread.
    """

    def __init__(
        self,
        name: str,
        token: int | None,
        revision: int,
        open_stream: Callable[[int], tuple[requests.Session, requests.Response]],
    ) -> None:
        self.cond = threading.Condition()
        self.token = token
        self.revision = revision
        self.alive = True
        self.ended = ""  # why the stream ended, for the error a second failure raises
        self.events = 0
        self._session, self._response = open_stream(revision + 1)
        self._thread = threading.Thread(target=self._read, name=f"etcd-watch {name}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ the reader thread

    def _read(self) -> None:
        reason = "the reader stopped on an unexpected error"
        try:
            reason = self._consume()
        except Exception as err:  # whatever stops the reader ends the stream; keep the reason
            reason = f"{type(err).__name__}: {err}"
        finally:
            with self.cond:
                self.alive, self.ended = False, reason
                self.cond.notify_all()
            self._response.close()
            self._session.close()

    def _consume(self) -> str:
        """Read messages (one JSON object a line) until the stream ends or must end."""
        pending = b""
        for chunk in self._response.iter_content(chunk_size=None):  # as the bytes arrive
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                reason = self._apply(line) if line.strip() else ""
                if reason:
                    return reason
        return "the stream ended"

    def _apply(self, line: bytes) -> str:
        """Take one message; a non-empty return is why the stream must end."""
        try:
            result = _Message.model_validate_json(line).result
        except ValidationError:
            return f"not a watch response: {line[:200]!r}"  # e.g. {"error": ...} from the gateway
        if result.canceled:
            compacted = (
                f" (compacted at {result.compact_revision})" if result.compact_revision else ""
            )
            return f"canceled by etcd: {result.cancel_reason or 'no reason'}{compacted}"
        if result.events:
            with self.cond:
                for event in result.events:
                    rev = event.kv.mod_revision
                    self.token = None if event.type == "DELETE" else rev
                    self.revision = max(self.revision, rev)
                    self.events += 1
                self.cond.notify_all()
        return ""

    # ------------------------------------------------------------------ waiters

    def _moved(self, token: int | None) -> bool:
        if self.token == token:
            return False
        # The waiter read a newer version than the stream has reported yet: not a change.
        return token is None or self.revision >= token

    def newer_than(self, token: int | None) -> bool:
        """The stream has reported a version of the key after ``token`` (revisions only grow,
        so a compare-and-set with ``token`` can only fail)."""
        with self.cond:
            return self.alive and self.token is not None and (token is None or self.token > token)

    def wait(self, token: int | None, end: float) -> bool | None:
        """True once the key's token differs from ``token``; False at ``end`` (monotonic);
        None if the stream died first (the caller opens a new watch)."""
        with self.cond:
            while True:
                if self._moved(token):
                    return True
                if not self.alive:
                    return None
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)

    def stop(self) -> None:
        """End the stream: shut its socket down, which ends the reader's blocking read."""
        conn = getattr(self._response.raw, "connection", None)  # urllib3 2's HTTPResponse
        sock = getattr(conn, "sock", None)
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5.0)
