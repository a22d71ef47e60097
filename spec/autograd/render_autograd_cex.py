#!/usr/bin/env python3
"""Render the counterexample of a must-fail autograd model as the step list of docs/autograd.md.

The step lists under "Must-fail models: the counterexamples" in docs/autograd.md sit between
``<!-- CEX <model> -->`` and ``<!-- /CEX -->``. Each is this script's rendering of the model's
counterexample as TLC finds it when ``tracecheck check`` runs the model (its row in
``models.json``: module, cfg, deadlock checking, one worker, so breadth-first and the shortest;
seed and fingerprint polynomial fixed, so a liveness counterexample repeats too).
TLC's output is recorded in ``cex/<model>.json`` (the first state whole, then each state's changed
variables as TLA+ text, and each step's action), so the docs can be checked without TLC; the
recording is checked against TLC in its turn.

TLC labels a step taken inside a disjunct of ``AppNext``, ``SystemNext`` or ``FaultNext`` with the
disjunct's name and its source location; the recording resolves that location, in
``DistAutograd.tla``, to the action the disjunct calls.

Usage (from the repository root, in the project's venv)::

    python spec/autograd/render_autograd_cex.py MODEL             # print one model's steps
    python spec/autograd/render_autograd_cex.py --check           # exit 1 if a docs block is stale
    python spec/autograd/render_autograd_cex.py --write           # rewrite every docs block
    python spec/autograd/render_autograd_cex.py --record [MODEL]  # run TLC, rewrite the recordings
    python spec/autograd/render_autograd_cex.py --verify [MODEL]  # run TLC, exit 1 if one is stale

A step shows the action, then what changed: ``+``/``-`` for set elements, ``sends``/``takes``
for messages (``loses`` and ``drops`` for those nobody handles), counters left out.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tracecheck.protocols.autograd import AUTOGRAD
from tracecheck.runner.tlc import TLCOptions, run_tlc
from tracecheck.tla.parser import parse_value
from tracecheck.tla.values import format_value

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent.parent / "docs" / "autograd.md"
RECORDINGS = HERE / "cex"
SPEC = HERE / "DistAutograd.tla"
BLOCK = re.compile(r"(<!-- CEX (\w+) -->\n)(.*?)(<!-- /CEX -->)", re.DOTALL)
#: TLC's label for a step inside one of these disjunctions names the disjunction, not the action.
GROUPS = ("AppNext", "SystemNext", "FaultNext", "Next")
#: The spec's actions (the implementation's trace events): the trace mapping's list.
ACTIONS = tuple(action.event for action in AUTOGRAD.actions)
_SPAN = re.compile(r"line (\d+), col (\d+) to line (\d+), col (\d+) of module (\w+)")
#: Variables in the order a step lists their changes; the counters are left out.
ORDER = (
    "alive",
    "ctxs",
    "cur",
    "known",
    "handlers",
    "net",
    "pending",
    "detached",
    "sends",
    "recvs",
    "released",
    "tomb",
    "late",
    "execd",
    "fired",
    "grads",
    "bstate",
    "results",
    "freed",
    "outst",
    "awaiting",
    "parent",
    "echoWait",
)

Values = Mapping[str, Any]


# --- names -----------------------------------------------------------------------------------


def ctx(c: Any) -> str:
    """``c0.1`` for context <<0, 1>>; ``none`` for the empty tuple (no context)."""
    return "none" if c == () else f"c{c[0]}.{c[1]}"


def mid(m: Any) -> str:
    """``m1.0`` for message id <<1, 0>>; ``root`` for the graph root <<-1, 0>>."""
    if m == ():
        return "none"
    return "root" if m == (-1, 0) else f"m{m[0]}.{m[1]}"


def message(m: Any) -> str:
    """One message record in a line's words."""
    t, src, dst, c = m["type"], m["src"], m["dst"], ctx(m["ctx"])
    head = f"{t} w{src}->w{dst} {c}"
    if t == "FWD_REQ":
        text = f"{head} {mid(m['mid'])} {'grad' if m['flag'] else 'no-grad'}"
    elif t == "FWD_RESP":
        text = f"{head} {mid(m['mid'])} (answers {mid(m['req'])})"
    elif t == "RESP":
        text = f"{head} (answers {mid(m['req'])}, {'value' if m['flag'] else 'exception'})"
    elif t == "CLEANUP":
        copy = {0: "", 1: ", retried", 2: ", the retry's copy"}[m["dup"]]
        hz = f", {horizon(m['hz'])}" if "hz" in m else ""
        text = f"{head} (on behalf of w{m['trig']}{copy}{hz})"
    elif t == "BWD_REQ":
        text = f"{head} pass {m['pass']} send {mid(m['mid'])} {'grad' if m['flag'] else 'zero'}"
    elif t == "BWD_RESP":
        text = f"{head} pass {m['pass']} send {mid(m['mid'])} {'ok' if m['flag'] else 'error'}"
    elif t == "BWD_ACK":
        text = f"{head} pass {m['pass']} {'ok' if m['flag'] else 'error'}"
    else:  # BWD_START
        text = f"{head} pass {m['pass']}"
    return str(text)


