"""The fast trace renderer against the simple one it replaced, kept here as the test oracle.

:mod:`tracecheck.replay.tracespec` (with :mod:`tracecheck.replay.tracedata`),
:mod:`tracecheck.traces.postdelta` and :mod:`tracecheck.traces.jsonvalue` render each event with
shortcuts (a set logged as last time is not re-encoded, an element's canonical text is taken from
the node's previous set, the JSON-to-TLA+ text skips building error paths).
The generated artefacts must stay byte for byte what the simple implementation wrote, so the
tests below render simulated campaign traces and hypothesis-generated ones both ways.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.ledger import LEDGER, header
from tracecheck.protocols import load_mapping, load_simulator
from tracecheck.protocols.mapping import NODE, ActionMap, ProtocolMap
from tracecheck.replay import tracedata, tracespec
from tracecheck.tla.values import format_value
from tracecheck.traces import jsonvalue
from tracecheck.traces.jsonvalue import JsonValueError, tla_text
from tracecheck.traces.load import Trace, TraceFormatError, load_trace, parse_trace_lines
from tracecheck.traces.postdelta import RETIRE_AFTER, WORTH, DeltaPlan, encode_compact

# --- the reference: the renderer as it was before the fast path ------------------------------


def _ref_elements(value: Any) -> dict[bytes, Any] | None:
    if not isinstance(value, dict) or len(value) != 1 or not isinstance(value.get("#set"), list):
        return None
    items = value["#set"]
    texts = [orjson.dumps(e, option=orjson.OPT_SORT_KEYS) for e in items]
    if b'"#' in b"".join(texts):
        return None
    return dict(zip(texts, items, strict=True))


def _ref_delta(value: Any) -> tuple[list[Any], list[Any]] | None:
    """A set logged as a delta (trace schema 3): ``(add, del)``."""
    if isinstance(value, dict) and set(value) == {"#add", "#del"}:
        add, gone = value["#add"], value["#del"]
        if isinstance(add, list) and isinstance(gone, list):
            return add, gone
    return None


@dataclass(frozen=True)
class _RefDelta:
    removed: dict[bytes, Any]
    added: dict[bytes, Any]


_Shape = tuple[str, Sequence[tuple[str, Any]]]
_MIXED = (
    "logged as a delta, and for this expression also as a value that is no tag-free set: "
    "a delta needs a set to change"
)
_TAGGED = "a delta's elements must be tag-free JSON (they are matched by text)"


class _RefDeltaError(Exception):
    def __init__(self, trace: int, index: int, column: int, problem: str) -> None:
        super().__init__(problem)
        self.trace, self.index, self.column, self.problem = trace, index, column, problem


def _ref_walk(
    events: Sequence[_Shape], keys: Iterable[str] | None, number: int, seen: dict[str, set[str]]
) -> Iterable[tuple[int, int, Any, _RefDelta | None, dict[bytes, Any] | None]]:
    """Per post value: the value, its change from the node's last one (None: no tag-free set
    or delta) and the set it stands for. ``seen`` collects, per expression, the kinds of
    values met in the batch ("delta", "opaque"): both is an error where they meet, when every
    expression is walked (``keys`` None: compact rendering)."""
    chosen = None if keys is None else set(keys)
    last: dict[tuple[str, str], dict[bytes, Any] | None] = {}
    for i, (node, posts) in enumerate(events):
        for j, (expr, value) in enumerate(posts):
            kinds = seen.setdefault(expr, set())
            delta = _ref_delta(value)
            before = last.get((expr, node), {})
            if delta is not None:
                kinds.add("delta")
                if before is None or (chosen is None and "opaque" in kinds):
                    raise _RefDeltaError(number, i, j, _MIXED)
                add, gone = delta
                add_t = {orjson.dumps(e, option=orjson.OPT_SORT_KEYS): e for e in add}
                gone_t = {orjson.dumps(e, option=orjson.OPT_SORT_KEYS) for e in gone}
                if any(b'"#' in t for t in [*add_t, *gone_t]):
                    raise _RefDeltaError(number, i, j, _TAGGED)
                # (before \ del) \cup add, an element in both staying as it was
                now = {t: e for t, e in before.items() if t not in gone_t or t in add_t}
                now |= {t: e for t, e in add_t.items() if t not in now}
            else:
                now = _ref_elements(value)
            last[(expr, node)] = now
            if now is None:
                kinds.add("opaque")
                if chosen is None and "delta" in kinds:
                    raise _RefDeltaError(number, i, j, _MIXED)
            if now is None or (chosen is not None and expr not in chosen and delta is None):
                yield i, j, value, None, now
                continue
            base = before or {}
            gone_keys = base.keys() - now.keys()
            new = now.keys() - base.keys()
            removed = {t: base[t] for t in gone_keys} if gone_keys else {}
            added = {t: now[t] for t in new} if new else {}
            yield i, j, value, _RefDelta(removed, added), now


def _whole(value: Any, now: dict[bytes, Any] | None) -> Any:
    """A value logged whole as logged; a delta as the set it stands for."""
    if _ref_delta(value) is None or now is None:
        return value
    return {"#set": [now[t] for t in sorted(now)]}


def _ref_encode(traces: Sequence[Sequence[_Shape]], keys: dict[str, int]) -> list[list[list[Any]]]:
    out: list[list[list[Any]]] = []
    for number, events in enumerate(traces):
        rows: list[list[Any]] = [[None] * len(posts) for _, posts in events]
        for i, j, value, delta, now in _ref_walk(events, keys, number, {}):
            rows[i][j] = _whole(value, now) if delta is None or not keys else delta
        out.append(rows)
    return out


def _ref_encode_compact(
    traces: Sequence[Sequence[_Shape]],
) -> tuple[dict[str, int], list[list[list[Any]]]]:
    full: dict[str, int] = {}
    delta: dict[str, int] = {}
    refused: set[str] = set()
    logged: set[str] = set()
    # retired: logged whole only, and its differences did not pay once it held RETIRE_AFTER
    # elements (checked at each whole set, before counting it); no longer counted
    ever_delta = {e for events in traces for _, posts in events for e, v in posts if _ref_delta(v)}
    retired: set[str] = set()
    seen: dict[str, set[str]] = {}
    walked = []
    for number, events in enumerate(traces):
        found = list(_ref_walk(events, None, number, seen))
        walked.append(found)
        for i, j, value, change, now in found:
            expr = events[i][1][j][0]
            items = value.get("#set") if isinstance(value, dict) and len(value) == 1 else None
            whole = isinstance(items, list)
            if (
                whole
                and expr not in ever_delta | refused
                and full.get(expr, 0) >= RETIRE_AFTER
                and delta.get(expr, 0) >= WORTH * full[expr]
            ):
                retired.add(expr)
            if whole and expr in retired:
                continue
            if change is None or now is None:
                refused.add(expr)
                continue
            delta_logged = _ref_delta(value) is not None
            if delta_logged:
                logged.add(expr)
            size = len(now) if delta_logged else len(value["#set"])  # (duplicates counted)
            full[expr] = full.get(expr, 0) + size
            delta[expr] = delta.get(expr, 0) + len(change.removed) + len(change.added)
    chosen = sorted(
        e
        for e in full
        if e in logged or (e not in refused | retired and delta[e] < WORTH * full[e])
    )
    keys = {e: i for i, e in enumerate(chosen, start=1)}
    out: list[list[list[Any]]] = []
    for events, found in zip(traces, walked, strict=True):
        rows: list[list[Any]] = [[None] * len(posts) for _, posts in events]
        for i, j, value, change, _ in found:
            use = change is not None and events[i][1][j][0] in keys
            rows[i][j] = change if use else value
        out.append(rows)
    return keys, out


def _ref_tla(value: object, trace: Trace, index: int, field: str) -> str:
    try:
        # the path-building renderer the fast one falls back to, and the general one past it
        try:
            return jsonvalue._text(value, field)
        except RecursionError:
            return format_value(jsonvalue.from_json(value, field))
    except JsonValueError as exc:
        raise TraceFormatError(trace.source, trace.lines[index], str(exc)) from exc


@dataclass(frozen=True)
class _RefRow:
    event: str
    node: str
    params: tuple[tuple[str, Any], ...]
    post: tuple[tuple[str, Any], ...]
    fields: tuple[str, ...]


def _ref_row(trace: Trace, index: int, mapping: ProtocolMap) -> _RefRow:
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
    return _RefRow(event.event, event.node, params, post, tuple(action.post))


class _RefFormatter:
    def __init__(self) -> None:
        self._memo: dict[bytes, str] = {}

    def __call__(self, value: Any, trace: Trace, index: int, field: str) -> str:
        if isinstance(value, _RefDelta):
            removed = self._set(value.removed, trace, index, field)
            added = self._set(value.added, trace, index, field)
            return f"<<{removed}, {added}>>"
        key = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        return self._text(key, value, trace, index, field)

    def _text(self, key: bytes, value: Any, trace: Trace, index: int, field: str) -> str:
        text = self._memo.get(key)
        if text is None:
            text = self._memo[key] = _ref_tla(value, trace, index, field)
        return text

    def _set(self, elements: dict[bytes, Any], trace: Trace, index: int, field: str) -> str:
        parts = sorted(self._text(k, e, trace, index, field) for k, e in elements.items())
        return "{" + ", ".join(parts) + "}"


def _ref_lines(
    traces: Sequence[Trace], mapping: ProtocolMap, *, compact: bool
) -> tuple[dict[str, int], list[list[str]], list[str]]:
    """The reference's delta plan, event lines and sorted nodes for a batch."""
    rows = [[_ref_row(t, i, mapping) for i in range(len(t.events))] for t in traces]
    shapes = [[(r.node, r.post) for r in events] for events in rows]
    try:
        if compact:
            keys, posts = _ref_encode_compact(shapes)
        else:
            keys, posts = {}, _ref_encode(shapes, {})
    except _RefDeltaError as exc:
        trace, row = traces[exc.trace], rows[exc.trace][exc.index]
        where = trace.lines[exc.index]
        problem = f"field post.{row.fields[exc.column]}: {exc.problem}"
        raise TraceFormatError(trace.source, where, problem) from exc
    fmt = _RefFormatter()
    lines = []
    for trace, events, values in zip(traces, rows, posts, strict=True):
        out = []
        for i, (row, post) in enumerate(zip(events, values, strict=True)):
            params = ", ".join(fmt(v, trace, i, field) for field, v in row.params)
            logged = ", ".join(
                fmt(v, trace, i, f"post.{field}") for field, v in zip(row.fields, post, strict=True)
            )
            out.append(
                f"<<{format_value(row.event)}, {format_value(row.node)}, "
                f"<<{params}>>, <<{logged}>>>>"
            )
        lines.append(out)
    nodes = sorted({r.node for events in rows for r in events})
    return keys, lines, nodes


