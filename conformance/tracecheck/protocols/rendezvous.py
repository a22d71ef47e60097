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
from pathlib import Path

from tracecheck.protocols.mapping import ActionMap, ProtocolMap
from tracecheck.tla.values import format_value
from tracecheck.traces.load import Trace

__all__ = ["RENDEZVOUS", "simulate"]

#: The spec's state record in the trace's encoding: the deadline as an option.
_STATE = (
    "LET tvS == {v} IN [tvS EXCEPT !.deadline = "
    "IF tvS.deadline = NoDeadline THEN <<>> ELSE <<tvS.deadline>>]"
)

#: TLA+ expression of each logged variable after the step; ``@`` is the acting node.
_POST = {
    "store": _STATE.format(v="store'"),
    "local": _STATE.format(v="local'[@]"),
    **{v: f"{v}'[@]" for v in ("dirty", "fresh", "pc", "op", "opDl", "result", "view")},
}

_START = ("pc", "op", "opDl")
_SYNC = ("local", "dirty", "fresh", "pc")
_APPLY = ("local", "dirty", "pc")
_STOP = ("pc", "op", "opDl", "result", "local", "fresh")

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
    "Crash": ("pc", "op", "opDl", "local", "dirty", "fresh"),
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
    derive=_node_index,
    event_schema="protoref.rendezvous.trace:EVENT_ADAPTER",
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


def simulate(seed: int, steps: int, out: Path) -> None:
    """One seeded random run of protoref's rendezvous simulator, its trace written to ``out``.

    Four nodes, min 2, max 3, any node may close from tick 6, agents asking ``is_closed()``,
    a join timeout of 6 ticks: 20 runs of 150 steps exercise every spec action (last call and
    completion, the wait and redundancy lists, close, graceful exit of a redundant node,
    read-only syncs, the rollback of a waiting node). (With the Reference epilogue a leave ends
    the complete round, so waiters rarely wait long; at the default 12 ticks no waiter's join
    timed out in 50 runs.)
    """
    from protoref.rendezvous.simulator import SimConfig, Simulator  # noqa: PLC0415 - lazy
    from protoref.tracing import JsonlSink  # noqa: PLC0415

    config = SimConfig(
        nodes=4,
        min_nodes=2,
        max_nodes=3,
        closers=4,
        close_after=6,
        read_only_syncs=True,
        join_timeout=6,
        # An exit op that times out (issue #21's rare paths): a participant that rejoins may
        # stall past its op deadline (7 ticks), so its heartbeat must outlive that (4 x 2),
        # or its own sync finds it dead and the exit op just finishes.
        stalls=True,
        keep_alive_max_attempt=4,
    )
    sink = JsonlSink(str(out))
    try:
        Simulator(seed, config, sink=sink).run(steps)
    finally:  # a run that raised keeps what it logged (the campaign validates it)
        sink.close()
