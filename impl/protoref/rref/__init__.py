"""The RRef protocol (Reference variant of spec/rref/RRef.tla): sans-IO core and simulator.

The simulator is imported from :mod:`protoref.rref.simulator` (not re-exported here, so that
``python -m protoref.rref.simulator`` runs it as a fresh module).
"""

from protoref.rref.machine import ACTION_TABLE, Step, step
from protoref.rref.state import RRefContext, UserRRef

__all__ = ["ACTION_TABLE", "RRefContext", "Step", "UserRRef", "step"]
