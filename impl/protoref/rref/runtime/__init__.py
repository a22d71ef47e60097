"""The RRef runtime: the sans-IO core driven across threads or OS processes over TCP.

Layers, bottom up: :mod:`.wire` (framing, HMAC, replay checks) and :mod:`.frames` (the frame
schema), :mod:`.codec` (user payloads as JSON), :mod:`.link` and :mod:`.transport` (asyncio
links), :mod:`.node_core` / :mod:`.node_payload` / :mod:`.node_inbox` / :mod:`.node` (the driver
around ``machine.step``, traced like the simulator), :mod:`.current` (which worker a thread acts
for), :mod:`.handle` (the RRef handle), :mod:`.worker` / :mod:`.calls` / :mod:`.shutdown` /
:mod:`.agent` (one worker: loop thread, rendezvous, calls, shutdown). The public API is
:mod:`protoref.rpc`.
"""

from protoref.rref.runtime.agent import Agent, RpcOptions, ShutdownReport
from protoref.rref.runtime.handle import RRef, WorkerInfo

__all__ = ["Agent", "RRef", "RpcOptions", "ShutdownReport", "WorkerInfo"]
