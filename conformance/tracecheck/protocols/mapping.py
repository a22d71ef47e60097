"""The declarative map from trace events to spec actions, one table per protocol.

A row says: the event named X is the spec action X (the names are equal by contract), called
with these parameters (the acting node or a logged argument, in the action's parameter order),
and after the step these expressions over the primed spec variables must equal these logged
post-state fields. From the table :mod:`tracecheck.replay.tracespec` generates the TLA+ wrappers, so
the trace spec reuses the spec's own actions and never re-implements them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from tracecheck.traces.load import Trace

#: Ids a window start state dropped: per creating node, runs ``(first, last)`` of its counter.
WindowIds = Mapping[str, Sequence[tuple[int, int]]]

__all__ = ["NODE", "ActionMap", "ProtocolMap", "WindowIds", "spec_actions", "spec_writers"]

#: In ``ActionMap.params``, the acting node (``event.node``) rather than a logged argument.
NODE = "node"


class ActionMap(BaseModel):
    """How one trace event replays as one spec step."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: The event name, which is also the TLA+ action's name.
    event: str = Field(pattern=r"^[A-Z][A-Za-z0-9]*$")
    #: The action's parameters in order: ``"node"`` or the name of a field of ``args``.
    params: tuple[str, ...] = ()
    #: Post-state checks: logged ``post`` field -> TLA+ expression over primed variables, where
    #: ``@`` stands for the acting node, e.g. ``{"owners": "owners'[@]"}``.
    post: Mapping[str, str] = Field(default_factory=dict)
    #: Who takes the step, which the event's ``node`` must be: a logged argument (``"w"``), a
    #: field of one (``"m.src"``: a retry is the sender's), or an environment actor of the
    #: header (``"env:barrier"``); alternatives joined by ``|`` when the implementation's state
    #: decides (``"msg.dst|msg.src"``: autograd's Discard is logged by the receiver's agent, or
    #: by the sender's when the receiver is dead). None: the acting node is a parameter
    #: (``"node"``) already.
    actor: str | None = Field(
        default=None,
        pattern=r"^(env:[^\s|]+|[A-Za-z_]\w*(\.[A-Za-z_]\w*)*)(\|[A-Za-z_]\w*(\.[A-Za-z_]\w*)*)*$",
    )
    #: The step takes a message from the network: in schema 4 its event names the send
    #: (``sent_by``), and its Lamport clock must be after the send's.
    receives: bool = False

    @property
    def args(self) -> tuple[str, ...]:
        """The logged argument names the event must carry."""
        return tuple(p for p in self.params if p != NODE)

    @model_validator(mode="after")
    def _someone_acts(self) -> ActionMap:
        if self.actor is None and NODE not in self.params:
            raise ValueError(
                f"{self.event}: say who takes the step (actor: an argument, arg.field or "
                "env:<name>), or pass the acting node as a parameter"
            )
        if self.actor is not None and not self.actor.startswith("env:"):
            for choice in self.actor.split("|"):
                if choice.split(".")[0] not in self.args:
                    raise ValueError(f"{self.event}: actor {self.actor!r} names no argument")
        return self


