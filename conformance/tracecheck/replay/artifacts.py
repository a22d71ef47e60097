"""What a failed check leaves behind: the traces, the generated modules and the report.

A rejection in CI must be reproducible from the CI output alone, so every failing validation
(a rejected trace, or an accepted one that breaks a spec invariant) writes one folder:

- the failing traces, byte for byte when they came from files;
- the generated ``TraceData.tla``, ``TraceSpec.tla``, ``TraceOps.tla`` and ``TraceSpec.cfg``
  for exactly those traces, with a copy of the protocol's trace spec ``Trace<Module>.tla``
  (``tracecheck tlc TraceSpec.tla --no-deadlock --library SPEC/<protocol>`` replays them, see
  ``rerun.txt``), and ``TraceWitness.tla``/``.cfg`` when an invariant broke;
- ``report.txt`` (the readable report) and ``report.json``.

The folder is ``artifacts/tracecheck/<UTC time>-<protocol>`` under the working directory, or
under ``$TRACECHECK_ARTIFACTS`` when that is set; the CLI and the test failure messages print
it. An all-accepted run writes nothing.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from tracecheck.protocols.mapping import ProtocolMap
from tracecheck.replay.coverage import CoverageSummary
from tracecheck.replay.report import print_report
from tracecheck.replay.tlcrun import spec_library, spec_variables
from tracecheck.replay.tracedata import constants_for
from tracecheck.replay.tracespec import (
    TRACE_MODULE,
    fixed_name,
    fixed_trace_spec,
    render_batch,
)
from tracecheck.replay.verdicts import ValidationReport
from tracecheck.replay.witness import (
    WITNESS_MODULE,
    WitnessReport,
    print_witness,
    witness_files,
)
from tracecheck.traces.load import Trace

__all__ = [
    "ARTIFACTS_ENV",
    "DEFAULT_ROOT",
    "artifacts_root",
    "failure_note",
    "keep_failures",
    "rejections",
]

#: The environment variable that moves the artefacts (CI sets it to its upload folder).
ARTIFACTS_ENV = "TRACECHECK_ARTIFACTS"
DEFAULT_ROOT = Path("artifacts") / "tracecheck"


def artifacts_root(override: Path | None = None) -> Path:
    """Where failure folders go: ``override``, else ``$TRACECHECK_ARTIFACTS``, else
    ``artifacts/tracecheck`` in the working directory."""
    if override is not None:
        return override
    env = os.environ.get(ARTIFACTS_ENV)
    return Path(env) if env else DEFAULT_ROOT


def _new_folder(root: Path, protocol: str) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    root.mkdir(parents=True, exist_ok=True)
    for attempt in range(1000):
        folder = (
            root / f"{stamp}-{protocol}" if not attempt else root / f"{stamp}-{protocol}-{attempt}"
        )
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return folder
    raise FileExistsError(f"no free artefact folder under {root}")


def _write_trace(trace: Trace, folder: Path, taken: set[str]) -> str:
    name = Path(trace.source).name or "trace.ndjson"
    if name in taken:
        name = f"{len(taken) + 1}-{name}"
    taken.add(name)
    source = Path(trace.source)
    if source.is_file():
        shutil.copyfile(source, folder / name)
    else:  # merged or built in memory: write the trace as the checker read it
        rows = [trace.header.model_dump(mode="json")]
        rows += [e.model_dump(mode="json") for e in trace.events]
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return name


def _report_text(
    report: ValidationReport, coverage: CoverageSummary | None, witness: WitnessReport | None
) -> str:
    buffer = io.StringIO()
    # wide: a report's tables are never cut (soft_wrap keeps long lines whole)
    console = Console(file=buffer, width=4096, highlight=False, soft_wrap=True, color_system=None)
    print_report(console, report, coverage)
    if witness is not None:
        print_witness(console, witness)
    return buffer.getvalue()


def keep_failures(
    traces: Sequence[Trace],
    report: ValidationReport,
    mapping: ProtocolMap,
    spec_root: Path,
    *,
    witness: WitnessReport | None = None,
    coverage: CoverageSummary | None = None,
    root: Path | None = None,
) -> Path | None:
    """Write the failing traces, their generated modules and the report to a new folder and
    return it; ``None`` (and nothing written) when every trace passed."""
    sources = {v.source for v in report.verdicts if not v.accepted}
    if witness is not None:
        sources |= {v.source for v in witness.verdicts if not v.clean}
    failing = [t for t in traces if t.source in sources]
    if not failing:
        return None
    folder = _new_folder(artifacts_root(root), mapping.protocol)
    taken: set[str] = set()
    names = [_write_trace(t, folder, taken) for t in failing]
    # One trace spec per set of constants (traces with different constants share no TLC run):
    # in the folder itself when there is one, else in batch-1/, batch-2/, ...
    groups: dict[tuple[tuple[str, str], ...], list[Trace]] = {}
    for trace in failing:
        groups.setdefault(tuple(sorted(constants_for(trace, mapping).items())), []).append(trace)
    for number, batch in enumerate(groups.values(), start=1):
        target = folder if len(groups) == 1 else folder / f"batch-{number}"
        target.mkdir(exist_ok=True)
        _write_modules(target, batch, mapping, witness, spec_root)
    (folder / "report.txt").write_text(_report_text(report, coverage, witness), encoding="utf-8")
    payload = {"report": report.model_dump(mode="json"), "traces": names}
    if witness is not None:
        payload["invariants"] = witness.model_dump(mode="json")
    (folder / "report.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    library = " ".join(f"--library {spec_root / d}" for d in (mapping.protocol, "common"))
    where = "" if len(groups) == 1 else " (in each batch-N folder: traces with other constants)"
    (folder / "rerun.txt").write_text(
        f"Replay the failing traces{where} (the furthest cursor per trace is printed as tv_max):\n"
        f"  tracecheck tlc {TRACE_MODULE}.tla --no-deadlock {library}\n",
        encoding="utf-8",
    )
    return folder


def _write_modules(
    folder: Path,
    batch: Sequence[Trace],
    mapping: ProtocolMap,
    witness: WitnessReport | None,
    spec_root: Path,
) -> None:
    """The generated modules of one batch of traces that share their constants, and the
    protocol's trace spec (a copy of the checked-in one: the folder replays on its own)."""
    rendered = render_batch(batch, mapping)
    # every generated module the trace spec needs (TraceData, TraceSpec, TraceOps)
    for name, text in rendered.modules().items():
        (folder / f"{name}.tla").write_text(text, encoding="utf-8")
    library = spec_library(spec_root, mapping)
    fixed = fixed_trace_spec(mapping, spec_variables(library, mapping))
    (folder / f"{fixed_name(mapping)}.tla").write_text(fixed, encoding="utf-8")
    (folder / f"{TRACE_MODULE}.cfg").write_text(rendered.cfg, encoding="utf-8")
    if witness is not None and not witness.all_clean:
        module, cfg = witness_files(rendered, witness.invariants, mapping)
        (folder / f"{WITNESS_MODULE}.tla").write_text(module, encoding="utf-8")
        (folder / f"{WITNESS_MODULE}.cfg").write_text(cfg, encoding="utf-8")


def rejections(report: ValidationReport, sources: set[str] | None = None) -> str:
    return "; ".join(
        f"{v.source}: event {v.rejection.index} "
        f"({v.rejection.event.event if v.rejection.event else 'end'})"
        for v in report.verdicts
        if v.rejection is not None and (sources is None or v.source in sources)
    )


def failure_note(
    traces: Sequence[Trace], report: ValidationReport, mapping: ProtocolMap, spec_root: Path
) -> str:
    """A test's assert message for traces that should have passed: what failed, and the
    folder its artefacts were just written to (only evaluated when the assert fails)."""
    kept = keep_failures(traces, report, mapping, spec_root)
    sources = {t.source for t in traces}
    return f"rejected {rejections(report, sources)}; traces, modules and report in {kept}"
