#!/usr/bin/env python3
"""Render the counterexample of a must-fail rendezvous model as a Markdown step table.

The tables under "Must-fail models and their counterexamples" in docs/rendezvous.md sit between
``<!-- CEX <model> -->`` and ``<!-- /CEX -->``. Each is this script's rendering of the model's
real counterexample: TLC is run as ``tracecheck check`` runs it (the model's row in
``models.json``: module, cfg, deadlock checking, one worker, so breadth-first and the shortest
counterexample), and the states come parsed from :mod:`tracecheck.runner.tlc`.

Usage (from the repository root, in the project's venv)::

    python spec/rendezvous/render_cex.py MODEL      # print one model's table
    python spec/rendezvous/render_cex.py --check    # exit 1 if a docs table is stale
    python spec/rendezvous/render_cex.py --write    # rewrite every docs table

One row per state: the action (TLC's label; for specs whose steps TLC labels only "Action" or
"DomainNext", such as DynamicRendezvousBootstrap, the action is recovered from the state
change), the acting node, the store after the step, and the acting node's pc, op, ticks to its
op deadline, dirty flag, token-current flag and local copy.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tracecheck.runner.results import Counterexample
from tracecheck.runner.tlc import TLCOptions, run_tlc
from tracecheck.tla.values import ModelValue

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent.parent / "docs" / "rendezvous.md"
BLOCK = re.compile(r"(<!-- CEX (\w+) -->\n)(.*?)(<!-- /CEX -->)", re.DOTALL)
HEADER = (
    "| # | action | node | store after | acting node after "
    "(pc, op, opDl, dirty, token current, local copy) |\n|---|---|---|---|---|"
)
#: The per-node variables whose change marks the node that acted.
NODE_VARS = ("pc", "op", "local", "dirty", "opDl", "result", "view", "fresh")


def at(function: Any, node: int) -> Any:
    """``f[node]`` of a TLA+ function of the nodes (a tuple when the nodes are 1..N)."""
    return function[node - 1] if isinstance(function, tuple) else function[node]


def nodes_of(function: Any) -> list[int]:
    return list(range(1, len(function) + 1)) if isinstance(function, tuple) else sorted(function)


def domain(function: Any) -> set[int]:
    return set(nodes_of(function))


def pairs(function: Any) -> str:
    """``1:0,2:1`` for a function of the nodes (``{}`` prints as nothing)."""
    items = enumerate(function, 1) if isinstance(function, tuple) else sorted(function.items())
    return ",".join(f"{k}:{v}" for k, v in items)


def show_state(s: Any) -> str:
    """A rendezvous state: ``r0 open P{1:0} W{2} R{} dl=1 hb{1:0,2:1}``."""
    if isinstance(s, ModelValue):
        return s.name
    deadline = "None" if s["deadline"] == ModelValue("NoDeadline") else s["deadline"]
    flags = ("complete" if s["complete"] else "open") + (" closed" if s["closed"] else "")
    waiting = ",".join(map(str, sorted(s["waitList"])))
    redundant = ",".join(map(str, sorted(s["redundancyList"])))
    return (
        f"r{s['round']} {flags} P{{{pairs(s['participants'])}}} W{{{waiting}}} "
        f"R{{{redundant}}} dl={deadline} hb{{{pairs(s['lastHeartbeats'])}}}"
    )


def _write_action(p: Mapping[str, Any], v: Mapping[str, Any], n: int) -> str:
    """The decision a dirty copy records: what changed in the node's copy."""
    l0, l1 = at(p["local"], n), at(v["local"], n)
    # participants: node -> rank, printed by TLC as a tuple when the nodes are 1..k
    p0, p1 = domain(l0["participants"]), domain(l1["participants"])
    changes = (
        ("AddToParticipants", n in p1 - p0),
        ("RemoveFromParticipants", n in p0 - p1),
        ("AddToWaitList", n in l1["waitList"] - l0["waitList"]),
        ("RemoveFromWaitList", n in l0["waitList"] - l1["waitList"]),
        ("AddToRedundancyList", n in l1["redundancyList"] - l0["redundancyList"]),
        ("RemoveFromRedundancyList", n in l0["redundancyList"] - l1["redundancyList"]),
        ("MarkRendezvousClosed", l1["closed"] and not l0["closed"]),
        ("MarkRendezvousComplete", l1["complete"] and not l0["complete"]),
    )
    return next((name for name, changed in changes if changed), "KeepAlive")


