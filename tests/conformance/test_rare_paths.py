"""The campaigns' rare paths (issue #21 section 1): the simulators reach on purpose what random
runs never did, the checker accepts the correct implementation there, and a bug planted there
is rejected.

- RRef (``SimConfig(rare_paths=True)``, :mod:`protoref.rref.sim.rare`): the application forks
  or fetches a UserRRef whose rpc.remote timed out (the core refuses, nothing is logged); the
  owner-creation race where the creator's delete reaches the owner before its slow
  PYTHON_REMOTE_CALL while another fork exists (RRef.tla ``AssignOwnerRRef``, ``stale`` with
  ``needed``).
- Rendezvous (``SimConfig(stalls=True)``): a participant rejoins and stalls past its exit op's
  deadline, so the exit op times out (``ExitDecision``'s ``ErrorTimeout``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from protoref.rref.sim.simulator import SimConfig, Simulator
from protoref.tracing import JsonlSink
from support.planted import plant
from tracecheck.plugins import rendezvous as rendezvous_plugin
from tracecheck.plugins import rref as rref_plugin
from tracecheck.protocols import rendezvous, rref
from tracecheck.replay.validate import validate_traces
from tracecheck.traces.load import load_trace

SPEC_ROOT = Path(__file__).resolve().parents[2] / "spec"
STEPS = 150  # the campaigns' default workload steps
#: Seeds found by running the campaigns' simulators (seeds 1..40 / 1..30): where a timed-out
#: creator is pinned and the exit timeout happens, and where the planted bug's fork shows.
RACE_SEED, EXIT_TIMEOUT_SEED, PLANTED_SEED = 1, 8, 3

Row = dict[str, Any]


def _events(path: Path) -> list[Row]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[1:]]
    return [row for row in rows if row["kind"] == "event"]


def owner_creation_races(events: list[Row]) -> int:
    """AssignOwnerRRef(w, r, f) of a fork f the owner already deleted (its RREF_USER_DELETE
    came first) while another fork of r is registered there: the spec's ``stale`` branch
    that still needs the OwnerRRef."""
    deleted: set[tuple[Any, ...]] = set()
    forks: set[tuple[Any, ...]] = set()
    found = 0
    for e in events:
        w, a = e["node"], e["args"]
        if e["event"] == "AddForkOfOwnerIfNotPresent":
            forks.add((w, str(a["r"]), str(a["c"])))
        elif e["event"] == "DelForkOfOwner":
            deleted.add((w, str(a["r"]), str(a["f"])))
            forks.discard((w, str(a["r"]), str(a["f"])))
        elif e["event"] == "AssignOwnerRRef" and a["f"] != a["r"]:
            r, f = str(a["r"]), str(a["f"])
            others = any(x[:2] == (w, r) and x[2] != f for x in forks)
            found += (w, r, f) in deleted and others
    return found


def pinned_creators(events: list[Row]) -> tuple[int, int]:
    """Timed-out creators (TimeOutRemote with f # r) whose delete reached the owner after the
    owner's AssignOwnerRRef (RRef.tla ``PinTimedOut``), and those whose delete came first."""
    timed_out: set[str] = set()
    assigned: set[str] = set()
    after = before = 0
    for e in events:
        a = e["args"]
        if e["event"] == "TimeOutRemote" and a["f"] != a["r"]:
            timed_out.add(str(a["f"]))
        elif e["event"] == "AssignOwnerRRef":
            assigned.add(str(a["f"]))
        elif e["event"] == "DelForkOfOwner" and str(a["f"]) in timed_out:
            after += str(a["f"]) in assigned
            before += str(a["f"]) not in assigned
    return after, before


def _timed_out_then_used(events: list[Row]) -> int:
    """Forks or fetches of a UserRRef after its rpc.remote timed out (RRef.tla: never)."""
    timed_out: set[str] = set()
    used = 0
    for e in events:
        a = e["args"]
        if e["event"] == "TimeOutRemote":
            timed_out.add(str(a["f"]))
        elif e["event"] == "PrepareChildFork" and a["parent"] != a["r"]:
            used += str(a["parent"]) in timed_out
        elif e["event"] == "ToHere":
            used += str(a["f"]) in timed_out
    return used


def test_rare_paths_are_reached_and_the_misuse_is_refused(tmp_path: Path) -> None:
    config = SimConfig(shutdown=True, lose_first_attempts=True, rare_paths=True)
    refused = races = pinned = early = 0
    for seed in range(1, 21):
        path = tmp_path / f"{seed}.ndjson"
        sim = Simulator(seed, config, JsonlSink(path))
        sim.run(STEPS)
        events = _events(path)
        assert _timed_out_then_used(events) == 0, seed
        refused += sim.refused
        races += owner_creation_races(events)
        after, before = pinned_creators(events)
        pinned += after
        early += before
    assert refused > 0
    # DeleteLast: timed-out creators are deleted on the owner only after their call was
    # processed, never before (the race the Reference without DeleteLast allowed)
    assert pinned > 0
    assert early == 0
    assert races == 0
    # without the option: no misuse is tried (and the random stream is the one seeds gave)
    plain = Simulator(RACE_SEED, SimConfig(shutdown=True, lose_first_attempts=True))
    plain.run(STEPS)
    assert plain.refused == 0


def test_a_pinned_creator_is_accepted_and_a_fork_after_timeout_rejected(tmp_path: Path) -> None:
    race = tmp_path / "race.ndjson"
    rref_plugin.simulate(RACE_SEED, STEPS, race)
    assert pinned_creators(_events(race))[0] > 0
    planted = tmp_path / "planted.ndjson"
    with plant("fork-after-timeout"):
        rref_plugin.simulate(PLANTED_SEED, STEPS, planted)
    assert _timed_out_then_used(_events(planted)) > 0
    report = validate_traces([load_trace(race), load_trace(planted)], rref.RREF, SPEC_ROOT)
    good, bad = report.verdicts
    assert good.accepted, good.rejection
    assert not bad.accepted
    assert bad.rejection is not None
    assert bad.rejection.event is not None
    assert bad.rejection.event.event in ("PrepareChildFork", "ToHere")
    assert str(bad.rejection.event.args.get("parent", bad.rejection.event.args.get("f"))) in {
        str(e["args"]["f"]) for e in _events(planted) if e["event"] == "TimeOutRemote"
    }


@pytest.mark.parametrize("seed", [EXIT_TIMEOUT_SEED])
def test_an_exit_op_that_times_out_is_reached_and_accepted(seed: int, tmp_path: Path) -> None:
    path = tmp_path / "exit.ndjson"
    rendezvous_plugin.simulate(seed, STEPS, path)
    op: dict[str, str] = {}
    exits_timed_out = 0
    for e in _events(path):
        if e["event"] == "ErrorTimeout":
            exits_timed_out += op.get(e["node"]) == "exit"
        if "op" in e["post"]:
            op[e["node"]] = e["post"]["op"]
    assert exits_timed_out > 0
    report = validate_traces([load_trace(path)], rendezvous.RENDEZVOUS, SPEC_ROOT)
    assert report.verdicts[0].accepted, report.verdicts[0].rejection
