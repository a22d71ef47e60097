"""Rendering traces as TLA+: a constant data module and a trace spec that replays it.

TLC 2.15 has no Json module, so each trace becomes a constant in a generated module, one event
per line as a positional tuple ``<<event, node, <<params>>, <<post values>>>>`` (the encoding the
notes measured fastest; one long line takes SANY minutes to parse). The trace spec EXTENDS the
protocol spec, picks a trace ``t`` in Init (several traces share one TLC run), keeps a cursor
``l`` and a hidden-step counter ``h``, and consumes one event per step by conjoining the spec's
own action with the event's parameters and logged post-state. A state constraint records, per
trace, the furthest cursor reached and prints each new maximum: trace ``t`` is accepted when
its cursor passes the last event, and otherwise the first unmatched event is that maximum.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tracecheck.jsonvalue import JsonValueError, from_json
from tracecheck.mapping import NODE, ProtocolMap
from tracecheck.postdelta import Delta, DeltaPlan, element_text, encode_compact
from tracecheck.tlavalue import TLAValueError, format_value, parse_value
from tracecheck.traces import Trace, TraceFormatError

__all__ = [
    "DATA_MODULE",
    "TRACE_MODULE",
    "RenderedBatch",
    "constants_for",
    "printed_values",
    "render_batch",
]

DATA_MODULE = "TraceData"
TRACE_MODULE = "TraceSpec"
#: The PrintT tag of the furthest-cursor messages, parsed by :mod:`tracecheck.validate`.
MAX_TAG = "tv_max"


@dataclass(frozen=True)
class RenderedBatch:
    """The generated files of one TLC run over several traces with the same constants."""

    data_module: str
    trace_module: str
    cfg: str
    lengths: tuple[int, ...]


def _tla(value: object, trace: Trace, index: int, field: str) -> str:
    try:
        return format_value(from_json(value, field))
    except JsonValueError as exc:
        raise TraceFormatError(trace.source, trace.lines[index], str(exc)) from exc


@dataclass(frozen=True)
class _Row:
    """One event: name, node, parameters and (expression, value) post pairs, as logged JSON."""

    event: str
    node: str
    params: tuple[tuple[str, Any], ...]  # (field, value)
    post: tuple[tuple[str, Any], ...]  # (expression, value)
    fields: tuple[str, ...]  # the post fields, in the order of ``post``


def _row(trace: Trace, index: int, mapping: ProtocolMap) -> _Row:
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
    params = tuple((f"args.{p}", event.node if p == NODE else event.args[p]) for p in action.params)
    post = tuple((expr, event.post[f]) for f, expr in action.post.items())
    return _Row(event.event, event.node, params, post, tuple(action.post))


class _Formatter:
    """JSON to TLA+ text, memoised by canonical JSON text: ids, user records and messages
    recur in thousands of events. A value that has no TLA+ form is a TraceFormatError."""

    def __init__(self) -> None:
        self._memo: dict[str, str] = {}

    def __call__(self, value: Any, trace: Trace, index: int, field: str) -> str:
        if isinstance(value, Delta):
            removed = self._set(value.removed, trace, index, field)
            added = self._set(value.added, trace, index, field)
            return f"<<{removed}, {added}>>"
        key = element_text(value)
        text = self._memo.get(key)
        if text is None:
            text = self._memo[key] = _tla(value, trace, index, field)
        return text

    def _set(self, elements: dict[str, Any], trace: Trace, index: int, field: str) -> str:
        parts = sorted(self(e, trace, index, field) for e in elements.values())
        return "{" + ", ".join(parts) + "}"


def _event_tuple(trace: Trace, index: int, row: _Row, post: Sequence[Any], fmt: _Formatter) -> str:
    params = ", ".join(fmt(v, trace, index, field) for field, v in row.params)
    values = ", ".join(
        fmt(v, trace, index, f"post.{field}") for field, v in zip(row.fields, post, strict=True)
    )
    return f"<<{format_value(row.event)}, {format_value(row.node)}, <<{params}>>, <<{values}>>>>"


def constants_for(trace: Trace, mapping: ProtocolMap) -> dict[str, str]:
    """The spec constants of this trace as TLA+ expressions (traces batch when they agree);
    constants the mapping derives from a whole batch are added by :func:`render_batch`."""
    nodes = format_value(frozenset(trace.header.nodes))
    settings = {
        k: _tla(v, trace, 0, f"header.settings.{k}") for k, v in trace.header.settings.items()
    }
    rendered: dict[str, str] = {}
    for name, template in mapping.constants.items():
        try:
            rendered[name] = template.format(nodes=nodes, settings=settings)
        except KeyError as exc:
            raise TraceFormatError(
                trace.source, 1, f"field settings: the spec constant {name} needs {exc}"
            ) from None
    return rendered


def _data_module(
    traces: Sequence[Trace],
    rows: Sequence[Sequence[_Row]],
    posts: Sequence[Sequence[Sequence[Any]]],
) -> str:
    fmt = _Formatter()
    out = [f"---- MODULE {DATA_MODULE} ----", "\\* Generated by tracecheck; do not edit."]
    out += ["EXTENDS Integers, TLC  \\* unary minus; :> and @@ of logged functions", ""]
    for number, (trace, events, values) in enumerate(zip(traces, rows, posts, strict=True), 1):
        out.append(f"\\* {trace.source}")
        out.append(f"Trace{number} == <<")
        lines = [
            _event_tuple(trace, i, row, post, fmt)
            for i, (row, post) in enumerate(zip(events, values, strict=True))
        ]
        out += [f"  {line}," for line in lines[:-1]] + [f"  {lines[-1]}", ">>", ""]
    out.append("Traces == <<" + ", ".join(f"Trace{n}" for n in range(1, len(traces) + 1)) + ">>")
    out.append("====")
    return "\n".join(out) + "\n"


def _wrapper(mapping: ProtocolMap, index: int, plan: DeltaPlan) -> str:
    action = mapping.actions[index]
    call = action.event
    if action.params:
        call += "(" + ", ".join(f"tvE[3][{i}]" for i in range(1, len(action.params) + 1)) + ")"
    full: list[str] = []
    rebuilt: list[str] = []
    delta: list[str] = []
    updates: list[str] = []
    for i, expr in enumerate(action.post.values(), start=1):
        spec_value = expr.replace("@", "tvE[2]")
        key = plan.keys.get(expr)
        if key is None:
            full.append(f"     /\\ {spec_value} = tvE[4][{i}]")
            continue
        # The logged set is the node's previous one for this expression minus the removed
        # elements plus the added ones (tracecheck.postdelta); tvLog keeps it for the next.
        rebuilt.append(
            f"tvV{i} == (tvLog[<<{key}, tvE[2]>>] \\ tvE[4][{i}][1]) \\cup tvE[4][{i}][2]"
        )
        delta.append(f"        /\\ {spec_value} = tvV{i}")
        updates.append(f"![<<{key}, tvE[2]>>] = tvV{i}")
    body = list(full)
    if rebuilt:
        body += [
            "     /\\ LET " + "\n            ".join(rebuilt),
            "        IN",
            *delta,
            f"        /\\ tvLog' = [tvLog EXCEPT {', '.join(updates)}]",
        ]
    elif plan.keys:
        body.append("     /\\ UNCHANGED tvLog")
    return "\n".join(
        [
            f"Is{action.event} ==",
            "  /\\ tvCursor <= Len(Traces[tvTrace])",
            "  /\\ LET tvE == Traces[tvTrace][tvCursor] IN",
            f"     /\\ tvE[1] = {format_value(action.event)}",
            f"     /\\ {call}",
            *body,
            "  /\\ tvCursor' = tvCursor + 1 /\\ tvHidden' = 0 /\\ UNCHANGED tvTrace",
        ]
    )


def _trace_module(
    mapping: ProtocolMap,
    constants: dict[str, str],
    count: int,
    plan: DeltaPlan,
    nodes: Sequence[str],
) -> str:
    wrappers = [_wrapper(mapping, i, plan) for i in range(len(mapping.actions))]
    consume = " \\/ ".join(f"Is{a.event}" for a in mapping.actions)
    hidden = ""
    disjuncts = [consume]
    variables = "tvTrace, tvCursor, tvHidden"
    init_log = ""
    if plan.keys:
        variables += ", tvLog"
        node_set = format_value(frozenset(nodes))
        init_log = (
            f"             /\\ tvLog = [p \\in (1..{len(plan.keys)}) \\X {node_set} |-> {{}}]"
        )
    if mapping.hidden_steps and mapping.max_hidden:
        steps = " \\/ ".join(mapping.hidden_steps)
        frozen = "<<tvCursor, tvTrace, tvLog>>" if plan.keys else "<<tvCursor, tvTrace>>"
        hidden = (
            "\\* Unlogged steps the implementation really performs, a bounded number in a row.\n"
            f"HiddenStep == tvHidden < {mapping.max_hidden} /\\ ({steps}) "
            f"/\\ tvHidden' = tvHidden + 1 /\\ UNCHANGED {frozen}\n"
        )
        disjuncts.append("HiddenStep")
    overrides = "\n".join(f"TV_{name} == {expr}" for name, expr in constants.items())
    return (
        "\n".join(
            [
                f"---- MODULE {TRACE_MODULE} ----",
                "\\* Generated by tracecheck from the protocol's mapping table; do not edit.",
                f"EXTENDS {mapping.module}, {DATA_MODULE}, TLC, Naturals, Sequences",
                f"VARIABLES {variables}",
                overrides,
                "",
                f"TraceInit == tvTrace \\in 1..{count} /\\ tvCursor = 1 /\\ tvHidden = 0",
                f"             /\\ {mapping.init}",
                *([init_log] if init_log else []),
                "",
                *(w + "\n" for w in wrappers),
                hidden,
                "TraceNext == " + " \\/ ".join(disjuncts),
                "",
                "\\* Per trace, the furthest cursor reached; each new maximum is printed.",
                f"ASSUME \\A i \\in 1..{count} : TLCSet(i, 0)",
                "TraceWatch == tvCursor > TLCGet(tvTrace) => (TLCSet(tvTrace, tvCursor) /\\ "
                f"PrintT(<<{format_value(MAX_TAG)}, tvTrace, tvCursor>>))",
                "====",
            ]
        )
        + "\n"
    )


def render_batch(
    traces: Sequence[Trace], mapping: ProtocolMap, *, compact: bool = False
) -> RenderedBatch:
    """Render traces that share their constants into one data module, trace spec and cfg.

    ``compact`` logs set-valued post fields as differences (:mod:`tracecheck.postdelta`), which
    keeps the data module linear in the trace's length; the explain pass reads the literal
    values, so it renders without.
    """
    if not traces:
        raise ValueError("render_batch needs at least one trace")
    constants = constants_for(traces[0], mapping)
    for trace in traces[1:]:
        if constants_for(trace, mapping) != constants:
            raise ValueError(f"{trace.source}: its constants differ; render it in its own batch")
    if mapping.derive is not None:
        constants |= dict(mapping.derive(traces))
    rows = [[_row(t, i, mapping) for i in range(len(t.events))] for t in traces]
    shapes = [[(r.node, r.post) for r in events] for events in rows]
    if compact:
        plan, posts = encode_compact(shapes)
    else:
        plan = DeltaPlan(keys={})
        posts = plan.encode(shapes)
    nodes = sorted({r.node for events in rows for r in events})
    cfg = [
        "\\* Generated by tracecheck. Deadlock checking is off: a consumed trace has no",
        "\\* successor, and that is how it ends.",
        "INIT TraceInit",
        "NEXT TraceNext",
        "CONSTRAINT TraceWatch",
    ]
    if constants:
        cfg.append("CONSTANTS")
        cfg += [f"  {name} <- TV_{name}" for name in constants]
    return RenderedBatch(
        data_module=_data_module(traces, rows, posts),
        trace_module=_trace_module(mapping, constants, len(traces), plan, nodes),
        cfg="\n".join(cfg) + "\n",
        lengths=tuple(len(t.events) for t in traces),
    )


def printed_values(lines: Sequence[str], tag: str) -> list[tuple[object, ...]]:
    """The tuples ``<<"tag", ...>>`` that PrintT wrote, in order (TLC wraps long ones)."""
    text = "\n".join(lines)
    found: list[tuple[object, ...]] = []
    for match in re.finditer(rf'<<\s*"{re.escape(tag)}"', text):
        end = _closing(text, match.start())
        if end is None:
            continue
        try:
            value = parse_value(text[match.start() : end])
        except TLAValueError:
            continue
        if isinstance(value, tuple):
            found.append(value)
    return found


def _closing(text: str, start: int) -> int | None:
    """The end of the ``<<...>>`` opening at ``start``, skipping strings."""
    depth, i = 0, start
    while i < len(text):
        if text[i] == '"':
            i += 1
            while i < len(text) and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif text.startswith("<<", i):
            depth += 1
            i += 1
        elif text.startswith(">>", i):
            depth -= 1
            i += 1
            if depth == 0:
                return i + 1
        i += 1
    return None
