"""Just enough of TLC's ``.cfg`` language to list and isolate a model's properties, and to
read the ``CHECK_DEADLOCK`` setting TLC 2.15 cannot parse.

TLC 2.15 reports a temporal violation as "Temporal properties were violated." without saying
which, so when a model checks several properties the runner re-checks them one at a time to
name the culprit. That needs the property names and a copy of the cfg with a single property.

``CHECK_DEADLOCK FALSE`` (TLC 2.16 and later) is a parse error for 2.15, which knows only the
command line's ``-deadlock``; the runner reads it (:func:`check_deadlock`) and gives TLC the cfg
without it (:func:`without_check_deadlock`) and the flag instead.

The teeth rule (tracecheck.runner.teeth) needs every name a protocol's cfgs check.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = [
    "KEYWORDS",
    "check_deadlock",
    "checked",
    "checked_in_folder",
    "properties",
    "strip_comments",
    "with_only_property",
    "without_check_deadlock",
]

KEYWORDS = frozenset(
    {
        "CONSTANT",
        "CONSTANTS",
        "INIT",
        "NEXT",
        "SPECIFICATION",
        "INVARIANT",
        "INVARIANTS",
        "PROPERTY",
        "PROPERTIES",
        "SYMMETRY",
        "VIEW",
        "CONSTRAINT",
        "CONSTRAINTS",
        "ACTION_CONSTRAINT",
        "ACTION_CONSTRAINTS",
        "TYPE",
        "TYPE_CONSTRAINT",
        "CHECK_DEADLOCK",
        "POSTCONDITION",
        "ALIAS",
    }
)
_PROPERTY_KEYWORDS = frozenset({"PROPERTY", "PROPERTIES"})
_INVARIANT_KEYWORDS = frozenset({"INVARIANT", "INVARIANTS"})
_BLOCK_COMMENT = re.compile(r"\(\*.*?\*\)", re.DOTALL)
_LINE_COMMENT = re.compile(r"\\\*[^\n]*")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[A-Za-z0-9_]+|<-|\.\.|\S')


def strip_comments(text: str) -> str:
    """The cfg text without ``(* *)`` and ``\\*`` comments."""
    return _LINE_COMMENT.sub("", _BLOCK_COMMENT.sub("", text))


def _sections(text: str) -> list[tuple[str, list[str]]]:
    sections: list[tuple[str, list[str]]] = []
    for token in _TOKEN.findall(strip_comments(text)):
        if token in KEYWORDS:
            sections.append((token, []))
        elif sections:
            sections[-1][1].append(token)
    return sections


def properties(text: str) -> list[str]:
    """The names listed under ``PROPERTY``/``PROPERTIES``, in order."""
    names: list[str] = []
    for keyword, tokens in _sections(text):
        if keyword in _PROPERTY_KEYWORDS:
            names += [t for t in tokens if t not in {",", "<-"}]
    return names


def checked(text: str) -> list[str]:
    """Every name the cfg checks: ``INVARIANT(S)`` then ``PROPERTY(IES)`` entries, in order.

    The teeth rule (tracecheck.runner.teeth) holds each of them to a must-fail model or a reason.
    """
    names: list[str] = []
    for keyword, tokens in _sections(text):
        if keyword in _INVARIANT_KEYWORDS:
            names += [t for t in tokens if t not in {",", "<-"}]
    return names + [n for n in properties(text) if n not in names]


def checked_in_folder(folder: Path) -> dict[str, list[str]]:
    """For a spec folder: each name some ``*.cfg`` checks -> the cfg files that check it.

    Generated trace-validation cfgs (``Trace*``) are left out: they check the trace, not the
    protocol.
    """
    found: dict[str, list[str]] = {}
    for cfg in sorted(folder.glob("*.cfg")):
        if cfg.name.startswith("Trace"):
            continue
        for name in checked(cfg.read_text(encoding="utf-8")):
            found.setdefault(name, []).append(cfg.name)
    return found


def with_only_property(text: str, name: str) -> str:
    """A cfg equal to ``text`` but checking the single temporal property ``name``.

    Everything but the property sections is kept verbatim, comments removed (they cannot change
    meaning), so constants, symmetry and invariants stay as the model's author wrote them.
    """
    kept: list[str] = []
    for keyword, tokens in _sections(text):
        if keyword not in _PROPERTY_KEYWORDS:
            kept.append(" ".join([keyword, *tokens]))
    kept.append(f"PROPERTY {name}")
    return "\n".join(kept) + "\n"


_CHECK_DEADLOCK = re.compile(r"\bCHECK_DEADLOCK\s+(TRUE|FALSE)\b")


def check_deadlock(text: str) -> bool | None:
    """The cfg's ``CHECK_DEADLOCK`` value (the last one given), or None when it sets none."""
    found = _CHECK_DEADLOCK.findall(strip_comments(text))
    return None if not found else found[-1] == "TRUE"


def without_check_deadlock(text: str) -> str:
    """The cfg without its ``CHECK_DEADLOCK`` settings (and comments, which mean nothing)."""
    return _CHECK_DEADLOCK.sub("", strip_comments(text))
