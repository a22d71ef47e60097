"""Dead peers: a worker that was killed fails what waits on it within about a second.

A killed process's connections break at once (its kernel closes them) and its listening port
then refuses new ones. So when a link to a peer of the table breaks, this worker knocks on the
peer's port (:func:`knock`): a peer whose acceptor answers anything (its handshake Challenge, or
the marker of a worker at its unauthenticated-connection cap) is alive, and the link broke for
another reason (the transport redials on the next send and retries what was lost, RRef.tla
``RetrySend``); a port that refuses, or accepts and hangs up without a word (a listener being
torn down with its process), is a strike. ``PROBE_STRIKES`` strikes in a row (about 0.4 s), or
no sign of life for ``PROBE_GIVE_UP_SECONDS`` (a host that went silent), and the peer is
declared dead. A dial that keeps being refused (transport.REFUSED_FOR_SECONDS) declares it dead
too, for a peer this worker had no link to. Once dead, a peer's pending calls, fetches and
rpc.remote creations fail with :class:`PeerDeadError` (each plug-in's peer_dead), later calls to
it fail at once, frames for it are dropped, and graceful shutdown reports it (shutdown.py)
instead of waiting for it. A peer is never declared dead once barrier 2 of graceful shutdown has
passed: the others close their links then, and nothing depends on them any more.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from protoref.rpc.errors import PeerDeadError
from protoref.rpc.peers import MASTER

if TYPE_CHECKING:  # the agent composes this part
    from protoref.rpc.hooks import Host

__all__ = ["PROBE_GIVE_UP_SECONDS", "PROBE_STRIKES", "Liveness", "knock"]

log = logging.getLogger("protoref.rpc")
#: Strikes in a row (refused, or hung up without a word) that make a peer dead.
PROBE_STRIKES: Final = 3
#: A peer that shows no sign of life this long after its link broke is dead.
PROBE_GIVE_UP_SECONDS: Final = 10.0
#: How long a knock waits to connect, then for the first byte of the acceptor's answer.
KNOCK_TIMEOUT: Final = 1.0
ALIVE, GONE, SILENT = "alive", "gone", "silent"


async def knock(host: str, port: int) -> str:
    """``ALIVE``: the acceptor at host:port answered a byte (user code runs there); ``GONE``:
    refused, or accepted and hung up without a word (a port being torn down with its process);
    ``SILENT``: no answer in time (busy, or a host that is gone)."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), KNOCK_TIMEOUT)
    except TimeoutError:
        return SILENT
    except OSError:
        return GONE
    try:
        return ALIVE if await asyncio.wait_for(reader.read(1), KNOCK_TIMEOUT) else GONE
    except TimeoutError:
        return SILENT
    except OSError:
        return GONE
    finally:
        writer.transport.abort()  # its acceptor sees a stranger leave mid-handshake


class Liveness:
    """Detects ``agent``'s dead peers and fails what waits on them (through its plug-ins;
    ``on_dead`` tells the shutdown barriers). ``barrier_passed(2)``: never declared dead after."""

    def __init__(
        self,
        agent: Host,
        on_dead: Callable[[str], None],
        barrier_passed: Callable[[int], bool],
    ) -> None:
        self.agent = agent
        self._on_dead = on_dead
        self._barrier_passed = barrier_passed
        #: Dead peer -> why it was declared dead.
        self.dead: dict[str, str] = {}
        self._probing: set[str] = set()
        self._lost_at: dict[str, float] = {}

    def _may_declare(self, peer: str) -> bool:
        a = self.agent
        barrier2 = self._barrier_passed(2)
        return peer in a.peers.ranks and peer != a.name and peer not in self.dead and not barrier2

    def on_link_lost(self, peer: str) -> None:
        """(loop thread) A link to ``peer`` broke under us: probe it."""
        a = self.agent
        if peer == MASTER:
            peer = next((n for n, k in a.peers.ranks.items() if k == 0), peer)
        if a.closing or not self._may_declare(peer) or peer in self._probing:
            return
        self._probing.add(peer)
        self._lost_at[peer] = time.monotonic()
        a.loop.create_task(self._probe(peer))

    async def _probe(self, peer: str) -> None:
        host, port = self.agent.transport.addresses[peer]
        strikes, pause = 0, 0.05
        try:
            while True:
                await asyncio.sleep(pause)
                verdict = await knock(host, port)
                if verdict == ALIVE:
                    return
                strikes = strikes + 1 if verdict == GONE else 0
                waited = time.monotonic() - self._lost_at[peer]
                if strikes >= PROBE_STRIKES or waited >= PROBE_GIVE_UP_SECONDS:
                    what = (
                        f"refused {strikes} connection attempts in a row"
                        if strikes >= PROBE_STRIKES
                        else "gave no sign of life"
                    )
                    self.declare_dead(
                        peer, f"its connection broke and it {what} over {waited:.2f} s"
                    )
                    return
                pause = min(pause * 2, 0.4)
        finally:
            self._probing.discard(peer)

    def on_unreachable(self, peer: str, error: BaseException) -> None:
        """(loop thread) Dialing ``peer`` failed for good (refused, or connect_timeout)."""
        if self._may_declare(peer):
            self.declare_dead(peer, f"it cannot be reached: {error!r}")

    def declare_dead(self, peer: str, reason: str) -> None:
        """(loop thread) ``peer`` is gone: fail what waits on it, forget it."""
        a = self.agent
        if peer in self.dead or peer == a.name:
            return
        self.dead[peer] = reason
        log.warning("%s: worker %s is dead: %s", a.name, peer, reason)
        a.transport.forget(peer)
        error = PeerDeadError(peer, f"worker {peer} is gone ({reason})")
        for plugin in a.plugins:
            plugin.peer_dead(peer, error)
        self._on_dead(peer)

    def check_alive(self, peer: str) -> None:
        """Refuse a call to a dead peer at once."""
        reason = self.dead.get(peer)
        if reason is not None:
            raise PeerDeadError(peer, f"worker {peer} is gone ({reason})")