def _assert_renders_as_reference(
    traces: Sequence[Trace], mapping: ProtocolMap, *, compact: bool
) -> None:
    """Every artefact of :func:`tracespec.render_batch` equals the one built from the
    reference's plan and lines (the module and cfg templates are shared, not under test)."""
    keys, lines, nodes = _ref_lines(traces, mapping, compact=compact)
    plan = DeltaPlan(keys=keys)
    constants = tracedata.constants_for(traces[0], mapping)
    if mapping.derive is not None:
        constants |= dict(mapping.derive(traces))
    variables = ["x", "y"]
    with_reader = tracespec.render_batch(
        traces, mapping, compact=compact, variables=variables, reader=Path("reader")
    )
    assert with_reader.data_file == tracedata.data_file(lines)
    inline = tracespec.render_batch(traces, mapping, compact=compact, variables=variables)
    ends = [1 if t.finished and mapping.quiescence else 0 for t in traces]
    # the data module's parameters: which expressions are logged as differences, the nodes
    parameters = tracespec._parameters(mapping, plan, nodes, ends, None)
    assert inline.data_module == tracedata.data_module(traces, lines, parameters)
    assert with_reader.data_module == tracedata.reader_data_module(parameters)
    fixed = tracespec.fixed_name(mapping)
    for rendered in (with_reader, inline):
        assert rendered.trace_module == tracespec._root(tracespec.TRACE_MODULE, fixed, constants)
        assert rendered.sim_module == tracespec._root(tracespec.SIM_MODULE, fixed, constants)


