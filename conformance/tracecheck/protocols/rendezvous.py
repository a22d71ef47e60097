"""The rendezvous mapping: every event of protoref's rendezvous traces as a step of
spec/rendezvous/DynamicRendezvous.tla.

Every node action takes one parameter, the acting node ``n`` (logged as ``args.n``); ``Tick``
takes none and is logged by the header's environment actor ``"clock"``. Post-state checks
compare the acting node's slice of each variable the action changes (``x'[@]``) and, for
``SyncWriteWon``, the store. ``tokenCurrent`` is not logged: it says whether a write landed
since the node's last sync, which the logged store and sync outcomes pin down.

Values: the trace's nodes are descriptor strings, ordered by the header (sorted in the
``_NodeDesc`` order), so the spec's ``NodeIndex`` is each node's position there. The
implementation logs the last-call deadline as an option (``[]`` for ``None``, ``[k]``), because
TLC cannot compare an integer with a string; the trace spec gives ``NoDeadline`` an integer no
real deadline takes (they saturate at -1) and converts the spec's record to the logged form.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tracecheck.protocols.mapping import ActionMap, ProtocolMap
from tracecheck.tla.values import format_value
from tracecheck.traces.load import Trace

__all__ = ["RENDEZVOUS"]

#: The spec's state record in the trace's encoding: the deadline as an option.
_STATE = (
    "LET tvS == {v} IN [tvS EXCEPT !.deadline = "
    "IF tvS.deadline = NoDeadline THEN <<>> ELSE <<tvS.deadline>>]"
)

#: TLA+ expression of each logged variable after the step; ``@`` is the acting node. ``fresh``
#: is logged as whether the read cache serves (the spec counts the ticks it has left).
_POST = {
    "store": _STATE.format(v="store'"),
    "local": _STATE.format(v="local'[@]"),
    "fresh": "(fresh'[@] > 0)",
    **{v: f"{v}'[@]" for v in ("dirty", "pc", "op", "opDl", "result", "view")},
}

_START = ("pc", "op", "opDl")
_SYNC = ("local", "dirty", "fresh", "pc")
_APPLY = ("local", "dirty", "pc")
#: A stop keeps the node's copy, token and read cache (the spec's Stop under ReadOnlySyncs).
_STOP = ("pc", "op", "opDl", "result")

#: event -> logged post-state variables (every node action's parameter is ``n``).
_TABLE: dict[str, tuple[str, ...]] = {
    "NextRendezvous": (*_START, "result"),
    "KeepAliveTimer": _START,
    "SetClosed": _START,
    "SyncRead": _SYNC,
    "SyncCached": ("pc",),
    "SyncWriteWon": ("store", *_SYNC),
    "SyncWriteLost": _SYNC,
    "KeepAlive": _APPLY,
    "AddToParticipants": _APPLY,
    "AddToWaitList": _APPLY,
    "AddToRedundancyList": _APPLY,
    "RemoveFromParticipants": _APPLY,
    "RemoveFromWaitList": _APPLY,
    "RemoveFromRedundancyList": (*_APPLY, "opDl"),
    "MarkRendezvousComplete": _APPLY,
    "MarkRendezvousClosed": _APPLY,
    "Delay": ("pc",),
    "Finish": ("pc", "op", "opDl", "result", "view"),
    "ErrorClosed": _STOP,
    "GracefulExit": _STOP,
    "ErrorTimeout": ("pc", "op", "opDl", "result"),
    # The node is gone: what the spec's Crash does to its variables is not observed.
    "Crash": (),
    # is_closed() / num_nodes_waiting() of the real handler (ReadOnlySyncs = TRUE).
    "ReadOnlySync": ("local", "fresh"),
}

#: Header settings that are spec constants, by the same name.
_SETTINGS = (
    "Variant",
    "MinNodes",
    "MaxNodes",
    "Closers",
    "MaxCrashes",
    "JoinTimeout",
    "LastCallTimeout",
    "CloseTimeout",
    "HeartbeatTimeout",
    "KeepAliveInterval",
    "KeepAliveMaxAttempt",
    "RollbackPeriod",
    "SleeperWakesEarly",
    "ReadOnlySyncs",
    "CacheTicks",
    "TimerFiresAnyTime",
    "CloseAnyTime",
)

#: Settings a trace may leave out: the spec's defaults (a read cache shorter than a tick; the
#: models' reductions of when the heartbeat timer fires and set_closed() is called).
_DEFAULTS = {"CacheTicks": 1, "TimerFiresAnyTime": False, "CloseAnyTime": False}

#: The time model and what the contract asks beyond the table (``tracecheck contract``).
_NOTES = (
    "**Whole ticks.** Every time-based decision (an op deadline passed, a heartbeat due or "
    "expired, the last call passed, the read cache valid) is taken on a clock that reads a "
    "whole number of ticks, and every clock reading of one step reads the same tick. A `Tick` "
    "event, logged by the environment actor `clock`, falls between the events of the steps "
    "before and after the moment that clock moved on. Settings are in ticks, and so must be "
    "the durations an implementation hard-codes (torch 2.13: the 1 s SYNC sleep and the 5 s "
    "rollback window, so one tick is one torch second).",
    "**One step at a time.** Each logged step (an op start; a sync together with the decision "
    "and the business function after it, two events; a read-only sync) runs under one lock "
    "shared by every node of the run (a thread lock, and an `flock` across processes), and "
    "reads the clock inside it, so the events' order is the order in which the store saw the "
    "steps and time moved on. Waits (a sleep, a wait for a store change) happen outside the "
    "lock. Per-process logs are merged by a system-wide monotonic stamp taken inside the lock.",
    "**The read cache and the tick.** A sync served from the read cache (`SyncCached`: no "
    "store call, no sanitize) is allowed while the node's last real sync is less than "
    "`CacheTicks` ticks old: 1 (the default) means within the same tick; 2 means also in the "
    "next tick (torch 2.13's inclusive `now - last_sync <= 1 s` on a whole-second clock). "
    "`fresh` is logged as whether the cache would serve at the step's tick. A node that sleeps "
    "after SYNC syncs again only after a `Tick`; one that waits for a store change and "
    "invalidates its cache on waking sets `SleeperWakesEarly`.",
    "**Steps that find nothing to do are logged as what they are.** With `TimerFiresAnyTime` "
    "every firing of the heartbeat timer is a `KeepAliveTimer`, whose op decides on the "
    "node's copy (`KeepAlive` when due, else `Finish`); with `CloseAnyTime` every "
    "`set_closed()` / `shutdown()` is a `SetClosed`, from an idle or a stopped node (a stale "
    "copy that still shows the rendezvous open decides `MarkRendezvousClosed`, loses the CAS, "
    "reloads and finishes). With the defaults (the models' reductions) a timer firing with "
    "nothing due is logged as a `ReadOnlySync`, and `SetClosed` only on an open store.",
    "**Only state the implementation has.** `Crash` logs no post-state (the node is gone; the "
    "spec forgets its copy). `ErrorClosed` and `GracefulExit` log the control state only: the "
    "copy, its token and its read cache stay, as `is_closed()` after a RendezvousClosedError "
    "answers from them. `tokenCurrent` is never logged.",
    "**Node order.** The header lists `nodes` in the implementation's rank order, the order in "
    "which completion hands out ranks 0, 1, ...: the spec's `NodeIndex` is a node's position "
    "there. torch 2.13 sorts `_NodeDesc`s by `addr` as a string, then `pid` and `local_id` as "
    "integers (`protoref.torch.values.desc_order`), so `10.0.0.10_7_0` comes before "
    "`10.0.0.8_7_0` and `h_10_0` after `h_9_0`.",
    "**Library pieces.** `protoref.rendezvous.runtime.handler_trace.HandlerTracer` (the step lock, "
    "thread lock and `flock`; per-process raw records, `record()` for any implementation's "
    "event) and `merge` (one trace from every process's records: `Tick` events from the "
    "records' ticks, `seq` and `lamport` renumbered, store tokens checked against the order); "
    "`protoref.rendezvous.runtime.clock.TickClock` and `protoref.torch.timing.TickTime` (a "
    "whole-tick clock, pinned inside a step); `protoref.rendezvous.trace.events.EVENT_MODELS` "
    "and `POST_FIELDS` "
    "(the schema the events are validated against). `protoref.torch.observe` puts them around "
    "torch's handler, which was not written to be traced.",
)


def _node_index(traces: Sequence[Trace]) -> Mapping[str, str]:
    """NodeIndex: a node's position in the header's nodes (sorted in the _NodeDesc order).
    Traces batch only when their node sets agree, so the first header speaks for all."""
    nodes = traces[0].header.nodes
    body = " @@ ".join(f"{format_value(n)} :> {i}" for i, n in enumerate(nodes))
    return {"NodeIndex": f"({body})"}


RENDEZVOUS = ProtocolMap(
    protocol="rendezvous",
    module="DynamicRendezvous",
    constants={
        "Nodes": "{nodes}",
        **{name: f"{{settings[{name}]}}" for name in _SETTINGS},
        # The store's sentinel: any value a state record compares with (and differs from).
        "NoState": '[tvNoState |-> "NoState"]',
        # deadline = None: an integer, since the spec compares it with deadlines (>= -1).
        "NoDeadline": "-2",
    },
    setting_defaults=_DEFAULTS,
    notes=_NOTES,
    derive=_node_index,
    actions=(
        # Tick has no acting node: the header's environment actor "clock" logs it.
        ActionMap(event="Tick", actor="env:clock"),
        *(
            ActionMap(event=event, params=("n",), post={v: _POST[v] for v in post}, actor="n")
            for event, post in _TABLE.items()
        ),
    ),
    arg_kinds={"n": "node"},
    # A run finishes when no node is left to act (the simulator's step() has nothing to do):
    # then the spec, too, has every node stopped or crashed.
    quiescence={
        "every node stopped or crashed (pc)": (
            '\\A tvN \\in Nodes : pc[tvN] \\in {"stopped", "crashed"}'
        )
    },
)
