"""The RRef runtime: the sans-IO core driven across threads or OS processes over
:mod:`protoref.rpc`.

:mod:`.node_core` / :mod:`.node_payload` / :mod:`.node_inbox` / :mod:`.node` (the driver around
``machine.step``, traced like the simulator), :mod:`.handle` (the RRef handle), :mod:`.proxy`
(``rref.rpc_sync().f(...)`` and its kin), :mod:`.scenarios` and :mod:`.udfs` (importable
scripts and functions the demo, the benches and the tests run on workers). The public API is
:mod:`protoref.rpc`.
"""

from protoref.rref.runtime.handle import RRef, WorkerInfo

__all__ = ["RRef", "WorkerInfo"]
