"""Bad input on a live worker's port: each kind gets its typed error, is logged, the link is
closed (or, for a refused protocol message, the frame dropped) and the protocol state is intact."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from protoref import rpc
from protoref.errors import ProtocolError
from protoref.ids import GloballyUniqueId as G
from protoref.rpc import frames as fr
from protoref.rpc import wire
from protoref.rpc.agent import Agent
from protoref.rpc.errors import (
    AuthenticationError,
    FrameError,
    FrameTooLargeError,
    MalformedFrameError,
    ReplayError,
    UnknownFrameError,
)
from protoref.rref.core import events as ev
from protoref.rref.runtime import frames as rf
from protoref.rref.runtime import udfs
from support.rref_runtime import SECRET, eventually, world

MAX = 4096


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[Agent, Agent]]:
    with world(2, max_frame_bytes=MAX) as (w0, w1):
        yield w0, w1


def read_raw(sock: socket.socket) -> bytes:
    header = sock.recv(4, socket.MSG_WAITALL)
    if len(header) < 4:
        return b""
    return sock.recv(int.from_bytes(header, "big"), socket.MSG_WAITALL)


def closed_by_peer(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def dial(
    agent: Agent, secret: bytes = SECRET, name: str = "w0"
) -> tuple[socket.socket, wire.Session]:
    sock = socket.create_connection(("127.0.0.1", agent.transport.port), timeout=20)
    challenge = wire.parse_handshake("test", read_raw(sock), fr.Challenge)
    assert isinstance(challenge, fr.Challenge)
    nonce = wire.new_nonce()
    mac = wire.hello_mac(secret, name, challenge.nonce, nonce)
    sock.sendall(wire.pack(fr.Hello(name=name, nonce=nonce, mac=mac).model_dump_json().encode()))
    key = wire.session_key(secret, name, challenge.nonce, nonce)
    return sock, wire.Session.for_dialer(name, key)


def handshaken(agent: Agent, posing_as: Agent) -> tuple[socket.socket, wire.Session]:
    """Dial ``agent`` under ``posing_as``'s name (the tests know the secret). The agent drops
    its link from the real worker before it answers (a newer link from a peer supersedes the
    older, transport.py), so wait until that worker has seen its end close too: a call it wrote
    on the dropped link before noticing would be lost with it (a user call is never retried,
    docs/divergences.md 10) and time out. CI hit that once, when the worker's loop was slow."""
    superseded = posing_as.transport.outbound.get(agent.name)
    sock, session = dial(agent, name=posing_as.name)
    welcome = wire.parse_handshake("test", read_raw(sock), fr.Welcome)
    assert isinstance(welcome, fr.Welcome)
    if superseded is not None:
        eventually(
            lambda: posing_as.transport.outbound.get(agent.name) is not superseded,
            f"{posing_as.name} saw the link {agent.name} dropped close",
        )
    return sock, session


def rejected(agent: Agent, kind: type[FrameError], count_before: int) -> FrameError:
    def seen() -> bool:
        return any(isinstance(e, kind) for e in list(agent.rejected)[count_before:])

    eventually(seen, f"{kind.__name__} recorded")
    return next(e for e in list(agent.rejected)[count_before:] if isinstance(e, kind))


def still_works(w0: Agent) -> None:
    with w0.use():
        assert rpc.rpc_sync("w1", udfs.add, (20, 22)) == 42


def test_a_stranger_without_the_secret_is_refused_at_the_handshake(
    pair: tuple[Agent, Agent],
) -> None:
    w0, w1 = pair
    before, n = w1.plugin("rref").node.ctx, len(w1.rejected)
    sock, _ = dial(w1, secret=b"guessed")
    with sock:
        err = rejected(w1, AuthenticationError, n)
        assert "handshake MAC is wrong" in str(err)
        assert closed_by_peer(sock)
    assert w1.plugin("rref").node.ctx == before
    still_works(w0)


