"""torch's own distributed autograd, black-box: the ops of its traces and the constants of
``spec/autograd/TraceDistAutogradTorch.tla``.

The instance every torch trace is replayed in: DistAutograd.tla's PyTorch variant with FAST-mode
backward, one application thread per worker (the sessions run one context block at a time on a
worker), every pair of workers may call (itself included) from a block and from a UDF, nested
calls fired and forgotten, blocks that exit with calls in flight, timeouts, late
``get_gradients``, several passes. Off: crashes (the sessions kill no worker), duplicated and
lost cleanups (FAULTY_TENSORPIPE fails a first attempt before writing it, and torch's re-send
is then the only copy), unused outputs (every awaited output feeds the loss), the ablations.

The bounds come from the trace: the contexts each worker opens, a message-id budget, the
largest number of nested calls of one UDF, the largest number of passes of one context, and the
workers whose backward functions may raise (the peers of the calls the program made to a UDF
whose backward raises: the ``raises`` field of ``Call``).
"""

from __future__ import annotations

from collections import Counter
from typing import Final

from tracecheck.protocols.blackbox import BlackBoxTrace, OpTable
from tracecheck.tla.values import format_value

__all__ = [
    "AUTOGRAD_OPS",
    "AUTOGRAD_TORCH_CONSTANTS",
    "DEFAULT_HIDDEN",
    "TRACE_MODULE",
    "trace_constants",
    "trace_workers",
]

TRACE_MODULE: Final = "TraceDistAutogradTorch"
#: The bound on unobserved steps between two observed events (docs/conformance.md, "torch's own
#: distributed autograd, black-box": how it was chosen and what it costs).
DEFAULT_HIDDEN: Final = 24

AUTOGRAD_OPS: Final[OpTable] = {
    "ContextEnter": {"cw": int, "cn": int},
    "ContextRefused": {"cw": int, "cn": int},
    "Call": {"cw": int, "cn": int, "peer": str, "label": str, "grad": bool, "raises": bool},
    "NestedCall": {"cw": int, "cn": int, "peer": str, "label": str, "grad": bool, "wait": bool},
    "CallDone": {"label": str, "outcome": str},
    "ContextExit": {"cw": int, "cn": int},
    "Backward": {"cw": int, "cn": int, "retain": bool},
    "BackwardDone": {"cw": int, "cn": int, "outcome": str},
    "Gradients": {"cw": int, "cn": int, "grad": int},
    "LateGradients": {"cw": int, "cn": int, "outcome": str},
    "LateBackward": {"cw": int, "cn": int, "outcome": str},
    "Quiet": {},
    "Counters": {"contexts": int, "passes": int},
    "ShutdownCalled": {},
    "ShutdownDone": {},
    "ShutdownFailed": {"error": str},
}

AUTOGRAD_TORCH_CONSTANTS: Final = {
    "Threads": "{1}",
    "Calls": "TVWorkers \\X TVWorkers",
    "NestCalls": "TVWorkers \\X TVWorkers",
    "FireAndForget": "TRUE",
    "Variant": '"PyTorch"',
    "RefAblations": "{}",
    "Watermark": "FALSE",
    "LateForward": "TRUE",
    "DupCleanup": "FALSE",
    "LoseCleanup": "FALSE",
    "CrashWorkers": "{}",
    "Detect": "FALSE",
    "RpcTimeout": "TRUE",
    "Cascade": "TRUE",
    "KnownOnlyOnGrad": "FALSE",
    "NestingUnchecked": "FALSE",
    "BackwardMode": '"FAST"',
    "UnusedSends": "FALSE",
    "LateCalls": "TRUE",
    "UncheckedIds": "{}",
}


def trace_workers(trace: BlackBoxTrace) -> str:
    """The spec's workers: the ranks of the trace's workers (their order in the header)."""
    return format_value(frozenset(range(len(trace.workers))))


def trace_constants(trace: BlackBoxTrace) -> dict[str, str]:
    """The constants the trace fixes (see the module's doc)."""
    rank = {name: i for i, name in enumerate(trace.workers)}
    opened: Counter[int] = Counter()
    calls = 0
    nested: Counter[tuple[str, int, int]] = Counter()
    passes: Counter[tuple[int, int]] = Counter()
    raising: set[int] = set()
    for e in trace.events:
        f = e.fields
        if e.op == "ContextEnter":
            opened[rank[e.node]] += 1
        elif e.op in {"Call", "NestedCall"}:
            calls += 1
            if e.op == "NestedCall":
                nested[(e.node, f["cw"], f["cn"])] += 1
            elif f["raises"]:
                raising.add(rank[str(f["peer"])])
        elif e.op == "Backward":
            passes[(f["cw"], f["cn"])] += 1
    ranks = range(len(trace.workers))
    # every call draws one id on its sender and its wrapped answer one on the callee
    budget = 2 * calls + 1
    pairs = " @@ ".join(f"{format_value(n)} :> {r}" for n, r in rank.items())
    return {
        "TVRank": f"({pairs})",
        "MaxCtx": "(" + " @@ ".join(f"{r} :> {opened[r]}" for r in ranks) + ")",
        "MaxMsg": f"[w \\in TVWorkers |-> {budget}]",
        "MaxNested": str(max(nested.values(), default=1)),
        "MaxPasses": str(max(passes.values(), default=1)),
        "ErrorWorkers": format_value(frozenset(raising)),
    }
