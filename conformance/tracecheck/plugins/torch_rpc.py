"""torch's own RPC agent (RRef protocol) run by protoref's harness (:mod:`protoref.torch.rpc`):
the plug-in the ``torch-rref`` campaign reaches torch through, as ``torch-rendezvous`` reaches
torch's rendezvous handler through :mod:`tracecheck.plugins.torch_harness`. What it adds: how to
run one seeded session on FAULTY_TENSORPIPE (the campaign), how to drive one program along a
fault plan read from a counterexample (``replay-on-torch``), the check that the installed torch
is supported, and the error a session raises when it cannot run."""

from __future__ import annotations

from protoref.errors import ProtorefError
from protoref.torch.compat import TorchUnavailableError, require_torch, torch_version
from protoref.torch.rpc.session import run_session
from protoref.torch.rpc_repro import FaultPlan, run_program

__all__ = [
    "FaultPlan",
    "ProtorefError",
    "TorchUnavailableError",
    "require_torch",
    "run_program",
    "run_session",
    "torch_version",
]
