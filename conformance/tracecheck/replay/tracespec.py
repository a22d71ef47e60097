"""Rendering traces as TLA+: a constant data module and a trace spec that replays it.

TLC 2.15 has no Json module, so each trace becomes a constant in a generated module, one event
per line as a positional tuple ``<<event, node, <<params>>, <<post values>>>>`` (the encoding the
notes measured fastest; one long line takes SANY minutes to parse). The trace spec EXTENDS the
protocol spec, picks a trace ``t`` in Init (several traces share one TLC run), keeps a cursor
``l`` and a hidden-step counter ``h``, and consumes one event per step by conjoining the spec's
own action with the event's parameters and logged post-state. A state constraint records, per
trace, the furthest cursor reached and prints each new maximum: trace ``t`` is accepted when
its cursor passes the last event, and otherwise the first unmatched event is that maximum.

A second root module, ``TraceSim``, replays the same wrappers for TLC's random simulation: one
behaviour walks trace 1, resets the spec's variables to their initial values, walks trace 2,
and so on, printing a marker as each trace is consumed. Simulation keeps no set of seen states
(no fingerprints) and stops at the first dead end, so it is a fast witness of acceptance, never
a proof of rejection: :mod:`tracecheck.replay.validate` runs the breadth-first ``TraceSpec`` on
every trace the simulation did not accept.

The data module is INSTANCEd, not EXTENDed: SANY runs its PlusCal-translation check on every
module a root EXTENDS (seconds on a large trace) and on none that are instantiated.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from tracecheck.protocols.mapping import NODE, ActionMap, ProtocolMap
from tracecheck.tla.values import TLAValueError, format_value, parse_value
from tracecheck.traces.jsonvalue import JsonValueError, tla_text
from tracecheck.traces.load import Trace, TraceFormatError, TraceHeader
from tracecheck.traces.postdelta import (
    UNCHANGED,
    Delta,
    DeltaError,
    DeltaPlan,
    element_text,
    encode_compact,
)

__all__ = [
    "DATA_FILE",
    "DATA_MODULE",
    "DONE_TAG",
    "OPS_MODULE",
    "READER_MODULE",
    "SIM_MODULE",
    "TRACE_MODULE",
    "RenderedBatch",
    "constants_for",
    "printed_values",
    "render_batch",
]

DATA_MODULE = "TraceData"
TRACE_MODULE = "TraceSpec"
#: The events for the Java reader, and the module whose operator it overrides.
DATA_FILE = "TraceData.txt"
READER_MODULE = "TraceIO"
#: Operators for mappings' post-state expressions, with native versions in the Java reader.
OPS_MODULE = "TraceOps"
#: The root module of the simulation pass (see the module docstring).
SIM_MODULE = "TraceSim"
#: The PrintT tag the simulation pass writes when a trace is consumed.
DONE_TAG = "tv_done"
#: The PrintT tag of the furthest-cursor messages, parsed by :mod:`tracecheck.replay.validate`.
MAX_TAG = "tv_max"


@dataclass(frozen=True)
class RenderedBatch:
    """The generated files of one TLC run over several traces with the same constants."""

    data_module: str
    trace_module: str
    cfg: str
    lengths: tuple[int, ...]
    #: The simulation pass's root module and cfg; ``None`` when the spec's variables are not
    #: known (the pass must reset each of them between traces).
    sim_module: str | None = None
    sim_cfg: str | None = None
    #: With the Java reader: the events file, and the folder TLC needs on its classpath.
    data_file: str | None = None
    reader: Path | None = None

    def modules(self) -> dict[str, str]:
        """Every generated module by name (the cfgs are not modules)."""
        found = {
            DATA_MODULE: self.data_module,
            TRACE_MODULE: self.trace_module,
            OPS_MODULE: _OPS_MODULE,
        }
        if self.sim_module is not None:
            found[SIM_MODULE] = self.sim_module
        if self.data_file is not None:
            found[READER_MODULE] = _READER_MODULE
        return found


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


class _Row(NamedTuple):
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


def _rows(trace: Trace, actions: dict[str, _Action], mapping: ProtocolMap) -> list[_Row]:
    """Each event of ``trace`` as a row; the first one that does not fit its action raises."""
    rows: list[_Row] = []
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
        append(_Row(action, node, params, tuple([(e, post[f]) for f, e in action.post])))
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
    for k, v in header.settings.items():
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


def _event_lines(
    traces: Sequence[Trace],
    rows: Sequence[Sequence[_Row]],
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


def _data_module(traces: Sequence[Trace], lines: Sequence[Sequence[str]]) -> str:
    """The traces as a TLA+ constant module: one event per line (SANY takes minutes over one
    long line)."""
    out = [f"---- MODULE {DATA_MODULE} ----", "\\* Generated by tracecheck; do not edit."]
    out += ["EXTENDS Integers, TLC  \\* unary minus; :> and @@ of logged functions", ""]
    for number, (trace, events) in enumerate(zip(traces, lines, strict=True), 1):
        out.append(f"\\* {trace.source}")
        out.append(f"Trace{number} == <<")
        out += [f"  {line}," for line in events[:-1]] + [f"  {events[-1]}", ">>", ""]
    out.append("Traces == <<" + ", ".join(f"Trace{n}" for n in range(1, len(traces) + 1)) + ">>")
    out.append("====")
    return "\n".join(out) + "\n"


def _data_file(lines: Sequence[Sequence[str]]) -> str:
    """The traces for the Java reader (java/tlc2/overrides/TLCOverrides.java): ``#`` before each
    trace, then one event per line."""
    out: list[str] = []
    for events in lines:
        out.append("#")
        out += events
    return "\n".join(out) + "\n"


#: The stubs the reader overrides: without the override TVRead fails loudly, never silently.
_READER_MODULE = f"""---- MODULE {READER_MODULE} ----
\\* Generated by tracecheck. TVRead is replaced by tlc2.overrides.TLCOverrides (Java).
EXTENDS TLC
TVRead(path) == Assert(FALSE, "TVRead needs tracecheck's Java reader on TLC's classpath")
====
"""

#: Operators the generated modules and the mappings' post-state expressions use. Each is
#: defined here in TLA+ (what TLC evaluates without the Java reader) and computed natively by
#: java/tlc2/overrides/TLCOverrides.java when the reader is on TLC's classpath; tests hold the
#: two equal. Interpreted, the RRef mapping's slices and the rebuilt logged sets were a quarter
#: of TLC's time on the bench's batch (20 traces: 9.0 -> 7.1 s of TLC CPU with them native).
_OPS_MODULE = f"""---- MODULE {OPS_MODULE} ----
\\* Generated by tracecheck; do not edit.
\\* The part of the set X whose entry in the function U (of records) has w in field k.
TVSliceBy(X, U, k, w) == {{x \\in X : x \\in DOMAIN U /\\ U[x][k] = w}}
\\* The entries of the function U (of records) that have w in field k.
TVImageBy(U, k, w) == {{U[x] : x \\in {{y \\in DOMAIN U : U[y][k] = w}}}}
\\* A logged set rebuilt from its last value S and a step's difference (removed R, added A).
TVPatch(S, R, A) == (S \\ R) \\cup A
\\* S \\ T (natively: one merge of the two sets sorted).
TVMinus(S, T) == S \\ T
\\* The entries of the function V whose keys are not in DOMAIN U: what V = U @@ (new entries)
\\* added (natively: one merge of the two domains sorted, nothing when V is U).
TVNewEntries(U, V) == {{V[x] : x \\in DOMAIN V \\ DOMAIN U}}
====
"""

_READER_DATA_MODULE = f"""---- MODULE {DATA_MODULE} ----
\\* Generated by tracecheck; do not edit. The events are in {DATA_FILE}, one per line.
EXTENDS {READER_MODULE}
Traces == TVRead("{DATA_FILE}")
====
"""


def _log_slot(key: int, nodes: int) -> str:
    """The index in ``tvLog`` (a tuple) of the acting node's value for delta key ``key``."""
    return f"{(key - 1) * nodes + 1} + TVNode[tvE[2]]"


