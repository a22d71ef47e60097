"""Reading TLC's and SANY's output into a TLCResult: the verdict (a violation, an error, success
or none), the violated property, errors with their source locations, statistics, progress, and
the counterexample's states parsed into Python values. :mod:`tracecheck.runner.tlc` feeds it the
``-tool`` messages of a run as they arrive."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence

from tracecheck.runner.results import (
    Counterexample,
    CounterexampleState,
    Progress,
    SourceLocation,
    TLCError,
    TLCResult,
    TLCStats,
    Verdict,
)
from tracecheck.runner.tooloutput import (
    Code,
    Message,
    MessageClass,
    parse_depth,
    parse_progress,
    parse_stats,
)
from tracecheck.tla.parser import TLAValueError, parse_state

__all__ = ["MAX_MESSAGE", "ResultBuilder", "bounded", "sany_error"]


#: The most of one TLC message a result keeps: TLC echoes the values it could not handle, and
#: a hostile trace's 50 MB argument once came back as 52 MB of error text.
MAX_MESSAGE = 4000


def bounded(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text``, cut to ``limit`` characters with a note of how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} characters cut)"


_VERSION = re.compile(r"TLC2 Version (\S+).*?\(rev: (\w+)\)")


_NAMED = re.compile(r"(?:Invariant|Action property) (\w+) is violated")


_ASSUMPTION = re.compile(r"Assumption line (\d+), col (\d+) .*? of module (\w+)")


_STATE_HEADER = re.compile(r"^(\d+): (.*)$")


_ACTION = re.compile(r"^<(\w+)(?: line (\d+), col (\d+) to .* of module (\w+))?>$")


_POSITION = re.compile(r"[Ll]ine (\d+), col(?:umn)? (\d+) (?:to .*? )?(?:of|in) (?:module )?(\w+)")


#: Error-class messages that only introduce a counterexample; they are not errors themselves.
_NARRATION = frozenset({Code.BEHAVIOR_UP_TO_HERE, Code.COUNTEREXAMPLE})


_VIOLATIONS = {
    Code.INVARIANT_VIOLATED: Verdict.INVARIANT,
    Code.INVARIANT_VIOLATED_INITIAL: Verdict.INVARIANT,
    Code.ACTION_PROPERTY_VIOLATED: Verdict.ACTION_PROPERTY,
    Code.TEMPORAL_VIOLATED: Verdict.PROPERTY,
    Code.DEADLOCK: Verdict.DEADLOCK,
}


class ResultBuilder:
    """Accumulates messages of one run and decides the verdict when the process ends."""

    def __init__(self, cmd: list[str], on_progress: Callable[[Progress], None] | None) -> None:
        self.cmd = cmd
        self.on_progress = on_progress
        self.started = time.monotonic()
        self.verdict: Verdict | None = None
        self.violated: str | None = None
        self.summary = ""
        self.errors: list[TLCError] = []
        self.states: list[CounterexampleState] = []
        self.loops_to: int | None = None
        self.stutters = False
        self.stats: dict[str, int | None] = {}
        self.version: tuple[str, str] | None = None
        self.mode: str | None = None
        self.printed: list[str] = []
        self.sany_failed = False

    # callbacks from ToolOutputReader

    def text(self, line: str) -> None:
        self.printed.append(line)

    def message(self, msg: Message) -> None:
        code = msg.code
        if code == Code.VERSION:
            match = _VERSION.search(msg.body)
            self.version = (match[1], match[2]) if match else None
        elif code in (Code.MODE_MC, Code.MODE_SIMULATION):
            self.mode = "simulation" if code == Code.MODE_SIMULATION else "model-checking"
        elif code == Code.PROGRESS:
            self._progress(msg.body)
        elif code == Code.STATS:
            figures = parse_stats(msg.body)
            if figures:
                self.stats.update(zip(("generated", "distinct", "queue"), figures, strict=True))
        elif code == Code.DEPTH:
            self.stats["depth"] = parse_depth(msg.body)
        elif code in (Code.STATE, Code.STATE_STUTTERING, Code.BACK_TO_STATE):
            self._state(msg)
        elif code == Code.SUCCESS:
            self._decide(Verdict.SUCCESS, msg.body)
        elif code in _VIOLATIONS:
            self._violation(_VIOLATIONS[Code(code)], msg.body)
        elif code == Code.ASSUMPTION_FALSE:
            self._assumption(msg.body)
        elif code == Code.SANY_ERROR:
            self.sany_failed = True
        elif code in _NARRATION:
            return
        elif msg.klass in (MessageClass.ERROR, MessageClass.TLC_BUG):
            self._error(msg)

    # interpretation

    def _decide(self, verdict: Verdict, body: str) -> None:
        if self.verdict is None or self.verdict is Verdict.SUCCESS:
            self.verdict = verdict
            first = body.strip().splitlines()[0] if body.strip() else verdict.value
            self.summary = bounded(first, 500)

    def _violation(self, verdict: Verdict, body: str) -> None:
        self._decide(verdict, body)
        match = _NAMED.search(body)
        if match and self.violated is None:
            self.violated = match[1]

    def _assumption(self, body: str) -> None:
        self._decide(Verdict.ASSUME_FALSE, body)
        match = _ASSUMPTION.search(body)
        location = (
            SourceLocation(module=match[3], line=int(match[1]), column=int(match[2]))
            if match
            else None
        )
        self.errors.append(
            TLCError(code=Code.ASSUMPTION_FALSE, message=bounded(body), location=location)
        )

    def _error(self, msg: Message) -> None:
        parts = [msg.body, *(child.body for child in msg.children)]
        text = bounded("\n".join(p for p in parts if p.strip()))
        position = _POSITION.search(text)
        location = (
            SourceLocation(module=position[3], line=int(position[1]), column=int(position[2]))
            if position
            else None
        )
        self.errors.append(TLCError(code=msg.code, message=text, location=location))
        self._decide(Verdict.CRASH, text)

    def _progress(self, body: str) -> None:
        figures = parse_progress(body)
        if figures is None:
            return
        depth, generated, distinct, queue, rate = figures
        self.stats.update(generated=generated, distinct=distinct, queue=queue)
        if self.on_progress is not None:
            self.on_progress(
                Progress(
                    depth=depth,
                    generated=generated,
                    distinct=distinct,
                    queue=queue,
                    states_per_minute=rate,
                    elapsed=time.monotonic() - self.started,
                )
            )

    def _state(self, msg: Message) -> None:
        body = msg.body
        header, _, rest = body.partition("\n")
        match = _STATE_HEADER.match(header.strip())
        if match is None:
            return
        index, label = int(match[1]), match[2].strip()
        if msg.code == Code.BACK_TO_STATE or label.startswith("Back to state"):
            self.loops_to = index  # "4: Back to state: <Reset ...>": the lasso closes at 4
            return
        if msg.code == Code.STATE_STUTTERING or label.startswith("Stuttering"):
            self.stutters = True
            return
        self.states.append(_counterexample_state(index, label, rest))

    def finish(self, exit_code: int, *, timed_out: bool) -> TLCResult:
        verdict = self.verdict
        if timed_out:
            verdict = Verdict.TIMEOUT
            self.summary = "killed by the timeout"
        elif self.sany_failed or (verdict is None and self._sany_text_error()):
            sany = sany_error(self.printed)
            if sany is not None:
                verdict, error = sany
                self.errors.append(error)
                self.summary = error.message.splitlines()[0]
        if verdict is None:
            verdict = Verdict.CRASH
            tail = bounded("\n".join(bounded(line, 500) for line in self.printed[-20:]))
            self.summary = f"TLC exited with code {exit_code} and no verdict"
            self.errors.append(TLCError(message=tail or self.summary))
        counterexample = None
        if verdict.is_violation and self.states:
            counterexample = Counterexample(
                states=self.states, loops_to=self.loops_to, stutters=self.stutters
            )
        return TLCResult(
            verdict=verdict,
            violated=self.violated,
            summary=self.summary,
            errors=self.errors,
            stats=TLCStats(**self.stats),
            counterexample=counterexample,
            wall_seconds=time.monotonic() - self.started,
            tlc_version=self.version[0] if self.version else None,
            tlc_revision=self.version[1] if self.version else None,
            mode=self.mode,
            command=self.cmd,
            exit_code=exit_code,
            printed=self.printed,
        )

    def _sany_text_error(self) -> bool:
        return any("***Parse Error***" in p or "*** Errors:" in p for p in self.printed)


def _counterexample_state(index: int, label: str, body: str) -> CounterexampleState:
    action_match = _ACTION.match(label)
    action: str | None = label.strip("<>")
    location = None
    if action_match:
        action = action_match[1] if action_match[1] != "Initial" else "Initial predicate"
        if action_match[2]:
            location = SourceLocation(
                module=action_match[4], line=int(action_match[2]), column=int(action_match[3])
            )
    try:
        values = parse_state(body) if body.strip() else {}
        error = None
    except TLAValueError as exc:
        values, error = {}, str(exc)
    return CounterexampleState(
        index=index,
        action=action,
        header=label,
        location=location,
        values=values,
        raw=body,
        parse_error=error,
    )


_PARSE_AT = re.compile(r"at line (\d+), column (\d+)")


_PARSE_MODULE = re.compile(r"(?:Could not parse module|In module) (\w+)")


_SEMANTIC_AT = re.compile(r"line (\d+), col (\d+) to line \d+, col \d+ of module (\w+)")


_MISSING_MODULE = re.compile(r"Cannot find source file for module (\w+)")


def sany_error(lines: Sequence[str]) -> tuple[Verdict, TLCError] | None:
    """Classify SANY's plain-text report: parse error, semantic error, or none."""
    text = "\n".join(lines)
    if "***Parse Error***" in text or "Could not parse module" in text:
        at = _PARSE_AT.search(text)
        module = _PARSE_MODULE.search(text)
        detail = next((ln.strip() for ln in lines if ln.strip().startswith("Encountered")), "")
        message = detail or "parse error"
        location = SourceLocation(
            module=module[1] if module else None,
            line=int(at[1]) if at else None,
            column=int(at[2]) if at else None,
        )
        return Verdict.PARSE_ERROR, TLCError(message=bounded(message), location=location)
    missing = _MISSING_MODULE.search(text)
    if missing:
        return Verdict.PARSE_ERROR, TLCError(message=missing[0])
    if "*** Errors:" in text or "Semantic errors" in text:
        at = _SEMANTIC_AT.search(text)
        message = "semantic error"
        if at:
            after = text[at.end() :].strip().splitlines()
            message = after[0].strip() if after else message
        where = SourceLocation(module=at[3], line=int(at[1]), column=int(at[2])) if at else None
        return Verdict.SEMANTIC_ERROR, TLCError(message=bounded(message), location=where)
    return None
