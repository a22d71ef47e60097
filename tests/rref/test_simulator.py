"""The simulator: seeded runs end leak-free with every invariant holding at every step."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protoref.errors import LeakError
from protoref.rref.sim.scenarios import SCENARIOS
from protoref.rref.sim.simulator import SimConfig, Simulator, main
from protoref.tracing import MemorySink

CHECKED = SimConfig(check_invariants=True)
SWEEP = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SWEEP
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_random_workloads_end_leak_free(seed: int) -> None:
    summary = Simulator(seed, CHECKED).run(120)
    assert summary.events > 0


configs = st.builds(
    SimConfig,
    workers=st.integers(min_value=2, max_value=4),
    self_remote=st.booleans(),
    duplicates=st.booleans(),
    timeouts=st.booleans(),
    max_delay=st.integers(min_value=0, max_value=8),
    rpc_timeout=st.integers(min_value=1, max_value=12),
    check_invariants=st.just(True),
)


@SWEEP
@given(seed=st.integers(min_value=0, max_value=2**32 - 1), config=configs)
def test_configurations_end_leak_free(seed: int, config: SimConfig) -> None:
    Simulator(seed, config).run(80)


# Events each scenario must contain whatever the interleaving (note §1.6).
SCENARIO_EVENTS = {
    "user_to_owner_return": {
        "Remote",
        "AssignOwnerRRef",
        "ToHere",
        "RetrieveOwnerRRef",
        "ReceiveFetchRet",
    },
    "user_to_owner_arg": {"PrepareChildFork", "GetOrCreateRRef", "DelPendingChild"},
    "owner_to_user": {"CreateLocalRRef", "PrepareChildFork", "GetOrCreateRRef", "DelForkOfOwner"},
    "user_to_user": {"AddForkOfOwnerIfNotPresent", "FinishForkRequest", "DelPendingChild"},
    "self_remote": {"AssignOwnerRRef", "FinishCreatingOwnerRRef", "PrepareChildFork"},
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("seed", range(8))
def test_scenarios_end_leak_free(name: str, seed: int) -> None:
    sim = Simulator(seed, SimConfig(timeouts=False, check_invariants=True), workload=name)
    SCENARIOS[name](sim)
    summary = sim.finish()
    assert SCENARIO_EVENTS[name] <= set(summary.counts)


def test_owner_to_user_sends_no_fork_request() -> None:
    # S3: the parent is the owner, so the child is confirmed at once (addConfirmedUser).
    for seed in range(8):
        sim = Simulator(seed, SimConfig(timeouts=False, duplicates=False))
        SCENARIOS["owner_to_user"](sim)
        counts = sim.finish().counts
        assert "AddForkOfOwnerIfNotPresent" not in counts
        assert "DelPendingChild" not in counts


def _trace(seed: int) -> list[str]:
    sink = MemorySink()
    Simulator(seed, SimConfig(), sink).run(100)
    return sink.lines()


def test_same_seed_same_trace() -> None:
    assert _trace(7) == _trace(7)
    assert _trace(7) != _trace(8)


def test_reproducible_across_processes(tmp_path: Path) -> None:
    # String hashing is salted per process; the scheduler must not depend on set order.
    outs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / f"trace{hash_seed}.ndjson"
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        cmd = [
            sys.executable,
            "-m",
            "protoref.rref.sim.simulator",
            "--seed",
            "11",
            "--steps",
            "150",
            "--out",
            str(out),
        ]
        subprocess.run(cmd, check=True, env=env, capture_output=True)
        outs.append(out.read_text())
    assert outs[0] == outs[1]


def test_cli_prints_seed_and_writes_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "t.ndjson"
    assert main(["--seed", "3", "--steps", "50", "--out", str(out), "--check"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("seed 3\n")
    assert out.read_text().splitlines()[0].startswith('{"kind":"header"')


def test_cli_scenario_and_unknown_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--seed", "1", "--scenario", "user_to_user"]) == 0
    assert main(["--seed", "1", "--scenario", "nope"]) == 2
    assert "unknown scenario" in capsys.readouterr().err


# The invariant sweep: every invariant predicate (R1-R11, protoref.rref.core.invariants) after every
# step, over thousands of seeds, with the faults on (any delivery order, delays, duplicated
# retried control messages, rpc.remote timeouts), with and without graceful shutdown. Short
# workloads keep it fast (measured: 2,000 runs, about 110,000 checked events, 11 s of CPU).
SWEEP_SEEDS = 2000
SWEEP_STEPS = 25
SWEEP_CONFIGS = [
    SimConfig(check_invariants=True, shutdown=shutdown, workers=workers, max_delay=delay)
    for shutdown in (False, True)
    for workers, delay in ((3, 4), (2, 8), (4, 2))
]


def test_thousands_of_seeds_hold_every_invariant_and_end_leak_free() -> None:
    totals: Counter[str] = Counter()
    leak_kinds: set[str] = set()
    for seed in range(SWEEP_SEEDS):
        # A violation raises InvariantViolationError naming the invariant and the seed; a leak
        # at quiescence raises LeakError; a stuck shutdown raises LeakError too.
        summary = Simulator(seed, SWEEP_CONFIGS[seed % len(SWEEP_CONFIGS)]).run(SWEEP_STEPS)
        totals.update(summary.counts)
        leak_kinds |= {leak.kind for _, leak in summary.leaks}
    # Shutdown reports only the UserRRefs the application still held (forced deletes).
    assert leak_kinds <= {"held_user"}
    # The faults were really exercised.
    for name in ("RetrySend", "TimeOutRemote", "DelForkOfOwner", "DestroyInstance"):
        assert totals[name] > 100, (name, totals[name])
    assert sum(totals.values()) > 50_000


def test_leak_is_reported() -> None:
    # The G1 = FALSE ablation by hand: the destructor runs but sends no RREF_USER_DELETE, so
    # the owner keeps the fork and the OwnerRRef.
    sim = Simulator(0, SimConfig(timeouts=False, duplicates=False))
    _, f = sim.remote("w0", "w1")
    sim.drop("w0", f)
    while sim.net:
        sim.deliver(0)
    a = sim.contexts["w0"]
    sim.contexts["w0"] = replace(
        a, deleted=a.deleted | {f}, confirmed_users=a.confirmed_users - {f}
    )
    with pytest.raises(LeakError, match="LeakFreeQuiescenceInv"):
        sim.finish()


def _contexts_and_simulators(seeds: range) -> list[Simulator]:
    """Simulators stopped at many points of random workloads (with shutdown)."""
    stopped = []
    for seed in seeds:
        sim = Simulator(seed, SimConfig(shutdown=True, workers=3 + seed % 2))
        for steps in range(0, 160, 7):
            for _ in range(7):
                if not sim.step("workload"):
                    break
            stopped.append(sim)
            sim = Simulator(seed, SimConfig(shutdown=True, workers=3 + seed % 2))
            for _ in range(steps + 7):
                sim.step("workload")
    return stopped


def test_destructible_is_unreferenced_and_undeleted() -> None:
    # destructible() computes RRef.tla's DelUser guard with set differences; it must be the
    # guard as referenced() states it, in users order, on every context a run goes through.
    checked = 0
    for sim in _contexts_and_simulators(range(12)):
        for ctx in sim.contexts.values():
            expected = [f for f in ctx.users if f not in ctx.deleted and not ctx.referenced(f)]
            assert ctx.destructible() == expected
            checked += bool(expected)
    assert checked > 0  # some context had a destructible UserRRef


@pytest.mark.parametrize("mode", ["workload", "drain"])
def test_application_pick_is_choices_over_every_option(mode: str) -> None:
    # _pick_app searches each worker's cached cumulative weights; it must pick what
    # rng.choices(actions, weights) over the concatenated options picks from the same state.
    picks = 0
    for sim in _contexts_and_simulators(range(8)):
        weights, actions = sim._app_options(mode)  # type: ignore[arg-type]
        if not actions:
            continue
        for draw in range(20):
            state = sim.rng.getstate()
            reference = random.Random()
            reference.setstate(state)
            expected = reference.choices(actions, weights)[0]
            assert sim._pick_app(mode) == expected, (sim.seed, draw)  # type: ignore[arg-type]
            picks += 1
    assert picks > 1000
