"""Trace events of the rendezvous: one model per DynamicRendezvous.tla action, one union.

Each event is ``{"kind": "event", "event": <action>, "node", "seq", "lamport", "args", "post"}``.
``args`` is ``{"n": <node>}`` (every node action's one parameter; ``Tick`` has none and is logged
by the pseudo-node ``"clock"``). ``post`` holds the acting node's post-state of the spec variables
the action changes, by their TLA+ names: ``local``, ``dirty``, ``fresh``, ``pc``, ``op``,
``opDl``, ``result``, ``view`` (the node's slice) and, for ``SyncWriteWon``, ``store``.
``tokenCurrent`` is not logged: it is a relation between a node's token and the store, which the
store's versions and the logged ``store`` pin down.

Values are the spec's abstraction of the implementation's state at the step's time ``now``:
the last-call deadline as an option, ``[]`` for ``None`` (the spec's ``NoDeadline``) or ``[k]``
with ``k`` the ticks left (``-1`` once passed): one JSON type for both, since TLC cannot compare
an integer with a string,
heartbeats as ages in ticks saturated at ``HeartbeatExpiry + 1``, the op deadline as ticks left
saturated at ``-(RollbackPeriod + 1)`` (0 when no op runs); nodes are their descriptor strings,
ordered by the header's (sorted) ``nodes``; dicts are ``{"#map": [[k, v], ...]}`` (``[]`` when
empty), sets
``{"#set": [...]}``, the sentinel ``"NoState"``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import Enum
from typing import Annotated, Any, Final, Literal, Protocol, Union

from pydantic import Field, JsonValue, TypeAdapter, create_model

from protoref.rendezvous.core.state import NodeDesc, RendezvousSettings, RendezvousState, View
from protoref.tracing import FrozenModel, TraceEventBase, sort_key, tla_set

__all__ = [
    "EVENT_ADAPTER",
    "EVENT_MODELS",
    "POST_FIELDS",
    "RendezvousTraceEvent",
    "TracedRunner",
    "make_event",
    "spec_value",
]

CLOCK_NODE: Final = "clock"


class TracedHolder(Protocol):
    """What an event reads of a node's state holder (the runtime's ``StateHolder``)."""

    @property
    def state(self) -> RendezvousState: ...

    @property
    def dirty(self) -> bool: ...

    def fresh(self, now: float) -> bool: ...


class TracedRunner(Protocol):
    """What an event reads of a node (the runtime's ``NodeRunner``): its spec variables.

    A protocol, so that this package depends on the core only and every driver (the
    handler, the simulator, torch's observer) can log through it."""

    @property
    def node(self) -> NodeDesc: ...

    @property
    def settings(self) -> RendezvousSettings: ...

    @property
    def holder(self) -> TracedHolder: ...

    @property
    def pc(self) -> Enum: ...

    @property
    def op(self) -> Enum | None: ...

    @property
    def deadline(self) -> float: ...

    @property
    def result(self) -> Enum: ...

    @property
    def view(self) -> View | None: ...


# --------------------------------------------------------------------------- values


def _map(items: Mapping[NodeDesc, int]) -> JsonValue:
    """A dict as a TLA+ function; the empty one is ``[]`` (``<<>>``, as the ITF rules say)."""
    pairs: list[JsonValue] = [[str(k), v] for k, v in items.items()]
    if not pairs:
        return []
    return {"#map": sorted(pairs, key=sort_key)}


def _nodes(nodes: frozenset[NodeDesc]) -> dict[str, JsonValue]:
    return tla_set([str(n) for n in nodes])


def spec_value(
    s: RendezvousState, settings: RendezvousSettings, now: float, tick: float = 1.0
) -> JsonValue:
    """The spec's record for state ``s`` at time ``now`` (see the module docstring); times
    are counted in ticks of ``tick`` seconds (the simulator's time is in ticks already)."""
    cap = math.floor(settings.heartbeat_expiry / tick) + 1
    left = None if s.deadline is None else math.ceil((s.deadline - now) / tick)
    deadline: JsonValue = [] if left is None else [max(left, -1)]
    ages = {k: min(math.floor((now - t) / tick), cap) for k, t in s.last_heartbeats.items()}
    return {
        "round": s.round,
        "complete": s.complete,
        "deadline": deadline,
        "closed": s.closed,
        "participants": _map(s.participants),
        "waitList": _nodes(s.wait_list),
        "redundancyList": _nodes(s.redundancy_list),
        "lastHeartbeats": _map(ages),
    }


def _view(view: View | None) -> JsonValue:
    if view is None:
        return {"round": -1, "ranks": []}
    return {"round": view.round, "ranks": _map(view.ranks)}


def _op_dl(runner: TracedRunner, now: float, tick: float) -> int:
    if runner.op is None:
        return 0
    floor = -math.floor(runner.settings.rollback_period / tick) - 1
    return max(math.ceil((runner.deadline - now) / tick), floor)


# --------------------------------------------------------------------------- models


class NodeArgs(FrozenModel):
    """The acting node: every node action's one parameter ``n``."""

    n: str


class NoArgs(FrozenModel):
    """``Tick`` has no parameter."""


#: The type of each logged variable.
_TYPES: Final[dict[str, Any]] = {
    "store": JsonValue,
    "local": JsonValue,
    "dirty": bool,
    "fresh": bool,
    "pc": str,
    "op": str,
    "opDl": int,
    "result": str,
    "view": JsonValue,
}


_START = ("pc", "op", "opDl")
_SYNC = ("local", "dirty", "fresh", "pc")
_APPLY = ("local", "dirty", "pc")
_STOP = ("pc", "op", "opDl", "result")  # the copy, token and read cache stay

#: Event name -> the post-state fields it logs (the spec variables the action changes, but
#: ``tokenCurrent``).
POST_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "Tick": (),
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
    "Crash": (),  # the node is gone: nothing of it is observed
    "ReadOnlySync": ("local", "fresh"),
}


def _event_model(name: str) -> type[TraceEventBase]:
    args: Any = NoArgs if name == "Tick" else NodeArgs
    event: Any = Literal[name]
    post: Any = create_model(
        f"{name}Post",
        __base__=FrozenModel,
        __module__=__name__,
        **{f: (_TYPES[f], ...) for f in POST_FIELDS[name]},  # type: ignore[call-overload]
    )
    model: type[TraceEventBase] = create_model(
        name,
        __base__=TraceEventBase,
        __module__=__name__,
        event=(event, name),
        args=(args, ...),
        post=(post, ...),
    )
    return model


#: Event name -> event model: the trace schema's action names.
EVENT_MODELS: Final[dict[str, type[TraceEventBase]]] = {n: _event_model(n) for n in POST_FIELDS}

#: One event of any action, discriminated by ``event``.
RendezvousTraceEvent: Any = Annotated[
    Union[tuple(EVENT_MODELS.values())],  # noqa: UP007 - a runtime-built union
    Field(discriminator="event"),
]
#: Parses one event line (``EVENT_ADAPTER.validate_json(line)``).
EVENT_ADAPTER: Final[TypeAdapter[Any]] = TypeAdapter(RendezvousTraceEvent)


def make_event(
    name: str,
    runner: TracedRunner | None,
    seq: int,
    lamport: int,
    *,
    now: float,
    store_state: RendezvousState | None = None,
    tick: float = 1.0,
) -> TraceEventBase:
    """The event of action ``name`` taken by ``runner``'s node at ``now`` (``None``: Tick).

    ``store_state`` is the store's state after the step (``SyncWriteWon`` logs it); ``tick``
    the length of one spec tick in the runner's time unit.
    """
    cls: type[TraceEventBase] = EVENT_MODELS[name]
    post_cls: Any = cls.model_fields["post"].annotation
    if runner is None:
        fields = {"args": NoArgs(), "post": post_cls()}
        return cls(node=CLOCK_NODE, seq=seq, lamport=lamport, **fields)
    settings = runner.settings
    holder = runner.holder
    values: dict[str, Any] = {
        "local": lambda: spec_value(holder.state, settings, now, tick),
        "dirty": lambda: holder.dirty,
        "fresh": lambda: holder.fresh(now),
        "pc": lambda: runner.pc.value,
        "op": lambda: "none" if runner.op is None else runner.op.value,
        "opDl": lambda: _op_dl(runner, now, tick),
        "result": lambda: runner.result.value,
        "view": lambda: _view(runner.view),
        "store": lambda: (
            "NoState" if store_state is None else spec_value(store_state, settings, now, tick)
        ),
    }
    post = post_cls(**{f: values[f]() for f in POST_FIELDS[name]})
    node = str(runner.node)
    fields = {"args": NodeArgs(n=node), "post": post}
    return cls(node=node, seq=seq, lamport=lamport, **fields)