def horizon(h: Any) -> str:
    """A horizon <<n, open>>: every id of the creator below n but those open is dead."""
    n, live = h
    but = f" but {{{', '.join(sorted(ctx(c) for c in live))}}}" if live else ""
    return f"horizon: below {n}{but}"


def _send(s: Any) -> str:
    inputs = ", ".join(sorted(mid(x) for x in s["in"]))
    return f"send {mid(s['mid'])} ->w{s['dst']} in {{{inputs}}}"


def _recv(r: Any) -> str:
    return f"recv {mid(r['mid'])} <-w{r['src']}" + (" (loss)" if r["loss"] else "")


def _handler(h: Any) -> str:
    text = f"handler w{h['w']} {ctx(h['ctx'])} for {mid(h['req'])} from w{h['caller']}"
    if h["called"]:
        text += f", {h['called']} nested"
    if h["wait"] != ():
        text += f", waiting for {mid(h['wait'])}"
    if h["forgot"]:
        text += ", forgot " + ", ".join(sorted(mid(m) for m in h["forgot"]))
    if h["nr"]:
        text += ", using " + ", ".join(sorted(mid(m) for m in h["nr"]))
    if h["err"]:
        text += ", failed"
    return text


#: How an element of each per-worker set variable reads.
ELEMENT: dict[str, Callable[[Any], str]] = {
    "ctxs": ctx,
    "tomb": ctx,
    "known": lambda e: f"{ctx(e[0])}->w{e[1]}",
    "parent": lambda e: f"{ctx(e[0])}->w{e[1]}",
    "echoWait": lambda e: f"{ctx(e[0])}->w{e[1]}",
    "sends": _send,
    "recvs": _recv,
    "pending": lambda e: f"{ctx(e[0])}/{mid(e[1])}",
    "detached": lambda e: f"{ctx(e[0])}/{mid(e[1])}",
    "outst": lambda e: f"{ctx(e[0])}/{mid(e[1])}",
    "execd": lambda e: f"{ctx(e[0])}/{mid(e[1])}",
    "fired": lambda e: f"{ctx(e[0])}/{mid(e[1])}",
    "grads": lambda e: f"{ctx(e[0])}/p{e[1]}/{mid(e[2])}",
    "bstate": lambda e: f"{ctx(e[0])}#{e[1]}:{e[2]}",
    "awaiting": lambda e: f"{ctx(e[0])}/{mid(e[2])} from w{e[1]}",
}
#: How an element of each global set variable reads.
GLOBAL: dict[str, Callable[[Any], str]] = {
    "released": lambda e: f"w{e[0]}:{ctx(e[1])}",
    "late": lambda e: f"{ctx(e[0])}:{e[1]}",
    "results": lambda e: f"{ctx(e[0])}#{e[1]}:{e[2]}",
    "freed": ctx,
    "handlers": _handler,
}


def _items(elements: Any, show: Callable[[Any], str]) -> str:
    return ", ".join(sorted(show(e) for e in elements))


def _set_change(name: str, before: Any, after: Any, show: Callable[[Any], str]) -> str | None:
    added, removed = set(after) - set(before), set(before) - set(after)
    parts = []
    if added:
        parts.append(f"+ {{{_items(added, show)}}}")
    if removed:
        parts.append(f"- {{{_items(removed, show)}}}")
    return f"{name} {'  '.join(parts)}" if parts else None


# --- which action a step is ------------------------------------------------------------------


