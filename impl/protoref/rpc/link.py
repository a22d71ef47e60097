"""One authenticated connection: reads on the loop thread, writes from any thread.

A frame is sealed (sequence number, MAC) and written under the link's lock straight to a
duplicate of the socket's descriptor, so an application or UDF thread does not wake the loop to
send; :func:`corked` gathers the frames of one API call (or one UDF's completion) into one
write per link. Transport acks of retried control messages gather for ``ACK_DELAY_SECONDS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from protoref.rpc import wire
from protoref.rpc.frames import Ack, dump
from protoref.tracing import FrozenModel

__all__ = ["ACK_DELAY_SECONDS", "BROKEN", "Link", "corked", "read_raw"]

#: What a broken or closed connection raises.
BROKEN = (asyncio.IncompleteReadError, ConnectionError, OSError, EOFError)
#: How long acks of control messages gather before they leave in one frame (see Link.ack).
#: Each ack frame wakes both loops (the acker's timer, the peer's read); nothing waits for an
#: ack but the sender's bookkeeping and the shutdown drain, so acks may gather for a while.
ACK_DELAY_SECONDS = 0.02


async def read_raw(reader: asyncio.StreamReader, peer: str, max_bytes: int) -> bytes:
    header = await reader.readexactly(wire.HEADER_BYTES)
    return await reader.readexactly(wire.check_length(peer, header, max_bytes))


class _Cork(threading.local):
    links: list[Link] | None = None


_cork = _Cork()


@contextlib.contextmanager
def corked() -> Iterator[None]:
    """Frames this thread sends inside leave together at the end (one write per link): an
    application call's delete, remote call and fetch, or a UDF's REMOTE_RET and its fetch
    reply, cost one send syscall and wake the peer once."""
    if _cork.links is not None:  # nested: the outermost cork flushes
        yield
        return
    links: list[Link] = []
    _cork.links = links
    try:
        yield
    finally:
        _cork.links = None
        for link in links:
            link.flush()


@dataclass(eq=False)
class Link:
    """One authenticated connection (either direction).

    Reads belong to the loop thread (an asyncio stream). Writes may come from any thread: a
    frame is sealed and written under the link's lock (sequence numbers leave in order) straight
    to a duplicate of the socket's descriptor, so an application or UDF thread does not wake the
    loop thread to send. Only when the kernel buffer is full do the rest wait in ``_pending``
    for the loop to see the socket writable (frames after them queue behind, order kept).
    On the loop thread, the frames of one loop iteration leave in one write."""

    peer: str
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    session: wire.Session
    dead: bool = False
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)
    loop_thread: int = field(default_factory=threading.get_ident)
    _sock: socket.socket | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _out: list[bytes] = field(default_factory=list)  # sealed, not written yet
    _pending: bytearray | None = None  # written once the socket is writable again
    _flush_scheduled: bool = False
    _watching: bool = False
    _acks: list[int] = field(default_factory=list)  # control ids to ack (see ack)
    #: Writes the kernel did not take whole (the rest waited for the socket; for tests).
    stalls: int = 0
    _ack_stamp: Callable[[], int] | None = None

    def __post_init__(self) -> None:
        raw = self.writer.get_extra_info("socket")
        # A duplicate descriptor of the same connection, ours to write on from any thread
        # (asyncio's transport keeps reading on the original); non-blocking like it.
        self._sock = None if raw is None else socket.socket(fileno=os.dup(raw.fileno()))
        if self._sock is not None:
            self._sock.setblocking(False)

    def send(self, cls: type[FrozenModel], **fields: Any) -> None:
        with self._lock:
            if self.dead:
                raise ConnectionError(f"link to {self.peer} is closed")
            body = dump(cls, self.session.next_seq(), fields)
            self._out.append(self.session.seal_body(body))
            if threading.get_ident() == self.loop_thread:
                if not self._flush_scheduled:
                    self._flush_scheduled = True
                    self.loop.call_soon(self.flush)
                return
            links = _cork.links
            if links is not None:
                if self not in links:
                    links.append(self)
                return
            self._write_locked()

    def ack(self, ctl: int, stamp: Callable[[], int]) -> None:
        """(loop thread) Ack the retried control message ``ctl`` within ACK_DELAY_SECONDS, in
        one frame with the others acked meanwhile: an ack is no protocol step (the sender only
        forgets the message, or waits for it at shutdown; a lost one is settled by the
        Welcome's ``processed`` list), so it need not cost a frame and a wake-up of its own."""
        self._acks.append(ctl)
        self._ack_stamp = stamp
        if len(self._acks) == 1:
            self.loop.call_later(ACK_DELAY_SECONDS, self._send_acks)

    def _send_acks(self) -> None:
        if self._acks and not self.dead and self._ack_stamp is not None:
            ctls = tuple(self._acks)
            self._acks.clear()
            self.send(Ack, ctls=ctls, stamp=self._ack_stamp())

    def flush(self) -> None:
        """Write the frames sealed so far, in order (a no-op once written or closed)."""
        with self._lock:
            self._flush_scheduled = False
            self._write_locked()

    def _write_locked(self) -> None:
        if not self._out:
            return
        data = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        self._out.clear()
        if self.dead or self._sock is None:
            return
        if self._pending is not None:  # earlier bytes wait for the socket: queue behind them
            self._pending += data
            return
        try:
            sent = self._sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:  # the connection broke: the read side notices and drops the link
            return
        if sent < len(data):
            self.stalls += 1
            self._pending = bytearray(data[sent:])
            if threading.get_ident() == self.loop_thread:
                self._watch()
            else:
                with contextlib.suppress(RuntimeError):  # the loop closed: nobody to write
                    self.loop.call_soon_threadsafe(self._watch)

    def _watch(self) -> None:
        """(loop thread) Write ``_pending`` as the socket becomes writable."""
        with self._lock:
            if self._pending and not self._watching and self._sock is not None and not self.dead:
                self._watching = True
                self.loop.add_writer(self._sock.fileno(), self._on_writable)

    def _on_writable(self) -> None:
        with self._lock:
            if self._sock is None or self._pending is None:  # closed meanwhile
                return
            try:
                sent = self._sock.send(self._pending)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                sent = len(self._pending)  # broken: drop them, the read side notices
            del self._pending[:sent]
            if not self._pending:
                self._pending = None
                self._watching = False
                self.loop.remove_writer(self._sock.fileno())

    def unsent(self) -> int:
        with self._lock:
            return len(self._pending or b"") + sum(map(len, self._out))

    def close(self) -> None:
        """(loop thread) Stop; frames sealed before still go, through asyncio's transport,
        which writes them before it closes the connection."""
        self._send_acks()
        with self._lock:
            if self._sock is not None:
                self._write_locked()
                if self._watching:
                    self.loop.remove_writer(self._sock.fileno())
                    self._watching = False
                if self._pending:
                    self.writer.write(bytes(self._pending))
                self._pending = None
                self._sock.close()
                self._sock = None
            self.dead = True
        self.writer.close()