def test_an_oversized_frame_is_refused_before_its_body_is_read(pair: tuple[Agent, Agent]) -> None:
    w0, w1 = pair
    before, n = w1.plugin("rref").node.ctx, len(w1.rejected)
    sock, _ = handshaken(w1, w0)
    with sock:
        sock.sendall((MAX + 1).to_bytes(4, "big"))
        err = rejected(w1, FrameTooLargeError, n)
        assert f"max_frame_bytes={MAX}" in str(err)
        assert closed_by_peer(sock)
    assert w1.plugin("rref").node.ctx == before
    still_works(w0)


@pytest.mark.parametrize(
    ("body", "kind", "words"),
    [
        (b"{not json", MalformedFrameError, "not JSON"),
        (b'{"kind": "teleport", "seq": 1}', UnknownFrameError, "unknown frame kind 'teleport'"),
        (b'{"kind": "proto", "seq": 1, "stamp": 1}', MalformedFrameError, "field proto.msg"),
        # the autograd plug-in's part of a call, opaque to the RRef frames, checked on arrival
        # (hooks.CallHook.load) before anything of the frame is applied
        (
            b'{"kind": "call", "seq": 1, "stamp": 1, "call_id": 1, "body": {"fn": '
            b'"protoref.rref.runtime.udfs:add", "args": [1, 2]}, '
            b'"ext": {"autograd": {"stamp": -1}}}',
            MalformedFrameError,
            "field ext.autograd.msg",
        ),
    ],
)
def test_malformed_and_unknown_frames_close_the_link(
    pair: tuple[Agent, Agent], body: bytes, kind: type[FrameError], words: str
) -> None:
    w0, w1 = pair
    before, n = w1.plugin("rref").node.ctx, len(w1.rejected)
    sock, session = handshaken(w1, w0)
    with sock:
        import hashlib  # noqa: PLC0415
        import hmac  # noqa: PLC0415

        mac = hmac.new(session.key, session.label_out + body, hashlib.sha256).digest()
        sock.sendall(wire.pack(body, mac))
        assert words in str(rejected(w1, kind, n))
        assert closed_by_peer(sock)
    assert w1.plugin("rref").node.ctx == before
    still_works(w0)


def _ack(session: wire.Session) -> bytes:
    return session.seal(fr.Ack(seq=session.next_seq(), ctls=(999_999,), stamp=0))


def test_a_replayed_frame_is_refused_on_its_link_and_useless_on_another(
    pair: tuple[Agent, Agent],
) -> None:
    w0, w1 = pair
    before, n = w1.plugin("rref").node.ctx, len(w1.rejected)
    sock, session = handshaken(w1, w0)
    with sock:
        frame = _ack(session)
        sock.sendall(frame)
        sock.sendall(frame)
        assert "sequence 1 replayed" in str(rejected(w1, ReplayError, n))
        assert closed_by_peer(sock)
    n = len(w1.rejected)
    other, _ = handshaken(w1, w0)
    with other:
        other.sendall(frame)  # recorded on one connection, replayed on a new one
        rejected(w1, AuthenticationError, n)
        assert closed_by_peer(other)
    assert w1.plugin("rref").node.ctx == before
    still_works(w0)


def test_a_message_the_protocol_refuses_is_logged_and_dropped(pair: tuple[Agent, Agent]) -> None:
    w0, w1 = pair
    before, n = w1.plugin("rref").node.ctx, len(w1.plugin("rref").node.protocol_errors)
    sock, session = handshaken(w1, w0)
    with sock:
        stray = ev.PythonCall(src="w0", dst="w1", rref=G("w0", 90), owner="w0", fork=G("w0", 91))
        misaddressed = ev.UserDelete(
            src="w0", dst="w0", rref=G("w1", 90), owner="w0", fork=G("w0", 92)
        )
        for msg in (stray, misaddressed):
            sock.sendall(session.seal(rf.Proto(seq=session.next_seq(), stamp=1, msg=msg)))
        eventually(lambda: len(w1.plugin("rref").node.protocol_errors) >= n + 2, "two refusals")
    errors = list(w1.plugin("rref").node.protocol_errors)[n:]
    assert all(isinstance(e, ProtocolError) for e in errors)
    assert "PYTHON_CALL outside a call" in str(errors[0])
    assert "arrived on w0's link" in str(errors[1])
    assert w1.plugin("rref").node.ctx == before
    still_works(w0)