def resolve(header: str, spec_lines: Sequence[str]) -> str:
    """The action of a step from TLC's label: the label itself, or for a step inside a
    disjunction (``SystemNext line 1024, col 8 to line 1024, col 57 of module ...``) the action
    the disjunct at that location calls."""
    label = header.strip("<>").split(" ")[0]
    if label not in GROUPS:
        return label
    span = _SPAN.search(header)
    if span is None:
        raise ValueError(f"{header!r}: no source location to resolve {label}")
    l0, c0, l1, c1 = (int(span[i]) for i in range(1, 5))
    lines = list(spec_lines[l0 - 1 : l1])
    lines[-1] = lines[-1][:c1]
    lines[0] = lines[0][c0 - 1 :]
    called = [a for a in re.findall(r"(\w+)\(", " ".join(lines)) if a in ACTIONS]
    if len(called) != 1:
        raise ValueError(f"{header!r}: the disjunct calls {called}, not one action")
    return str(called[0])


# --- recordings ------------------------------------------------------------------------------


def record(model: str) -> dict[str, Any]:
    """Run ``model`` as ``tracecheck check`` does; its counterexample, actions resolved."""
    entry = _entry(model)
    # A fixed seed and fingerprint polynomial: TLC picks both at random, and the cycle it
    # reports for a liveness property can depend on them; fixed, every recording repeats.
    options = TLCOptions(
        workers=1, check_deadlock=entry["check_deadlock"], seed=0, extra=("-fp", "0")
    )
    result = run_tlc(HERE / entry["module"], HERE / entry["cfg"], options)
    cex = result.counterexample
    if cex is None:
        raise SystemExit(f"{model}: TLC gave no counterexample ({result.verdict.value})")
    spec_lines = SPEC.read_text(encoding="utf-8").splitlines()
    states: list[dict[str, Any]] = []
    prev: Values = {}
    for state in cex.states:
        if state.parse_error:
            raise SystemExit(f"{model}: state {state.index}: {state.parse_error}")
        changed = {k: format_value(v) for k, v in state.values.items() if prev.get(k) != v}
        action = (
            "Init" if state.action == "Initial predicate" else resolve(state.header, spec_lines)
        )
        states.append({"index": state.index, "action": action, "changed": changed})
        prev = state.values
    return {
        "model": model,
        "verdict": result.verdict.value,
        "violated": result.violated,
        "loops_to": cex.loops_to,
        "stutters": cex.stutters,
        "states": states,
    }


def load(model: str) -> dict[str, Any]:
    path = RECORDINGS / f"{model}.json"
    if not path.is_file():
        raise SystemExit(f"{model}: no recording {path.name}; run {Path(__file__).name} --record")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _entry(model: str) -> dict[str, Any]:
    manifest = json.loads((HERE / "models.json").read_text(encoding="utf-8"))
    entry: dict[str, Any] | None = next((m for m in manifest["models"] if m["name"] == model), None)
    if entry is None:
        raise SystemExit(f"{model}: not in models.json")
    return entry


def must_fail() -> list[str]:
    """The manifest's must-fail models, in its order."""
    manifest = json.loads((HERE / "models.json").read_text(encoding="utf-8"))
    return [m["name"] for m in manifest["models"] if m["expect"] != "pass"]


def _dump(data: Mapping[str, Any]) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


# --- rendering -------------------------------------------------------------------------------


def _lines(action: str, before: Values, after: Values) -> list[str]:
    out: list[str] = []
    for name in ORDER:
        if name not in after or before.get(name) == after[name]:
            continue
        b: Any = before[name]
        a: Any = after[name]
        if name == "net":
            out += _net_lines(action, before, after)
        elif name == "cur":
            out += [
                f"cur[w{w}][t{t}] = {ctx(a[w][t])}"
                for w in sorted(a)
                for t in sorted(a[w])
                if a[w][t] != b[w][t]
            ]
        elif name == "alive":
            out += [
                f"alive[w{w}] = {a[w]}".replace("True", "TRUE").replace("False", "FALSE")
                for w in sorted(a)
                if a[w] != b[w]
            ]
        elif name == "tomb" and any(isinstance(v, Mapping) for v in a.values()):
            out += _horizon_tomb_lines(b, a)
        elif name in GLOBAL:
            line = _set_change(name, b, a, GLOBAL[name])
            out += [line] if line else []
        else:
            for w in sorted(a):
                line = _set_change(f"{name}[w{w}]", b[w], a[w], ELEMENT[name])
                out += [line] if line else []
    return out


