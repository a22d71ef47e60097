"""One RPC worker (torch's RpcAgent + RRefContext + the Python RPC API's plumbing).

The machinery is in :mod:`.worker` (threads, transport, rendezvous), dead peers in
:mod:`.liveness`, the application's calls in :mod:`.calls`, the graceful shutdown in
:mod:`.shutdown`; :class:`Agent` puts them together and routes the frames its transport
delivers.
"""

from __future__ import annotations

from typing import cast

from protoref.rpc import current
from protoref.rpc import frames as fr
from protoref.rpc.calls import Calls, RpcFuture
from protoref.rpc.link import Link
from protoref.rpc.options import RpcOptions, new_loop
from protoref.rpc.shutdown import Shutdown, ShutdownReport

__all__ = ["Agent", "RpcFuture", "RpcOptions", "ShutdownReport", "current_agent", "new_loop"]


class Agent(Calls, Shutdown):
    """One worker: its machinery, its calls, its shutdown, its distributed autograd."""

    def __init__(self, name: str, rank: int, world_size: int, options: RpcOptions) -> None:
        super().__init__(name, rank, world_size, options)
        self._init_liveness()
        self._init_barriers()
        self._init_autograd()

    def on_frame(self, link: Link, frame: fr.Frame) -> None:
        """The transport's handler: rendezvous and barrier frames here, the rest to the node."""
        if isinstance(frame, fr.Join):
            self._on_join(link, frame.info)
        elif isinstance(frame, fr.Peers):
            if self._peers is not None and not self._peers.done():
                self._peers.set_result(frame.peers)
        elif isinstance(frame, fr.Barrier | fr.BarrierGo):
            self.on_barrier_frame(frame)
        elif isinstance(frame, fr.Autograd):
            self.on_autograd_frame(link.peer, frame.body)
        else:
            self.node.on_frame(
                link.peer,
                frame,
                lambda ctl: link.ack(ctl, self._clock_now),
            )


def current_agent() -> Agent:
    """The calling thread's worker (set by init_rpc and in UDF threads), else the process's."""
    return cast(Agent, current.current_worker())
