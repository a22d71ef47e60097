"""Dead peers: a worker that was killed fails what waits on it within about a second.

A killed process's connections break at once (its kernel closes them) and its listening port
refuses new ones. So when a link to a peer of the table breaks, this worker tries to reach the
peer's port a few times over ``PROBE_PAUSES`` (about 0.7 s): a peer that accepts a connection is
alive (the link broke for another reason: the transport redials it on the next send and
retries what was lost, RRef.tla ``RetrySend``); one that refuses every attempt is declared dead.
A dial that keeps being refused (transport.REFUSED_FOR_SECONDS) declares it dead too, for a
peer this worker had no link to. Once dead, a peer's pending calls, fetches and rpc.remote
creations fail with :class:`PeerDeadError` (Node.peer_dead), later calls to it fail at once,
frames for it are dropped, and graceful shutdown reports it (shutdown.py) instead of waiting
for it. A peer is never declared dead once barrier 2 of graceful shutdown has passed: the
others close their links then, and nothing depends on them any more.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Final

from protoref.rref.runtime.errors import PeerDeadError
from protoref.rref.runtime.worker import MASTER, WorkerCore

__all__ = ["PROBE_PAUSES", "Liveness"]

log = logging.getLogger("protoref.rref.runtime")
#: Pauses before each connection attempt of a probe; all refused: the peer is dead.
PROBE_PAUSES: Final = (0.0, 0.1, 0.2, 0.4)
PROBE_CONNECT_TIMEOUT: Final = 0.5


class Liveness(WorkerCore):
    """Detects dead peers and fails what waits on them."""

    def _init_liveness(self) -> None:
        #: Dead peer -> why it was declared dead.
        self.dead: dict[str, str] = {}
        self._probing: set[str] = set()
        self._lost_at: dict[str, float] = {}

    def _may_declare(self, peer: str) -> bool:
        barrier2 = self._go_done(2)
        return peer in self.ranks and peer != self.name and peer not in self.dead and not barrier2

    def _go_done(self, phase: int) -> bool:
        """Whether shutdown barrier ``phase`` has passed (shutdown.Shutdown)."""
        raise NotImplementedError

    def on_link_lost(self, peer: str) -> None:
        """(loop thread) A link to ``peer`` broke under us: probe it."""
        if peer == MASTER:
            peer = next((n for n, k in self.ranks.items() if k == 0), peer)
        if self.closing or not self._may_declare(peer) or peer in self._probing:
            return
        self._probing.add(peer)
        self._lost_at[peer] = time.monotonic()
        self.loop.create_task(self._probe(peer))

    async def _probe(self, peer: str) -> None:
        host, port = self.transport.addresses[peer]
        try:
            for pause in PROBE_PAUSES:
                await asyncio.sleep(pause)
                try:
                    _, writer = await asyncio.wait_for(
                        asyncio.open_connection(host, port), PROBE_CONNECT_TIMEOUT
                    )
                except (OSError, TimeoutError):
                    continue
                writer.transport.abort()  # it accepts: alive (its acceptor sees us leave)
                return
            waited = time.monotonic() - self._lost_at[peer]
            self.declare_dead(
                peer,
                f"its connection broke and it refused {len(PROBE_PAUSES)} connection attempts "
                f"over {waited:.2f} s",
            )
        finally:
            self._probing.discard(peer)

    def on_unreachable(self, peer: str, error: BaseException) -> None:
        """(loop thread) Dialing ``peer`` failed for good (refused, or connect_timeout)."""
        if self._may_declare(peer):
            self.declare_dead(peer, f"it cannot be reached: {error!r}")

    def declare_dead(self, peer: str, reason: str) -> None:
        """(loop thread) ``peer`` is gone: fail what waits on it, forget it."""
        if peer in self.dead or peer == self.name:
            return
        self.dead[peer] = reason
        log.warning("%s: worker %s is dead: %s", self.name, peer, reason)
        self.transport.forget(peer)
        error = PeerDeadError(peer, f"worker {peer} is gone ({reason})")
        self.node.peer_dead(peer, error)
        self.on_peer_dead(peer)

    def on_peer_dead(self, peer: str) -> None:
        """Shutdown's part: barriers stop waiting for ``peer`` (shutdown.Shutdown)."""
        raise NotImplementedError

    def check_alive(self, peer: str) -> None:
        """Refuse a call to a dead peer at once."""
        reason = self.dead.get(peer)
        if reason is not None:
            raise PeerDeadError(peer, f"worker {peer} is gone ({reason})")
