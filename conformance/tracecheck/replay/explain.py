"""Explaining a rejected trace: at every spec state where the first unmatched event was tried,
which enabling condition of its action was false, or which logged post-state field no step of
the action can produce, with the values the spec would have allowed.

The explain run replays the trace up to event K - 1 (the prefix every behaviour matched), then,
at each frontier state (cursor = K), prints:
- the action's top-level guard conjuncts, evaluated cumulatively (``G1 /\\ ... /\\ Gi``) so the
  first false one is found without evaluating later guards that may depend on it;
- whether the action is enabled with the logged parameters, and for each logged post field
  whether some step of the action produces it;
and takes the action without the post-state check, printing the post values it can produce.
The guards are cut from the spec's own source (:mod:`tracecheck.replay.guards`), so the report
quotes the spec's text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field

from tracecheck.protocols.mapping import ActionMap, ProtocolMap
from tracecheck.replay.guards import acting, guard_checks, split_action
from tracecheck.replay.tlcrun import CheckerError, printed_values, run_rendered
from tracecheck.replay.tracespec import END_STEP, render_batch
from tracecheck.runner.results import TLCResult, Verdict
from tracecheck.runner.tlc import TLCOptions
from tracecheck.tla.values import TLAValue, format_value
from tracecheck.traces.deltas import resolve
from tracecheck.traces.jsonvalue import from_json
from tracecheck.traces.load import Trace

__all__ = ["Explanation", "FrontierState", "PostCheck", "explain_rejection"]

_FRONTIER = "tv_frontier"
_POSSIBLE = "tv_possible"


class PostCheck(BaseModel):
    """One logged post-state field at one frontier state."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    field: str
    expression: str
    logged: str
    #: Some step of the action produces the logged value.
    possible: bool
    #: The values the action's steps produce (TLA+ text), when it is enabled.
    allowed: list[str] = Field(default_factory=list)


class FrontierState(BaseModel):
    """A spec state in which the unmatched event was tried, and what went wrong there."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: The spec variables (TLA+ text) of this state.
    state: dict[str, str]
    enabled: bool
    #: The first guard conjunct that is false (spec text), if one is.
    failed_guard: str | None = None
    #: Where that conjunct is: "2" is the action's second top-level conjunct; "3.1" the first
    #: conjunct under the existential quantifier that is its third.
    failed_guard_at: str | None = None
    post: list[PostCheck] = Field(default_factory=list)

    def reason(self) -> str:
        """One sentence: why the event cannot be taken here."""
        if self.failed_guard_at == "quiescence":
            return f"not quiescent: {self.failed_guard} is false"
        if not self.enabled:
            if self.failed_guard is not None:
                return f"not enabled: conjunct {self.failed_guard_at} is false: " + " ".join(
                    self.failed_guard.split()
                )
            return "not enabled with the logged parameters (no single guard conjunct is false)"
        wrong = [p for p in self.post if not p.possible]
        if not wrong:
            return "enabled and each post field is possible, but not all together"
        return "; ".join(
            f"post.{p.field}: logged {p.logged}, the spec allows "
            + (" or ".join(p.allowed) if p.allowed else "no value")
            for p in wrong
        )


class Explanation(BaseModel):
    """Why the first unmatched event of a trace has no spec step."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    action: str
    params: dict[str, str]
    frontier: list[FrontierState]
    summary: str


def _call(action: ActionMap) -> str:
    if not action.params:
        return action.event
    return (
        action.event
        + "("
        + ", ".join(f"tvE[3][{i}]" for i in range(1, len(action.params) + 1))
        + ")"
    )


