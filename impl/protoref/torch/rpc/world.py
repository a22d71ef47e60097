"""The process-wide state of one worker: its recorder and the objects its program holds.

Step functions run on torch's RPC threads in the worker process; they find the worker's
recorder and named objects here (one worker per process, set up by
:mod:`protoref.torch.rpc.worker`).
"""

from __future__ import annotations

import threading
from typing import Any

from protoref.torch.rpc.recorder import Recorder

__all__ = ["World", "world"]


class World:
    def __init__(self) -> None:
        self.recorder = Recorder("unset")
        #: the program's objects by label (RRefs, autograd context ids)
        self.handles: dict[str, Any] = {}
        #: set by the conductor's last step: the worker may shut down
        self.finished = threading.Event()


_WORLD = World()


def world() -> World:
    return _WORLD
