"""asyncio TCP transport: authenticated links to peers, one event loop per worker.

A worker dials each peer it sends to (one outbound link per peer, opened lazily; frames queued
meanwhile keep their order) and accepts the links its peers dial. Replies that belong to a link
(transport acks, the rendezvous answer) go back on the link the request came in on; everything
else goes on the sender's own outbound link. A frame that fails a check (size, HMAC, schema,
sequence) is handed to ``on_rejected`` and its link is closed: nothing of it reached the core.
A new inbound link from a peer supersedes the old one before the Welcome is computed, so the
``processed`` list it reports is final (see Node.welcome_state).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from protoref.rref.runtime import wire
from protoref.rref.runtime.errors import AuthenticationError, FrameError
from protoref.rref.runtime.frames import Ack, Challenge, Frame, Hello, Welcome, dump
from protoref.tracing import FrozenModel

__all__ = ["Link", "Transport", "TransportHandler", "corked"]

log = logging.getLogger("protoref.rref.runtime")
_BROKEN = (asyncio.IncompleteReadError, ConnectionError, OSError, EOFError)
#: How long acks of control messages gather before they leave in one frame (see Link.ack).
#: Each ack frame wakes both loops (the acker's timer, the peer's read); nothing waits for an
#: ack but the sender's bookkeeping and the shutdown drain, so acks may gather for a while.
ACK_DELAY_SECONDS = 0.02


class TransportHandler(Protocol):
    def on_frame(self, link: Link, frame: Frame) -> None: ...

    def on_rejected(self, error: FrameError) -> None: ...

    def welcome_state(self, peer: str) -> tuple[int, tuple[int, ...]]: ...

    def on_link_ready(self, peer: str, welcome: Welcome, generation: int) -> None: ...


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


@dataclass(eq=False)
class Transport:
    name: str
    secret: bytes
    handler: TransportHandler
    max_frame_bytes: int = wire.DEFAULT_MAX_FRAME_BYTES
    connect_timeout: float = 30.0
    addresses: dict[str, tuple[str, int]] = field(default_factory=dict)
    outbound: dict[str, Link] = field(default_factory=dict)
    inbound: dict[str, Link] = field(default_factory=dict)
    generations: dict[str, int] = field(default_factory=dict)
    _backlog: dict[str, deque[tuple[type[FrozenModel], dict[str, Any]]]] = field(
        default_factory=dict
    )
    _dialing: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _server: asyncio.Server | None = None
    _closing: bool = False
    port: int = 0  # where this worker listens (set by serve)

    # ------------------------------------------------------------------ server

    async def serve(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._accept, host, port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        where = str(writer.get_extra_info("peername"))
        try:
            server_nonce = wire.new_nonce()
            writer.write(wire.pack(Challenge(nonce=server_nonce).model_dump_json().encode()))
            raw = await asyncio.wait_for(
                read_raw(reader, where, self.max_frame_bytes), self.connect_timeout
            )
            hello = wire.parse_handshake(where, raw, Hello)
            assert isinstance(hello, Hello)
            good = wire.hello_mac(self.secret, hello.name, server_nonce, hello.nonce)
            if not hmac.compare_digest(hello.mac.encode(), good.encode()):
                raise AuthenticationError(f"{hello.name}?@{where}", "handshake MAC is wrong")
            old = self.inbound.pop(hello.name, None)
            if old is not None:  # superseded: none of its remaining frames may be applied
                old.close()
            lamport, processed = self.handler.welcome_state(hello.name)
            mac = wire.welcome_mac(self.secret, hello.name, server_nonce, hello.nonce)
            welcome = Welcome(mac=mac, lamport=lamport, processed=processed)
            writer.write(wire.pack(welcome.model_dump_json().encode()))
            while writer.transport.get_write_buffer_size():  # the Link writes around asyncio
                await asyncio.sleep(0.001)
            key = wire.session_key(self.secret, hello.name, server_nonce, hello.nonce)
            link = Link(hello.name, reader, writer, wire.Session.for_acceptor(hello.name, key))
            self.inbound[hello.name] = link
        except FrameError as err:
            self.handler.on_rejected(err)
            writer.close()
            return
        except (*_BROKEN, TimeoutError):
            writer.close()
            return
        await self._read_loop(link)

    async def _read_loop(self, link: Link) -> None:
        try:
            while not link.dead:
                raw = await read_raw(link.reader, link.peer, self.max_frame_bytes)
                frame = link.session.open(raw)
                if link.dead:
                    break
                self.handler.on_frame(link, frame)
        except FrameError as err:
            self.handler.on_rejected(err)
        except _BROKEN:
            pass
        finally:
            link.close()
            if self.outbound.get(link.peer) is link:
                del self.outbound[link.peer]
            if self.inbound.get(link.peer) is link:
                del self.inbound[link.peer]

    # ------------------------------------------------------------------ client

    def send(self, peer: str, cls: type[FrozenModel], **fields: Any) -> int:
        """Send on the outbound link to ``peer``, dialing it first if needed (order kept).

        Returns the generation of the link the frame is (or will be) written on: a frame
        written on an older generation than the current link may have been lost with it."""
        link = self.outbound.get(peer)
        generation = self.generations.get(peer, 0)
        if link is not None and not link.dead and peer not in self._backlog:
            link.send(cls, **fields)
            return generation
        self._backlog.setdefault(peer, deque()).append((cls, fields))
        if peer not in self._dialing and not self._closing:
            task = asyncio.get_running_loop().create_task(self._dial(peer))
            self._dialing[peer] = task
        return generation + 1

    def send_now(self, peer: str, cls: type[FrozenModel], **fields: Any) -> int | None:
        """From any thread: write on the live outbound link to ``peer`` and return its
        generation, or None when the loop must dial (or drain a backlog) first."""
        link = self.outbound.get(peer)
        if link is None or link.dead or peer in self._backlog:
            return None
        generation = self.generations.get(peer, 0)
        try:
            link.send(cls, **fields)
        except ConnectionError:
            return None
        return generation

    async def _dial(self, peer: str) -> None:
        try:
            link, welcome = await self._dial_until_deadline(peer)
        except (*_BROKEN, TimeoutError, FrameError) as err:
            if isinstance(err, FrameError):
                self.handler.on_rejected(err)
            # The backlog stays queued (in order) for the next dial, which the next send starts.
            queued = len(self._backlog.get(peer, ()))
            log.error("%s: cannot reach %s (%r); %d frame(s) queued", self.name, peer, err, queued)
            return
        finally:
            self._dialing.pop(peer, None)
        # The generation first: a thread that sees the new link (send_now) reads its number.
        self.generations[peer] = self.generations.get(peer, 0) + 1
        self.outbound[peer] = link
        self._spawn(self._read_loop(link))
        self.handler.on_link_ready(peer, welcome, self.generations[peer])
        for cls, fields in self._backlog.pop(peer, deque()):
            link.send(cls, **fields)

    async def _dial_until_deadline(self, peer: str) -> tuple[Link, Welcome]:
        """Dial with backoff while the peer is not listening yet (a worker may start before the
        master), for up to ``connect_timeout``; a failed handshake is not retried."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.connect_timeout
        pause = 0.02
        while True:
            try:
                return await asyncio.wait_for(
                    self._handshake(peer), max(0.01, deadline - loop.time())
                )
            except OSError:
                if loop.time() + pause > deadline:
                    raise
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.5)

    async def _handshake(self, peer: str) -> tuple[Link, Welcome]:
        host, port = self.addresses[peer]
        reader, writer = await asyncio.open_connection(host, port)
        try:
            raw = await read_raw(reader, peer, self.max_frame_bytes)
            challenge = wire.parse_handshake(peer, raw, Challenge)
            assert isinstance(challenge, Challenge)
            nonce = wire.new_nonce()
            mac = wire.hello_mac(self.secret, self.name, challenge.nonce, nonce)
            writer.write(
                wire.pack(Hello(name=self.name, nonce=nonce, mac=mac).model_dump_json().encode())
            )
            raw = await read_raw(reader, peer, self.max_frame_bytes)
            welcome = wire.parse_handshake(peer, raw, Welcome)
            assert isinstance(welcome, Welcome)
            good = wire.welcome_mac(self.secret, self.name, challenge.nonce, nonce)
            if not hmac.compare_digest(welcome.mac.encode(), good.encode()):
                raise AuthenticationError(peer, "the acceptor does not know the shared secret")
        except BaseException:
            writer.close()
            raise
        key = wire.session_key(self.secret, self.name, challenge.nonce, nonce)
        return Link(peer, reader, writer, wire.Session.for_dialer(peer, key)), welcome

    # ------------------------------------------------------------------ shutdown

    async def close(self) -> None:
        self._closing = True
        for task in list(self._dialing.values()):
            task.cancel()
        links = [*self.outbound.values(), *self.inbound.values()]
        for link in links:
            link.flush()
            for _ in range(200):  # bytes the kernel could not take yet: give them a moment
                if not link.unsent():
                    break
                await asyncio.sleep(0.005)
            with contextlib.suppress(*_BROKEN):
                await link.writer.drain()
            link.close()
        for link in links:
            with contextlib.suppress(*_BROKEN):
                await link.writer.wait_closed()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