def _explain_module(
    mapping: ProtocolMap, action: ActionMap, index: int, spec_text: str
) -> tuple[str, list[tuple[str, str]]]:
    params, conjuncts = split_action(spec_text, action.event)
    defs, guards = guard_checks(params, conjuncts, acting(spec_text))
    args = ", ".join(f"tvE[3][{i}]" for i in range(1, len(params) + 1))
    checks = [f"TVCheck_{k}" + (f"({args})" if params else "") for k in range(1, len(guards) + 1)]
    call = _call(action)
    post_exprs = [expr.replace("@", "tvE[2]") for expr in action.post.values()]
    enabled_posts = [
        f"ENABLED ({call} /\\ {expr} = tvE[4][{i}])" for i, expr in enumerate(post_exprs, start=1)
    ]
    hidden = (
        "\\/ (tvCursor = K /\\ HiddenStep)" if mapping.hidden_steps and mapping.max_hidden else ""
    )
    text = "\n".join(
        [
            "---- MODULE TraceExplain ----",
            "\\* Generated by tracecheck to explain a rejected trace; do not edit.",
            "EXTENDS TraceSpec",
            f"K == {index}",
            *defs,
            "ExplainWatch == tvCursor = K => LET tvE == Traces[tvTrace][K] IN",
            f"  PrintT(<<{format_value(_FRONTIER)}, {mapping.vars},",
            f"          <<{', '.join(checks)}>>,",
            f"          ENABLED {call},",
            f"          <<{', '.join(enabled_posts)}>> >>)",
            "ExplainProbe == tvCursor = K /\\ LET tvE == Traces[tvTrace][K] IN",
            f"  /\\ {call}",
            f"  /\\ PrintT(<<{format_value(_POSSIBLE)}, {mapping.vars},",
            f"              <<{', '.join(post_exprs)}>> >>)",
            "  /\\ tvCursor' = K + 1 /\\ tvHidden' = 0 /\\ UNCHANGED tvTrace",
            f"ExplainNext == (tvCursor < K /\\ TraceNext) {hidden} \\/ ExplainProbe",
            "ExplainBound == tvCursor <= K",
            "====",
        ]
    )
    return text + "\n", guards


def _vars_names(spec_text: str, vars_name: str) -> list[str] | None:
    match = re.search(rf"^{vars_name}\s*==\s*<<(.*?)>>", spec_text, re.MULTILINE | re.DOTALL)
    if match is None:
        return None
    return [v.strip() for v in re.sub(r"\\\*[^\n]*", "", match[1]).split(",") if v.strip()]


def explain_rejection(
    trace: Trace,
    index: int,
    mapping: ProtocolMap,
    library: Sequence[Path],
    options: TLCOptions | None = None,
) -> Explanation:
    """Re-run ``trace`` alone up to event ``index`` and say why that event has no step (or,
    one past its last event, why its finished run's last state is not quiescent)."""
    if index == len(trace.events) + 1:
        return _explain_end(trace, mapping, library, options)
    event = trace.events[index - 1]
    action = mapping.action(event.event)
    if action is None:  # render_batch refuses unknown events, so a loaded trace has none
        raise CheckerError(f"{event.event} has no mapping")
    spec_text = _spec_text(library, mapping.module)
    module, guards = _explain_module(mapping, action, index, spec_text)
    rendered = render_batch([trace], mapping)
    cfg = (
        rendered.cfg.replace("NEXT TraceNext", "NEXT ExplainNext")
        + "CONSTRAINT ExplainWatch\nCONSTRAINT ExplainBound\n"
    )
    result = run_rendered(
        replace(rendered, cfg=cfg),
        library,
        options,
        extra={"TraceExplain": module},
        root="TraceExplain",
    )
    if result.verdict is not Verdict.SUCCESS:
        raise CheckerError(
            f"the explain run failed: {result.verdict.value}: {result.summary} "
            + "; ".join(e.message for e in result.errors)
        )
    names = _vars_names(spec_text, mapping.vars)
    # the logged post-state whole: deltas (trace schema 3) rebuilt from the node's earlier events
    (*_, logged) = resolve([(e.node, list(e.post.items())) for e in trace.events[:index]])
    frontier = _frontier(result, action, dict(zip(event.post, logged, strict=True)), names, guards)
    params = {
        p: format_value(_json_to_tla(event.node if p == "node" else event.args[p]))
        for p in action.params
    }
    call = f"{action.event}({', '.join(params.values())})"
    if not frontier:
        summary = f"event {index} ({call}): no spec state reaches it"
    else:
        reasons = sorted({s.reason() for s in frontier})
        summary = f"event {index} ({call}) has no spec step in {len(frontier)} state(s): " + (
            " | ".join(reasons)
        )
    return Explanation(
        index=index, action=action.event, params=params, frontier=frontier, summary=summary
    )


def _json_to_tla(value: Any) -> Any:
    return from_json(value)


def _spec_text(library: Sequence[Path], module: str) -> str:
    for folder in library:
        path = folder / f"{module}.tla"
        if path.is_file():
            return path.read_text(encoding="utf-8")
    return ""


