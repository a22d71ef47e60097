"""The faults of one session, chosen from its seed: which torch message types the
``FAULTY_TENSORPIPE`` agent fails (once per message; torch's sendWithRetries re-sends after
1 s) and which it delays (the sending thread sleeps before the write).

The agent accepts exactly these names (``FaultyTensorPipeAgent::messageStringToType`` in torch
2.13; any other name is an error "No mapping to rpc::MessageType exists"): RREF_FORK_REQUEST,
RREF_CHILD_ACCEPT, RREF_USER_DELETE, CLEANUP_AUTOGRAD_CONTEXT_REQ, PYTHON_REMOTE_CALL,
SCRIPT_REMOTE_CALL, PYTHON_CALL, SCRIPT_CALL, PYTHON_RREF_FETCH_CALL, SCRIPT_RREF_FETCH_CALL.

Only retried types are failed: a failed user call (PYTHON_CALL, PYTHON_REMOTE_CALL, a fetch) is
never sent and never retried, a loss the specs leave out of scope (the design note's
assumptions), and it would fail the conductor's own steps. User calls are delayed instead,
which gives the late processing the specs' timeouts allow. PYTHON_CALL is never delayed: the
conductor's steps are PYTHON_CALLs, and delaying them changes no protocol message's order.
"""

from __future__ import annotations

import random
from typing import Final

from pydantic import BaseModel, ConfigDict

__all__ = ["ACCEPTED_TYPES", "FaultPlan", "plan_for"]

ACCEPTED_TYPES: Final = (
    "RREF_FORK_REQUEST",
    "RREF_CHILD_ACCEPT",
    "RREF_USER_DELETE",
    "CLEANUP_AUTOGRAD_CONTEXT_REQ",
    "PYTHON_REMOTE_CALL",
    "SCRIPT_REMOTE_CALL",
    "PYTHON_CALL",
    "SCRIPT_CALL",
    "PYTHON_RREF_FETCH_CALL",
    "SCRIPT_RREF_FETCH_CALL",
)

_FAILABLE: Final = {
    "rref": ("RREF_FORK_REQUEST", "RREF_CHILD_ACCEPT", "RREF_USER_DELETE"),
    # the cleanup cascade's only message type the agent knows (retried by sendWithRetries);
    # FORWARD/BACKWARD_AUTOGRAD_REQ have no name in messageStringToType
    "autograd": ("CLEANUP_AUTOGRAD_CONTEXT_REQ",),
}
_DELAYABLE: Final = {
    "rref": (
        "RREF_FORK_REQUEST",
        "RREF_CHILD_ACCEPT",
        "RREF_USER_DELETE",
        "PYTHON_REMOTE_CALL",
        "PYTHON_RREF_FETCH_CALL",
    ),
    "autograd": ("CLEANUP_AUTOGRAD_CONTEXT_REQ",),
}

#: the chance a type is failed / delayed in a session (autograd has one type of each)
_P_FAIL: Final = {"rref": 0.4, "autograd": 0.6}
_P_DELAY: Final = {"rref": 0.5, "autograd": 0.7}


class FaultPlan(BaseModel):
    """The agent's fault options for every worker of one session."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int
    messages_to_fail: tuple[str, ...]
    messages_to_delay: dict[str, float]
    num_fail_sends: int

    def describe(self) -> str:
        fail = ",".join(self.messages_to_fail) or "none"
        delay = ",".join(f"{k}={v:g}s" for k, v in sorted(self.messages_to_delay.items()))
        return f"seed {self.seed}: fail {fail} (x{self.num_fail_sends}); delay {delay or 'none'}"


def plan_for(protocol: str, seed: int) -> FaultPlan:
    """The faults of the session with ``seed`` (the same seed, the same plan)."""
    rng = random.Random(f"{protocol}:{seed}")
    fail = tuple(t for t in _FAILABLE[protocol] if rng.random() < _P_FAIL[protocol])
    delay = {
        t: round(rng.choice((0.02, 0.05, 0.1, 0.2)), 2)
        for t in _DELAYABLE[protocol]
        if rng.random() < _P_DELAY[protocol]
    }
    return FaultPlan(
        seed=seed,
        messages_to_fail=fail,
        messages_to_delay=delay,
        num_fail_sends=1 if fail else 0,
    )
