"""torch's own RRef protocol, black-box: the constants of ``spec/rref/TraceRRefTorch.tla``.

The instance every torch trace is replayed in: the PyTorch variant, every pair of workers may
share (sending to oneself included), rpc.remote to any worker and to self, duplicated control
messages (torch re-sends a failed one), timeouts, the graceful shutdown. The two PyTorch-only
faults stay off: the sessions inject no UNKNOWN error into rpc.remote and fail each control
message once, far below sendWithRetries' five attempts (tracecheck.replay.hidden searches
only what the constants allow, so a fault left on would only widen the search).
"""

from __future__ import annotations

from typing import Final

from tracecheck.protocols.blackbox import BlackBoxTrace
from tracecheck.tla.values import format_value

__all__ = ["DEFAULT_HIDDEN", "RREF_CONSTANTS", "TRACE_MODULE", "trace_constants"]

TRACE_MODULE: Final = "TraceRRefTorch"
#: The bound on unobserved steps between two observed events (docs/conformance.md, "Black-box
#: traces of torch's RRef and autograd": how it was chosen and what it costs).
DEFAULT_HIDDEN: Final = 8

RREF_CONSTANTS: Final = {
    "MaxLocalId": "[w \\in TVW |-> 1000]",
    "Variant": '"PyTorch"',
    "Links": "TVW \\X TVW",
    "RemoteDsts": "TVW",
    "SelfRemote": "TRUE",
    "Duplicates": "TRUE",
    "Timeouts": "TRUE",
    "G1": "TRUE",
    "G2Workers": "TVW",
    "Shutdown": "TRUE",
    "UnknownErrors": "FALSE",
    "RetryExhaustion": "FALSE",
}


def trace_constants(trace: BlackBoxTrace) -> dict[str, str]:
    """The constants a trace's header fixes. ``TVFailed``, the types whose re-sent copies may
    arrive twice: none for FAULTY_TENSORPIPE sessions. The agent fails a first attempt before
    writing it (``FaultyTensorPipeAgent::send`` returns the failed future and sends nothing),
    so torch's retry is the only copy ever delivered: the spec's single delivery, a second
    later. Searching RetrySend there only widened the search (a 96-event session with all
    three control types failed did not finish its observed-first pass in 280 s with it)."""
    faults = trace.header.get("faults", {})
    agent = faults.get("agent", "FAULTY_TENSORPIPE") if isinstance(faults, dict) else ""
    failed = faults.get("messages_to_fail", []) if isinstance(faults, dict) else []
    duplicated = [] if agent == "FAULTY_TENSORPIPE" else [t for t in failed if isinstance(t, str)]
    return {"TVFailed": format_value(frozenset(sorted(duplicated)))}
