"""The model manifest: every TLC model of the project, what TLC must say about it, and its figures.

Each protocol folder holds ``spec/<protocol>/models.json``; one file per protocol keeps edits to
one spec from touching another's manifest. A model either must pass or must fail with a named
invariant or property (a broken model that proves a property has teeth). ``make check`` runs the
quick models and compares: a must-fail model that passes is an error just like a pass model that
fails. State counts that drift from the recorded ones are reported, not failed: they change
whenever a spec is edited, and the manifest is re-recorded with ``tracecheck check --record``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from tracecheck.errors import ManifestError
from tracecheck.runner.aotcache import CLIENT_COMPILER
from tracecheck.runner.distributed import Distribution, distributable, run_distributed
from tracecheck.runner.results import TLCResult, Verdict
from tracecheck.runner.tlc import ProgressCallback, TLCOptions, run_tlc
from tracecheck.tla.cfgfile import checked_in_folder

__all__ = [
    "CLIENT_COMPILER_BELOW",
    "MANIFEST_NAME",
    "Expect",
    "Manifest",
    "ModelCheck",
    "ModelEntry",
    "ProtocolManifest",
    "Recorded",
    "compare",
    "entry_for",
    "jvm_flags",
    "load_manifest",
    "models_markdown",
    "options_for",
    "record_results",
    "run_model",
]

MANIFEST_NAME = "models.json"


class Expect(StrEnum):
    """The verdict a model must get."""

    PASS = "pass"
    INVARIANT = "invariant"
    PROPERTY = "property"
    ACTION_PROPERTY = "action_property"
    DEADLOCK = "deadlock"

    @property
    def verdict(self) -> Verdict:
        return Verdict.SUCCESS if self is Expect.PASS else Verdict(self.value)


class Recorded(BaseModel):
    """Figures of the last recorded run (one worker, so they are reproducible)."""

    model_config = ConfigDict(extra="forbid")

    distinct: int | None = None
    generated: int | None = None
    depth: int | None = None
    seconds: float | None = None


class ModelEntry(BaseModel):
    """One model: a module and cfg in a protocol's spec folder and its expected verdict."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]*$")
    module: str
    cfg: str
    klass: Literal["quick", "deep"] = Field(alias="class")
    expect: Expect
    violates: str | None = None
    check_deadlock: bool = True
    workers: Annotated[int, Field(ge=1)] | Literal["auto"] = 1
    timeout: float | None = Field(default=None, gt=0)
    issue: str | None = None
    #: The protocol's smoke model: quick (TLC checks it in seconds) and run first by ``check``,
    #: so an error in a spec shows before the long models start.
    smoke: bool = False
    description: str = Field(min_length=1)
    recorded: Recorded = Recorded()

    @model_validator(mode="after")
    def _violates_matches_expect(self) -> Self:
        named = self.expect in {Expect.INVARIANT, Expect.PROPERTY, Expect.ACTION_PROPERTY}
        if named and not self.violates:
            raise ValueError(f"expect={self.expect.value} needs `violates`: the name TLC reports")
        if not named and self.violates:
            raise ValueError(f"expect={self.expect.value} takes no `violates`")
        return self


class ProtocolManifest(BaseModel):
    """The contents of one ``spec/<protocol>/models.json``."""

    model_config = ConfigDict(extra="forbid")

    protocol: str
    models: list[ModelEntry]
    #: The teeth rule's written exceptions: a property some cfg checks -> why no must-fail model
    #: can violate it (tracecheck.runner.teeth; every other checked property needs such a model).
    no_teeth: dict[str, str] = Field(default_factory=dict)

    @field_validator("no_teeth")
    @classmethod
    def _reasons_are_written(cls, value: dict[str, str]) -> dict[str, str]:
        blank = sorted(name for name, reason in value.items() if not reason.strip())
        if blank:
            raise ValueError(f"no_teeth entries without a reason: {blank}")
        return value


class Manifest(BaseModel):
    """All protocol manifests under a spec root, validated together."""

    model_config = ConfigDict(extra="forbid")

    root: Path
    protocols: dict[str, ProtocolManifest]

    def folder(self, protocol: str) -> Path:
        return self.root / protocol

    def entries(self) -> list[tuple[str, ModelEntry]]:
        return [(p, m) for p, pm in sorted(self.protocols.items()) for m in pm.models]

    def select(
        self,
        protocols: list[str] | None = None,
        names: list[str] | None = None,
        klass: str | None = "quick",
    ) -> list[tuple[str, ModelEntry]]:
        """Entries filtered by protocol, model name and class (``None`` or "all": any class)."""
        unknown = set(protocols or ()) - set(self.protocols)
        if unknown:
            raise ManifestError(
                f"unknown protocol(s) {sorted(unknown)}; known: {sorted(self.protocols)}"
            )
        known_names = {m.name for _, m in self.entries()}
        missing = set(names or ()) - known_names
        if missing:
            raise ManifestError(f"unknown model(s) {sorted(missing)}")
        return [
            (p, m)
            for p, m in self.entries()
            if (not protocols or p in protocols)
            and (not names or m.name in names)
            and (names or klass in (None, "all") or m.klass == klass)
        ]


