"""The autograd mapping: every event of protoref's autograd traces as a step of
spec/autograd/DistAutograd.tla.

Parameters are the spec action's, in order, logged under their TLA+ names; ``msg``, ``m``, ``h``
and ``r`` are whole records (a message, a handler, a recv function), so the logged record must
be one the spec's state holds. Post-state checks compare the acting worker's slice of each
variable the action touches. The spec's workers are naturals while a trace's nodes are strings:
a trace names worker ``w`` ``"w"`` (its decimal rank), and :data:`WORKER` turns the acting node
back into the spec's worker (TLC's ``ToString``). The global ``handlers`` is sliced to the
handlers running on the worker. ``net`` and the history ``released`` are not logged: the
parameters pin every step down, so TLC computes them.

Every constant comes from the header's settings, so a trace says which variant and which
faults it was produced under (another implementation, or an instrumented torch, may log the
PyTorch variant); the id budgets ``MaxCtx`` and ``MaxMsg`` are derived from the traces (a
bound only has to be large enough).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tracecheck.protocols.mapping import ActionMap, ProtocolMap
from tracecheck.traces.load import Trace

__all__ = ["AUTOGRAD", "WORKER"]

#: The acting worker (a natural) of the event's node (its decimal name).
WORKER = "(CHOOSE tvW \\in Workers : ToString(tvW) = @)"

#: Per-worker variables, logged under their spec names (``echoWait`` by its spec name too).
_PER_WORKER = (
    "nextCtx",
    "nextMsg",
    "ctxs",
    "known",
    "sends",
    "recvs",
    "pending",
    "detached",
    "tomb",
    "alive",
    "execd",
    "fired",
    "grads",
    "bstate",
    "outst",
    "awaiting",
    "parent",
    "echoWait",
)
#: TLA+ expression of each logged post field: the acting worker's slice after the step.
_SLICE = {
    **{v: f"{v}'[{WORKER}]" for v in _PER_WORKER},
    # under Horizon a worker's tomb is a record: its explicit tombstones are what is logged
    "tomb": f"TombIds(tomb'[{WORKER}])",
    "handlers": f"{{tvH \\in handlers' : tvH.w = {WORKER}}}",
    # cur[w] is a function over Threads; logged as the <<t, c>> of the threads with a context
    "cur": (
        f"{{<<tvT, cur'[{WORKER}][tvT]>> : "
        f"tvT \\in {{tvU \\in Threads : cur'[{WORKER}][tvU] # None}}}}"
    ),
}

_TASK = ("execd", "fired", "bstate", "outst", "awaiting", "parent", "echoWait")
_ERASE = (*_TASK, "ctxs", "known", "sends", "recvs", "grads", "tomb")
_MSG = ("w", "msg")
_FUTURES = ("pending", "detached", "handlers")
_FAIL = ("outst", "bstate", "awaiting")

#: event -> (spec parameters in order, logged post-state variables)
_TABLE: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "NewContext": (("w", "t"), ("nextCtx", "ctxs", "cur")),
    "SendMessageWithAutograd": (
        ("w", "t", "dst", "grad"),
        ("nextMsg", "sends", "known", "pending"),
    ),
    "NestedSendMessageWithAutograd": (
        ("w", "h", "dst", "grad", "await"),
        ("nextMsg", "sends", "known", "handlers", "detached"),
    ),
    "ReleaseContext": (("w", "t"), (*_ERASE, "cur")),
    "DistEngineExecute": (("w", "t", "retain"), (*_TASK, "grads")),
    "RetrieveContext": (("w", "c"), ()),
    "FetchStoredValue": (("w", "h", "r"), ("handlers",)),
    "UdfRaises": (("w", "h"), ("handlers",)),
    "RetryCleanup": (("m",), ()),
    "LoseCleanupMsg": (("m",), ()),
    "Crash": (
        ("w",),
        (*_TASK, "alive", "ctxs", "cur", "known", "sends", "recvs", *_FUTURES, "grads"),
    ),
    # logged by the survivor w: x's Crash changes no variable of w's slice
    "PeerDied": (("w", "x"), ()),
    "BackwardError": (("w", "c"), _FAIL),
    "ProcessForwardAutogradReq": (_MSG, ("ctxs", "recvs", "handlers")),
    "FinishForwardAutogradReq": (
        ("w", "h", "respGrad"),
        ("handlers", "nextMsg", "sends", "known"),
    ),
    "DeserializeForwardAutogradResp": (
        ("w", "msg", "loss"),
        ("ctxs", "recvs", *_FUTURES),
    ),
    "DeserializeResponse": (_MSG, _FUTURES),
    "PollTimeoutRpcs": (("w", "m"), _FUTURES),
    "ProcessCleanupAutogradContextReq": (_MSG, _ERASE),
    "ReleaseOrphanedContext": (("w", "c"), _ERASE),
    "Discard": (("msg",), ()),
    "RecvRpcBackwardApply": (("w", "c", "r"), ("fired", "outst")),
    "ProcessBackwardAutogradReq": (_MSG, (*_TASK, "grads")),
    "ProcessBackwardAutogradResp": (_MSG, _FAIL),
    "CleanupBackwardPass": (("w", "c"), ("bstate", "awaiting")),
    "ProcessBackwardStart": (_MSG, ("execd", "fired", "bstate", "parent", "echoWait")),
    "ProcessBackwardAck": (_MSG, ("bstate", "echoWait")),
    "NewContextRefused": (("w", "t"), ()),
}

#: Who takes each step whose actor is not the worker argument ``w`` (tracecheck.replay.claims):
#: a cleanup's retry or loss is its sender's; a discarded message is its receiver's agent's,
#: or its sender's when the receiver is dead (the implementation's state decides).
_ACTOR = {"RetryCleanup": "m.src", "LoseCleanupMsg": "m.src", "Discard": "msg.dst|msg.src"}

#: Header settings that are spec constants, by the same name.
_SETTINGS = (
    "Workers",
    "Calls",
    "NestCalls",
    "FireAndForget",
    "Variant",
    "RefAblations",
    "Watermark",
    # a definition of the spec (default FALSE) the trace's cfg overrides, as a model's does
    "Horizon",
    "LateForward",
    "DupCleanup",
    "LoseCleanup",
    "CrashWorkers",
    "Detect",
    "RpcTimeout",
    "Cascade",
    "KnownOnlyOnGrad",
    "NestingUnchecked",
    "BackwardMode",
    "UnusedSends",
    "ErrorWorkers",
    "LateCalls",
    "UncheckedIds",
    # the shapes of real programs (issue 26 s4): definitions of the spec (default FALSE)
    "ForwardAfterPass",
    "StoredValues",
    "UdfErrors",
    "ReportedDeaths",
)


def _budgets(traces: Sequence[Trace]) -> Mapping[str, str]:
    """The bounds a batch needs (each only has to be large enough): ``MaxCtx`` and ``MaxMsg``
    per worker, the most ids of each kind any trace drew (``nextCtx``/``nextMsg`` after a
    draw; a worker that drew none gets 0); ``Threads``, the application threads any event
    names; ``MaxNested``, the most nested calls a UDF made; ``MaxPasses``, one more than the
    backward calls any trace made (so that every logged pass may retain its graph)."""
    top = {"nextCtx": dict.fromkeys(traces[0].header.nodes, 0)}
    top["nextMsg"] = dict(top["nextCtx"])
    threads, nested, passes = 0, 1, 1
    for trace in traces:
        calls = 0
        for event in trace.events:
            for field, most in top.items():
                if field in event.post:
                    most[event.node] = max(most.get(event.node, 0), int(event.post[field]))
            if "t" in event.args:
                threads = max(threads, int(event.args["t"]))
            if event.event == "NestedSendMessageWithAutograd":
                nested = max(nested, int(event.args["h"]["called"]) + 1)
            calls += event.event == "DistEngineExecute"
        passes = max(passes, calls + 1)

    def function(most: dict[str, int]) -> str:
        return "(" + " @@ ".join(f"{int(w)} :> {n}" for w, n in sorted(most.items())) + ")"

    return {
        "MaxCtx": function(top["nextCtx"]),
        "MaxMsg": function(top["nextMsg"]),
        "Threads": f"0..{threads}",
        "MaxNested": str(nested),
        "MaxPasses": str(passes),
    }


AUTOGRAD = ProtocolMap(
    protocol="autograd",
    module="DistAutograd",
    constants={name: f"{{settings[{name}]}}" for name in _SETTINGS},
    # a trace from before the horizons (issue 28) says nothing of them: tombstones as a set;
    # one from before issue 26 s4 nothing of the programs' shapes: the spec's first rounds
    setting_defaults={
        "Horizon": False,
        "ForwardAfterPass": False,
        "StoredValues": False,
        "UdfErrors": False,
        "ReportedDeaths": False,
    },
    derive=_budgets,
    actions=tuple(
        ActionMap(
            event=event,
            params=params,
            post={v: _SLICE[v] for v in post},
            actor=_ACTOR.get(event, "w"),
        )
        for event, (params, post) in _TABLE.items()
    ),
    hidden={},
    outside={
        "UnawaitedRpcAsync": (
            "unawaited rpc_async: a UDF returned, or called again, while its nested call was "
            "unanswered (docs/divergences.md, 'The spec where real programs go')"
        ),
    },
)
