"""Frames, authentication, replay protection and payload encoding: the sans-IO checks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from protoref.ids import GloballyUniqueId as G
from protoref.rpc import frames as fr
from protoref.rpc import wire
from protoref.rpc.codec import decode_value, encode_value
from protoref.rpc.errors import (
    AuthenticationError,
    CodecError,
    FrameTooLargeError,
    MalformedFrameError,
    ReplayError,
    UnknownFrameError,
    UnresolvableFunctionError,
)
from protoref.rpc.udf import qualified_name, resolve
from protoref.rref.core import events as ev
from protoref.rref.runtime import frames as rf
from protoref.rref.runtime.udfs import add

KEY = wire.session_key(b"secret", "w1", "aa", "bb")


def pair() -> tuple[wire.Session, wire.Session]:
    return wire.Session.for_dialer("w0", KEY), wire.Session.for_acceptor("w1", KEY)


def frame(session: wire.Session) -> bytes:
    msg = ev.UserDelete(src="w1", dst="w0", rref=G("w0", 1), owner="w0", fork=G("w1", 2))
    return session.seal(rf.Proto(seq=session.next_seq(), stamp=3, msg=msg, ctl=1))[4:]


def test_a_sealed_frame_opens_on_the_other_side_with_the_core_message() -> None:
    dialer, acceptor = pair()
    got = acceptor.open(frame(dialer))
    assert isinstance(got, rf.Proto)
    assert isinstance(got.msg, ev.UserDelete)
    assert got.msg.fork == G("w1", 2)


def test_a_replayed_frame_is_refused() -> None:
    dialer, acceptor = pair()
    raw = frame(dialer)
    acceptor.open(raw)
    with pytest.raises(ReplayError, match="sequence 1 replayed, expected 2"):
        acceptor.open(raw)


def test_a_skipped_sequence_number_is_refused() -> None:
    dialer, acceptor = pair()
    frame(dialer)
    with pytest.raises(ReplayError, match="out of order"):
        acceptor.open(frame(dialer))


def test_a_frame_reflected_back_to_its_sender_does_not_verify() -> None:
    dialer, _ = pair()
    other_dialer = wire.Session.for_dialer("w1", KEY)
    with pytest.raises(AuthenticationError):
        other_dialer.open(frame(dialer))


def test_a_tampered_or_unkeyed_frame_does_not_verify() -> None:
    dialer, acceptor = pair()
    raw = bytearray(frame(dialer))
    raw[-5] ^= 1
    with pytest.raises(AuthenticationError):
        acceptor.open(bytes(raw))
    stranger = wire.Session.for_dialer("w0", wire.session_key(b"guess", "w1", "aa", "bb"))
    with pytest.raises(AuthenticationError):
        acceptor.open(frame(stranger))
    assert acceptor.received == 0  # nothing was accepted


def _mac_body(session: wire.Session, body: bytes) -> bytes:
    import hashlib  # noqa: PLC0415
    import hmac  # noqa: PLC0415

    return hmac.new(session.key, session.label_out + body, hashlib.sha256).digest() + body


def test_malformed_and_unknown_frames_get_their_own_errors() -> None:
    dialer, acceptor = pair()
    with pytest.raises(MalformedFrameError, match="not JSON"):
        acceptor.open(_mac_body(dialer, b"{nope"))
    with pytest.raises(UnknownFrameError, match="'teleport'"):
        acceptor.open(_mac_body(dialer, json.dumps({"kind": "teleport", "seq": 1}).encode()))
    with pytest.raises(MalformedFrameError, match=r"field ack\.ctls"):
        acceptor.open(_mac_body(dialer, json.dumps({"kind": "ack", "seq": 1}).encode()))
    bad_msg = {"kind": "proto", "seq": 1, "stamp": 1, "msg": {"type": "RREF_TELEPORT"}}
    with pytest.raises(MalformedFrameError, match="msg"):
        acceptor.open(_mac_body(dialer, json.dumps(bad_msg).encode()))
    hello = fr.Hello(name="w0", nonce="n", mac="m").model_dump_json().encode()
    with pytest.raises(MalformedFrameError, match="handshake frame hello inside a session"):
        acceptor.open(_mac_body(dialer, hello))


def test_the_length_prefix_is_checked_before_the_body_is_read() -> None:
    with pytest.raises(FrameTooLargeError, match="max_frame_bytes=100"):
        wire.check_length("w0", (101).to_bytes(4, "big"), 100)
    with pytest.raises(MalformedFrameError, match="shorter than its MAC"):
        wire.check_length("w0", (3).to_bytes(4, "big"), 100)
    assert wire.check_length("w0", (100).to_bytes(4, "big"), 100) == 100


def test_handshake_macs_bind_name_and_both_nonces() -> None:
    base = wire.hello_mac(b"s", "w0", "n1", "n2")
    assert base != wire.hello_mac(b"s", "w9", "n1", "n2")
    assert base != wire.hello_mac(b"s", "w0", "n3", "n2")
    assert base != wire.welcome_mac(b"s", "w0", "n1", "n2")


class Point:
    def __init__(self, x: int) -> None:
        self.x = x


class PointCodec:
    name = "point"

    def handles(self, value: object) -> bool:
        return isinstance(value, Point)

    def encode(self, value: Any) -> Any:
        return value.x

    def decode(self, data: Any) -> Any:
        return Point(data)


@pytest.mark.parametrize(
    "value",
    [None, 1, 2.5, "s", [1, [2]], (1, (2, "x")), {"a": (1,)}, {"#rref": 1}, {"#x": [1]}],
)
def test_json_values_round_trip(value: Any) -> None:
    data = encode_value(value, (), None)
    assert json.loads(json.dumps(data)) == data
    assert decode_value(data, (), None) == value


def test_non_json_values_need_an_explicit_codec() -> None:
    with pytest.raises(CodecError, match=r"args\[1\]: a Point is not JSON-able"):
        encode_value((1, Point(2)), (), None, path="args")
    data = encode_value([Point(3)], (PointCodec(),), None)
    assert decode_value(data, (PointCodec(),), None)[0].x == 3
    with pytest.raises(CodecError, match="no codec named 'point'"):
        decode_value(data, (), None)
    with pytest.raises(CodecError, match="finite"):
        encode_value(float("nan"), (), None)
    with pytest.raises(CodecError, match="key 1 is not a string"):
        encode_value({1: 2}, (), None)


def test_rrefs_are_indices_into_the_fork_records() -> None:
    marker = object()
    data = encode_value([marker, marker], (), lambda _h: 7, is_rref=lambda v: v is marker)
    assert data == [{"#rref": 7}, {"#rref": 7}]
    assert decode_value(data, (), lambda i: f"rref{i}") == ["rref7", "rref7"]
    with pytest.raises(CodecError, match="cannot be sent here"):
        encode_value(marker, (), None, is_rref=lambda v: v is marker)


def test_functions_travel_by_importable_name_only() -> None:
    assert qualified_name(add) == "protoref.rref.runtime.udfs:add"
    assert resolve("protoref.rref.runtime.udfs:add") is add
    with pytest.raises(UnresolvableFunctionError, match="lambdas"):
        qualified_name(lambda: None)
    with pytest.raises(UnresolvableFunctionError, match="cannot import"):
        resolve("no.such.module:f")
    with pytest.raises(UnresolvableFunctionError, match="no attribute"):
        resolve("protoref.rref.runtime.udfs:nope")
