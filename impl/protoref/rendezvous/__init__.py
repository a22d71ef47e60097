"""Dynamic rendezvous (spec/rendezvous/DynamicRendezvous.tla, PyTorch 2.13's c10d backend).

The slice template: the sans-IO core (:mod:`.core`), the trace events (:mod:`.trace`), the
real drivers (:mod:`.runtime`: the handler, its state holder, executor and heartbeat), the stores
(:mod:`.adapters`) and the simulator (:mod:`.sim`, not re-exported, so ``python -m`` runs it as a
fresh module). The benchmarks are ``benches.rendezvous`` and ``benches.rendezvous_procs``.
"""

from protoref.rendezvous.adapters.store import FileStore, InMemoryStore, RendezvousStore, Versioned
from protoref.rendezvous.core.errors import (
    RendezvousClosedError,
    RendezvousConnectionError,
    RendezvousError,
    RendezvousGracefulExitError,
    RendezvousStateError,
    RendezvousTimeoutError,
)
from protoref.rendezvous.core.ops import Action, Op, decide
from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings, RendezvousState
from protoref.rendezvous.runtime.clock import Clock, FakeClock, MonotonicClock
from protoref.rendezvous.runtime.handler import (
    DynamicRendezvousHandler,
    RendezvousInfo,
    new_node_desc,
)

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