def _frontier(
    result: TLCResult,
    action: ActionMap,
    logged_post: dict[str, Any],
    names: list[str] | None,
    guards: list[tuple[str, str]],
) -> list[FrontierState]:
    possible: dict[Any, list[Any]] = {}
    for row in printed_values(result.printed, _POSSIBLE):
        possible.setdefault(row[1], []).append(row[2])
    frontier_rows: list[tuple[Any, ...]] = []
    for row in printed_values(result.printed, _FRONTIER):
        if row not in frontier_rows:
            frontier_rows.append(row)
    fields = list(action.post)
    states: list[FrontierState] = []
    for _, state, cumulative, enabled, post_ok in frontier_rows:
        failed = next((i for i, ok in enumerate(cumulative) if not ok), None)
        guard_at, guard_text = guards[failed] if failed is not None else (None, None)
        produced = possible.get(state, [])
        checks = [
            PostCheck(
                field=field,
                expression=action.post[field],
                logged=format_value(_json_to_tla(logged_post[field])),
                possible=bool(post_ok[i]),
                allowed=sorted({format_value(p[i]) for p in produced}),
            )
            for i, field in enumerate(fields)
        ]
        labels = (
            names
            if names and len(names) == len(state)
            else [f"var{i}" for i in range(1, len(state) + 1)]
        )
        states.append(
            FrontierState(
                state={n: format_value(v) for n, v in zip(labels, state, strict=True)},
                enabled=bool(enabled),
                failed_guard=guard_text,
                failed_guard_at=guard_at,
                post=checks,
            )
        )
    return states


_QUIET = "tv_quiet"


def _explain_end(
    trace: Trace, mapping: ProtocolMap, library: Sequence[Path], options: TLCOptions | None
) -> Explanation:
    """Which of the mapping's quiescence conditions are false in the spec states after the
    last event of a trace whose run says it finished."""
    index = len(trace.events) + 1
    names = list(mapping.quiescence)
    checks = ", ".join(f"TVQuiet{i}" for i in range(1, len(names) + 1))
    hidden = (
        "\\/ (tvCursor = K /\\ HiddenStep)" if mapping.hidden_steps and mapping.max_hidden else ""
    )
    module = "\n".join(
        [
            "---- MODULE TraceExplain ----",
            "\\* Generated by tracecheck to explain a finished run's end; do not edit.",
            "EXTENDS TraceSpec",
            f"K == {index}",
            f"ExplainWatch == tvCursor = K => PrintT(<<{format_value(_QUIET)}, "
            f"{mapping.vars}, <<{checks}>> >>)",
            f"ExplainNext == (tvCursor < K /\\ TraceNext) {hidden}",
            "ExplainBound == tvCursor <= K",
            "====",
        ]
    )
    rendered = render_batch([trace], mapping)
    cfg = (
        rendered.cfg.replace("NEXT TraceNext", "NEXT ExplainNext")
        + "CONSTRAINT ExplainWatch\nCONSTRAINT ExplainBound\n"
    )
    result = run_rendered(
        replace(rendered, cfg=cfg),
        library,
        options,
        extra={"TraceExplain": module + "\n"},
        root="TraceExplain",
    )
    if result.verdict is not Verdict.SUCCESS:
        raise CheckerError(
            f"the explain run failed: {result.verdict.value}: {result.summary} "
            + "; ".join(e.message for e in result.errors)
        )
    labels = _vars_names(_spec_text(library, mapping.module), mapping.vars)
    frontier: list[FrontierState] = []
    seen: list[tuple[object, ...]] = []
    for row in printed_values(result.printed, _QUIET):
        if row in seen:
            continue
        seen.append(row)
        _, state, holds = row
        # printed_values parsed these with tla.parser.parse_value: TLA+ values
        truths = holds if isinstance(holds, tuple) else ()
        false = [n for n, ok in zip(names, truths, strict=False) if ok is not True]
        values = [cast("TLAValue", v) for v in (state if isinstance(state, tuple) else (state,))]
        keys = (
            labels
            if labels and len(labels) == len(values)
            else [f"var{i}" for i in range(1, len(values) + 1)]
        )
        frontier.append(
            FrontierState(
                state={k: format_value(v) for k, v in zip(keys, values, strict=True)},
                enabled=False,
                failed_guard="; ".join(false) or None,
                failed_guard_at="quiescence",
            )
        )
    reasons = sorted({s.failed_guard or "" for s in frontier})
    summary = f"the run says it finished, but after its last event (event {index - 1}) " + (
        f"the spec state is not quiescent in {len(frontier)} state(s): not "
        + " | not ".join(reasons)
        if frontier
        else "no spec state was reached"
    )
    return Explanation(index=index, action=END_STEP, params={}, frontier=frontier, summary=summary)
