"""Typed errors of the RRef runtime: bad frames, failed calls, codec and discovery problems.

Frame errors name the peer and say what was wrong with the frame; the connection that carried it
is closed (a length-prefixed stream cannot be resynchronised after a bad frame) and the protocol
state is untouched, because a frame is checked completely before anything is applied.
"""

from __future__ import annotations

import builtins
from functools import cache

from protoref.errors import ProtorefError

__all__ = [
    "AuthenticationError",
    "AuthenticationRefusedError",
    "CodecError",
    "FrameError",
    "FrameTooLargeError",
    "HandshakeLimitError",
    "MalformedFrameError",
    "PeerDeadError",
    "PeerDiscoveryError",
    "RPCError",
    "RPCTimeoutError",
    "RemoteError",
    "ReplayError",
    "UnknownFrameError",
    "UnresolvableFunctionError",
    "remote_error",
    "remote_type_name",
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


class HandshakeLimitError(FrameError):
    """An unauthenticated peer sent more than a handshake may hold, or too many unauthenticated
    connections are open at once: it is cut off before it can cost memory."""


class AuthenticationError(FrameError):
    """The handshake or a frame's HMAC does not verify under the shared secret."""


class AuthenticationRefusedError(AuthenticationError):
    """The acceptor hung up right after this worker's Hello: it did not accept the Hello's MAC,
    which is what a peer with another shared secret does (it says nothing to an unauthenticated
    dialer; issue 28 s4)."""


class ReplayError(FrameError):
    """A frame whose sequence number is not the next one on its connection (replayed or
    reordered)."""


class CodecError(ProtorefError):
    """A user payload that cannot be encoded or decoded (names the path inside the value)."""


class UnresolvableFunctionError(ProtorefError):
    """A remote function that has no importable ``module:qualname`` or cannot be imported."""


class PeerDiscoveryError(ProtorefError):
    """init_rpc could not assemble the peer table (timeout, duplicate name or rank), or has no
    secret to authenticate peers with."""


class RPCError(ProtorefError, RuntimeError):
    """A user call failed in the runtime (not in the user's function). A ``RuntimeError``, as
    torch's RPC errors are, so ``except RuntimeError`` in a torch program still catches it."""


class RPCTimeoutError(RPCError, TimeoutError):
    """A user call or fetch did not complete within its timeout."""


class PeerDeadError(RPCError):
    """The worker a call needs is gone: its connections broke and it refuses new ones (a
    process that was killed). Calls pending on it fail with this within about a second, later
    calls at once, instead of each waiting for its timeout."""

    def __init__(self, peer: str, message: str) -> None:
        self.peer = peer
        super().__init__(message)


class RemoteError(RPCError):
    """The remote function raised; ``remote_type`` and the message come from the callee.

    When the callee's exception is a builtin one (``ValueError``, ``KeyError``, ...), the error
    raised here is also an instance of that builtin (:func:`remote_error`), so a torch program's
    ``except ValueError`` still catches it, as torch re-raises the callee's exception type."""

    def __init__(self, remote_type: str, message: str) -> None:
        self.remote_type = remote_type
        self.remote_message = message
        super().__init__(f"{remote_type}: {message}")

    def __str__(self) -> str:  # KeyError's own __str__ would quote the text
        return f"{self.remote_type}: {self.remote_message}"


def remote_type_name(exc: BaseException) -> str:
    """How an exception's type travels: a builtin's bare name, any other as module.qualname."""
    if isinstance(exc, RemoteError):
        return exc.remote_type
    cls = type(exc)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


@cache
def _remote_class(builtin_name: str) -> type[RemoteError]:
    base = getattr(builtins, builtin_name, None)
    if (
        not isinstance(base, type)
        or not issubclass(base, Exception)
        or issubclass(base, Warning | RemoteError)
    ):
        return RemoteError
    try:  # only builtins: nothing the peer names is imported or instantiated beyond them
        return type(f"Remote{builtin_name}", (RemoteError, base), {"__module__": __name__})
    except TypeError:  # a builtin whose layout cannot be combined
        return RemoteError


def remote_error(remote_type: str, message: str) -> RemoteError:
    """The RemoteError for a callee's exception of type ``remote_type`` (see RemoteError)."""
    return _remote_class(remote_type)(remote_type, message)
