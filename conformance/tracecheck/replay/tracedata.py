"""The events of a batch as TLA+ value text: each event checked against its mapped action and
turned into one line ``<<event, node, <<params>>, <<post values>>>>``, the lines written as a TLA+
constant module or as the Java reader's file, and the spec constants a trace's header sets.
:mod:`tracecheck.replay.tracespec` builds the trace spec around them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from tracecheck.protocols.mapping import NODE, ActionMap, ProtocolMap
from tracecheck.tla.values import format_value
from tracecheck.traces.jsonvalue import JsonValueError, tla_text
from tracecheck.traces.load import Trace, TraceFormatError, TraceHeader
from traceformat.deltas import UNCHANGED, Delta, DeltaError, element_text

__all__ = [
    "DATA_FILE",
    "DATA_MODULE",
    "READER_MODULE",
    "Row",
    "constants_for",
    "data_file",
    "data_module",
    "delta_error",
    "event_lines",
    "event_rows",
    "header_constants",
    "reader_data_module",
]


DATA_MODULE = "TraceData"


#: The events for the Java reader, and the module whose operator it overrides.
DATA_FILE = "TraceData.txt"


READER_MODULE = "TraceIO"


def _tla(value: object, trace: Trace, index: int, field: str) -> str:
    try:
        return tla_text(value, field)
    except JsonValueError as exc:
        raise TraceFormatError(trace.source, trace.lines[index], str(exc)) from exc


@dataclass(frozen=True)
class _Action:
    """What rendering needs of one mapped action, worked out once per batch."""

    #: The logged argument names, and the parameters in order (:data:`NODE` or an argument).
    args: frozenset[str]
    params: tuple[str, ...]
    #: (logged post field, TLA+ expression), in the mapping's order.
    post: tuple[tuple[str, str], ...]
    post_fields: frozenset[str]
    #: Field paths for error messages: ``args.<param>`` and ``post.<field>``.
    param_paths: tuple[str, ...]
    post_paths: tuple[str, ...]
    #: The event line's opening, ``<<"Event", ``.
    head: str

    @classmethod
    def of(cls, action: ActionMap) -> _Action:
        return cls(
            args=frozenset(action.args),
            params=action.params,
            post=tuple(action.post.items()),
            post_fields=frozenset(action.post),
            param_paths=tuple(f"args.{p}" for p in action.params),
            post_paths=tuple(f"post.{f}" for f in action.post),
            head=f"<<{format_value(action.event)}, ",
        )


class Row(NamedTuple):
    """One event: its action, node, parameter values and (expression, value) post pairs, as
    logged JSON (a tuple, not a dataclass: one is built per event)."""

    action: _Action
    node: str
    params: tuple[Any, ...]
    post: tuple[tuple[str, Any], ...]


def _check_row(trace: Trace, index: int, mapping: ProtocolMap) -> None:
    """Raise the TraceFormatError for an event that does not fit its mapped action."""
    event = trace.events[index]
    line = trace.lines[index]
    action = mapping.action(event.event)
    if action is None:
        known = ", ".join(sorted(a.event for a in mapping.actions))
        raise TraceFormatError(
            trace.source, line, f"field event: {event.event!r} maps to no spec action ({known})"
        )
    missing = [a for a in action.args if a not in event.args]
    extra = sorted(set(event.args) - set(action.args))
    if missing or extra:
        raise TraceFormatError(
            trace.source,
            line,
            f"field args: {event.event} takes {list(action.args)}; "
            f"missing {missing}, unexpected {extra}",
        )
    absent = [f for f in action.post if f not in event.post]
    if absent:
        raise TraceFormatError(trace.source, line, f"field post: {event.event} needs {absent}")


def _rows(trace: Trace, actions: dict[str, _Action], mapping: ProtocolMap) -> list[Row]:
    """Each event of ``trace`` as a row; the first one that does not fit its action raises."""
    rows: list[Row] = []
    append = rows.append
    for index, event in enumerate(trace.events):
        action = actions.get(event.event)
        args, post = event.args, event.post
        if action is None or args.keys() != action.args or not action.post_fields <= post.keys():
            _check_row(trace, index, mapping)
            raise AssertionError(
                "unreachable: _check_row raises for this event"
            )  # pragma: no cover
        node = event.node
        params = tuple([node if p == NODE else args[p] for p in action.params])
        append(Row(action, node, params, tuple([(e, post[f]) for f, e in action.post])))
    return rows


#: A set logged as the node's previous one: nothing removed, nothing added.
_UNCHANGED_TEXT = "<<{}, {}>>"


class _Formatter:
    """JSON to TLA+ text, memoised by canonical JSON text: ids, user records and messages
    recur in thousands of events. A value that has no TLA+ form is a TraceFormatError."""

    def __init__(self) -> None:
        self._memo: dict[bytes, str] = {}
        # Strings (nodes, names) by themselves: their text depends on nothing else, and they
        # are most of the parameters (no canonical JSON text to build for them).
        self._strings: dict[str, str] = {}

    def __call__(self, value: Any, trace: Trace, index: int, field: str) -> str:
        if value is UNCHANGED:
            return _UNCHANGED_TEXT
        kind = type(value)
        if kind is str:
            text = self._strings.get(value)
            if text is None:
                text = self._strings[value] = _tla(value, trace, index, field)
            return text
        if kind is Delta:
            removed = self._set(value.removed, trace, index, field)
            added = self._set(value.added, trace, index, field)
            return f"<<{removed}, {added}>>"
        return self._text(element_text(value), value, trace, index, field)

    def _text(self, key: bytes, value: Any, trace: Trace, index: int, field: str) -> str:
        text = self._memo.get(key)
        if text is None:
            text = self._memo[key] = _tla(value, trace, index, field)
        return text

    def _set(self, elements: dict[bytes, Any], trace: Trace, index: int, field: str) -> str:
        if not elements:
            return "{}"
        parts = sorted([self._text(k, e, trace, index, field) for k, e in elements.items()])
        return "{" + ", ".join(parts) + "}"


def constants_for(trace: Trace, mapping: ProtocolMap) -> dict[str, str]:
    """The spec constants of this trace as TLA+ expressions (traces batch when they agree);
    constants the mapping derives from a whole batch are added by :func:`render_batch`."""
    return header_constants(trace.header, trace.source, mapping)


def header_constants(header: TraceHeader, source: str, mapping: ProtocolMap) -> dict[str, str]:
    """:func:`constants_for` from a trace's header alone (``source`` names it in errors)."""
    nodes = format_value(frozenset(header.nodes))
    settings: dict[str, str] = {}
    for k, v in {**mapping.setting_defaults, **header.settings}.items():
        try:
            settings[k] = tla_text(v, f"header.settings.{k}")
        except JsonValueError as exc:
            raise TraceFormatError(source, 1, str(exc)) from exc
    rendered: dict[str, str] = {}
    for name, template in mapping.constants.items():
        try:
            rendered[name] = template.format(nodes=nodes, settings=settings)
        except KeyError as exc:
            raise TraceFormatError(
                source, 1, f"field settings: the spec constant {name} needs {exc}"
            ) from None
    return rendered


