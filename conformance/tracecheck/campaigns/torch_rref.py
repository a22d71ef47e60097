"""``tracecheck campaign torch-rref``: torch 2.13's own RRef protocol, run and checked black-box.

Run ``i`` is one session of :mod:`protoref.torch.rpc` with seed ``first_seed + i``: three
torch processes on the FAULTY_TENSORPIPE agent, the whole scenario library in a seeded order,
the delays and failures of message types chosen from the seed. Its merged trace is replayed
through ``spec/rref/TraceRRefTorch.tla`` (the PyTorch variant of RRef.tla, at most ``hidden``
unobserved steps between two observed events). A run's verdict:

- ``accepted``: some behaviour of the spec explains every observed event;
- ``known-defect``: accepted, and torch's graceful shutdown failed where the spec shows an
  OwnerRRef leaked by pytorch#41217's hazard (an rpc.remote timed out, its RREF_USER_DELETE
  overtook the late call): MCRRef_pytorch_lateRemoteLeak_shutdown's ShutdownCompletesProp
  violation, seen on torch;
- ``failed``: the full bounded search rejects the trace (the first unexplained event is named),
  or the session itself failed.

Coverage: the observed events per op (each op is one spec action or a probe of its state).
torch absent or unsupported is the plug-in's ``TorchUnavailableError``
(:mod:`tracecheck.plugins.torch_rpc`).
"""

from __future__ import annotations

from typing import Any, Self

from tracecheck.campaigns.torch_session import (
    TorchBlackBox,
    TorchSessionResult,
    TorchSessionRun,
)
from tracecheck.protocols.blackbox import RREF_OPS, BlackBoxTrace
from tracecheck.protocols.rref_torch import DEFAULT_HIDDEN
from tracecheck.replay.rref_torch import check_rref_trace

__all__ = ["RREF_ACTIONS", "TorchRRefResult", "TorchRRefRun", "run_torch_rref_campaign"]

#: RRef.tla's actions (the disjuncts of Next), for coverage; FailRemote and ExhaustRetries
#: are off in the torch instance (tracecheck.protocols.rref_torch says why).
RREF_ACTIONS = (
    "CreateLocalRRef",
    "Remote",
    "PrepareChildFork",
    "ToHere",
    "DropRRef",
    "DropOwnerRRef",
    "RetrySend",
    "LoseFirstAttempt",
    "TimeOutRemote",
    "TimeOutToHere",
    "FailRemote",
    "ExhaustRetries",
    "DelUser",
    "AssignOwnerRRef",
    "ConfirmPendingUser",
    "FinishCreatingOwnerRRef",
    "RetrieveOwnerRRef",
    "ReceiveFetchRet",
    "GetOrCreateRRef",
    "AddForkOfOwnerIfNotPresent",
    "FinishForkRequest",
    "DelPendingChild",
    "DelForkOfOwner",
    "WaitAllWorkers",
    "DelAllUsersAndUnforkedOwners",
    "DestroyInstance",
)

#: the defect tag of a shutdown that failed on a leaked OwnerRRef
LEAK_SHUTDOWN = "pytorch#41217 leak: shutdown never completes"


class TorchRRefRun(TorchSessionRun):
    defect: str | None = None

    @classmethod
    def of(cls, defects: list[str], **fields: Any) -> Self:
        return cls(defect=defects[0] if defects else None, **fields)

    @property
    def known(self) -> list[str]:
        return [] if self.defect is None else [self.defect]


class TorchRRefResult(TorchSessionResult[TorchRRefRun]):
    """The runs; ``actions`` counts RRef.tla's actions."""


def _leak(trace: BlackBoxTrace) -> list[str]:
    # an accepted trace whose graceful shutdown failed: the spec's OwnerRRef leak
    return [LEAK_SHUTDOWN] if any(e.op == "ShutdownFailed" for e in trace.events) else []


RREF_BLACKBOX = TorchBlackBox(
    protocol="rref",
    ops=RREF_OPS,
    actions=RREF_ACTIONS,
    check=check_rref_trace,
    defects=_leak,
    run=TorchRRefRun,
    result=TorchRRefResult,
    hidden=DEFAULT_HIDDEN,
)


#: ``run_torch_rref_campaign(runs, first_seed, spec_root, *, out=None, hidden=DEFAULT_HIDDEN,
#: scenarios=())``: the campaign (:meth:`TorchBlackBox.campaign`)
run_torch_rref_campaign = RREF_BLACKBOX.campaign