def _wrapper(mapping: ProtocolMap, index: int, plan: DeltaPlan, frozen: str, nodes: int) -> str:
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
        # elements plus the added ones (tracecheck.traces.postdelta); tvLog keeps it for the next.
        slot = _log_slot(key, nodes)
        rebuilt.append(f"tvV{i} == TVPatch(tvLog[{slot}], tvE[4][{i}][1], tvE[4][{i}][2])")
        delta.append(f"        /\\ {spec_value} = tvV{i}")
        updates.append(f"![{slot}] = tvV{i}")
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
            f"  /\\ tvCursor' = tvCursor + 1 /\\ tvHidden' = 0 /\\ UNCHANGED {frozen}",
        ]
    )


def _trace_module(
    mapping: ProtocolMap,
    constants: dict[str, str],
    count: int,
    plan: DeltaPlan,
    nodes: Sequence[str],
    *,
    sim_vars: Sequence[str] | None = None,
) -> str:
    """The breadth-first trace spec, or with ``sim_vars`` (the spec's variables, in the order
    of its ``vars``) the simulation pass's module."""
    frozen_vars = "tvTrace" if sim_vars is None else "<<tvTrace, tvInit>>"
    wrappers = [
        _wrapper(mapping, i, plan, frozen_vars, len(nodes)) for i in range(len(mapping.actions))
    ]
    consume = " \\/ ".join(f"Is{a.event}" for a in mapping.actions)
    hidden = ""
    disjuncts = [consume]
    variables = "tvTrace, tvCursor, tvHidden"
    log_init: list[str] = []
    if plan.keys:
        variables += ", tvLog"
        # A tuple with one slot per (key, node), key-major, not a function over <<key, node>>
        # pairs: TLC rebuilds a function's hash index at the first lookup after each EXCEPT
        # (7% of TLC's CPU on 20 RRef traces; a tuple is indexed directly: 9% less TLC CPU),
        # and not a constructor [p \in ... |-> {}], which TLC keeps lazy and chains every
        # EXCEPT onto (a 5,600-event trace spent a fifth of its time there). TVNode numbers
        # the nodes from 0; it is a constant, so TLC indexes it once.
        slots = len(plan.keys) * len(nodes)
        log_init = [
            "TVLog0 == <<" + ", ".join(["{}"] * slots) + ">>",
            "TVNode == " + " @@ ".join(f"({format_value(n)} :> {i})" for i, n in enumerate(nodes)),
        ]
    if sim_vars is not None:
        variables += ", tvInit"
    if mapping.hidden_steps and mapping.max_hidden:
        steps = " \\/ ".join(mapping.hidden_steps)
        frozen = "<<tvCursor, tvTrace, tvLog" if plan.keys else "<<tvCursor, tvTrace"
        frozen += ", tvInit>>" if sim_vars is not None else ">>"
        hidden = (
            "\\* Unlogged steps the implementation really performs, a bounded number in a row.\n"
            f"HiddenStep == tvHidden < {mapping.max_hidden} /\\ ({steps}) "
            f"/\\ tvHidden' = tvHidden + 1 /\\ UNCHANGED {frozen}\n"
        )
        disjuncts.append("HiddenStep")
    overrides = "\n".join(f"TV_{name} == {expr}" for name, expr in constants.items())
    start = f"tvTrace \\in 1..{count}" if sim_vars is None else "tvTrace = 1"
    init = [
        f"TraceInit == {start} /\\ tvCursor = 1 /\\ tvHidden = 0",
        f"             /\\ {mapping.init}",
        *(["             /\\ tvLog = TVLog0"] if plan.keys else []),
        *([f"             /\\ tvInit = {mapping.vars}"] if sim_vars is not None else []),
    ]
    name = TRACE_MODULE if sim_vars is None else SIM_MODULE
    tail = _watch(count) if sim_vars is None else _sim_tail(sim_vars, plan)
    body = "\n".join(
        [
            f"---- MODULE {name} ----",
            "\\* Generated by tracecheck from the protocol's mapping table; do not edit.",
            f"EXTENDS {mapping.module}, TLC, Naturals, Sequences, FiniteSets, {OPS_MODULE}",
            f"INSTANCE {DATA_MODULE}",
            f"VARIABLES {variables}",
            overrides,
            *_NORM,
            *log_init,
            "",
            *init,
            "",
            *(w + "\n" for w in wrappers),
            hidden,
            "TraceNext == " + " \\/ ".join(disjuncts),
            "",
            *tail,
            "====",
        ]
    )
    return body + "\n"