def event_lines(
    traces: Sequence[Trace],
    rows: Sequence[Sequence[Row]],
    posts: Sequence[Sequence[Sequence[Any]]],
) -> list[list[str]]:
    """Per trace, each event as one line of TLA+ value text:
    ``<<event, node, <<params>>, <<post values>>>>``."""
    fmt = _Formatter()
    nodes: dict[str, str] = {}
    out: list[list[str]] = []
    for trace, events, values in zip(traces, rows, posts, strict=True):
        lines: list[str] = []
        append = lines.append
        for i, ((action, node, params, _), post) in enumerate(zip(events, values, strict=True)):
            node_text = nodes.get(node)
            if node_text is None:
                node_text = nodes[node] = format_value(node)
            texts = [fmt(v, trace, i, f) for f, v in zip(action.param_paths, params, strict=True)]
            logged = [fmt(v, trace, i, f) for f, v in zip(action.post_paths, post, strict=True)]
            append(f"{action.head}{node_text}, <<{', '.join(texts)}>>, <<{', '.join(logged)}>>>>")
        out.append(lines)
    return out


def data_module(
    traces: Sequence[Trace], lines: Sequence[Sequence[str]], parameters: Sequence[str] = ()
) -> str:
    """The traces as a TLA+ constant module: one event per line (SANY takes minutes over one
    long line), then ``parameters`` (definitions the trace spec reads besides ``Traces``)."""
    out = [f"---- MODULE {DATA_MODULE} ----", "\\* Generated by tracecheck; do not edit."]
    out += ["EXTENDS Integers, TLC  \\* unary minus; :> and @@ of logged functions", ""]
    for number, (trace, events) in enumerate(zip(traces, lines, strict=True), 1):
        out.append(f"\\* {trace.source}")
        out.append(f"Trace{number} == <<")
        out += [f"  {line}," for line in events[:-1]] + [f"  {events[-1]}", ">>", ""]
    out.append("Traces == <<" + ", ".join(f"Trace{n}" for n in range(1, len(traces) + 1)) + ">>")
    out += [*parameters, "===="]
    return "\n".join(out) + "\n"


def data_file(lines: Sequence[Sequence[str]]) -> str:
    """The traces for the Java reader (java/tlc2/overrides/TLCOverrides.java): ``#`` before each
    trace, then one event per line."""
    out: list[str] = []
    for events in lines:
        out.append("#")
        out += events
    return "\n".join(out) + "\n"


def reader_data_module(parameters: Sequence[str] = ()) -> str:
    """The data module whose events the Java reader reads from :data:`DATA_FILE`, then
    ``parameters`` (as :func:`data_module`'s)."""
    return "\n".join(
        [
            f"---- MODULE {DATA_MODULE} ----",
            f"\\* Generated by tracecheck; do not edit. The events: {DATA_FILE}, one per line.",
            f"EXTENDS {READER_MODULE}, Integers",
            f'Traces == TVRead("{DATA_FILE}")',
            *parameters,
            "====",
            "",
        ]
    )


def delta_error(trace: Trace, rows: Sequence[Row], exc: DeltaError) -> TraceFormatError:
    """A delta that cannot be applied, as the TraceFormatError naming its event's line and
    post field."""
    action = rows[exc.index].action
    field = next((f for f, e in action.post if e == exc.key), exc.key)
    return TraceFormatError(
        trace.source, trace.lines[exc.index], f"field post.{field}: {exc.problem}"
    )


def event_rows(traces: Sequence[Trace], mapping: ProtocolMap) -> list[list[Row]]:
    """Per trace, each event as a :class:`Row`; the first event that does not fit its mapped
    action raises its TraceFormatError."""
    actions = {a.event: _Action.of(a) for a in mapping.actions}
    return [_rows(t, actions, mapping) for t in traces]
