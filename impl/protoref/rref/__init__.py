"""The RRef protocol (Reference variant of spec/rref/RRef.tla): sans-IO core and simulator.

The simulator is imported from :mod:`protoref.rref.sim.simulator` (not re-exported here, so that
``python -m protoref.rref.sim.simulator`` runs it as a fresh module).
"""

from protoref.rref.core.machine import ACTION_TABLE, Step, step
from protoref.rref.core.state import RRefContext, UserRRef

__all__ = ["ACTION_TABLE", "RRefContext", "Step", "UserRRef", "step"]
