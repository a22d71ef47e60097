"""The peer table: who the workers are and where they listen, found through the master.

Peers are found through a master (rank 0) at ``master_addr:master_port``, as torch's
MASTER_ADDR/MASTER_PORT: every other worker listens on a port of its own (0: the OS picks),
dials the master, sends a ``Join`` and receives the peer table once ``world_size`` workers have
joined.
"""

from __future__ import annotations

import asyncio
import logging

from protoref.rpc import frames as fr
from protoref.rpc.current import WorkerInfo
from protoref.rpc.errors import AuthenticationRefusedError, PeerDiscoveryError, RPCError
from protoref.rpc.link import Link

__all__ = ["MASTER", "PeerTable"]

log = logging.getLogger("protoref.rpc")
MASTER = "<master>"  # dial key of the master before its name is known


class PeerTable:
    """Worker ``name`` (``rank`` of ``world_size``)'s view of the others: names, ranks, and
    the rendezvous that fills it."""

    def __init__(self, name: str, rank: int, world_size: int) -> None:
        self.name, self.rank, self.world_size = name, rank, world_size
        self.ranks: dict[str, int] = {}
        self.discovery_errors: list[PeerDiscoveryError] = []
        self._joined: dict[str, tuple[fr.PeerInfo, Link | None]] = {}
        self.complete: asyncio.Future[tuple[fr.PeerInfo, ...]] | None = None

    def open(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start waiting for the table."""
        self.complete = loop.create_future()

    def join_self(self, me: fr.PeerInfo) -> None:
        """(master) Its own entry, once it listens."""
        self._joined[self.name] = (me, None)
        self._maybe_complete()

    def on_peers(self, peers: tuple[fr.PeerInfo, ...]) -> None:
        """(non-master) The master's table."""
        if self.complete is not None and not self.complete.done():
            self.complete.set_result(peers)

    def refused(self, error: AuthenticationRefusedError) -> None:
        """A peer hung up on this worker's Hello while the table is not complete: no table
        will come (the master, or the peer, does not accept this worker's secret), so the wait
        ends now with why, instead of at ``connect_timeout``."""
        if self.complete is None or self.complete.done():
            return
        peer = "the master" if error.peer == MASTER else error.peer
        self.complete.set_exception(
            PeerDiscoveryError(
                f"{self.name}: its peers refused its authentication: {peer} closed the "
                "connection after its Hello, as a worker with another shared secret does "
                "(every worker needs the same secret: init_rpc(secret=...), PROTOREF_RPC_SECRET "
                "or PROTOREF_RPC_SECRET_FILE)"
            )
        )

    def learn(self, peers: tuple[fr.PeerInfo, ...]) -> None:
        for p in peers:
            self.ranks[p.name] = p.rank

    def on_join(self, link: Link, info: fr.PeerInfo) -> None:
        problem = None
        if self.rank != 0:
            problem = f"{info.name} sent a Join to {self.name}, which is not the master"
        elif info.name != link.peer:
            problem = f"{link.peer} joined under another name, {info.name}"
        elif not 0 < info.rank < self.world_size:
            problem = f"{info.name} has rank {info.rank}, outside 1..{self.world_size - 1}"
        elif info.name in self._joined or any(
            p.rank == info.rank for p, _ in self._joined.values()
        ):
            problem = f"{info.name} (rank {info.rank}): name or rank already taken"
        if problem is not None:
            err = PeerDiscoveryError(problem)
            self.discovery_errors.append(err)
            log.error("%s: %s", self.name, err)
            link.close()
            return
        self._joined[info.name] = (info, link)
        self._maybe_complete()

    def _maybe_complete(self) -> None:
        if len(self._joined) < self.world_size or self.complete is None:
            return
        table = tuple(sorted((p for p, _ in self._joined.values()), key=lambda p: p.rank))
        for _, link in self._joined.values():
            if link is not None:
                link.send(fr.Peers, peers=table)
        self.complete.set_result(table)

    def master(self) -> str:
        return next(n for n, k in self.ranks.items() if k == 0)

    def name_of_rank(self, rank: int) -> str:
        for name, r in self.ranks.items():
            if r == rank:
                return name
        raise KeyError(f"no worker of rank {rank}")

    def worker_info(self, name: str | int | None = None) -> WorkerInfo:
        """torch's get_worker_info: by name, by rank (id), or this worker's (None)."""
        if name is None:
            return WorkerInfo(self.name, self.rank)
        if isinstance(name, int) and not isinstance(name, bool):
            for worker, rank in self.ranks.items():
                if rank == name:
                    return WorkerInfo(worker, rank)
        elif name in self.ranks:
            return WorkerInfo(name, self.ranks[name])
        raise RPCError(  # torch's text
            f"name:{self.name},rank:{self.rank} could not find destination name {name}"
        )

    def to_name(self, to: str | int | WorkerInfo) -> str:
        """The name of a call's destination given as torch allows: name, rank or WorkerInfo."""
        if isinstance(to, WorkerInfo):
            return to.name
        if isinstance(to, str | int) and not isinstance(to, bool):
            return self.worker_info(to).name
        raise ValueError(f"Cannot get WorkerInfo from name {to}")  # torch's text