class ProtocolMap(BaseModel):
    """Everything the checker needs to replay one protocol's traces through its spec."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    protocol: str
    #: The spec module the trace spec EXTENDS (in ``spec/<protocol>/``).
    module: str
    #: The spec's tuple of all variables and its initial predicate.
    vars: str = "vars"
    init: str = "Init"
    #: Spec constants as TLA+ expressions; ``{nodes}`` is the header's nodes as a set of strings,
    #: ``{settings[name]}`` a header setting rendered as TLA+.
    constants: Mapping[str, str] = Field(default_factory=dict)
    #: Header settings a trace may leave out, with the value (as JSON, like a header's) they
    #: then take: knobs whose default is what most implementations do.
    setting_defaults: Mapping[str, JsonValue] = Field(default_factory=dict)
    #: What the trace contract says beyond the table (e.g. how time is observed), one
    #: paragraph each; ``tracecheck contract`` prints them.
    notes: tuple[str, ...] = ()
    actions: tuple[ActionMap, ...]
    #: Events that mark a shape the spec leaves out on purpose: event name -> the shape and
    #: where it is written down. A trace is rejected at such an event, saying so ("outside the
    #: spec: ..."), rather than at a later event no spec step explains.
    outside: Mapping[str, str] = Field(default_factory=dict)
    #: Spec actions that are never logged, each with the reason.
    hidden: Mapping[str, str] = Field(default_factory=dict)
    #: Spec actions the trace spec may take between two events (unlogged steps the
    #: implementation really performs), at most ``max_hidden`` in a row.
    hidden_steps: tuple[str, ...] = ()
    max_hidden: int = Field(default=0, ge=0)
    #: Constants computed from the traces of a batch (e.g. id bounds that only need to be
    #: large enough): traces -> name -> TLA+ text. Traces batch when their other constants agree.
    derive: Callable[[Sequence[Trace]], Mapping[str, str]] | None = None
    #: What the logged arguments hold, by name (the same name means the same thing in every
    #: event): ``"node"`` (one of the header's nodes), ``"id"`` (a ``[node, n]`` pair, n >= 1),
    #: ``"id?"`` (an id or ``[]``), ``"message"`` (a record whose ``src``, ``dst`` and ``owner``
    #: are nodes and whose ``rref``, ``fork``, ``parent`` are ids or ``[]``). Checked before
    #: TLC runs, so a value outside the spec's domains is a rejection at its event, not an
    #: evaluation error of TLC's that stops the whole batch.
    arg_kinds: Mapping[str, Literal["node", "id", "id?", "message"]] = Field(default_factory=dict)
    #: The spec's quiescence, required at the last state of a trace whose run says it finished
    #: (its end line): named conditions (TLA+ over the unprimed spec variables), so that a
    #: rejection says which one fails. Empty: a finished run is only checked for lost lines.
    quiescence: Mapping[str, str] = Field(default_factory=dict)
    #: A long trace in windows (tracecheck.replay.stream): a window's start state (the spec's
    #: variables by name, as TLC printed them) -> the state to start from instead, and the ids
    #: that state no longer holds (per creator, runs ``(first, last)`` of the counter): what a
    #: spec whose state grows with the trace drops of what no later step can read, so that
    #: windows stay flat; no later event may name such an id. None: windows start from the
    #: states as they are.
    window_start: Callable[[Mapping[str, object]], tuple[dict[str, object], WindowIds]] | None = (
        None
    )

    @model_validator(mode="after")
    def _events_unique(self) -> ProtocolMap:
        names = [a.event for a in self.actions]
        duplicates = {n for n in names if names.count(n) > 1}
        if duplicates:
            raise ValueError(f"events mapped twice: {sorted(duplicates)}")
        overlap = set(names) & set(self.hidden)
        if overlap:
            raise ValueError(f"actions both mapped and hidden: {sorted(overlap)}")
        return self

    def action(self, event: str) -> ActionMap | None:
        return next((a for a in self.actions if a.event == event), None)

    def unmapped(self, spec_action_names: set[str]) -> set[str]:
        """Spec actions neither mapped nor listed as hidden (the static coverage check)."""
        return spec_action_names - {a.event for a in self.actions} - set(self.hidden)


_DEFINITION = re.compile(r"^([A-Z][A-Za-z0-9]*)(?:\(([^)]*)\))?\s*==", re.MULTILINE)


def spec_actions(module_text: str, next_name: str = "Next") -> dict[str, tuple[str, ...]]:
    """The spec's actions, with their parameters, read from the module's source.

    From ``Next``, descend through *composites* (definitions that prime nothing themselves and
    only combine other definitions, like ``Next == AppNext \\/ SystemNext`` or a message
    dispatch) and stop at *actions* (definitions that prime a variable or say UNCHANGED). A light
    reading of the source, enough for the static check that every action is mapped or hidden.
    """
    definitions = _definitions(module_text)
    actions: dict[str, tuple[str, ...]] = {}
    todo, seen = [next_name], {next_name}
    while todo:
        name = todo.pop()
        params, body = definitions.get(name, ((), ""))
        if name != next_name and _acts(body):
            actions[name] = params
            continue
        for word in sorted(set(_WORD.findall(body)) & definitions.keys() - seen):
            seen.add(word)
            todo.append(word)
    return actions


_WORD = re.compile(r"\b[A-Z][A-Za-z0-9]*\b")


def spec_writers(module_text: str, variable: str, next_name: str = "Next") -> set[str]:
    """The spec actions (see :func:`spec_actions`) that may prime ``variable``: their own text
    or that of a definition they use, transitively, says ``variable'`` (a light reading of the
    source, like spec_actions; it may over-approximate, never miss a textual write)."""
    definitions = _definitions(module_text)
    primed = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(variable)}'")
    writers: set[str] = set()
    for action in spec_actions(module_text, next_name):
        todo, seen = [action], {action}
        while todo:
            _, body = definitions.get(todo.pop(), ((), ""))
            if primed.search(body):
                writers.add(action)
                break
            for word in sorted(set(_WORD.findall(body)) & definitions.keys() - seen):
                seen.add(word)
                todo.append(word)
    return writers


def _definitions(module_text: str) -> dict[str, tuple[tuple[str, ...], str]]:
    """Each top-level definition's parameters and body, comments stripped."""
    definitions: dict[str, tuple[tuple[str, ...], str]] = {}
    matches = list(_DEFINITION.finditer(module_text))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(module_text)
        params = tuple(p.strip() for p in (match[2] or "").split(",") if p.strip())
        definitions[match[1]] = (params, _strip_comments(module_text[match.end() : end]))
    return definitions


def _acts(body: str) -> bool:
    return "'" in body or "UNCHANGED" in body


def _strip_comments(text: str) -> str:
    text = re.sub(r"\(\*.*?\*\)", "", text, flags=re.DOTALL)
    return re.sub(r"\\\*[^\n]*", "", text)