#: ``TVNorm(S)`` is ``S``, sorted in place first. TLC keeps a set built by \cup or \ (what a
#: spec action assigns to a variable) unsorted, so ``x \in S`` on it searches linearly until
#: something sorts it (TLC sorts a state's sets to fingerprint it, after the step that built
#: them, and never in simulation). Cardinality sorts a SetEnumValue in place
#: (SetEnumValue.size), after which a membership test is a binary search: the RRef mapping's
#: slices test each of the node's UserRRefs against a freshly grown set (an 11,411-event
#: trace: 32.5 s -> 14.4 s).
_NORM = [
    "\\* TVNorm(S) = S; the test sorts S in place so that lookups in it are binary searches.",
    "TVNorm(S) == IF Cardinality(S) >= 0 THEN S ELSE S",
]


def _watch(count: int) -> list[str]:
    return [
        "\\* Per trace, the furthest cursor reached; each new maximum is printed.",
        f"ASSUME \\A i \\in 1..{count} : TLCSet(i, 0)",
        "TraceWatch == tvCursor > TLCGet(tvTrace) => (TLCSet(tvTrace, tvCursor) /\\ "
        f"PrintT(<<{format_value(MAX_TAG)}, tvTrace, tvCursor>>))",
    ]


def _sim_tail(sim_vars: Sequence[str], plan: DeltaPlan) -> list[str]:
    # TLC cannot assign through ``vars' = tvInit`` nor prime Init, hence one conjunct per
    # variable; the values were captured from Init in the first state.
    reset = " /\\ ".join(f"{v}' = tvInit[{i}]" for i, v in enumerate(sim_vars, start=1))
    log = " /\\ tvLog' = TVLog0" if plan.keys else ""
    return [
        "\\* Simulation pass: trace after trace in one behaviour, the spec reset in between.",
        "TraceReset == tvCursor > Len(Traces[tvTrace]) /\\ tvTrace < Len(Traces)",
        "  /\\ tvTrace' = tvTrace + 1 /\\ tvCursor' = 1 /\\ tvHidden' = 0",
        f"  /\\ {reset}{log} /\\ UNCHANGED tvInit",
        "SimNext == TraceNext \\/ TraceReset",
        "\\* An invariant that always holds and prints when a trace is consumed.",
        "TraceDone == tvCursor > Len(Traces[tvTrace]) => "
        f"PrintT(<<{format_value(DONE_TAG)}, tvTrace>>)",
    ]


