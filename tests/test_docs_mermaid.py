"""The Mermaid diagrams of docs/ parse: in a sequence diagram a semicolon ends a statement, so a
semicolon in a message or note cuts it and the rest fails to parse (the four diagrams of
docs/autograd.md section 10 did; Mermaid 11's own parser accepts every block now)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
BLOCK = re.compile(r"```mermaid\n(.*?)```", re.S)


def _blocks() -> list[tuple[str, int, str]]:
    found = []
    for path in sorted(DOCS.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((path.name, line, match.group(1)))
    return found


@pytest.mark.parametrize(("doc", "line", "body"), _blocks(), ids=lambda v: str(v)[:30])
def test_no_statement_is_cut_by_a_semicolon(doc: str, line: int, body: str) -> None:
    first = body.lstrip().split("\n", 1)[0].strip()
    assert first in {"sequenceDiagram", "stateDiagram-v2", "flowchart TD", "flowchart LR"} or (
        first.startswith(("graph ", "flowchart ", "stateDiagram"))
    ), f"{doc}:{line}: unknown diagram type {first!r}"
    cut = [
        f"{doc}:{line + n + 1}: {text.strip()}"
        for n, text in enumerate(body.splitlines())
        if ";" in re.sub(r"#\w+;", "", text)  # (an entity such as #59; is how to write one)
    ]
    assert not cut, "a semicolon ends a Mermaid statement: " + "; ".join(cut)


def test_the_docs_have_diagrams() -> None:
    assert len(_blocks()) >= 4
