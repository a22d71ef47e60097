"""Traces produced by TLC's own simulation of the RRef spec, in our JSON-lines trace format.

``spec/rref/SimRRef.tla`` runs RRef with a ghost variable ``simLast`` that records the action
each step took, the acting worker and the parameters; ``SimDepthInv`` fails at a chosen depth,
so ``tlc -simulate`` prints one random behaviour per run (TLC 2.15 has no ``-dumpTrace``, and a
violation ends a simulation run). Each printed behaviour becomes a trace: a header with the
model's settings, then per step the event named by the ghost, its parameters under the mapping's
argument names, and the acting worker's post-state computed from the printed state the way
protoref logs it (:func:`rref_post`). A behaviour may end early in a state without successors
(the id budget used up, the network empty); TLC then reports a deadlock with the same trace.

Such traces come from a producer that shares no code with the implementation, so the checker
accepting them shows it accepts what the spec allows, not only what protoref happens to log.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

from tracecheck.errors import TracecheckError
from tracecheck.protocols import load_mapping
from tracecheck.protocols.mapping import NODE, ProtocolMap
from tracecheck.runner.results import CounterexampleState, TLCResult, Verdict
from tracecheck.runner.tlc import TLCOptions, run_tlc
from tracecheck.tla.values import ModelValue, Record, TLAFunction, TLAValue

__all__ = [
    "SIM_SETTINGS",
    "SimTraceError",
    "behaviour_to_lines",
    "simulate_rref",
    "to_json",
    "write_sim_traces",
]

#: RRef constants of the simulation model, as trace header settings (ITF JSON).
SIM_SETTINGS: dict[str, Any] = {
    "Variant": "Reference",
    "SelfRemote": True,
    "Duplicates": True,
    "Timeouts": True,
    "RemoteDsts": {"#set": ["w1", "w2", "w3"]},
    "G1": True,
    "G2Workers": {"#set": ["w1", "w2", "w3"]},
    "Shutdown": False,
    "Links": {"#set": [[a, b] for a in ("w1", "w2", "w3") for b in ("w1", "w2", "w3") if a != b]},
}
WORKERS = ("w1", "w2", "w3")

#: The trace schema these traces are written in (see behaviour_to_lines).
SCHEMA_3 = 3


class SimTraceError(TracecheckError):
    """TLC's simulation did not yield a behaviour we can turn into a trace."""


def to_json(value: TLAValue) -> Any:
    """A TLA+ value as ITF JSON; model values (the workers) become strings."""
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, ModelValue):
        return value.name
    if isinstance(value, tuple):
        return [to_json(v) for v in value]
    if isinstance(value, frozenset):
        return {"#set": sorted((to_json(v) for v in value), key=json.dumps)}
    if isinstance(value, Record):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, TLAFunction):
        return {"#map": [[to_json(k), to_json(v)] for k, v in value.items()]}
    raise TypeError(f"not a TLA+ value: {type(value).__name__}")


def _users(users: Any) -> list[Record]:
    """The UserRRef records of the spec's ``users`` (a function ForkId -> record)."""
    if users == ():  # TLC prints the empty function as the empty tuple
        return []
    if not isinstance(users, TLAFunction):
        raise SimTraceError(f"users is not a function of the ForkIds: {users!r}")
    return [u for u in users.values() if isinstance(u, Record)]


def _on(users: Any, node: str) -> list[Record]:
    """The UserRRef records on ``node`` of the spec's ``users``."""
    return [u for u in _users(users) if _name(u["on"]) == node]


def _name(value: TLAValue) -> str:
    return value.name if isinstance(value, ModelValue) else str(value)


