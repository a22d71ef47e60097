"""asyncio TCP transport: authenticated links to peers, one event loop per worker.

A worker dials each peer it sends to (one outbound link per peer, opened lazily; frames queued
meanwhile keep their order) and accepts the links its peers dial. Replies that belong to a link
(transport acks, the rendezvous answer) go back on the link the request came in on; everything
else goes on the sender's own outbound link. A frame that fails a check (size, HMAC, schema,
sequence) is handed to ``on_rejected`` and its link is closed: nothing of it reached the core.
A new inbound link from a peer supersedes the old one before the Welcome is computed, so the
``processed`` list it reports is final (see Node.welcome_state).

Before a peer has authenticated it can cost little: its handshake may hold at most
``HANDSHAKE_MAX_BYTES`` (its length prefix is checked before a byte more is read) and must
arrive within ``HANDSHAKE_TIMEOUT_SECONDS``, and at most ``MAX_UNAUTHENTICATED`` connections may
be in their handshake at once (the next ones are closed at once, unanswered). A link that broke
is reported to the handler (``on_link_lost``), which may find its peer dead; frames for a peer
declared dead (``forget``) are dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from protoref.rpc import wire
from protoref.rpc.errors import (
    AuthenticationError,
    AuthenticationRefusedError,
    FrameError,
    HandshakeLimitError,
)
from protoref.rpc.frames import Challenge, Frame, Hello, Welcome
from protoref.rpc.link import BROKEN as _BROKEN
from protoref.rpc.link import Link, read_raw
from protoref.tracing import FrozenModel

__all__ = [
    "HANDSHAKE_MAX_BYTES",
    "HANDSHAKE_TIMEOUT_SECONDS",
    "MAX_UNAUTHENTICATED",
    "PeerBusyError",
    "Transport",
    "TransportHandler",
]

log = logging.getLogger("protoref.rpc")
#: The most a handshake frame (Hello, Challenge) may hold: a name of 128 characters, two nonces
#: and a MAC take about 300 bytes.
HANDSHAKE_MAX_BYTES: Final = 4096
#: How long an accepted connection may take to send its Hello.
HANDSHAKE_TIMEOUT_SECONDS: Final = 10.0
#: Connections that may be in their handshake at once; each holds at most its stream buffer
#: (asyncio's 64 KiB limit, twice that before it pauses reading) and a handshake.
MAX_UNAUTHENTICATED: Final = 64
#: A named peer (in the peer table, so it was listening) that refuses connections this long is
#: reported unreachable at once, instead of being dialed for connect_timeout.
REFUSED_FOR_SECONDS: Final = 0.7
#: How long close waits for dials in progress, so that the frames queued behind them go out.
CLOSE_DIAL_SECONDS: Final = 5.0
#: What a connection over the cap receives before it is closed: a frame of length 0.
BUSY: Final = bytes(wire.HEADER_BYTES)


class PeerBusyError(ConnectionAbortedError):
    """The acceptor turned this connection away (its unauthenticated cap): dial again later."""


async def read_handshake(reader: asyncio.StreamReader, peer: str) -> bytes:
    """A handshake frame from a peer not authenticated yet: its length is checked against
    HANDSHAKE_MAX_BYTES before anything more is read, so it costs at most that."""
    header = await reader.readexactly(wire.HEADER_BYTES)
    length = int.from_bytes(header, "big")
    if length == 0:
        raise PeerBusyError(f"{peer} is at its cap of unauthenticated connections; retry later")
    if length > HANDSHAKE_MAX_BYTES:
        raise HandshakeLimitError(
            peer,
            f"announces a {length}-byte handshake; before authentication at most "
            f"{HANDSHAKE_MAX_BYTES} bytes are read",
        )
    return await reader.readexactly(wire.check_length(peer, header, HANDSHAKE_MAX_BYTES))


class TransportHandler(Protocol):
    def on_frame(self, link: Link, frame: Frame) -> None: ...

    def on_rejected(self, error: FrameError) -> None: ...

    def welcome_state(self, peer: str) -> tuple[int, tuple[int, ...]]: ...

    def on_link_ready(self, peer: str, welcome: Welcome, generation: int) -> None: ...

    def on_link_lost(self, peer: str) -> None: ...

    def on_unreachable(self, peer: str, error: BaseException) -> None: ...


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
    max_unauthenticated: int = MAX_UNAUTHENTICATED
    #: Connections in their handshake now, and those closed unanswered because of the cap.
    unauthenticated: int = 0
    turned_away: int = 0
    #: Peers declared dead: frames for them are dropped, they are not dialed again.
    gone: set[str] = field(default_factory=set)

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
        if self.unauthenticated >= self.max_unauthenticated:
            # Turned away with a 4-byte BUSY marker (a frame of length 0), which costs nothing
            # but tells a peer probing for life (liveness.knock) that this worker runs, and a
            # dialer (read_handshake) to try again later.
            self.turned_away += 1
            writer.write(BUSY)
            writer.close()
            return
        self.unauthenticated += 1
        try:
            link = await self._handshake_in(reader, writer)
        except asyncio.CancelledError:
            # The worker is closing mid-handshake (a peer's liveness probe, say). This task is
            # the server's, nobody awaits it: close the connection and end quietly (asyncio
            # would log the cancellation as an unhandled error, and uvloop refuse to close a
            # loop that still holds the socket).
            writer.transport.abort()
            return
        finally:
            self.unauthenticated -= 1
        if link is not None:
            await self._read_loop(link)

    async def _handshake_in(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> Link | None:
        """The acceptor's side of the handshake: Challenge, a bounded Hello within the
        handshake timeout, Welcome; the authenticated link, or None (closed)."""
        where = str(writer.get_extra_info("peername"))
        try:
            server_nonce = wire.new_nonce()
            writer.write(wire.pack(Challenge(nonce=server_nonce).model_dump_json().encode()))
            raw = await asyncio.wait_for(read_handshake(reader, where), HANDSHAKE_TIMEOUT_SECONDS)
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
            writer.transport.abort()  # unread bytes of a hostile frame are not drained
            return None
        except (*_BROKEN, TimeoutError):
            writer.close()
            return None
        return link

    async def _read_loop(self, link: Link) -> None:
        lost = False  # broken under us (not closed by this worker, not for a bad frame)
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
            lost = not link.dead
        finally:
            link.close()
            if self.outbound.get(link.peer) is link:
                del self.outbound[link.peer]
            if self.inbound.get(link.peer) is link:
                del self.inbound[link.peer]
        if lost and not self._closing:
            self.handler.on_link_lost(link.peer)

    # ------------------------------------------------------------------ client

    def send(self, peer: str, cls: type[FrozenModel], **fields: Any) -> int:
        """Send on the outbound link to ``peer``, dialing it first if needed (order kept).

        Returns the generation of the link the frame is (or will be) written on: a frame
        written on an older generation than the current link may have been lost with it."""
        link = self.outbound.get(peer)
        generation = self.generations.get(peer, 0)
        if peer in self.gone:  # dead: nobody will read it
            return generation
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
        generation = self.generations.get(peer, 0)
        if peer in self.gone:  # dead: dropped, as on the loop thread
            return generation
        if link is None or link.dead or peer in self._backlog:
            return None
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
            if not self._closing:
                if isinstance(err, OSError):
                    self.handler.on_unreachable(peer, err)
                else:  # it accepted, then hung up mid-handshake: maybe it is leaving
                    self.handler.on_link_lost(peer)
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
        refused_since: float | None = None
        while True:
            try:
                return await asyncio.wait_for(
                    self._handshake(peer), max(0.01, deadline - loop.time())
                )
            except ConnectionRefusedError:
                # A peer of the table was listening before the table was complete: refusing
                # now means it is gone (the master may not be listening yet: it is dialed by
                # its address key before the table exists, so it gets connect_timeout).
                now = loop.time()
                refused_since = now if refused_since is None else refused_since
                named = peer in self.addresses and not peer.startswith("<")
                if (named and now - refused_since >= REFUSED_FOR_SECONDS) or now + pause > deadline:
                    raise
            except OSError:
                refused_since = None
                if loop.time() + pause > deadline:
                    raise
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.5 if refused_since is None else 0.2)

    async def _handshake(self, peer: str) -> tuple[Link, Welcome]:
        host, port = self.addresses[peer]
        reader, writer = await asyncio.open_connection(host, port)
        try:
            raw = await read_handshake(reader, peer)
            challenge = wire.parse_handshake(peer, raw, Challenge)
            assert isinstance(challenge, Challenge)
            nonce = wire.new_nonce()
            mac = wire.hello_mac(self.secret, self.name, challenge.nonce, nonce)
            writer.write(
                wire.pack(Hello(name=self.name, nonce=nonce, mac=mac).model_dump_json().encode())
            )
            try:
                raw = await read_raw(reader, peer, self.max_frame_bytes)
            except _BROKEN as err:
                # The acceptor closes, without a word, a Hello whose MAC it does not accept.
                raise AuthenticationRefusedError(
                    peer, "it closed the connection after our Hello: it refused our authentication"
                ) from err
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

    def forget(self, peer: str) -> None:
        """``peer`` is dead: drop what waits for it, stop dialing it, drop its later frames."""
        self.gone.add(peer)
        self._backlog.pop(peer, None)
        task = self._dialing.pop(peer, None)
        if task is not None:
            task.cancel()
        for links in (self.outbound, self.inbound):
            link = links.pop(peer, None)
            if link is not None:
                link.close()

    # ------------------------------------------------------------------ shutdown

    async def close(self) -> None:
        self._closing = True
        # A frame queued behind a dial is still sent: the master's last BarrierGo, naming a
        # dead worker to a worker it had no link to, was lost here when the dial was cancelled,
        # and that worker then took the master's departure for a death (issue 28 s2). A dial
        # ends within its connect_timeout (a live peer answers at once); past the bound it is
        # cancelled as before.
        dials = list(self._dialing.values())
        if dials:
            await asyncio.wait(dials, timeout=CLOSE_DIAL_SECONDS)
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
