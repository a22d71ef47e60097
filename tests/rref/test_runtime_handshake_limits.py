"""Before authentication a peer costs little: a handshake of at most a few KiB, within a
timeout, and a capped number of unauthenticated connections at once (issue #20 section 4)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest

from protoref import rpc
from protoref.rpc import frames as fr
from protoref.rpc import transport, wire
from protoref.rpc.agent import Agent
from protoref.rpc.errors import HandshakeLimitError
from protoref.rref.runtime import udfs
from support.rref_runtime import SECRET, eventually, world

MIB = 1 << 20


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[Agent, Agent]]:
    with world(2) as (w0, w1):
        yield w0, w1


def connect(agent: Agent) -> socket.socket:
    return socket.create_connection(("127.0.0.1", agent.transport.port), timeout=20)


def first_frame(sock: socket.socket) -> bytes | None:
    """The acceptor's first frame (its body), or None if it closed without one."""
    header = sock.recv(4, socket.MSG_WAITALL)
    if len(header) < 4:
        return None
    return sock.recv(int.from_bytes(header, "big"), socket.MSG_WAITALL)


def sends_mebibytes(sock: socket.socket, mib: int) -> bool:
    try:
        for _ in range(mib):
            sock.sendall(bytes(MIB))
    except (ConnectionResetError, BrokenPipeError):
        return False
    return True


def still_works(w0: Agent) -> None:
    with w0.use():
        assert rpc.rpc_sync("w1", udfs.add, (20, 22)) == 42


def authenticates(agent: Agent) -> bool:
    """A peer with the secret still gets a Welcome (the cap is not a lock-out once freed)."""
    with connect(agent) as sock:
        body = first_frame(sock)
        assert body is not None
        challenge = wire.parse_handshake("test", body, fr.Challenge)
        assert isinstance(challenge, fr.Challenge)
        nonce = wire.new_nonce()
        mac = wire.hello_mac(SECRET, "tester", challenge.nonce, nonce)
        hello = fr.Hello(name="tester", nonce=nonce, mac=mac)
        sock.sendall(wire.pack(hello.model_dump_json().encode()))
        welcome = first_frame(sock)
        return welcome is not None and b'"welcome"' in welcome


def test_a_handshake_announcing_megabytes_is_cut_off_at_its_length(
    pair: tuple[Agent, Agent],
) -> None:
    w0, w1 = pair
    count = len(w1.rejected)
    with connect(w1) as sock:
        assert first_frame(sock) is not None  # the Challenge
        sock.sendall((15 * MIB).to_bytes(4, "big") + bytes(64 * 1024))
        eventually(
            lambda: any(isinstance(e, HandshakeLimitError) for e in w1.rejected),
            "HandshakeLimitError recorded",
        )
        assert not sends_mebibytes(sock, 64)  # aborted: the rest is never read
    error = next(e for e in list(w1.rejected)[count:] if isinstance(e, HandshakeLimitError))
    assert f"announces a {15 * MIB}-byte handshake" in str(error)
    assert f"at most {transport.HANDSHAKE_MAX_BYTES} bytes" in str(error)
    assert error.__traceback__ is None  # kept without the frames that hold the connection
    still_works(w0)


def test_unauthenticated_connections_are_capped(pair: tuple[Agent, Agent]) -> None:
    w0, w1 = pair
    cap = transport.MAX_UNAUTHENTICATED
    turned_away = w1.transport.turned_away
    socks = [connect(w1) for _ in range(cap + 100)]
    try:
        answers = [first_frame(sock) for sock in socks]
        challenged = [a for a in answers if a is not None and b'"challenge"' in a]
        busy = [a for a in answers if a == b""]  # the BUSY marker: a frame of length 0
        print(f"\n{len(socks)} idle connections: {len(challenged)} challenged, {len(busy)} busy")
        assert len(challenged) <= cap
        assert len(challenged) + len(busy) == len(socks)
        assert w1.transport.turned_away - turned_away == len(busy) >= 100
        assert w1.transport.unauthenticated <= cap
    finally:
        for sock in socks:
            sock.close()
    eventually(lambda: w1.transport.unauthenticated == 0, "the handshakes' slots freed")
    assert authenticates(w1)
    still_works(w0)


def test_a_silent_connection_is_dropped_after_the_handshake_timeout(
    pair: tuple[Agent, Agent], monkeypatch: pytest.MonkeyPatch
) -> None:
    w0, w1 = pair
    monkeypatch.setattr(transport, "HANDSHAKE_TIMEOUT_SECONDS", 0.2)
    with connect(w1) as sock:
        assert first_frame(sock) is not None  # the Challenge, then nothing from us
        assert sock.recv(1) == b""  # the worker hung up
    eventually(lambda: w1.transport.unauthenticated == 0, "the slot freed")
    still_works(w0)


def test_a_dialer_turned_away_is_told_to_retry() -> None:
    async def read(data: bytes) -> bytes:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        return await transport.read_handshake(reader, "w1")

    with pytest.raises(transport.PeerBusyError, match="cap of unauthenticated connections"):
        asyncio.run(read(transport.BUSY))
    assert isinstance(transport.PeerBusyError("x"), OSError)  # retried like a failed connect
    body = b'{"kind":"challenge","nonce":"n"}'
    assert asyncio.run(read(wire.pack(body))) == bytes(wire.MAC_BYTES) + body
