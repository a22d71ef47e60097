"""Rendering traces as TLA+: the protocol's trace spec (fixed text, checked in), and per run a
constant data module, a root module and a cfg.

TLC 2.15 has no Json module, so each trace becomes a constant in a generated module, one event
per line as a positional tuple ``<<event, node, <<params>>, <<post values>>>>`` (the encoding the
notes measured fastest; one long line takes SANY minutes to parse). The trace spec
(:func:`fixed_trace_spec`, checked in as ``spec/<p>/Trace<Module>.tla``: it depends on the
mapping and on no trace) EXTENDS the protocol spec, picks a trace ``t`` in Init (several traces
share one TLC run), keeps a cursor ``l`` and a hidden-step counter ``h``, and consumes one event
per step by conjoining the spec's own action with the event's parameters and logged post-state.
A state constraint records, per trace, the furthest cursor reached and prints each new maximum:
trace ``t`` is accepted when its cursor passes the last event, and otherwise the first unmatched
event is that maximum. What depends on a run's traces (the events, which post expressions are
logged as differences, the nodes, the end steps, a window's start) is in the data module; the
root module (``TraceSpec``, or ``TraceSim``) EXTENDS the trace spec and defines the constants.

The simulation pass (``SimInit``/``SimNext`` of the same trace spec, root ``TraceSim``) walks
trace 1, resets the spec's variables to their initial values, walks trace 2, and so on, printing
a marker as each trace is consumed. Simulation keeps no set of seen states (no fingerprints) and
stops at the first dead end, so it is a fast witness of acceptance, never a proof of rejection:
:mod:`tracecheck.replay.validate` runs the breadth-first search on every trace the simulation did
not accept.

The events' text, the data module and the Java reader's file come from
:mod:`tracecheck.replay.tracedata`. The data module is INSTANCEd, not EXTENDed: SANY runs its
PlusCal-translation check on every module a root EXTENDS (seconds on a large trace) and on none that
are instantiated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tracecheck.protocols.mapping import ActionMap, ProtocolMap
from tracecheck.replay.tracedata import (
    DATA_MODULE,
    READER_MODULE,
    constants_for,
    data_file,
    data_module,
    delta_error,
    event_lines,
    event_rows,
    reader_data_module,
)
from tracecheck.tla.values import format_value
from tracecheck.traces.load import Trace
from tracecheck.traces.postdelta import DeltaPlan, encode_compact
from traceformat.deltas import DeltaError

__all__ = [
    "DONE_TAG",
    "END_STEP",
    "MAX_TAG",
    "OPS_MODULE",
    "SIM_MODULE",
    "STATE_TAG",
    "TRACE_MODULE",
    "RenderedBatch",
    "Window",
    "fixed_name",
    "fixed_trace_spec",
    "post_keys",
    "render_batch",
]

TRACE_MODULE = "TraceSpec"
#: Operators for mappings' post-state expressions, with native versions in the Java reader.
OPS_MODULE = "TraceOps"
#: The root module of the simulation pass (see the module docstring).
SIM_MODULE = "TraceSim"
#: The PrintT tag the simulation pass writes when a trace is consumed.
DONE_TAG = "tv_done"
#: The PrintT tag of the furthest-cursor messages, parsed by :mod:`tracecheck.replay.validate`.
MAX_TAG = "tv_max"
#: The PrintT tag of a state reached once a window's events are consumed
#: (:mod:`tracecheck.replay.stream`): ``<<tag, tvHidden, <<the spec's variables>>>>``.
STATE_TAG = "tv_state"


@dataclass(frozen=True)
class RenderedBatch:
    """The generated files of one TLC run over several traces with the same constants."""

    data_module: str
    trace_module: str
    cfg: str
    lengths: tuple[int, ...]
    #: Per trace, 1 when its run says it finished and the mapping has a quiescence condition
    #: (the trace spec then takes one more step, ``IsTVEnd``, at its end), else 0.
    end_steps: tuple[int, ...] = ()
    #: The simulation pass's root module and cfg; ``None`` when the spec's variables are not
    #: known (the pass must reset each of them between traces).
    sim_module: str | None = None
    sim_cfg: str | None = None
    #: With the Java reader: the events file, and the folder TLC needs on its classpath.
    data_file: str | None = None
    reader: Path | None = None
    #: The protocol's mapping: its trace spec (:func:`fixed_trace_spec`) is the roots' base.
    mapping: ProtocolMap | None = None

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


def fixed_name(mapping: ProtocolMap) -> str:
    """The checked-in trace spec of a protocol: ``Trace<Module>``, beside its spec."""
    return f"Trace{mapping.module}"


def post_keys(mapping: ProtocolMap) -> dict[str, int]:
    """Every post expression of the mapping, numbered from 1 in the order the actions first
    use it: its slot in ``tvLog`` (with the acting node) and its entry in ``TVDelta``."""
    keys: dict[str, int] = {}
    for action in mapping.actions:
        for expr in action.post.values():
            keys.setdefault(expr, len(keys) + 1)
    return keys


#: Who the trace spec's steps leave unchanged besides what they assign.
_FROZEN = "<<tvTrace, tvInit>>"


def _wrapper(action: ActionMap, keys: dict[str, int]) -> str:
    call = action.event
    if action.params:
        call += "(" + ", ".join(f"tvE[3][{i}]" for i in range(1, len(action.params) + 1)) + ")"
    rebuilt: list[str] = []
    checks: list[str] = []
    updates: list[str] = []
    for i, expr in enumerate(action.post.values(), start=1):
        key = keys[expr]
        # the logged value: whole, or (TVDelta) the node's last one patched with the step's
        # difference (tracecheck.traces.postdelta); tvLog keeps it for the node's next
        rebuilt.append(f"tvV{i} == TVLogged(tvE, {i}, {key})")
        checks.append(f"        /\\ {expr.replace('@', 'tvE[2]')} = tvV{i}")
        updates.append(f"![TVSlot({key}, tvE[2])] = IF TVDelta[{key}] THEN tvV{i} ELSE @")
    body = ["     /\\ UNCHANGED tvLog"]
    if rebuilt:
        body = [
            "     /\\ LET " + "\n            ".join(rebuilt),
            "        IN",
            *checks,
            "        /\\ tvLog' = [tvLog EXCEPT "
            + ",\n                            ".join(updates)
            + "]",
        ]
    return "\n".join(
        [
            f"Is{action.event} ==",
            "  /\\ tvCursor <= Len(Traces[tvTrace])",
            "  /\\ LET tvE == Traces[tvTrace][tvCursor] IN",
            f"     /\\ tvE[1] = {format_value(action.event)}",
            f"     /\\ {call}",
            *body,
            f"  /\\ tvCursor' = tvCursor + 1 /\\ tvHidden' = 0 /\\ UNCHANGED {_FROZEN}",
        ]
    )


#: The name of the end step's wrapper (a finished run's quiescence), and its label in reports.
END_STEP = "IsTVEnd"


def _end_step(mapping: ProtocolMap) -> str:
    """The step a finished run's trace takes after its last event: none of the spec's, a check
    that the state is quiescent (the mapping's named conditions, each its own operator so an
    explanation can say which is false)."""
    conditions = [f"TVQuiet{i} == {expr}" for i, expr in enumerate(mapping.quiescence.values(), 1)]
    quiet = " /\\ ".join(f"TVQuiet{i}" for i in range(1, len(conditions) + 1))
    return "\n".join(
        [
            "\\* A run that says it finished (its end line) ends quiescent: one more step, at",
            "\\* the trace's end, that changes nothing and needs every condition below.",
            *conditions,
            f"{END_STEP} ==",
            "  /\\ tvCursor = Len(Traces[tvTrace]) + 1 /\\ TVEndSteps[tvTrace] = 1",
            f"  /\\ {quiet}",
            "  /\\ tvCursor' = tvCursor + 1 /\\ tvHidden' = 0",
            f"  /\\ UNCHANGED <<{mapping.vars}, tvLog>> /\\ UNCHANGED {_FROZEN}",
        ]
    )


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


def fixed_trace_spec(mapping: ProtocolMap, variables: Sequence[str] | None) -> str:
    """The trace spec of ``mapping``'s protocol: everything that does not depend on a trace
    (the wrappers, the end step, hidden steps, the cursor machinery and both passes' Init
    and Next), checked in as ``spec/<p>/Trace<Module>.tla`` (:func:`fixed_name`). What does
    depend on the traces of a run (the events, which sets are logged as differences, the
    nodes, which traces end with the end step, a window's start states) is the generated
    data module's. ``variables``: the spec's, in the order of its ``vars`` (None: not
    known; then the simulation pass and windows are left out)."""
    keys = post_keys(mapping)
    wrappers = [_wrapper(a, keys) for a in mapping.actions]
    consume = " \\/ ".join(f"Is{a.event}" for a in mapping.actions)
    if mapping.quiescence:
        wrappers.append(_end_step(mapping))
        consume += f" \\/ {END_STEP}"
    disjuncts = [consume]
    hidden: list[str] = []
    if mapping.hidden_steps and mapping.max_hidden:
        steps = " \\/ ".join(mapping.hidden_steps)
        hidden = [
            "\\* Unlogged steps the implementation really performs, a bounded number in a row.",
            f"HiddenStep == tvHidden < {mapping.max_hidden} /\\ ({steps}) "
            "/\\ tvHidden' = tvHidden + 1 /\\ UNCHANGED <<tvCursor, tvTrace, tvLog, tvInit>>",
            "",
        ]
        disjuncts.append("HiddenStep")
    start = ["     ELSE tvHidden = 0 /\\ " + mapping.init]
    if variables:
        assign = [f"            /\\ {v} = tvS[{i}]" for i, v in enumerate(variables, 2)]
        start = [
            "  /\\ IF TVFromStart",
            "     THEN \\E tvS \\in TVStart :",
            "            /\\ tvHidden = tvS[1]",
            *assign,
            *start,
        ]
    else:
        start = [f"  /\\ tvHidden = 0 /\\ {mapping.init}"]
    name = fixed_name(mapping)
    lines = [
        f" MODULE {name} ".center(77, "-"),
        *_box(
            [
                f"Trace validation against {mapping.module}.tla: tracecheck replays an",
                "implementation's trace by conjoining each event with the spec action it",
                "names, with the event's parameters and its logged post-state",
                "(docs/conformance.md). A trace is accepted iff some behaviour consumes",
                "every event (and a finished run's end step); the furthest cursor TLC",
                "reaches names the first event no behaviour explains.",
                "",
                "Generated from the protocol's mapping table (tracecheck.protocols) by",
                "    python -m tracecheck.replay.fixedspec --write",
                "and checked against it before each TLC run and by tests: do not edit.",
                "The traces, and what depends on them (which logged sets are",
                "differences, the nodes, the end steps, a window's start), are in the",
                "generated module TraceData; the constants in the generated root.",
            ]
        ),
        f"EXTENDS {mapping.module}, TLC, Naturals, Sequences, FiniteSets, {OPS_MODULE}",
        f"INSTANCE {DATA_MODULE}",
        "\\* which trace, its cursor, hidden steps since the last event, the logged sets rebuilt",
        "\\* (tvLog), and the spec's initial values (tvInit, the simulation pass's resets)",
        "VARIABLES tvTrace, tvCursor, tvHidden, tvLog, tvInit",
        "",
        *_NORM,
        "\\* A trace is consumed once its cursor passes its events and its end step, if any.",
        "TVLen(t) == Len(Traces[t]) + TVEndSteps[t]",
        "\\* tvLog is a tuple with one slot per (post expression k, node), key-major.",
        "TVSlot(k, n) == (k - 1) * TVNodes + 1 + TVNode[n]",
        "\\* Post field i of event e (expression k) as logged: whole, or when TVDelta[k] the",
        "\\* node's last value patched with <<removed, added>>.",
        "TVLogged(e, i, k) ==",
        "  IF TVDelta[k] THEN TVPatch(tvLog[TVSlot(k, e[2])], e[4][i][1], e[4][i][2]) ELSE e[4][i]",
        "",
        "\\* Breadth-first search: any trace of the run; a window goes on from TVStart.",
        "TraceInit ==",
        "  /\\ tvTrace \\in 1..Len(Traces) /\\ tvCursor = 1 /\\ tvLog = TVLog0 /\\ tvInit = <<>>",
        *start,
        "",
        *(w + "\n" for w in wrappers),
        *hidden,
        "TraceNext == " + " \\/ ".join(disjuncts),
        "",
        "\\* Per trace, the furthest cursor reached; each new maximum is printed. In a window of",
        "\\* a longer trace (TVPrintEnds), every state that consumed it is printed too.",
        "ASSUME \\A i \\in 1..Len(Traces) : TLCSet(i, 0)",
        "TraceWatch ==",
        "  /\\ (tvCursor > TLCGet(tvTrace) => (TLCSet(tvTrace, tvCursor) /\\ "
        f"PrintT(<<{format_value(MAX_TAG)}, tvTrace, tvCursor>>)))",
    ]
    if variables:
        lines.append(
            "  /\\ (TVPrintEnds /\\ tvCursor > TVLen(tvTrace) => "
            f"PrintT(<<{format_value(STATE_TAG)}, tvHidden, <<{', '.join(variables)}>>>>))"
        )
        lines += ["", *_sim_tail(mapping, variables, start)]
    lines.append("=" * 77)
    return "\n".join(lines) + "\n"


def _box(text: Sequence[str]) -> list[str]:
    """``text`` as a boxed TLA+ comment, the style of the specs beside it."""
    rule = "(" + "*" * 75 + ")"
    return [rule, *(f"(* {line:<71} *)" for line in text), rule]


def _sim_tail(mapping: ProtocolMap, variables: Sequence[str], start: Sequence[str]) -> list[str]:
    # TLC cannot assign through ``vars' = tvInit`` nor prime Init, hence one conjunct per
    # variable; the values were captured from Init in the first state.
    reset = " /\\ ".join(f"{v}' = tvInit[{i}]" for i, v in enumerate(variables, start=1))
    spec_vars = ", ".join(variables)
    return [
        "\\* Simulation pass: trace after trace in one behaviour, the spec reset in between",
        "\\* (a window of a long trace: one of TVStart's states, and its end state printed).",
        "SimInit ==",
        "  /\\ tvTrace = 1 /\\ tvCursor = 1 /\\ tvLog = TVLog0",
        *start,
        f"  /\\ tvInit = {mapping.vars}",
        "TraceReset == tvCursor > TVLen(tvTrace) /\\ tvTrace < Len(Traces)",
        "  /\\ tvTrace' = tvTrace + 1 /\\ tvCursor' = 1 /\\ tvHidden' = 0",
        f"  /\\ {reset} /\\ tvLog' = TVLog0 /\\ UNCHANGED tvInit",
        "SimNext == TraceNext \\/ TraceReset",
        "\\* An invariant that always holds and prints when a trace is consumed.",
        "TraceDone == tvCursor > TVLen(tvTrace) =>",
        f"  /\\ PrintT(<<{format_value(DONE_TAG)}, tvTrace>>)",
        f"  /\\ (TVPrintEnds => PrintT(<<{format_value(STATE_TAG)}, tvHidden, <<{spec_vars}>>>>))",
    ]


@dataclass(frozen=True)
class Window:
    """A window of a longer trace: the states the previous window ended in (TLA+ text of
    ``<<tvHidden, vars...>>``; None for the first window, which starts in Init), and whether
    a window follows (then every state that consumed this one is printed, tagged
    :data:`STATE_TAG`)."""

    start: tuple[str, ...] | None
    more: bool


def _parameters(
    mapping: ProtocolMap,
    plan: DeltaPlan,
    nodes: Sequence[str],
    end_steps: Sequence[int],
    window: Window | None,
) -> list[str]:
    """What the trace spec reads from the data module besides ``Traces``."""
    keys = post_keys(mapping)
    delta = ", ".join("TRUE" if e in plan.keys else "FALSE" for e in keys)
    # A tuple with one slot per (key, node), key-major, not a function over <<key, node>>
    # pairs: TLC rebuilds a function's hash index at the first lookup after each EXCEPT (7% of
    # TLC's CPU on 20 RRef traces; a tuple is indexed directly: 9% less TLC CPU), and not a
    # constructor [p \in ... |-> {}], which TLC keeps lazy and chains every EXCEPT onto (a
    # 5,600-event trace spent a fifth of its time there). TVNode numbers the nodes from 0.
    slots = len(keys) * len(nodes)
    start = window.start if window is not None else None
    return [
        "\\* This run's parameters (per trace, 1 when it takes the end step; the acting nodes;",
        "\\* per post expression, whether it is logged as differences; a window's start).",
        "TVEndSteps == <<" + ", ".join(str(n) for n in end_steps) + ">>",
        f"TVNodes == {len(nodes)}",
        "TVNode == " + " @@ ".join(f"({format_value(n)} :> {i})" for i, n in enumerate(nodes)),
        f"TVDelta == <<{delta}>>",
        "TVLog0 == <<" + ", ".join(["{}"] * slots) + ">>",
        f"TVPrintEnds == {'TRUE' if window is not None and window.more else 'FALSE'}",
        f"TVFromStart == {'FALSE' if start is None else 'TRUE'}",
        "TVStart == {" + ("" if start is None else "\n" + ",\n".join(start)) + "}",
    ]


def _root(name: str, fixed: str, constants: dict[str, str]) -> str:
    """A run's root module: the checked-in trace spec, and the constants the cfg gives the
    spec (from the traces' header and, derived, from the traces)."""
    return "\n".join(
        [
            f"---- MODULE {name} ----",
            f"\\* Generated by tracecheck: the constants of this run; the trace spec is {fixed}.",
            f"EXTENDS {fixed}",
            *(f"TV_{k} == {v}" for k, v in constants.items()),
            "====",
            "",
        ]
    )


def render_batch(
    traces: Sequence[Trace],
    mapping: ProtocolMap,
    *,
    compact: bool = False,
    variables: Sequence[str] | None = None,
    reader: Path | None = None,
    window: Window | None = None,
    derived: Mapping[str, str] | None = None,
) -> RenderedBatch:
    """Render traces that share their constants into one data module, root module and cfg
    (the trace spec around them is the protocol's fixed one, :func:`fixed_trace_spec`).

    ``compact`` logs set-valued post fields as differences
    (:mod:`tracecheck.traces.postdelta`), which keeps the data module linear in the trace's
    length; the explain pass reads the literal values, so it renders without. ``variables``
    (the spec's, in the order of its ``vars``) adds the simulation pass's root and cfg.
    ``reader`` (from
    :func:`tracecheck.replay.javareader.reader_classes`) writes the events to a file that TLC reads
    through the Java override instead of parsing a TLA+ constant module.

    ``window`` renders one trace that is a window of a longer one (breadth-first only, no
    simulation module: :mod:`tracecheck.replay.stream`), with ``derived`` the constants
    derived from the whole trace (else ``mapping.derive`` of ``traces``).
    """
    if not traces:
        raise ValueError("render_batch needs at least one trace")
    constants = constants_for(traces[0], mapping)
    for trace in traces[1:]:
        if constants_for(trace, mapping) != constants:
            raise ValueError(f"{trace.source}: its constants differ; render it in its own batch")
    if window is not None and len(traces) != 1:
        raise ValueError("a window is one trace")
    if derived is not None:
        constants |= dict(derived)
    elif mapping.derive is not None:
        constants |= dict(mapping.derive(traces))
    rows = event_rows(traces, mapping)
    shapes = [[(r.node, r.post) for r in events] for events in rows]
    try:
        if compact:
            plan, posts = encode_compact(shapes)
        else:
            plan = DeltaPlan(keys={})
            posts = plan.encode(shapes)
    except DeltaError as exc:
        raise delta_error(traces[exc.trace], rows[exc.trace], exc) from exc
    nodes = sorted({r.node for events in rows for r in events})
    end_steps = [1 if t.finished and mapping.quiescence else 0 for t in traces]
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
    fixed = fixed_name(mapping)
    sim_module = sim_cfg = None
    if variables:
        sim_module = _root(SIM_MODULE, fixed, constants)
        sim_cfg = (
            text.replace("INIT TraceInit", "INIT SimInit")
            .replace("NEXT TraceNext", "NEXT SimNext")
            .replace("CONSTRAINT TraceWatch", "INVARIANT TraceDone")
        )
    lines = event_lines(traces, rows, posts)
    parameters = _parameters(mapping, plan, nodes, end_steps, window)
    return RenderedBatch(
        data_module=(
            reader_data_module(parameters) if reader else data_module(traces, lines, parameters)
        ),
        data_file=data_file(lines) if reader else None,
        reader=reader,
        trace_module=_root(TRACE_MODULE, fixed, constants),
        cfg=text,
        lengths=tuple(len(t.events) for t in traces),
        end_steps=tuple(end_steps),
        sim_module=sim_module,
        sim_cfg=sim_cfg,
        mapping=mapping,
    )
