"""An action's enabling conditions, cut from the spec's own source for the explain pass: its
parameters and top-level conjuncts (:func:`split_action`), the definitions that act (prime a
variable, directly or through others), and the TLA+ operators that check the guards one after the
other (:func:`guard_checks`), so the report quotes the spec's text."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["acting", "guard_checks", "split_action"]


def split_action(module_text: str, name: str) -> tuple[tuple[str, ...], list[tuple[int, str]]]:
    """The parameters and top-level conjuncts of ``name``'s definition as ``(column, text)``.

    A definition that is not a bulleted conjunction comes back as one conjunct.
    """
    match = re.search(rf"^{name}(?:\(([^)]*)\))?\s*==[ \t]*", module_text, re.MULTILINE)
    if match is None:
        return (), []
    params = tuple(p.strip() for p in (match[1] or "").split(",") if p.strip())
    rest = module_text[match.end() :]
    end = re.search(r"^(?=\S)", rest, re.MULTILINE)
    body = rest[: end.start()] if end and end.start() > 0 else rest
    body = re.sub(r"\\\*[^\n]*", "", body)
    column = match.end() - module_text.rfind("\n", 0, match.end()) - 1
    block = " " * column + body
    leading = body[: len(body) - len(body.lstrip())]
    start = len(leading) - leading.rfind("\n") - 1 if "\n" in leading else column + len(leading)
    return params, _bullets(block) or [(start, body.strip())]


def _bullets(block: str) -> list[tuple[int, str]] | None:
    """Split a block (first line padded to its true column) into its ``/\\`` conjuncts, each
    as (column of its text, text with later lines verbatim); None if it is no bulleted list."""
    lines = [ln for ln in block.splitlines() if ln.strip()]
    if not lines or not lines[0].lstrip().startswith("/\\"):
        return None
    bullet = len(lines[0]) - len(lines[0].lstrip())
    conjuncts: list[tuple[int, list[str]]] = []
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if indent == bullet and line.lstrip().startswith("/\\"):
            text = line[indent + 2 :]
            conjuncts.append((indent + 2 + len(text) - len(text.lstrip()), [text.strip()]))
        elif indent <= bullet:
            break  # the list ended (a line at or left of the bullets that is no bullet)
        else:
            conjuncts[-1][1].append(line)
    return [(col, "\n".join(text)) for col, text in conjuncts]


def acting(module_text: str) -> frozenset[str]:
    """Names of the module's definitions that prime a variable, directly or through others."""
    bodies: dict[str, str] = {}
    matches = list(_DEFINITION.finditer(module_text))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(module_text)
        bodies[match[1]] = _strip_comments(module_text[match.end() : end])
    acting = {name for name, body in bodies.items() if "'" in body or "UNCHANGED" in body}
    grew = True
    while grew:
        grew = False
        for name, body in bodies.items():
            if name not in acting and set(_WORD.findall(body)) & acting:
                acting.add(name)
                grew = True
    return frozenset(acting)


_DEFINITION = re.compile(r"^([A-Z][A-Za-z0-9_]*)(?:\([^)]*\))?\s*==", re.MULTILINE)


_WORD = re.compile(r"\b[A-Z][A-Za-z0-9_]*\b")


def _strip_comments(text: str) -> str:
    text = re.sub(r"\(\*.*?\*\)", "", text, flags=re.DOTALL)
    return re.sub(r"\\\*[^\n]*", "", text)


def _is_guard(text: str, acting: frozenset[str] = frozenset()) -> bool:
    """A conjunct TLC can evaluate in a state: no prime, no UNCHANGED, no call of an action."""
    if "'" in text or "UNCHANGED" in text:
        return False
    return not set(_WORD.findall(text)) & acting


def _existential(column: int, text: str) -> tuple[str, str, list[tuple[int, str]]] | None:
    """``\\E v \\in S : /\\ h1 /\\ h2 ...`` as (v, S, the conjuncts h_i), else None."""
    if not text.startswith("\\E "):
        return None
    depth = 0
    for i, char in enumerate(text):
        depth += (char in "([{<" and 1) or 0
        depth -= (char in ")]}>" and 1) or 0
        if char == ":" and depth == 0 and text[i + 1 : i + 2] != ">":
            binder = re.fullmatch(r"\\E\s+(\w+)\s+\\in\s+(.+)", text[:i].strip(), re.DOTALL)
            if binder is None:
                return None
            first_line_end = text.find("\n")
            rest_col = column + i + 1 if first_line_end == -1 or i < first_line_end else 0
            if first_line_end != -1 and i > first_line_end:
                return None  # a binder over several lines: not worth guessing columns
            inner = _bullets(" " * rest_col + text[i + 1 :])
            return binder[1], " ".join(binder[2].split()), inner or []
    return None


def _operator(name: str, params: Sequence[str], column: int, text: str) -> str:
    """``name(params) ==`` then ``text`` with its first line at its original column."""
    head = f"({', '.join(params)})" if params else ""
    first, *more = text.split("\n")
    return f"{name}{head} ==\n" + " " * column + first + "".join("\n" + ln for ln in more)


def guard_checks(
    params: tuple[str, ...], conjuncts: list[tuple[int, str]], acting: frozenset[str]
) -> tuple[list[str], list[tuple[str, str]]]:
    """Operator definitions, and per guard (its label and spec text) in order; check k is the
    conjunction of guards 1..k, so the first false check names the first false guard without
    evaluating a later guard that needs an earlier one. Guards under a leading ``\\E v \\in S``
    are checked as ``\\E v \\in S : h1 /\\ ... /\\ hj``."""
    defs: list[str] = []
    guards: list[tuple[str, str]] = []
    fixed: list[str] = []
    head = f"({', '.join(params)})" if params else ""
    for i, (column, text) in enumerate(conjuncts, start=1):
        if _is_guard(text, acting):
            defs.append(_operator(f"TVGuard_{i}", params, column, text))
            fixed.append(f"TVGuard_{i}{head}")
            guards.append((str(i), text))
            defs.append(f"TVCheck_{len(guards)}{head} == " + " /\\ ".join(fixed))
            continue
        nested = _existential(column, text)
        if nested is None:
            continue
        var, domain, inner = nested
        # The quantifier's domain is a guard of its own: for a message handler, "the message
        # is in flight".
        nonempty = f"(\\E {var} \\in {domain} : TRUE)"
        guards.append((f"{i}.0", f"\\E {var} \\in {domain}"))
        defs.append(f"TVCheck_{len(guards)}{head} == " + " /\\ ".join([*fixed, nonempty]))
        partial: list[str] = []
        for j, (inner_col, inner_text) in enumerate(inner, start=1):
            if not _is_guard(inner_text, acting):
                continue
            defs.append(_operator(f"TVGuard_{i}_{j}", (*params, var), inner_col, inner_text))
            partial.append(f"TVGuard_{i}_{j}({', '.join((*params, var))})")
            body = " /\\ ".join(partial)
            exists = f"(\\E {var} \\in {domain} : {body})"
            guards.append((f"{i}.{j}", inner_text))
            defs.append(f"TVCheck_{len(guards)}{head} == " + " /\\ ".join([*fixed, exists]))
        if partial:
            fixed.append(exists)
    return defs, guards