def load_manifest(root: Path) -> Manifest:
    """Read and validate every ``<root>/*/models.json``; errors name the file and the field."""
    protocols: dict[str, ProtocolManifest] = {}
    seen: dict[str, Path] = {}
    for path in sorted(root.glob(f"*/{MANIFEST_NAME}")):
        pm = _load_one(path)
        if pm.protocol != path.parent.name:
            raise ManifestError(
                f"{path}: protocol {pm.protocol!r} differs from its folder {path.parent.name!r}"
            )
        for entry in pm.models:
            if entry.name in seen:
                raise ManifestError(f"{path}: model {entry.name!r} is also in {seen[entry.name]}")
            seen[entry.name] = path
            for filename in (entry.module, entry.cfg):
                if not (path.parent / filename).is_file():
                    raise ManifestError(f"{path}: model {entry.name!r} names missing {filename}")
        if pm.no_teeth:
            unchecked = sorted(set(pm.no_teeth) - set(checked_in_folder(path.parent)))
            if unchecked:
                raise ManifestError(f"{path}: no_teeth names what no cfg checks: {unchecked}")
        protocols[pm.protocol] = pm
    return Manifest(root=root, protocols=protocols)


def entry_for(spec: Path, cfg: Path | None) -> ModelEntry | None:
    """The manifest entry of the model ``spec`` with ``cfg`` (default: the module's own cfg),
    from the ``models.json`` beside the module, or None when no entry names that pair."""
    path = spec.resolve().parent / MANIFEST_NAME
    if not path.is_file():
        return None
    cfg_name = (cfg or spec.with_suffix(".cfg")).resolve()
    for entry in _load_one(path).models:
        if entry.module == spec.name and (path.parent / entry.cfg).resolve() == cfg_name:
            return entry
    return None


def _load_one(path: Path) -> ProtocolManifest:
    try:
        raw = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ManifestError(
            f"{path}: not UTF-8 text: byte {exc.start} ({exc.object[exc.start]:#04x}): {exc.reason}"
        ) from exc
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path}: line {exc.lineno}, column {exc.colno}: {exc.msg}") from exc
    try:
        return ProtocolManifest.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ManifestError(f"{path}: {problems}") from exc


class ModelCheck(BaseModel):
    """The comparison of one model's TLC result with its manifest entry."""

    protocol: str
    entry: ModelEntry
    result: TLCResult
    ok: bool
    problem: str | None = None
    drift: list[str] = Field(default_factory=list)
    #: How the model was run when asked to run distributed: "distributed", or why locally.
    mode: str | None = None


#: Models whose recorded state space is below this many distinct states run TLC on the JVM's
#: client compiler alone (``-XX:TieredStopAtLevel=1``): they end before the optimising compiler
#: pays for itself. Measured on Java 25, CPU seconds of one run (docs/performance.md, "The main
#: job"): 59 states 1.8 -> 1.3, 9,007 states 6.5 -> 4.0, 16,850 states 6.4 -> 3.9, but 34,207
#: states 9.4 -> 12.2. The JIT changes no count: TLC's search is the same.
CLIENT_COMPILER_BELOW = 20_000


def jvm_flags(entry: ModelEntry) -> tuple[str, ...]:
    """The JVM flags of a manifest model's runs: the client compiler for a small model (which
    also puts Java 25's AOT cache under it: :mod:`tracecheck.runner.aotcache`)."""
    distinct = entry.recorded.distinct
    return (CLIENT_COMPILER,) if distinct is not None and distinct < CLIENT_COMPILER_BELOW else ()


def options_for(manifest: Manifest, entry: ModelEntry, **overrides: object) -> TLCOptions:
    """TLC options for an entry: its workers, deadlock setting and timeout, spec/common, and
    the JVM flags for its size (:func:`jvm_flags`)."""
    common = manifest.root / "common"
    base = TLCOptions(
        workers=entry.workers,
        check_deadlock=entry.check_deadlock,
        timeout=entry.timeout,
        library=(common,) if common.is_dir() else (),
        jvm=jvm_flags(entry),
    )
    return base.model_copy(update={k: v for k, v in overrides.items() if v is not None})


