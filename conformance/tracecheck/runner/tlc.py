"""Running TLC and SANY as subprocesses and turning their ``-tool`` output into a TLCResult.

Each run gets its own temporary metadir (TLC's ``states/`` folder), because two runs started in
the same second otherwise collide, and the repository stays clean; its own ``java.io.tmpdir``
too, because TLC 2.15 copies the standard modules (Sequences.tla, ...) into the temporary
folder and deletes them on exit, which made concurrent runs fail with "Cannot find source file
for module Sequences". The process is read line by
line so progress reaches the caller while TLC works; a timeout kills TLC's whole process group.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

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
from tracecheck.runner.toolchain import Toolchain, toolchain
from tracecheck.runner.tooloutput import (
    Code,
    Message,
    MessageClass,
    ToolOutputReader,
    parse_depth,
    parse_progress,
    parse_stats,
)
from tracecheck.tla import cfgfile
from tracecheck.tla.values import TLAValueError, parse_state

__all__ = ["TLCOptions", "run_sany", "run_tlc", "tlc_command"]

ProgressCallback = Callable[[Progress], None]


class TLCOptions(BaseModel):
    """How to run TLC. The defaults suit the quick models: one worker, deterministic counts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Worker threads; ``"auto"`` lets TLC use every core.
    workers: int | str = 1
    #: Seconds before TLC is killed; ``None`` waits forever.
    timeout: float | None = None
    #: JVM heap, e.g. ``"4g"``; ``None`` keeps TLC's default (a quarter of memory).
    heap: str | None = None
    #: Random simulation instead of exhaustive breadth-first search.
    simulate: bool = False
    #: Simulation: the length of each behaviour.
    depth: int | None = None
    #: Simulation: how many behaviours (``-simulate num=K``); ``None`` runs until stopped.
    traces: int | None = None
    #: TLC's seed (simulation and fingerprint choices), for reproducible runs.
    seed: int | None = None
    #: Report states without successors as deadlocks (TLC 2.15 cannot set this from a cfg).
    check_deadlock: bool = True
    #: Extra TLA+ library folders (``-DTLA-Library``), e.g. ``spec/common``.
    library: tuple[Path, ...] = ()
    #: Flags passed to TLC verbatim, after ours.
    extra: tuple[str, ...] = ()
    #: Flags for the JVM, before the class name (e.g. ``-XX:TieredStopAtLevel=1``).
    jvm: tuple[str, ...] = ()
    #: Folders appended to the jar on the classpath (operator overrides such as the trace
    #: reader of :mod:`tracecheck.replay.javareader`).
    classpath: tuple[Path, ...] = ()
    #: Name the culprit of a temporal violation by re-checking properties one at a time.
    attribute_properties: bool = True


def tlc_command(
    spec: Path,
    cfg: Path | None,
    options: TLCOptions,
    metadir: Path,
    tools: Toolchain | None = None,
) -> list[str]:
    """The exact command line :func:`run_tlc` runs (run from the spec's folder)."""
    tools = tools or toolchain()
    cmd = tools.base_command(options.heap)
    if options.library:
        cmd.insert(1, "-DTLA-Library=" + os.pathsep.join(str(p) for p in options.library))
    if options.classpath:
        at = cmd.index("-cp") + 1
        cmd[at] = os.pathsep.join([cmd[at], *(str(p) for p in options.classpath)])
    cmd.insert(cmd.index("-cp"), f"-Djava.io.tmpdir={metadir.parent}")
    cmd[1:1] = options.jvm
    cmd += ["tlc2.TLC", "-tool", "-workers", str(options.workers), "-metadir", str(metadir)]
    if cfg is not None:
        cmd += ["-config", str(cfg)]
    if not options.check_deadlock:
        cmd.append("-deadlock")  # in TLC 2.15 this flag *disables* deadlock checking
    if options.simulate:
        cmd += ["-simulate"] + ([f"num={options.traces}"] if options.traces else [])
        if options.depth is not None:
            cmd += ["-depth", str(options.depth)]
    if options.seed is not None:
        cmd += ["-seed", str(options.seed)]
    cmd += list(options.extra)
    cmd.append(spec.name)
    return cmd


def run_tlc(
    spec: Path,
    cfg: Path | None = None,
    options: TLCOptions | None = None,
    on_progress: ProgressCallback | None = None,
) -> TLCResult:
    """Model-check ``spec`` with ``cfg`` (default: the cfg of the same name) and return the result.

    A temporal violation in a model with several properties is attributed by re-running TLC
    once per property (``options.attribute_properties``): 2.15 does not say which one failed.
    """
    options = options or TLCOptions()
    spec = spec.resolve()
    cfg = cfg.resolve() if cfg is not None else None
    result = _run_once(spec, cfg, options, on_progress)
    if (
        result.verdict is Verdict.PROPERTY
        and result.violated is None
        and options.attribute_properties
    ):
        result = _attribute_property(spec, cfg, options, result)
    return result