def _horizon_tomb_lines(before: Any, after: Any) -> list[str]:
    """Under Horizon a worker's tomb is a record: its explicit tombstones and its horizons."""
    out = []
    for w in sorted(after):
        line = _set_change(f"tomb[w{w}]", before[w]["ids"], after[w]["ids"], ctx)
        out += [line] if line else []
        b, a = before[w]["hz"], after[w]["hz"]
        out += [f"horizon[w{w}][w{x}] = {horizon(a[x])}" for x in sorted(a) if a[x] != b[x]]
    return out


def _net_lines(action: str, before: Values, after: Values) -> list[str]:
    taken = set(before["net"]) - set(after["net"])
    sent = set(after["net"]) - set(before["net"])
    out = []
    for m in sorted(taken, key=message):
        if action == "Crash" or (action == "Discard" and not after["alive"][m["dst"]]):
            verb = "loses (sent to the dead worker)"
        elif action == "Discard":
            verb = "drops (its future has timed out)"
        elif action == "LoseCleanupMsg":
            verb = "loses (the retries are exhausted)"
        else:
            verb = "takes"
        out.append(f"{verb} {message(m)}")
    out += [f"sends {message(m)}" for m in sorted(sent, key=message)]
    return out


def render(data: Mapping[str, Any]) -> str:
    """The fenced step list of a recorded counterexample."""
    rows = ["```"]
    values: dict[str, Any] = {}
    last = 0
    for state in data["states"]:
        before = dict(values)
        values.update({k: parse_value(v) for k, v in state["changed"].items()})
        n, action = state["index"], state["action"]
        last = n
        if action == "Init":
            rows.append(f"{n:2}. Init: every container empty, no message in flight")
            continue
        rows.append(f"{n:2}. {action}")
        rows += [f"      {line}" for line in _lines(action, before, values)]
    violated = data["violated"]
    if data["stutters"]:
        rows.append(
            f"{last + 1:2}. Stuttering: no step that fairness forces is enabled; "
            f"{violated} is violated"
        )
    elif data["loops_to"] is not None:
        rows.append(f"    back to state {data['loops_to']}, for ever: {violated} is violated")
    elif data["verdict"] == "action_property":
        rows.append(f"    {violated} is violated by the step to state {last}")
    else:
        rows.append(f"    {violated} is violated in state {last}")
    rows.append("```")
    return "\n".join(rows) + "\n"


# --- the command line ------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="*", help="print these models' steps (from the recordings)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if a docs block is stale")
    mode.add_argument("--write", action="store_true", help="rewrite the docs blocks")
    mode.add_argument("--record", action="store_true", help="run TLC, rewrite the recordings")
    mode.add_argument("--verify", action="store_true", help="run TLC, exit 1 if one is stale")
    args = parser.parse_args(argv)
    if args.record or args.verify:
        stale = []
        for model in args.model or must_fail():
            recorded = _dump(record(model))
            path = RECORDINGS / f"{model}.json"
            if args.record:
                RECORDINGS.mkdir(exist_ok=True)
                path.write_text(recorded, encoding="utf-8")
            elif not path.is_file() or path.read_text(encoding="utf-8") != recorded:
                stale.append(model)
        for model in stale:
            print(f"cex/{model}.json differs from TLC's counterexample; run --record")
        return 1 if stale else 0
    if not (args.check or args.write):
        if not args.model:
            parser.error("name a model, or give --check, --write, --record or --verify")
        for model in args.model:
            print(render(load(model)), end="")
        return 0
    docs = DOCS.read_text(encoding="utf-8")
    stale = []

    def fresh(match: re.Match[str]) -> str:
        model = match.group(2)
        if args.model and model not in args.model:
            return match.group(0)
        text = render(load(model))
        if text != match.group(3):
            stale.append(model)
        return match.group(1) + text + match.group(4)

    updated = BLOCK.sub(fresh, docs)
    missing = [m for m in must_fail() if f"<!-- CEX {m} -->" not in docs]
    if args.write:
        DOCS.write_text(updated, encoding="utf-8")
    for model in stale if args.check else []:
        print(f"{DOCS.name}: the {model} steps are stale; run {Path(__file__).name} --write")
    for model in missing:
        print(f"{DOCS.name}: no <!-- CEX {model} --> block")
    return 1 if (args.check and stale) or missing else 0


if __name__ == "__main__":
    sys.exit(main())