def run_model(
    manifest: Manifest,
    protocol: str,
    entry: ModelEntry,
    on_progress: ProgressCallback | None = None,
    *,
    distribution: Distribution | None = None,
    on_ready: Callable[[list[str]], None] | None = None,
    **overrides: object,
) -> ModelCheck:
    """Run one manifest model with TLC and compare the verdict with the entry; with a
    ``distribution``, in TLC's distributed mode when the model allows it (no temporal
    property: :func:`~tracecheck.runner.distributed.distributable`), else locally."""
    folder = manifest.folder(protocol)
    spec, cfg = folder / entry.module, folder / entry.cfg
    options = options_for(manifest, entry, **overrides)
    mode = None
    if distribution is not None:
        why = distributable(cfg.read_text(encoding="utf-8"))
        mode = "distributed" if why is None else f"local: {why}"
    if mode == "distributed" and distribution is not None:
        result = run_distributed(
            spec, cfg, options, distribution, on_progress=on_progress, on_ready=on_ready
        )
    else:
        result = run_tlc(spec, cfg, options, on_progress)
    return compare(protocol, entry, result).model_copy(update={"mode": mode})


def compare(protocol: str, entry: ModelEntry, result: TLCResult) -> ModelCheck:
    """Does TLC's verdict match the manifest? Also list figures that drifted from the record."""
    want = entry.expect.verdict
    problem: str | None = None
    if result.verdict is not want:
        if entry.expect is Expect.PASS:
            problem = f"must pass, but TLC says {result.verdict.value}: {result.summary}"
        elif result.verdict is Verdict.SUCCESS:
            problem = f"must fail with {entry.expect.value} {entry.violates or ''}, but passed"
        else:
            problem = f"must fail with {entry.expect.value}, but TLC says {result.verdict.value}"
            problem += f": {result.summary}"
    elif entry.violates and result.violated != entry.violates:
        problem = f"must violate {entry.violates}, but TLC reports {result.violated}"
    # A temporal violation's figures are where TLC's periodic liveness check happened to stop
    # the search (it runs on a timer), not a property of the model: never reported as drift.
    drift = (
        []
        if result.verdict is Verdict.PROPERTY
        else [
            f"{field} {old} -> {new}"
            for field, old, new in (
                ("distinct", entry.recorded.distinct, result.stats.distinct),
                ("depth", entry.recorded.depth, result.stats.depth),
            )
            if old is not None and new is not None and old != new
        ]
    )
    return ModelCheck(
        protocol=protocol,
        entry=entry,
        result=result,
        ok=problem is None,
        problem=problem,
        drift=drift,
    )


def record_results(manifest: Manifest, checks: list[ModelCheck]) -> list[Path]:
    """Write the figures of passing comparisons back into the manifests; returns files written."""
    by_name = {c.entry.name: c for c in checks if c.ok}
    written: list[Path] = []
    for protocol in manifest.protocols:
        path = manifest.folder(protocol) / MANIFEST_NAME
        raw = json.loads(path.read_text(encoding="utf-8"))
        changed = False
        for model in raw["models"]:
            check = by_name.get(model["name"])
            if check is None:
                continue
            stats = check.result.stats
            model["recorded"] = {
                "distinct": stats.distinct,
                "generated": stats.generated,
                "depth": stats.depth,
                "seconds": round(check.result.wall_seconds, 1),
            }
            changed = True
        if changed:
            path.write_text(json.dumps(raw, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            written.append(path)
    return written


def models_markdown(manifest: Manifest, on_torch: Mapping[str, str] | None = None) -> str:
    """The manifest as one Markdown table per protocol (docs/models.md is generated from it);
    ``on_torch``: model -> its replay on torch (``tracecheck replay-on-torch``), a last column."""
    torch_col = on_torch is not None
    on_torch = on_torch or {}
    lines = [
        "# Models",
        "",
        "Generated by `make docs` from `spec/*/models.json`; do not edit by hand. Figures are",
        "from the last `tracecheck check --record` (one worker unless the model says otherwise).",
    ]
    for protocol, pm in sorted(manifest.protocols.items()):
        lines += [
            "",
            f"## {protocol}",
            "",
            "| model | class | expected | distinct | depth | s | what it checks |"
            + (" on torch |" if torch_col else ""),
            "|---|---|---|---:|---:|---:|---|" + ("---|" if torch_col else ""),
        ]
        for m in pm.models:
            expected = f"{m.expect.value} `{m.violates}`" if m.violates else m.expect.value
            r = m.recorded
            figures = [
                "-" if v is None else f"{v:,}" if isinstance(v, int) else f"{v}"
                for v in (r.distinct, r.depth, r.seconds)
            ]
            about = m.description + (f" ({m.issue})" if m.issue else "")
            lines.append(
                f"| `{m.name}` | {m.klass} | {expected} | {' | '.join(figures)} | {about} |"
                + (f" {on_torch.get(m.name, '')} |" if torch_col else "")
            )
    return "\n".join(lines) + "\n"
