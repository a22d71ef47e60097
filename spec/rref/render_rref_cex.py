#!/usr/bin/env python3
"""Render the counterexample of a must-fail RRef model as the numbered steps docs/rref.md shows.

The blocks under "Must-fail models: the counterexamples" in docs/rref.md sit between
``<!-- CEX <model> -->`` and ``<!-- /CEX -->``. Each is this script's rendering of the model's
real counterexample: TLC runs the model as ``tracecheck check`` does (its row in models.json:
one worker, so breadth-first and the shortest counterexample for an invariant), with a fixed seed
and fingerprint polynomial so that a liveness counterexample is the same from run to run, and the
states come parsed from :mod:`tracecheck.runner.tlc`.

Usage (from the repository root, in the project's venv)::

    python spec/rref/render_rref_cex.py MODEL            # print one model's steps
    python spec/rref/render_rref_cex.py --check          # exit 1 if a docs block is stale
    python spec/rref/render_rref_cex.py --write          # rewrite every docs block

One numbered entry per step: the action (TLC labels most steps only by a disjunct of Next, so
it is recovered from the state change: which message was taken from the network, else which
variable changed), its parameters, then every variable that changed (``net`` as the messages
sent) with ids written ``w1.2`` for ``<<w1, 2>>``.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tracecheck.runner.manifest import load_manifest, run_model
from tracecheck.runner.results import Counterexample
from tracecheck.tla.values import ModelValue, Record, TLAFunction

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent.parent / "docs" / "rref.md"
BLOCK = re.compile(r"(<!-- CEX (\w+) -->\n)(.*?)(<!-- /CEX -->)", re.DOTALL)

#: Message type -> the handler that takes it (REMOTE_RET: see _handler).
HANDLER = {
    "PYTHON_REMOTE_CALL": "AssignOwnerRRef",
    "PYTHON_RREF_FETCH_CALL": "RetrieveOwnerRRef",
    "PYTHON_RREF_FETCH_RET": "ReceiveFetchRet",
    "PYTHON_CALL": "GetOrCreateRRef",
    "RREF_FORK_REQUEST": "AddForkOfOwnerIfNotPresent",
    "RREF_ACK": "FinishForkRequest",
    "RREF_CHILD_ACCEPT": "DelPendingChild",
    "RREF_USER_DELETE": "DelForkOfOwner",
}
#: The order in which changed variables are listed (net is shown as the messages sent).
ORDER = [
    *("owners", "pendingOwners", "forks", "pendingUsers", "confirmedUsers", "pendingChildren"),
    *("ownerHeld", "selfCalls", "tombstones", "held", "fetching", "fetched", "deleted"),
    *("timedOut", "remoteErrors", "phase", "stopping", "removedForks", "erasedOwners"),
]


def show(v: Any) -> str:
    """A TLA+ value as TLC prints it, ids shortened to ``w1.2``."""
    if isinstance(v, ModelValue):
        return v.name
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, tuple):
        if len(v) == 2 and isinstance(v[0], ModelValue) and isinstance(v[1], int):
            return f"{v[0].name}.{v[1]}"
        return "<<" + ", ".join(show(x) for x in v) + ">>"
    if isinstance(v, frozenset):
        return "{" + ", ".join(sorted(show(x) for x in v)) + "}"
    if isinstance(v, Record):
        return "[" + ", ".join(f"{k} |-> {show(x)}" for k, x in v.items()) + "]"
    if isinstance(v, TLAFunction):
        items = sorted((show(k), show(x)) for k, x in v.items())
        return "(" + " @@ ".join(f"{k} :> {x}" for k, x in items) + ")"
    return str(v)


def msg(m: Mapping[str, Any], verb: str = "sends") -> str:
    copy = " (retry copy)" if m["dup"] == 2 else ""
    return (
        f"{verb} {m['type']}{copy} {show(m['src'])} -> {show(m['dst'])} "
        f"(rref {show(m['rref'])}, fork {show(m['fork'])})"
    )


def _key(m: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(show(m[k]) for k in ("type", "src", "dst", "rref", "fork"))


def _taken(m: Mapping[str, Any], label: str | None) -> str:
    """The step that took message ``m`` from the network. TLC labels a step with the disjunct
    of Next it took, which separates the handlers (ReceiveNext, SystemNext) from the faults
    (FaultNext) that also remove a message."""
    if label == "FaultNext":
        if m["type"] == "PYTHON_REMOTE_CALL":
            return "FailRemote"
        return "LoseFirstAttempt" if m["dup"] == 1 else "ExhaustRetries"
    if m["type"] == "REMOTE_RET":
        return "FinishCreatingOwnerRRef" if m["fork"] == m["rref"] else "ConfirmPendingUser"
    return HANDLER[m["type"]]


def _grown(before: Any, after: Any) -> set[Any]:
    return set(after) - set(before)


def infer(p: Mapping[str, Any], v: Mapping[str, Any], label: str | None) -> tuple[str, str]:
    """The action of the step from ``p`` to ``v`` (TLC's ``label``) and its parameters."""
    gone = p["net"] - v["net"]
    new = v["net"] - p["net"]
    copies = {_key(m) for m in new if m["dup"] == 2}
    retried = [m for m in gone if m["dup"] == 0 and _key(m) in copies]
    if retried:
        m = retried[0]
        return (
            f"RetrySend({m['type']} {show(m['src'])} -> {show(m['dst'])}, fork {show(m['fork'])})",
            "",
        )
    if gone:
        m = next(iter(gone))
        name = _taken(m, label)
        copy = " (retry copy)" if m["dup"] == 2 else ""
        if label == "FaultNext":
            verb = "the callee fails" if name == "FailRemote" else "loses"
            return name, f"[{verb} {m['type']}{copy} {show(m['src'])} -> {show(m['dst'])}]"
        params = f"{show(m['dst'])}, {show(m['rref'])}, {show(m['fork'])}"
        return f"{name}({params})", f"[takes {m['type']}{copy} from {show(m['src'])}]"
    sent = {m["type"]: m for m in new}
    for kind, name in (("PYTHON_REMOTE_CALL", "Remote"), ("PYTHON_CALL", "PrepareChildFork")):
        if kind in sent:
            m = sent[kind]
            who = f"{show(m['src'])} -> {show(m['dst'])}"
            return f"{name}({who}, rref {show(m['rref'])}, fork {show(m['fork'])})", ""
    if "PYTHON_RREF_FETCH_CALL" in sent:
        m = sent["PYTHON_RREF_FETCH_CALL"]
        return f"ToHere({show(m['src'])} -> {show(m['dst'])}, fork {show(m['fork'])})", ""
    if v["stopping"] != p["stopping"]:
        return "WaitAllWorkers", ""
    for w, phase in v["phase"].items():
        if p["phase"][w] != phase:
            step = "DestroyInstance" if phase == "destroyed" else "DelAllUsersAndUnforkedOwners"
            return f"{step}({show(w)})", ""
    if _grown(p["deleted"], v["deleted"]):
        return f"DelUser({', '.join(show(f) for f in _grown(p['deleted'], v['deleted']))})", ""
    if _grown(p["timedOut"], v["timedOut"]) or any(
        p["selfCalls"][w] - v["selfCalls"][w] for w in v["selfCalls"]
    ):
        return "TimeOutRemote", ""
    if _grown(v["held"], p["held"]):
        return f"DropRRef({', '.join(show(f) for f in _grown(v['held'], p['held']))})", ""
    if _grown(v["fetching"], p["fetching"]):
        return "TimeOutToHere", ""
    for w in v["ownerHeld"]:
        if v["ownerHeld"][w] - p["ownerHeld"][w]:
            return f"CreateLocalRRef({show(w)})", ""
        if p["ownerHeld"][w] - v["ownerHeld"][w]:
            return f"DropOwnerRRef({show(w)})", ""
    if any(p["tombstones"][w] - v["tombstones"][w] for w in v["tombstones"]):
        return "ForgetTombstones", ""
    return "(unrecognised step)", ""


def steps(cex: Counterexample) -> str:
    states = cex.states
    lines = [" 1. Init: all maps empty, nextId = 1 everywhere, no message in flight"]
    for i in range(1, len(states)):
        p, v = states[i - 1].values, states[i].values
        action, taken = infer(p, v, states[i].action)
        lines.append(f"{i + 1:2}. {action}" + (f"  {taken}" if taken else ""))
        changed = [k for k in ORDER if p[k] != v[k]]
        lines += [f"      {k} = {show(v[k])}" for k in changed]
        sent = sorted(v["net"] - p["net"], key=_key)
        if action.startswith("RetrySend"):
            sent = [m for m in sent if m["dup"] == 2]
        lines += [f"      {msg(m)}" for m in sent]
        if not changed and not sent and taken.startswith("[takes"):
            lines.append("      (no state changes: the handler finds nothing to do)")
    if cex.loops_to is not None:
        lines.append(f"Back to state {cex.loops_to}: the behaviour repeats this loop for ever")
    elif cex.stutters:
        lines.append(
            f"State {len(states) + 1}: Stuttering -- the system stops here for ever "
            "(no action is enabled that fairness forces)"
        )
    return "\n".join(lines)


def render(model: str) -> str:
    manifest = load_manifest(HERE.parent)
    entries = {m.name: (p, m) for p, m in manifest.entries()}
    protocol, entry = entries[model]
    # A fixed seed and fingerprint polynomial: TLC picks both at random, and a liveness
    # counterexample (unlike an invariant's shortest one) depends on them.
    check = run_model(manifest, protocol, entry, seed=0, extra=("-fp", "0"))
    if not check.ok or check.result.counterexample is None:
        raise SystemExit(f"{model}: TLC did not fail as the manifest says: {check.problem}")
    return f"```\n{steps(check.result.counterexample)}\n```\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("model", nargs="?", help="print this model's counterexample")
    ap.add_argument("--check", action="store_true", help="fail if a docs block is stale")
    ap.add_argument("--write", action="store_true", help="rewrite the docs blocks")
    ap.add_argument("--only", nargs="*", default=None, help="with --check/--write: these models")
    args = ap.parse_args(argv)
    if args.model:
        print(render(args.model), end="")
        return 0
    docs = DOCS.read_text(encoding="utf-8")
    stale: list[str] = []

    def replace(match: re.Match[str]) -> str:
        name = match.group(2)
        if args.only is not None and name not in args.only:
            return match.group(0)
        fresh = render(name)
        if fresh != match.group(3):
            stale.append(name)
        return match.group(1) + fresh + match.group(4)

    updated = BLOCK.sub(replace, docs)
    if args.write:
        DOCS.write_text(updated, encoding="utf-8")
        return 0
    for name in stale:
        print(f"{DOCS.name}: the counterexample of {name} is stale; run --write", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
