"""The RRef runtime: the sans-IO core driven across threads or OS processes over TCP.

Layers, bottom up: :mod:`.wire` (framing, HMAC, replay checks) and :mod:`.frames` (the frame
schema), :mod:`.codec` (user payloads as JSON), :mod:`.transport` (asyncio links),
:mod:`.node` (the driver around ``machine.step``, traced like the simulator), :mod:`.agent`
(one worker: loop thread, rendezvous, shutdown). The public API is :mod:`protoref.rpc`.
"""

from protoref.rref.runtime.agent import Agent, RpcOptions, ShutdownReport
from protoref.rref.runtime.handle import RRef, WorkerInfo

__all__ = ["Agent", "RRef", "RpcOptions", "ShutdownReport", "WorkerInfo"]
