"""Run several rendezvous handlers at once from threads (tests of the handler and the stores)."""

from __future__ import annotations

import threading

from protoref.rendezvous.core.state import NodeDesc
from protoref.rendezvous.runtime.handler import DynamicRendezvousHandler, RendezvousInfo

__all__ = ["JOIN_LIMIT", "rendezvous_all"]

JOIN_LIMIT = 30.0  # seconds a test thread may take before the test fails (never reached)


def rendezvous_all(
    handlers: list[DynamicRendezvousHandler], limit: float = JOIN_LIMIT
) -> dict[NodeDesc, RendezvousInfo]:
    """Call ``next_rendezvous`` on every handler from its own thread; fail on any error or hang."""
    out: dict[NodeDesc, RendezvousInfo] = {}
    errors: list[BaseException] = []

    def go(h: DynamicRendezvousHandler) -> None:
        try:
            out[h.node] = h.next_rendezvous()
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=go, args=(h,)) for h in handlers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(limit)
        assert not t.is_alive()
    assert not errors, errors
    return out
