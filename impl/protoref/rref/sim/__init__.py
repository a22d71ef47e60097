"""The deterministic simulator of the Reference RRef protocol, in parts.

:mod:`.base` (state, core steps, trace), :mod:`.system` (deliveries, retries, timeouts,
destructors), :mod:`.shutdown` (graceful shutdown), :mod:`.workload` (the application) and
:mod:`.scheduler` (the seeded choice among them, :class:`Simulator`). The command line is
``python -m protoref.rref.sim.simulator``.
"""

from protoref.rref.sim.base import Envelope, RunSummary, SimConfig
from protoref.rref.sim.scheduler import Simulator

__all__ = ["Envelope", "RunSummary", "SimConfig", "Simulator"]
