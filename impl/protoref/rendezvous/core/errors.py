"""Errors of the rendezvous (torch's ``torch.distributed.elastic.rendezvous.api`` errors)."""

from __future__ import annotations

from protoref.errors import ProtorefError

__all__ = [
    "RendezvousClosedError",
    "RendezvousConnectionError",
    "RendezvousError",
    "RendezvousGracefulExitError",
    "RendezvousStateError",
    "RendezvousTimeoutError",
]


class RendezvousError(ProtorefError):
    """Base of every rendezvous error (torch's ``RendezvousError``)."""


class RendezvousClosedError(RendezvousError):
    """The rendezvous is closed (ERROR_CLOSED)."""


class RendezvousTimeoutError(RendezvousError):
    """An op passed its deadline (ERROR_TIMEOUT)."""


class RendezvousGracefulExitError(RendezvousError):
    """The rendezvous closed while this node was in the redundancy list (2.13's join op)."""


class RendezvousConnectionError(RendezvousError):
    """The store could not be reached or failed; the message names the store and the cause."""


class RendezvousStateError(RendezvousError):
    """The value in the store is not a rendezvous state of this schema (corrupted or foreign).

    Names the key and what was wrong; the value is never overwritten on this account.
    """

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        self.reason = reason
        super().__init__(f"rendezvous state under {key!r} is invalid: {reason}")