# --- campaign traces -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Trace]]:
    """Simulated runs of both protocols, as `tracecheck campaign` writes them."""
    folder = tmp_path_factory.mktemp("campaign")
    found: dict[str, list[Trace]] = {}
    for protocol, steps in (("rref", 400), ("rendezvous", 150)):
        simulate = load_simulator(protocol)
        paths = []
        for seed in (1, 2, 3):
            path = folder / f"{protocol}-{seed}.ndjson"
            simulate(seed, steps, path)
            paths.append(path)
        found[protocol] = [load_trace(p) for p in paths]
    return found


@pytest.mark.parametrize("protocol", ["rref", "rendezvous"])
@pytest.mark.parametrize("compact", [True, False], ids=["compact", "literal"])
def test_campaign_traces_render_as_the_reference(
    campaign: dict[str, list[Trace]], protocol: str, compact: bool
) -> None:
    mapping = load_mapping(protocol)
    traces = campaign[protocol]
    by_constants: dict[tuple[tuple[str, str], ...], list[Trace]] = {}
    for t in traces:
        key = tuple(sorted(tracedata.constants_for(t, mapping).items()))
        by_constants.setdefault(key, []).append(t)
    for batch in by_constants.values():
        _assert_renders_as_reference(batch, mapping, compact=compact)
    for t in traces:  # one trace alone: the explain pass renders that way
        _assert_renders_as_reference([t], mapping, compact=compact)