def rref_post(field: str, node: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> Any:
    """The acting worker's post-state of ``field`` as protoref logs it (see the RRef mapping:
    per-worker variables at the worker, the UserRRef sets restricted to UserRRefs on it, and
    ``delivered`` = the message the step took from the network, and for a variable that only
    grows what the step added)."""
    if field == "delivered":
        return to_json(before["net"] - after["net"])
    if field == "usersAdded":
        known = {u["fork"] for u in _users(before["users"])}
        return to_json(frozenset(u for u in _users(after["users"]) if u["fork"] not in known))
    if field in ("fetchedAdded", "deletedAdded", "timedOutAdded"):
        name = field.removesuffix("Added")
        return to_json(after[name] - before[name])
    if field == "tombstonesAdded":
        return to_json(_at(after, "tombstones", node) - _at(before, "tombstones", node))
    if field in ("held", "fetching"):
        mine = {u["fork"] for u in _on(after["users"], node)}
        return to_json(frozenset(f for f in after[field] if f in mine))
    if field == "stopping":
        return to_json(after[field])
    return to_json(_at(after, field, node))


def _at(state: Mapping[str, Any], field: str, node: str) -> Any:
    """A per-worker variable's value at ``node``."""
    per_worker = state[field]
    if not isinstance(per_worker, TLAFunction):
        raise SimTraceError(f"{field} is not a function of the workers: {per_worker!r}")
    return per_worker[ModelValue(node)]


def behaviour_to_lines(
    states: Sequence[CounterexampleState], mapping: ProtocolMap, seed: int
) -> list[str]:
    """The JSON lines of the trace of one simulated behaviour (header first)."""
    header = {
        "kind": "header",
        # 3: a behaviour of TLC's says which step took a message, not which step sent it,
        # so these traces make none of schema 4's claims (sent_by; and no end line: the
        # simulation is cut at a depth, not finished)
        "schema_version": SCHEMA_3,
        "protocol": mapping.protocol,
        "nodes": list(WORKERS),
        "settings": SIM_SETTINGS,
        "seed": seed,
    }
    lines = [json.dumps(header)]
    seq: dict[str, int] = {}
    for lamport, (before, after) in enumerate(pairwise(states), start=1):
        ghost = after.values.get("simLast")
        if not (isinstance(ghost, tuple) and len(ghost) == 3):
            raise SimTraceError(f"state {after.index}: no simLast ghost in {after.raw[:200]!r}")
        name, actor, params = ghost
        action = mapping.action(str(name))
        if action is None:
            raise SimTraceError(f"state {after.index}: {name} is not mapped")
        node = _name(actor)
        seq[node] = seq.get(node, 0) + 1
        args = {p: to_json(v) for p, v in zip(action.params, params, strict=True) if p != NODE}
        post = {f: rref_post(f, node, before.values, after.values) for f in action.post}
        event = {"kind": "event", "event": str(name), "node": node, "seq": seq[node]}
        lines.append(json.dumps(event | {"lamport": lamport, "args": args, "post": post}))
    return lines


def _cfg(depth: int, ids: int) -> str:
    return "\n".join(
        [
            "\\* Generated by tracecheck.campaigns.simtraces: RRef's Reference variant on three",
            "\\* workers, every option on, a uniform id budget; behaviours are cut at SimDepth.",
            "INIT SimInit",
            "NEXT SimNext",
            "CONSTANTS",
            "    w1 = w1  w2 = w2  w3 = w3  w4 = w4",
            "    Workers = {w1, w2, w3}",
            f"    SimIds = {ids}",
            f"    SimDepth = {depth}",
            "    MaxLocalId <- SimMaxLocalId",
            "    Links <- AllLinks",
            "    RemoteDsts = {w1, w2, w3}",
            '    Variant = "Reference"',
            "    SelfRemote = TRUE",
            "    Duplicates = TRUE",
            "    Timeouts = TRUE",
            "    G1 = TRUE",
            "    G2Workers = {w1, w2, w3}",
            "    Shutdown = FALSE",
            "    UnknownErrors = FALSE",
            "    RetryExhaustion = FALSE",
            "INVARIANT SimDepthInv",
            "",
        ]
    )


def simulate_rref(
    spec_root: Path, seed: int, depth: int = 40, ids: int = 6, timeout: float | None = 300
) -> tuple[list[CounterexampleState], TLCResult]:
    """One random behaviour of RRef (up to ``depth`` states) from ``tlc -simulate``."""
    with tempfile.TemporaryDirectory(prefix="simtraces-") as tmp:
        cfg = Path(tmp) / "SimRRef.cfg"
        cfg.write_text(_cfg(depth, ids), encoding="utf-8")
        options = TLCOptions(
            simulate=True,
            depth=depth + 1,
            seed=seed,
            timeout=timeout,
            library=(spec_root / "common",),
            attribute_properties=False,
        )
        result = run_tlc(spec_root / "rref" / "SimRRef.tla", cfg, options)
    if result.verdict not in (Verdict.INVARIANT, Verdict.DEADLOCK) or not result.counterexample:
        raise SimTraceError(
            f"tlc -simulate (seed {seed}) printed no behaviour: {result.verdict.value}: "
            f"{result.summary}"
        )
    return list(result.counterexample.states), result


def write_sim_traces(
    spec_root: Path, out: Path, seeds: Sequence[int], depth: int = 40, ids: int = 6
) -> list[Path]:
    """One trace file per seed, ``out/sim-seed<S>.ndjson``, from ``tlc -simulate``."""
    mapping = load_mapping("rref")
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for seed in seeds:
        states, _ = simulate_rref(spec_root, seed, depth, ids)
        path = out / f"sim-seed{seed}.ndjson"
        path.write_text("\n".join(behaviour_to_lines(states, mapping, seed)) + "\n", "utf-8")
        paths.append(path)
    return paths
