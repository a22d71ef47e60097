"""The teeth rule: a property a spec checks is worth reporting only if a wrong protocol breaks it.

For every invariant and temporal or action property that some cfg of a protocol checks
(``INVARIANT(S)``/``PROPERTY(IES)`` in ``spec/<p>/*.cfg``, generated ``Trace*`` cfgs excluded),
the protocol's ``models.json`` holds a must-fail model whose ``violates`` names it, or lists it
in its top-level ``no_teeth`` object with the written reason why no model can violate it. A
property with both is an error too: the reason claims what a model disproves.

``make check`` then shows each must-fail model failing with exactly the property it names (TLC
stops at the first violation, so such a model's cfg checks only what shows it, or orders its
invariants so that the named one is the first to fail). ``tests/test_teeth.py`` enforces the
rule for every protocol; ``make docs`` renders :func:`teeth_markdown` into ``docs/models.md``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from tracecheck.runner.manifest import Manifest, ModelEntry
from tracecheck.tla.cfgfile import checked, checked_in_folder

__all__ = ["Teeth", "problems", "teeth", "teeth_markdown"]


class Teeth(BaseModel):
    """One checked property of a protocol: which cfgs check it, which models break it, or why
    none can."""

    model_config = ConfigDict(frozen=True)

    name: str
    checked_by: tuple[str, ...]
    violated_by: tuple[ModelEntry, ...]
    reason: str | None

    @property
    def problem(self) -> str | None:
        """What breaks the rule for this property, or None."""
        if not self.violated_by and self.reason is None:
            cfgs = ", ".join(self.checked_by[:2])
            more = len(self.checked_by) - 2
            cfgs += f" and {more} more" if more > 0 else ""
            return f"{self.name} (checked by {cfgs}) has no must-fail model and no no_teeth reason"
        if self.violated_by and self.reason is not None:
            models = ", ".join(m.name for m in self.violated_by)
            return f"{self.name} is listed in no_teeth, but {models} must violate it"
        return None


def teeth(manifest: Manifest, protocol: str) -> list[Teeth]:
    """Every property the protocol's cfgs check, in order of first appearance (cfgs by name)."""
    pm = manifest.protocols[protocol]
    return [
        Teeth(
            name=name,
            checked_by=tuple(cfgs),
            violated_by=tuple(m for m in pm.models if m.violates == name),
            reason=pm.no_teeth.get(name),
        )
        for name, cfgs in checked_in_folder(manifest.folder(protocol)).items()
    ]


def problems(manifest: Manifest, protocol: str) -> list[str]:
    """Every breach of the rule in one protocol: properties without teeth or with a stale
    reason, and must-fail models whose own cfg does not check what they claim to violate (TLC
    could then never report it)."""
    found = [t.problem for t in teeth(manifest, protocol) if t.problem is not None]
    folder: Path = manifest.folder(protocol)
    for m in manifest.protocols[protocol].models:
        if m.violates and m.violates not in checked((folder / m.cfg).read_text(encoding="utf-8")):
            found.append(f"{m.name} must violate {m.violates}, which its cfg {m.cfg} omits")
    return found


def _figures(m: ModelEntry) -> str:
    r = m.recorded
    states = "-" if r.distinct is None else f"{r.distinct:,}"
    seconds = "-" if r.seconds is None else f"{r.seconds}"
    return f"{states} states, {seconds} s"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def teeth_markdown(manifest: Manifest) -> str:
    """Per protocol: property -> the models that must violate it (figures) -> what the
    counterexample shows (the model's description), or the written reason why none can."""
    lines = [
        "",
        "# Teeth",
        "",
        "Every invariant and property a cfg checks, with the must-fail models that violate it and",
        "what their counterexamples show, or the written reason why no model can",
        "(`no_teeth` in the manifest). `tests/test_teeth.py` fails on a property with neither.",
    ]
    for protocol in sorted(manifest.protocols):
        lines += [
            "",
            f"## {protocol}: teeth",
            "",
            "| property | violated by | what the counterexample shows |",
            "|---|---|---|",
        ]
        for t in teeth(manifest, protocol):
            if not t.violated_by:
                why = f"*no model can:* {_cell(t.reason)}" if t.reason else "**missing**"
                lines.append(f"| `{t.name}` | — | {why} |")
            for m in t.violated_by:
                lines.append(
                    f"| `{t.name}` | `{m.name}` ({_figures(m)}) | {_cell(m.description)} |"
                )
    return "\n".join(lines) + "\n"