def test_campaign_rref_traces_use_the_shortcuts(campaign: dict[str, list[Trace]]) -> None:
    """The comparison above passes through the fast paths, not around them."""
    mapping = load_mapping("rref")
    shapes = [
        [
            (e.node, [(x, e.post[f]) for f, x in mapping.action(e.event).post.items()])
            for e in t.events
        ]
        for t in campaign["rref"]
    ]
    plan, posts = encode_compact(shapes)
    from traceformat.deltas import UNCHANGED  # noqa: PLC0415

    assert plan.keys
    assert any(v is UNCHANGED for rows in posts for row in rows for v in row)


# --- generated traces ----------------------------------------------------------------------

#: Ledger's Deposit with two set-valued post fields, one of them per node.
SETS = LEDGER.model_copy(
    update={
        "actions": (
            ActionMap(
                event="Deposit",
                params=("node", "a"),
                post={"balance": "balance'[@]", "inbox": "inbox'", "mine": "mine'[@]"},
            ),
        )
    }
)

_NAMES = st.sampled_from(["a", "b", "on", "fork"])
_SCALARS = st.booleans() | st.integers(-3, 3) | st.sampled_from(["w0", "w1", 'q"\\'])
_ELEMENTS = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(_NAMES, inner, min_size=1, max_size=3)
        | st.lists(inner, max_size=2).map(lambda xs: {"#set": xs})
    ),
    max_leaves=6,
)
#: Elements without tags (no set inside): what a delta may name.
_PLAIN = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_NAMES, inner, min_size=1),
    max_leaves=6,
)


