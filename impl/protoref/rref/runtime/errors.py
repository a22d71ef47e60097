"""Typed errors of the RRef runtime: bad frames, failed calls, codec and discovery problems.

Frame errors name the peer and say what was wrong with the frame; the connection that carried it
is closed (a length-prefixed stream cannot be resynchronised after a bad frame) and the protocol
state is untouched, because a frame is checked completely before anything is applied.
"""

from __future__ import annotations

from protoref.errors import ProtorefError

__all__ = [
    "AuthenticationError",
    "CodecError",
    "FrameError",
    "FrameTooLargeError",
    "MalformedFrameError",
    "PeerDiscoveryError",
    "RPCError",
    "RPCTimeoutError",
    "RemoteError",
    "ReplayError",
    "UnknownFrameError",
    "UnresolvableFunctionError",
]


class FrameError(ProtorefError):
    """A frame that must not be applied; ``peer`` is who sent it (as far as we know)."""

    def __init__(self, peer: str, reason: str) -> None:
        self.peer = peer
        self.reason = reason
        super().__init__(f"frame from {peer}: {reason}")


class FrameTooLargeError(FrameError):
    """The length prefix announces more bytes than the configured ``max_frame_bytes``."""


class MalformedFrameError(FrameError):
    """Not JSON, or JSON that does not validate against the frame schema."""


class UnknownFrameError(FrameError):
    """Valid JSON whose ``kind`` names no frame type."""


class AuthenticationError(FrameError):
    """The handshake or a frame's HMAC does not verify under the shared secret."""


class ReplayError(FrameError):
    """A frame whose sequence number is not the next one on its connection (replayed or
    reordered)."""


class CodecError(ProtorefError):
    """A user payload that cannot be encoded or decoded (names the path inside the value)."""


class UnresolvableFunctionError(ProtorefError):
    """A remote function that has no importable ``module:qualname`` or cannot be imported."""


class PeerDiscoveryError(ProtorefError):
    """init_rpc could not assemble the peer table (timeout, duplicate name or rank)."""


class RPCError(ProtorefError):
    """A user call failed in the runtime (not in the user's function)."""


class RPCTimeoutError(RPCError, TimeoutError):
    """A user call or fetch did not complete within its timeout."""


class RemoteError(RPCError):
    """The remote function raised; ``remote_type`` and the message come from the callee."""

    def __init__(self, remote_type: str, message: str) -> None:
        self.remote_type = remote_type
        self.remote_message = message
        super().__init__(f"{remote_type}: {message}")