def render_batch(
    traces: Sequence[Trace],
    mapping: ProtocolMap,
    *,
    compact: bool = False,
    variables: Sequence[str] | None = None,
    reader: Path | None = None,
) -> RenderedBatch:
    """Render traces that share their constants into one data module, trace spec and cfg.

    ``compact`` logs set-valued post fields as differences
    (:mod:`tracecheck.traces.postdelta`), which keeps the data module linear in the trace's
    length; the explain pass reads the literal values, so it renders without. ``variables``
    (the spec's, in the order of its ``vars``) adds the simulation pass's module and cfg.
    ``reader`` (from
    :func:`tracecheck.replay.javareader.reader_classes`) writes the events to a file that TLC reads
    through the Java override instead of parsing a TLA+ constant module.
    """
    if not traces:
        raise ValueError("render_batch needs at least one trace")
    constants = constants_for(traces[0], mapping)
    for trace in traces[1:]:
        if constants_for(trace, mapping) != constants:
            raise ValueError(f"{trace.source}: its constants differ; render it in its own batch")
    if mapping.derive is not None:
        constants |= dict(mapping.derive(traces))
    actions = {a.event: _Action.of(a) for a in mapping.actions}
    rows = [_rows(t, actions, mapping) for t in traces]
    shapes = [[(r.node, r.post) for r in events] for events in rows]
    try:
        if compact:
            plan, posts = encode_compact(shapes)
        else:
            plan = DeltaPlan(keys={})
            posts = plan.encode(shapes)
    except DeltaError as exc:
        raise _delta_error(traces[exc.trace], rows[exc.trace], exc) from exc
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
    text = "\n".join(cfg) + "\n"
    sim_module = sim_cfg = None
    if variables:
        sim_module = _trace_module(mapping, constants, len(traces), plan, nodes, sim_vars=variables)
        sim_cfg = text.replace("NEXT TraceNext", "NEXT SimNext").replace(
            "CONSTRAINT TraceWatch", "INVARIANT TraceDone"
        )
    lines = _event_lines(traces, rows, posts)
    return RenderedBatch(
        data_module=_READER_DATA_MODULE if reader else _data_module(traces, lines),
        data_file=_data_file(lines) if reader else None,
        reader=reader,
        trace_module=_trace_module(mapping, constants, len(traces), plan, nodes),
        cfg=text,
        lengths=tuple(len(t.events) for t in traces),
        sim_module=sim_module,
        sim_cfg=sim_cfg,
    )


def _delta_error(trace: Trace, rows: Sequence[_Row], exc: DeltaError) -> TraceFormatError:
    """A delta that cannot be applied, as the TraceFormatError naming its event's line and
    post field."""
    action = rows[exc.index].action
    field = next((f for f, e in action.post if e == exc.key), exc.key)
    return TraceFormatError(
        trace.source, trace.lines[exc.index], f"field post.{field}: {exc.problem}"
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