def _twin(value: object) -> object:
    """A value equal to ``value`` in Python and different in JSON (and in TLA+), if any."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return bool(value) if value in (0, 1) else float(value)
    if isinstance(value, list) and value:
        return [_twin(value[0]), *value[1:]]
    if isinstance(value, dict):
        return {k: _twin(v) for k, v in reversed(value.items())}
    return value


@st.composite
def _evolving_sets(draw: st.DrawFn, size: int, plain: bool = False) -> list[Any]:
    """A run of logged sets, each mostly the last one with an element inserted, removed or
    replaced (what the fast path reuses), with key orders shuffled, and, when ``odd`` is drawn,
    odd values: floats (no TLA+ form), non-sets; duplicates, 1 where there was True. Most runs
    have large sets that change little, so that the expression is delta-encoded."""
    pool = draw(st.lists(_PLAIN if plain else _ELEMENTS, min_size=1, max_size=6))
    current: list[Any] = list(range(draw(st.integers(0, 12))))
    moves = ["add", "add", "drop", "same", "same", "swap", "reorder"]
    if draw(st.integers(0, 4)) == 0:
        moves.append("odd")
    out: list[Any] = []
    for _ in range(size):
        move = draw(st.sampled_from(moves))
        if move == "add":
            current.insert(draw(st.integers(0, len(current))), draw(st.sampled_from(pool)))
        elif move == "drop" and current:
            current.pop(draw(st.integers(0, len(current) - 1)))
        elif move == "swap" and current:
            i = draw(st.integers(0, len(current) - 1))
            current[i] = _twin(current[i])
        elif move == "reorder" and current:
            i = draw(st.integers(0, len(current) - 1))
            if isinstance(current[i], dict):
                current[i] = dict(reversed(list(current[i].items())))
        elif move == "odd":
            out.append(draw(st.sampled_from([5, "x", {"#set": "no"}, {"#set": [1.5]}])))
            continue
        out.append({"#set": list(current)})
    return out


def _canonical(element: Any) -> bytes:
    return orjson.dumps(element, option=orjson.OPT_SORT_KEYS)


def _maybe_delta(draw: st.DrawFn, value: Any, last: Any, deltas: bool) -> Any:
    """``value`` (a logged set or an odd value), or, when drawn, the same set logged as a
    delta (trace schema 3) from ``last`` (the node's last logged value for the field):
    exact, or sloppy (removing what was not there, adding what was), and now and then a
    delta where no set came before (an odd value: an error)."""
    if not deltas or not isinstance(value, dict) or not isinstance(value.get("#set"), list):
        return value
    if not draw(st.integers(0, 2)):
        return value
    before = last["#set"] if isinstance(last, dict) and isinstance(last.get("#set"), list) else []
    then = {_canonical(e): e for e in before}
    now = {_canonical(e): e for e in value["#set"]}
    add = [e for t, e in now.items() if t not in then]
    gone = [e for t, e in then.items() if t not in now]
    if draw(st.integers(0, 3)) == 0:  # sloppy
        add += [e for t, e in then.items() if t in now][:1]
        gone += [[9, "gone"]]
    return {"#add": add, "#del": gone}


@st.composite
def _generated_trace(draw: st.DrawFn) -> list[str]:
    size = draw(st.integers(1, 25))
    nodes = draw(st.lists(st.sampled_from(["a", "b"]), min_size=size, max_size=size))
    deltas = draw(st.booleans())
    # sets logged as deltas are mostly of tag-free elements (a tagged one is an error)
    plain = deltas and draw(st.integers(0, 3)) > 0
    inbox = draw(_evolving_sets(size, plain))
    mine = draw(_evolving_sets(size, plain))
    last: dict[tuple[str, str], Any] = {}
    seq = {"a": 0, "b": 0}
    lines = [json.dumps(header(maximum=3))]
    for node, whole_box, whole_own in zip(nodes, inbox, mine, strict=True):
        seq[node] += 1
        box = _maybe_delta(draw, whole_box, last.get(("inbox", node)), deltas)
        own = _maybe_delta(draw, whole_own, last.get(("mine", node)), deltas)
        last[("inbox", node)], last[("mine", node)] = whole_box, whole_own
        post = {"balance": draw(_ELEMENTS), "inbox": box, "mine": own}
        event = {
            "kind": "event",
            "event": "Deposit",
            "node": node,
            "seq": seq[node],
            "lamport": seq[node],
            "args": {"a": draw(_ELEMENTS)},
            "post": post,
        }
        lines.append(json.dumps(event))
    return lines


def _outcome(render: Any) -> tuple[str, object]:
    try:
        return "ok", render()
    except TraceFormatError as exc:
        return "error", str(exc)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_generated_trace(), min_size=1, max_size=3), st.booleans())
def test_generated_traces_render_as_the_reference(batch: list[list[str]], compact: bool) -> None:
    traces = [parse_trace_lines(lines, f"t{i}.ndjson") for i, lines in enumerate(batch)]

    def fast() -> object:
        rendered = tracespec.render_batch(traces, SETS, compact=compact, reader=Path("r"))
        inline = tracespec.render_batch(traces, SETS, compact=compact)
        return rendered.data_file, inline.data_module, rendered.trace_module

    def reference() -> object:
        keys, lines, nodes = _ref_lines(traces, SETS, compact=compact)
        constants = tracedata.constants_for(traces[0], SETS)
        parameters = tracespec._parameters(
            SETS, DeltaPlan(keys=keys), nodes, [0] * len(traces), None
        )
        module = tracespec._root(tracespec.TRACE_MODULE, tracespec.fixed_name(SETS), constants)
        data = tracedata.data_module(traces, lines, parameters)
        return tracedata.data_file(lines), data, module

    assert _outcome(fast) == _outcome(reference)


def _deposits(sets: Sequence[object]) -> Trace:
    lines = [json.dumps(header())]
    for seq, box in enumerate(sets, start=1):
        post = {"balance": 1, "inbox": box, "mine": {"#set": []}}
        event = {"kind": "event", "event": "Deposit", "node": "a", "seq": seq, "lamport": seq}
        lines.append(json.dumps(event | {"args": {"a": 1}, "post": post}))
    return parse_trace_lines(lines, "sets.ndjson")


@pytest.mark.parametrize(
    "change",
    [
        pytest.param([True, [0, False], 2], id="true-for-1"),
        pytest.param([1.0, [0, False], 2], id="float-for-1"),
        pytest.param([1, [0, 0], 2], id="0-for-false-inside"),
        pytest.param([1, [0, False], 2, 2], id="duplicate"),
        pytest.param([1, [0, False], {"b": 1, "a": 2}], id="record"),
    ],
)
def test_elements_equal_in_python_but_not_in_json_render_as_the_reference(
    change: list[object],
) -> None:
    """``==`` finds the elements a set kept; 1, 1.0 and True are equal to it and not in TLA+."""
    base = [1, [0, False], 2, *range(10, 30)]
    sets = [{"#set": base}, {"#set": [*change, *base[3:]]}, {"#set": base}]
    sets += [{"#set": [*base[:2], {"a": 2, "b": 1}, *base[3:]]}, {"#set": [True, *base[1:]]}]
    trace = _deposits([*sets, {"#set": base}])
    assert (
        "inbox'"
        in encode_compact([[(e.node, [("inbox'", e.post["inbox"])]) for e in trace.events]])[0].keys
    )
    fast = _outcome(
        lambda: _events(tracespec.render_batch([trace], SETS, compact=True).data_module)
    )
    reference = _outcome(
        lambda: tracedata.data_module([trace], _ref_lines([trace], SETS, compact=True)[1])
    )
    assert fast == reference


@pytest.mark.parametrize("then_delta", [False, True], ids=["whole-only", "then-a-delta"])
def test_a_set_whose_differences_do_not_pay_is_retired_as_by_the_reference(
    then_delta: bool,
) -> None:
    """One new element per event (like ``delivered``): planning stops diffing the expression
    once it holds RETIRE_AFTER elements; a delta logged for it later makes planning start
    again, keeping it (a delta is always rendered as a difference)."""
    sets: list[object] = [{"#set": [k]} for k in range(RETIRE_AFTER + 40)]
    if then_delta:
        sets.append({"#add": [10_000], "#del": [RETIRE_AFTER + 39]})
    trace = _deposits(sets)
    shapes = [[(e.node, [("inbox'", e.post["inbox"])]) for e in trace.events]]
    plan, posts = encode_compact(shapes)
    assert ("inbox'" in plan.keys) is then_delta
    if not then_delta:  # retired after RETIRE_AFTER elements: the rest not diffed
        from tracecheck.traces.postdelta import _changes  # noqa: PLC0415 - the planner's own walk

        sizes: dict[str, list[int]] = {}
        changes = _changes(shapes[0], sizes)
        assert sizes["inbox'"][0] == RETIRE_AFTER  # elements counted until retirement
        assert sizes["inbox'"][3] == 1
        assert changes[RETIRE_AFTER - 1][0] is not None
        assert all(row == [None] for row in changes[RETIRE_AFTER:])
        assert posts[0][-1] == [sets[-1]]
    for compact in (True, False):
        fast = _outcome(
            lambda c=compact: _events(tracespec.render_batch([trace], SETS, compact=c).data_module)
        )
        reference = _outcome(
            lambda c=compact: tracedata.data_module(
                [trace], _ref_lines([trace], SETS, compact=c)[1]
            )
        )
        assert fast == reference
        assert fast[0] == "ok"


def _events(module: str) -> str:
    """A data module without the run's parameters after ``Traces`` (what the reference's
    module holds: the events)."""
    head, _, _ = module.partition("\nTraces == ")
    traces = module[len(head) :].split("\n", 2)[1]
    return f"{head}\nTraces == {traces.removeprefix('Traces == ')}\n====\n"


def test_malformed_events_are_refused_as_by_the_reference() -> None:
    """The fast row check defers to the full one for its error message."""
    good = {"kind": "event", "event": "Deposit", "node": "a", "seq": 1, "lamport": 1}
    post = {"balance": 1, "inbox": {"#set": []}, "mine": {"#set": []}}
    cases = [
        good | {"event": "Withdraw", "args": {"a": 1}, "post": post},
        good | {"args": {}, "post": post},
        good | {"args": {"a": 1, "b": 2}, "post": post},
        good | {"args": {"a": 1}, "post": {"balance": 1}},
        good | {"args": {"a": 1.5}, "post": post},
        good | {"args": {"a": {"#map": []}}, "post": post},
    ]
    for bad in cases:
        trace = parse_trace_lines([json.dumps(header()), json.dumps(bad)], "bad.ndjson")
        fast = _outcome(lambda t=trace: tracespec.render_batch([t], SETS, compact=True).data_module)
        ref = _outcome(lambda t=trace: _ref_lines([t], SETS, compact=True))
        assert fast[0] == ref[0] == "error"
        assert fast == ref


# --- JSON to TLA+ text ------------------------------------------------------------------------

_ANY_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False)
    | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["a", "b1", "#set", "a b", "", "#map"]), inner, max_size=3
        )
        | st.lists(inner, max_size=3).map(lambda xs: {"#set": xs})
        | st.lists(st.tuples(inner, inner).map(list), max_size=2).map(lambda p: {"#map": p})
    ),
    max_leaves=12,
)


@given(_ANY_JSON)
def test_the_fast_json_text_is_the_path_tracking_one(value: object) -> None:
    """Same text, or the same error at the same path, as the renderer with error paths."""
    try:
        expected: object = jsonvalue._text(value, "$.v")
    except JsonValueError as exc:
        expected = (exc.path, exc.problem)
    try:
        got: object = tla_text(value, "$.v")
    except JsonValueError as exc:
        got = (exc.path, exc.problem)
    assert got == expected