def infer(p: Mapping[str, Any], v: Mapping[str, Any], n: int) -> str:
    """Name the DynamicRendezvous action of a step TLC labels only 'Action'."""
    pc0, pc1 = at(p["pc"], n), at(v["pc"], n)
    if pc1 == "crashed":
        return "Crash"
    if pc0 == "idle" and pc1 == "sync":
        ops = {"exit": "NextRendezvous", "keepalive": "KeepAliveTimer", "close": "SetClosed"}
        return ops[at(v["op"], n)]
    if pc1 == "decide" and pc0 in ("sync", "sleep"):
        if at(p["dirty"], n):
            won = v["store"] != p["store"] or at(p["tokenCurrent"], n)
            return "SyncWriteWon" if won else "SyncWriteLost"
        cached = at(p["fresh"], n) and pc0 == "sync" and at(p["local"], n) == at(v["local"], n)
        return "SyncCached" if cached else "SyncRead"
    if pc0 == "decide":
        if pc1 == "sleep":
            return "Delay"
        if pc1 == "stopped":
            return "GracefulExit" if at(v["result"], n) == "gracefulExit" else "ErrorClosed"
        if at(v["dirty"], n):
            return _write_action(p, v, n)
        return "ErrorTimeout" if at(v["result"], n) == "timeout" else "Finish"
    return "Action"


#: TLC labels that lump every step (a spec whose next-state relation is one disjunction the
#: steps are recovered from): DynamicRendezvousBootstrap's, MCDynamicRendezvousClocksDomains'.
LUMPED = ("Action", "DomainNext")


def table(cex: Counterexample) -> str:
    rows = [HEADER]
    prev: Mapping[str, Any] | None = None
    for state in cex.states:
        v = state.values
        action = "Initial" if state.action == "Initial predicate" else (state.action or "")
        actor, acting = "", ""
        if prev is not None and action not in ("Tick", "FastTick"):
            changed = [
                n
                for n in nodes_of(v["pc"])
                if any(at(v[x], n) != at(prev[x], n) for x in NODE_VARS)
            ]
            actor = ",".join(map(str, changed))
        if actor and "," not in actor:
            n = int(actor)
            dirty = "dirty" if at(v["dirty"], n) else "clean"
            acting = (
                f"{at(v['pc'], n)}, {at(v['op'], n)}, {at(v['opDl'], n)}, {dirty}, "
                f"{at(v['tokenCurrent'], n)}, {show_state(at(v['local'], n))}"
            )
            if prev is not None and at(v["result"], n) != at(prev["result"], n):
                acting += f"; result={at(v['result'], n)}"
        if action in LUMPED and prev is not None:
            quiet = all(
                at(v[x], k) == at(prev[x], k)
                for x in ("pc", "op", "dirty")
                for k in nodes_of(v["pc"])
            )
            if quiet:
                action, actor, acting = "FastTick", "", ""
            else:
                action = infer(prev, v, int(actor)) if actor and "," not in actor else "FastTick"
        rows.append(f"| {state.index} | {action} | {actor} | {show_state(v['store'])} | {acting} |")
        prev = v
    if cex.loops_to is not None:
        back = next(s for s in cex.states if s.index == cex.loops_to)
        rows.append(f"\nThen back to state {back.index} ({back.action}): the loop repeats forever.")
    first = cex.states[0].values
    if "offset" in first:  # MCDynamicRendezvousClocks: each host's clock, ahead of true time
        ahead = ", ".join(f"node {n}: {at(first['offset'], n)}" for n in nodes_of(first["offset"]))
        rows.append(f"\nHost clocks, ticks ahead of true time: {ahead}.")
    if "mem" in first:  # MCDynamicRendezvousClocksDomains: one clock domain per host
        rows.append(
            "\nClock domains: node 1 on host a, the others on host b (the reader's memory of "
            "foreign stamps is not shown; `hb` ages are true ages)."
        )
    return "\n".join(rows) + "\n"


def render(model: str) -> str:
    """The table of ``model``'s counterexample, from a TLC run as ``tracecheck check`` does it."""
    manifest = json.loads((HERE / "models.json").read_text(encoding="utf-8"))
    entry = next((m for m in manifest["models"] if m["name"] == model), None)
    if entry is None:
        raise SystemExit(f"{model}: not in models.json")
    options = TLCOptions(workers=entry["workers"], check_deadlock=entry["check_deadlock"])
    result = run_tlc(HERE / entry["module"], HERE / entry["cfg"], options)
    if result.counterexample is None:
        raise SystemExit(f"{model}: TLC gave no counterexample ({result.verdict.value})")
    return table(result.counterexample)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", help="print this model's table")
    parser.add_argument("--check", action="store_true", help="exit 1 if a docs table is stale")
    parser.add_argument("--write", action="store_true", help="rewrite the docs tables")
    parser.add_argument("--only", nargs="*", help="with --check/--write: these models only")
    args = parser.parse_args(argv)
    if args.model:
        print(render(args.model), end="")
        return 0
    if not (args.check or args.write):
        parser.error("name a model, or give --check or --write")
    docs = DOCS.read_text(encoding="utf-8")
    stale: list[str] = []

    def fresh(match: re.Match[str]) -> str:
        model = match.group(2)
        if args.only and model not in args.only:
            return match.group(0)
        text = render(model)
        if text != match.group(3):
            stale.append(model)
        return match.group(1) + text + match.group(4)

    updated = BLOCK.sub(fresh, docs)
    if args.write:
        DOCS.write_text(updated, encoding="utf-8")
        return 0
    for model in stale:
        print(f"{DOCS.name}: the {model} table is stale; run {Path(__file__).name} --write")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
