"""Dynamic rendezvous (spec/rendezvous/DynamicRendezvous.tla, PyTorch 2.13's c10d backend).

Sans-IO core (:mod:`.state`, :mod:`.ops`, :mod:`.actions`), state holder and executor steps
(:mod:`.holder`, :mod:`.executor`), stores (:mod:`.store`), the handler (:mod:`.handler`).
The simulator is :mod:`protoref.rendezvous.simulator` (not re-exported, so ``python -m`` runs it
as a fresh module).
"""

from protoref.rendezvous.clock import Clock, FakeClock, MonotonicClock
from protoref.rendezvous.errors import (
    RendezvousClosedError,
    RendezvousConnectionError,
    RendezvousError,
    RendezvousGracefulExitError,
    RendezvousStateError,
    RendezvousTimeoutError,
)
from protoref.rendezvous.handler import DynamicRendezvousHandler, RendezvousInfo, new_node_desc
from protoref.rendezvous.ops import Action, Op, decide
from protoref.rendezvous.state import NodeDesc, RendezvousSettings, RendezvousState
from protoref.rendezvous.store import FileStore, InMemoryStore, RendezvousStore, Versioned

__all__ = [
    "Action",
    "Clock",
    "DynamicRendezvousHandler",
    "FakeClock",
    "FileStore",
    "InMemoryStore",
    "MonotonicClock",
    "NodeDesc",
    "Op",
    "RendezvousClosedError",
    "RendezvousConnectionError",
    "RendezvousError",
    "RendezvousGracefulExitError",
    "RendezvousInfo",
    "RendezvousSettings",
    "RendezvousState",
    "RendezvousStateError",
    "RendezvousStore",
    "RendezvousTimeoutError",
    "Versioned",
    "decide",
    "new_node_desc",
]
