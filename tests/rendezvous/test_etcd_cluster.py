"""A round completes while the etcd leader is killed (a 3-member cluster on loopback).

Three node processes (``node_main``) join one round (min = max = 3) through a store that lists
every member, each process's list starting from another member, so that some talk to the
leader first. Two join; the leader is SIGKILLed while they wait; the third joins; all three
return the same round with ranks 0..2. The survivors elect a new leader; the nodes whose
member died fail over (requests, and their watch streams) to the others."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protoref.rendezvous.adapters.etcd_cluster import EtcdCluster
from protoref.rendezvous.adapters.etcd_store import EtcdStore
from protoref.rendezvous.core.codec import decode_state
from protoref.rendezvous.runtime.holder import state_key

LIMIT = 120.0  # seconds before a node process is taken for hung (never reached when correct)


@pytest.fixture
def cluster(etcd_binary: Path) -> Iterator[EtcdCluster]:
    with EtcdCluster(3) as c:  # its own: this test kills a member
        yield c


def _node(cluster: EtcdCluster, first: int, run_id: str) -> subprocess.Popen[str]:
    ports = cluster.client_ports[first:] + cluster.client_ports[:first]
    url = "etcd://" + ",".join(f"127.0.0.1:{p}" for p in ports) + "/leader-kill/"
    cmd = [sys.executable, "-m", "protoref.rendezvous.runtime.node_main", "--store", url]
    cmd += ["--run-id", run_id, "--min-nodes", "3", "--max-nodes", "3", "--addr", "127.0.0.1"]
    cmd += ["--keep-alive-interval", "1", "--join-timeout", str(LIMIT)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _participants(store: EtcdStore, run_id: str) -> int:
    got = store.get(state_key(run_id))
    return 0 if got is None else len(decode_state(got.value, "k", run_id).participants)


def test_a_round_completes_while_the_leader_is_killed(cluster: EtcdCluster) -> None:
    leader = cluster.leader()
    followers = [m for m in range(3) if m != leader]
    # the first two nodes talk to the leader first, the last one to a follower
    procs = [_node(cluster, leader, "lk"), _node(cluster, followers[0], "lk")]
    with EtcdStore(cluster.endpoint, prefix="/leader-kill/") as watcher:
        end = time.monotonic() + LIMIT
        while _participants(watcher, "lk") < 2:  # both joined and wait for the third
            assert time.monotonic() < end, "the first two nodes did not join"
            time.sleep(0.05)
        cluster.kill(leader)
        procs.append(_node(cluster, followers[1], "lk"))
        results: list[dict[str, Any]] = []
        for p in procs:
            out, err = p.communicate(timeout=LIMIT)
            assert p.returncode == 0, f"node exited {p.returncode}: {out} {err}"
            results.append(json.loads(out.splitlines()[-1]))
    assert sorted(r["rank"] for r in results) == [0, 1, 2], results
    assert {(r["round"], r["world_size"]) for r in results} == {(0, 3)}, results
    assert cluster.leader() != leader  # the two survivors elected a new leader
    assert cluster.alive() == followers
