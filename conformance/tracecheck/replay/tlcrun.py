"""Running generated modules with TLC: write a rendered batch (and any extra modules) to a
temporary folder, run TLC on it with the options trace runs need, and say plainly when TLC could
not run them (:class:`CheckerError`: a bug in a mapping or spec, never a verdict); and the values
the generated modules print (:func:`printed_values`)."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from tracecheck.errors import TracecheckError
from tracecheck.protocols.mapping import ProtocolMap
from tracecheck.replay.tracedata import DATA_FILE
from tracecheck.replay.tracespec import (
    TRACE_MODULE,
    RenderedBatch,
    fixed_name,
    fixed_trace_spec,
)
from tracecheck.runner.results import TLCResult, Verdict
from tracecheck.runner.tlc import TLCOptions, run_tlc
from tracecheck.tla.parser import TLAValueError, parse_value

__all__ = [
    "CheckerError",
    "printed_values",
    "require_clean",
    "run_rendered",
    "spec_library",
    "spec_variables",
    "trace_spec",
]

#: How a checked-in trace spec is brought up to date with its mapping.
REFRESH = "python -m tracecheck.replay.fixedspec --write"


class CheckerError(TracecheckError):
    """TLC could not run the generated trace spec: a bug in a mapping or spec, not a verdict."""


def spec_library(spec_root: Path, mapping: ProtocolMap) -> tuple[Path, ...]:
    """The folders SANY searches for the protocol spec and shared modules."""
    folders = [spec_root / mapping.protocol, spec_root / "common"]
    return tuple(f.resolve() for f in folders if f.is_dir())


def spec_variables(library: Sequence[Path], mapping: ProtocolMap) -> list[str] | None:
    """The names in the spec's ``vars == <<...>>``, in order; ``None`` if it is not found."""
    # The spec module first, then the modules beside it (``vars`` may come from one it EXTENDS).
    paths = [f / f"{mapping.module}.tla" for f in library]
    paths += [p for f in library for p in sorted(f.glob("*.tla")) if p not in paths]
    for path in paths:
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            found = re.search(rf"^{mapping.vars}\s*==\s*<<(.*?)>>", text, re.M | re.S)
            if found:
                body = re.sub(r"\\\*[^\n]*", "", found[1])
                return [v.strip() for v in body.split(",") if v.strip()]
    return None


def trace_spec(mapping: ProtocolMap, library: Sequence[Path]) -> tuple[str, Path | None]:
    """The protocol's trace spec (:func:`~tracecheck.replay.tracespec.fixed_trace_spec`) and
    the checked-in file that holds it (``spec/<p>/Trace<Module>.tla``), or None when the
    library has none (a mapping of one's own: the text is written beside the run's modules).
    A checked-in file that differs from what the mapping says is a CheckerError: TLC would
    check the traces against another mapping than the one the report describes."""
    text = fixed_trace_spec(mapping, spec_variables(library, mapping))
    name = fixed_name(mapping)
    for folder in library:
        path = folder / f"{name}.tla"
        if path.is_file():
            if path.read_text(encoding="utf-8") != text:
                raise CheckerError(
                    f"{path} is stale: the {mapping.protocol} mapping says otherwise; "
                    f"rewrite it with `{REFRESH}`"
                )
            return text, path
    return text, None


def run_rendered(
    rendered: RenderedBatch,
    library: Sequence[Path],
    options: TLCOptions | None = None,
    *,
    extra: Mapping[str, str] | None = None,
    root: str = TRACE_MODULE,
    cfg: str | None = None,
) -> TLCResult:
    """Write the generated modules (and ``extra`` ones, by name) to a temporary folder and run
    TLC on module ``root`` with ``cfg`` (by default the rendered breadth-first one)."""
    base = options or TLCOptions()
    classpath = (*base.classpath, rendered.reader) if rendered.reader else base.classpath
    opts = base.model_copy(
        update={
            "classpath": classpath,
            "check_deadlock": False,  # a consumed trace has no successor: that is its end
            "workers": 1,  # the registers that track the furthest cursor are per worker
            "library": tuple(library),
            "attribute_properties": False,
            # C1 only: trace runs are short and TLC's C2 compilations cost as much CPU as the
            # search (a 2,782-event RRef trace: 10 s of CPU with C2, 5 s without; the same at
            # 6,000 events), and the machines have two cores.
            "jvm": (*base.jvm, "-XX:TieredStopAtLevel=1"),
        }
    )
    with tempfile.TemporaryDirectory(prefix="tracecheck-") as tmp:
        folder = Path(tmp)
        modules = rendered.modules()
        if rendered.mapping is not None:
            text, checked_in = trace_spec(rendered.mapping, library)
            if checked_in is None:
                modules[fixed_name(rendered.mapping)] = text
        for name, text in (modules | dict(extra or {})).items():
            (folder / f"{name}.tla").write_text(text, encoding="utf-8")
        if rendered.data_file is not None:
            (folder / DATA_FILE).write_text(rendered.data_file, encoding="utf-8")
        (folder / f"{root}.cfg").write_text(cfg or rendered.cfg, encoding="utf-8")
        return run_tlc(folder / f"{root}.tla", folder / f"{root}.cfg", opts)


def require_clean(result: TLCResult, what: str) -> None:
    if result.verdict is not Verdict.SUCCESS:
        details = "; ".join(
            f"{e.location}: {e.message}" if e.location else e.message for e in result.errors
        )
        raise CheckerError(
            f"TLC could not check {what}: {result.verdict.value}: {result.summary}"
            + (f" ({details})" if details else "")
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
