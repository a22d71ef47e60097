#!/usr/bin/env python3
"""Generate the parts of docs/rendezvous.md that must not drift from the project's files.

- The sequence diagrams of the golden traces in ``tests/rendezvous/golden/`` (seeded runs of
  protoref's simulator that TLC accepts; see the folder's ``regenerate.py``): the store and the
  nodes, every read and write of the store, every decision, and the ticks.
- The table of models, from ``spec/rendezvous/models.json`` (the figures of the last
  ``tracecheck check --record``).

The same kinds of generated sections as docs/rref.md (spec/rref/gen_rref_docs.py); the join-op
diagram has its own script (gen_join_diagram.py) and the counterexample tables theirs
(render_cex.py, which runs TLC). Each block sits between ``<!-- BEGIN <name> ... -->`` and
``<!-- END <name> -->``.

Usage (from the repository root)::

    python3 spec/rendezvous/gen_rendezvous_docs.py            # rewrite the blocks
    python3 spec/rendezvous/gen_rendezvous_docs.py --check    # exit 1 if a block is stale
    python3 spec/rendezvous/gen_rendezvous_docs.py --print    # print the blocks only

In the project's venv (``make setup``): the blocks' markers and the command line are
``tracecheck.docblocks``'s, shared by both design notes' generators.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tracecheck import docblocks

HERE = Path(__file__).resolve().parent
#: this script, as its blocks name it
SCRIPT = "spec/rendezvous/gen_rendezvous_docs.py"
ROOT = HERE.parent.parent
DOCS = ROOT / "docs" / "rendezvous.md"
MANIFEST = HERE / "models.json"
GOLDEN = ROOT / "tests" / "rendezvous" / "golden"
#: golden trace -> what it shows (the regenerate script's descriptions, kept short here)
SCENARIOS = {
    "two_join": "Two nodes (min = max = 2) join and complete a round",
    "last_call": "Three nodes, min 2, max 3: the last call passes, the round completes with two, "
    "and the late node goes to the wait list",
    "redundant_close": "Three nodes, min = max = 2: the third is redundant; a close ends every "
    "join (the redundant node exits gracefully)",
}
#: events drawn as nothing: a read served from the cache, a wait after SYNC
QUIET = {"SyncCached", "Delay"}

MODELS_INTRO = (
    "## Models\n\n"
    "From the last TLC 2.15 run of each model (1 worker, `-deadlock`, on a shared 2-core "
    "machine; seconds are wall time, so they vary with the machine's load). Descriptions are in "
    "`spec/rendezvous/models.json` and in each cfg's comments; `Variant` is in each cfg.\n"
)

Event = dict[str, Any]


def _fn(value: Any) -> dict[str, Any]:
    return {} if value == [] else dict(value["#map"])


def _set(value: Any) -> list[str]:
    return sorted(value["#set"]) if isinstance(value, dict) else []


def summary(s: Any, short: dict[str, str]) -> str:
    """A state record in a few words: round, open/complete, the lists, the last call."""
    if s == "NoState":
        return "no state"
    parts = _fn(s["participants"])
    p = ",".join(f"{short[n]}:{r}" for n, r in sorted(parts.items(), key=lambda x: short[x[0]]))
    words = [f"r{s['round']}", "complete" if s["complete"] else "open", f"P[{p}]"]
    for key, name in (("waitList", "W"), ("redundancyList", "R")):
        if members := _set(s[key]):
            words.append(f"{name}[{','.join(sorted(short[n] for n in members))}]")
    if s["deadline"]:
        words.append(f"last call {s['deadline'][0]}")
    if s["closed"]:
        words.append("closed")
    return " ".join(words)


def read_trace(path: Path) -> tuple[dict[str, Any], list[Event]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return rows[0], [r for r in rows[1:] if r.get("kind") == "event"]


def diagram(path: Path) -> str:
    header, events = read_trace(path)
    short = {n: f"n{i}" for i, n in enumerate(header["nodes"])}
    lines = ["sequenceDiagram", "    participant S as store"]
    lines += [f"    participant {short[n]} as {n}" for n in header["nodes"]]
    everyone = ",".join(short.values())
    for e in events:
        name, post = e["event"], e["post"]
        if name in QUIET:
            continue
        if name == "Tick":
            lines.append(f"    Note over {everyone}: tick")
            continue
        n = short[e["node"]]
        if name == "SyncWriteWon":
            lines.append(f"    {n}->>S: write won: {summary(post['store'], short)}")
        elif name == "SyncWriteLost":
            lines.append(f"    S-->>{n}: write lost, reads {summary(post['local'], short)}")
        elif name in {"SyncRead", "ReadOnlySync"}:
            lines.append(f"    S-->>{n}: read {summary(post['local'], short)}")
        elif name == "Finish" and post["op"] == "none" and post["result"] == "ok":
            view = post["view"]
            ranks = _fn(view["ranks"])
            rank = ranks.get(e["node"], "?")
            lines.append(
                f"    Note over {n}: returns rank {rank} of {len(ranks)}, round {view['round']}"
            )
        elif name == "Finish" and post["op"] == "join":
            lines.append(f"    Note over {n}: exit op done, join op starts")
        else:
            lines.append(f"    Note over {n}: {name}")
    return "\n".join(lines)


def diagram_block(name: str) -> str:
    path = GOLDEN / f"{name}.ndjson"
    header, events = read_trace(path)
    body = (
        f"*{SCENARIOS[name]}* — `tests/rendezvous/golden/{name}.ndjson` (simulator seed "
        f"{header['seed']}, {len(events)} events, Reference variant; reads served from the "
        "cache and waits are not drawn).\n\n"
        f"```mermaid\n{diagram(path)}\n```"
    )
    return docblocks.block(f"rendezvous-diagram {name}", body, SCRIPT)


def models_table() -> str:
    raw = json.loads(MANIFEST.read_text(encoding="utf-8"))
    rows = [
        "| model | class | expect | violates | distinct | generated | depth | seconds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in raw["models"]:
        r = m.get("recorded") or {}
        figures = docblocks.figures(r)
        violates = f"`{m['violates']}`" if m["violates"] else "—"
        rows.append(
            f"| `{m['name']}` | {m['class']} | {m['expect']} | {violates} | {' | '.join(figures)} |"
        )
    return docblocks.block("rendezvous-models", MODELS_INTRO + "\n" + "\n".join(rows), SCRIPT)


def blocks() -> dict[str, str]:
    out = {f"rendezvous-diagram {n}": diagram_block(n) for n in SCENARIOS}
    out["rendezvous-models"] = models_table()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    description = (__doc__ or "").splitlines()[0]
    return docblocks.main(argv, DOCS, blocks, script=Path(__file__).name, description=description)


if __name__ == "__main__":
    sys.exit(main())
