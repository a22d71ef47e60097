"""A node whose clock reads a day ahead (an injected skewed clock, standing for another host)
rendezvouses with a normal one through the file store and through etcd, as OS processes.

Each process is ``node_main``; ``--simulate-clock-offset`` gives one of them a clock a day
ahead in a clock domain of its own. With ``--simulate-same-clock`` the skewed stamps claim the
host's domain, as comparing wall clocks across hosts would: that run must go wrong, which shows
the test exercises skew at all."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from protoref.rendezvous.adapters.etcd_server import EtcdServer

DAY = "86400"
LIMIT = 60.0  # seconds before a process is taken for hung (never reached when correct)


def _node(store: str, run_id: str, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "protoref.rendezvous.runtime.node_main", "--store", store]
    cmd += ["--run-id", run_id, "--addr", "127.0.0.1", "--keep-alive-interval", "0.25"]
    cmd += [*extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _outcome(procs: list[subprocess.Popen[str]]) -> list[tuple[int, list[dict[str, Any]]]]:
    out = []
    for p in procs:
        stdout, _ = p.communicate(timeout=LIMIT)
        out.append((p.returncode, [json.loads(line) for line in stdout.splitlines()]))
    return out


def _clean(outcome: list[tuple[int, list[dict[str, Any]]]], rounds: int) -> bool:
    """Every process exited 0 having returned ``rounds`` times, each time a world of 2 with a
    rank below it, rounds increasing; whoever returned the same round agrees on it with
    distinct ranks. (A node may leave a round before the other returned from it: the other
    then joins the next one, so the round numbers returned need not be the same.)"""
    by_round: dict[int, list[dict[str, Any]]] = {}
    for code, lines in outcome:
        if code != 0 or len(lines) != rounds:
            return False
        if [g["round"] for g in lines] != sorted({g["round"] for g in lines}):
            return False
        for g in lines:
            by_round.setdefault(g["round"], []).append(g)
    for got in by_round.values():
        ranks = [g["rank"] for g in got]
        if {g["world_size"] for g in got} != {2} or len(set(ranks)) != len(ranks):
            return False
        if not all(0 <= r < 2 for r in ranks):
            return False
    return True


def _url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "file":
        return f"file:{tmp_path}"
    etcd: EtcdServer = request.getfixturevalue("etcd_single")
    prefix: str = request.getfixturevalue("etcd_prefix")
    return f"{etcd.url}{prefix}"


@pytest.mark.parametrize("kind", ["file", "etcd"])
def test_a_node_a_day_ahead_rendezvous_with_a_normal_one(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """min = max = 2, one round. (Two rounds in a row raced: a node that returned first left
    round 0 before the other returned from it, so under the Reference epilogue the late node
    went on to round 1 and then waited for a third round its finished partner never joined.)"""
    url = _url(kind, tmp_path, request)
    sizes = ("--min-nodes", "2", "--max-nodes", "2", "--rounds", "1", "--join-timeout", "30")
    procs = [_node(url, "skew", *sizes), _node(url, "skew", *sizes, "--simulate-clock-offset", DAY)]
    outcome = _outcome(procs)
    assert _clean(outcome, 1), outcome


@pytest.mark.parametrize("kind", ["file", "etcd"])
def test_a_last_call_across_clock_domains(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """min 2, max 3: the round completes by its last call (0.5 s), whoever armed it."""
    url = _url(kind, tmp_path, request)
    sizes = ("--min-nodes", "2", "--max-nodes", "3", "--last-call-timeout", "0.5")
    sizes += ("--join-timeout", "30")
    procs = [_node(url, "lc", *sizes), _node(url, "lc", *sizes, "--simulate-clock-offset", DAY)]
    outcome = _outcome(procs)
    assert _clean(outcome, 1), outcome


def test_trusting_the_skewed_clock_goes_wrong(tmp_path: Path) -> None:
    """Teeth: the same first scenario with the skewed stamps trusted (one clock domain): the
    node a day ahead finds the other's heartbeats a day old and drops it at every read."""
    sizes = ("--min-nodes", "2", "--max-nodes", "2", "--rounds", "2", "--join-timeout", "5")
    skewed = ("--simulate-clock-offset", DAY, "--simulate-same-clock")
    url = f"file:{tmp_path}"
    outcome = _outcome([_node(url, "trusted", *sizes), _node(url, "trusted", *sizes, *skewed)])
    assert not _clean(outcome, 2), outcome