def _run_once(
    spec: Path, cfg: Path | None, options: TLCOptions, on_progress: ProgressCallback | None
) -> TLCResult:
    metadir = Path(tempfile.mkdtemp(prefix="tlc-meta-"))
    try:
        cmd = tlc_command(spec, cfg, options, metadir / "m")
        return _execute(cmd, spec.parent, options.timeout, on_progress)
    finally:
        shutil.rmtree(metadir, ignore_errors=True)


def _attribute_property(
    spec: Path, cfg: Path | None, options: TLCOptions, first: TLCResult
) -> TLCResult:
    cfg_path = cfg or spec.with_suffix(".cfg")
    names = cfgfile.properties(cfg_path.read_text(encoding="utf-8"))
    if len(names) == 1:
        return first.model_copy(update={"violated": names[0]})
    single = options.model_copy(update={"attribute_properties": False})
    for name in names:
        with tempfile.TemporaryDirectory(prefix="tlc-cfg-") as tmp:
            one = Path(tmp) / cfg_path.name
            one.write_text(
                cfgfile.with_only_property(cfg_path.read_text(encoding="utf-8"), name),
                encoding="utf-8",
            )
            attempt = _run_once(spec, one, single, None)
        if attempt.verdict is Verdict.PROPERTY:
            return first.model_copy(update={"violated": name})
    return first


def run_sany(spec: Path, tools: Toolchain | None = None) -> TLCResult:
    """Parse and check ``spec`` with SANY alone (no model): success, parse or semantic error."""
    tools = tools or toolchain()
    spec = spec.resolve()
    cmd = [*tools.base_command(), "tla2sany.SANY", spec.name]
    started = time.monotonic()
    proc = subprocess.run(
        cmd, cwd=spec.parent, capture_output=True, text=True, check=False, timeout=600
    )
    lines = (proc.stdout + proc.stderr).splitlines()
    error = _sany_error(lines)
    verdict = Verdict.SUCCESS if error is None else error[0]
    return TLCResult(
        verdict=verdict,
        summary="SANY finished" if error is None else error[1].message,
        errors=[] if error is None else [error[1]],
        wall_seconds=time.monotonic() - started,
        command=cmd,
        exit_code=proc.returncode,
        printed=lines,
    )


# --- running and reading ------------------------------------------------------------------


def _execute(
    cmd: list[str], cwd: Path, timeout: float | None, on_progress: ProgressCallback | None
) -> TLCResult:
    builder = _ResultBuilder(cmd, on_progress)
    reader = ToolOutputReader(builder.message, builder.text)
    with subprocess.Popen(
        cmd,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        encoding="utf-8",
        errors="replace",
        start_new_session=True,  # so a timeout can kill the JVM and anything it started
    ) as proc:
        killer = _Killer(proc, timeout)
        assert proc.stdout is not None
        for line in proc.stdout:
            reader.feed(line)
        reader.close()
        exit_code = proc.wait()
        killer.cancel()
    return builder.finish(exit_code, timed_out=killer.fired)


class _Killer:
    """Kills the process group after ``timeout`` seconds."""

    def __init__(self, proc: subprocess.Popen[str], timeout: float | None) -> None:
        self.fired = False
        self._proc = proc
        self._timer: threading.Timer | None = None
        if timeout is not None:
            self._timer = threading.Timer(timeout, self._kill)
            self._timer.daemon = True
            self._timer.start()

    def _kill(self) -> None:
        self.fired = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, signal.SIGKILL)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


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


class _ResultBuilder:
    """Accumulates messages of one run and decides the verdict when the process ends."""

    def __init__(self, cmd: list[str], on_progress: ProgressCallback | None) -> None:
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
            self.summary = body.strip().splitlines()[0] if body.strip() else verdict.value

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
        self.errors.append(TLCError(code=Code.ASSUMPTION_FALSE, message=body, location=location))

    def _error(self, msg: Message) -> None:
        parts = [msg.body, *(child.body for child in msg.children)]
        text = "\n".join(p for p in parts if p.strip())
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
            sany = _sany_error(self.printed)
            if sany is not None:
                verdict, error = sany
                self.errors.append(error)
                self.summary = error.message.splitlines()[0]
        if verdict is None:
            verdict = Verdict.CRASH
            tail = "\n".join(self.printed[-20:])
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


def _sany_error(lines: Sequence[str]) -> tuple[Verdict, TLCError] | None:
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
        return Verdict.PARSE_ERROR, TLCError(message=message, location=location)
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
        return Verdict.SEMANTIC_ERROR, TLCError(message=message, location=where)
    return None
