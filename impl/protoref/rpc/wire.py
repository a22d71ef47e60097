"""Framing, authentication and replay protection: sans-IO, so every check is unit-testable.

A frame on the wire is ``length (4 bytes, big-endian) | HMAC-SHA256 (32 bytes) | JSON body``;
``length`` counts the MAC and the body and is checked against ``max_frame_bytes`` before a byte
of the body is read. A connection opens with a challenge-response handshake over the shared
secret (:func:`hello_mac`, :func:`welcome_mac`): the acceptor's fresh nonce makes a recorded
handshake useless, and both nonces derive the connection's session key. Every later frame is
MACed under that key with a direction label (a frame cannot be reflected back to its sender)
and carries a per-connection, per-direction sequence number that must be exactly the next one
(a recorded frame cannot be replayed, dropped frames or reordering are noticed).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import ValidationError

from protoref.rpc import frames
from protoref.rpc.errors import (
    AuthenticationError,
    FrameTooLargeError,
    MalformedFrameError,
    ReplayError,
    UnknownFrameError,
)
from protoref.rpc.frames import Challenge, Frame, Hello, Welcome

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "HEADER_BYTES",
    "MAC_BYTES",
    "Session",
    "check_length",
    "hello_mac",
    "new_nonce",
    "pack",
    "parse_frame",
    "session_key",
    "welcome_mac",
]

MAC_BYTES: Final = 32
HEADER_BYTES: Final = 4
DEFAULT_MAX_FRAME_BYTES: Final = 16 * 1024 * 1024
_NO_MAC: Final = bytes(MAC_BYTES)
DIALER: Final = b"D"
ACCEPTOR: Final = b"A"


def new_nonce() -> str:
    return secrets.token_hex(16)


def _mac(key: bytes, *parts: str) -> str:
    return hmac.new(key, "|".join(parts).encode(), hashlib.sha256).hexdigest()


def hello_mac(secret: bytes, name: str, server_nonce: str, client_nonce: str) -> str:
    return _mac(secret, "hello", name, server_nonce, client_nonce)


def welcome_mac(secret: bytes, name: str, server_nonce: str, client_nonce: str) -> str:
    return _mac(secret, "welcome", name, server_nonce, client_nonce)


def session_key(secret: bytes, name: str, server_nonce: str, client_nonce: str) -> bytes:
    return bytes.fromhex(_mac(secret, "session", name, server_nonce, client_nonce))


def pack(body: bytes, mac: bytes = _NO_MAC) -> bytes:
    return (len(body) + MAC_BYTES).to_bytes(HEADER_BYTES, "big") + mac + body


def check_length(peer: str, header: bytes, max_frame_bytes: int) -> int:
    """The announced length of the rest of the frame, refused before it is read if too big."""
    length = int.from_bytes(header, "big")
    if length > max_frame_bytes:
        raise FrameTooLargeError(
            peer, f"announces {length} bytes, more than max_frame_bytes={max_frame_bytes}"
        )
    if length < MAC_BYTES:
        raise MalformedFrameError(peer, f"announces {length} bytes, shorter than its MAC")
    return length


def parse_frame(peer: str, body: bytes) -> Frame:
    """Validate a JSON body against the frame union, telling unknown kinds from bad shapes."""
    try:
        frame: Frame = frames.adapter().validate_json(body)
        return frame
    except ValidationError as err:
        try:
            raw = json.loads(body)
        except ValueError:
            raise MalformedFrameError(peer, "body is not JSON") from err
        if isinstance(raw, dict) and raw.get("kind") not in frames.kinds():
            raise UnknownFrameError(peer, f"unknown frame kind {raw.get('kind')!r}") from err
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise MalformedFrameError(peer, f"field {loc}: {first['msg']}") from err


def parse_handshake(peer: str, raw: bytes, expected: type[Challenge | Hello | Welcome]) -> Frame:
    frame = parse_frame(peer, raw[MAC_BYTES:])
    if not isinstance(frame, expected):
        raise MalformedFrameError(peer, f"expected a {expected.__name__} frame, got {frame.kind}")
    return frame


@dataclass
class Session:
    """One authenticated connection's MAC key, direction labels and sequence counters."""

    peer: str
    key: bytes
    label_out: bytes
    label_in: bytes
    sent: int = 0
    received: int = 0
    # HMAC states keyed and fed the direction label once; each frame's MAC continues a copy.
    # Not hmac.digest: OpenSSL's one-shot path releases the GIL on every call, however small
    # the frame, so each MAC let another thread of the worker take the GIL and made this one
    # wait for it back (up to the interpreter's switch interval); an HMAC object's update
    # keeps the GIL below 2 KiB (docs/performance.md, "RRef runtime").
    _mac_out: Any = field(init=False, repr=False, compare=False)
    _mac_in: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._mac_out = hmac.new(self.key, self.label_out, hashlib.sha256)
        self._mac_in = hmac.new(self.key, self.label_in, hashlib.sha256)

    @classmethod
    def for_dialer(cls, peer: str, key: bytes) -> Session:
        return cls(peer, key, DIALER, ACCEPTOR)

    @classmethod
    def for_acceptor(cls, peer: str, key: bytes) -> Session:
        return cls(peer, key, ACCEPTOR, DIALER)

    def next_seq(self) -> int:
        """The sequence number of the next frame to seal (call once per frame, then seal)."""
        self.sent += 1
        return self.sent

    def seal(self, frame: Frame) -> bytes:
        return self.seal_body(frame.model_dump_json().encode())

    def seal_body(self, body: bytes) -> bytes:
        """Length, MAC and ``body`` (a frame's JSON) under this session's key."""
        mac = self._mac_out.copy()
        mac.update(body)
        return pack(body, mac.digest())

    def open(self, raw: bytes) -> Frame:
        """Check a received frame (MAC + body, without the length prefix): MAC first, so an
        unauthenticated byte is never parsed; then its schema; then its sequence number."""
        mac, body = raw[:MAC_BYTES], raw[MAC_BYTES:]
        check = self._mac_in.copy()
        check.update(body)
        good = check.digest()
        if not hmac.compare_digest(mac, good):
            raise AuthenticationError(self.peer, "HMAC does not verify under the session key")
        frame = parse_frame(self.peer, body)
        seq = getattr(frame, "seq", None)
        if seq is None:
            raise MalformedFrameError(self.peer, f"handshake frame {frame.kind} inside a session")
        if seq != self.received + 1:
            what = "replayed" if seq <= self.received else "out of order"
            raise ReplayError(self.peer, f"sequence {seq} {what}, expected {self.received + 1}")
        self.received = seq
        return frame
