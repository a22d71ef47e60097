"""Connections that really break: TCP connections between live workers are aborted while the
retried control messages of the protocol (RREF_USER_DELETE, RREF_FORK_REQUEST, RREF_ACK,
RREF_CHILD_ACCEPT) may be in flight on them. The workers must dial again, re-send what the
acceptor reports it never applied (RetrySend), apply nothing twice, leave nothing behind at
shutdown, and log traces the spec accepts.

User calls are not retried (a UDF may not be idempotent; torch does not retry them either), so a
connection is only broken once the application's calls have returned; a user call lost with its
link is the RPC timeout's business, not the protocol's (the spec's assumptions exclude lost
messages). The timing of each break is drawn from a printed seed; whichever way each one falls
(a message lost with its link, or already applied and acknowledged), the checks below hold.
"""

from __future__ import annotations

import asyncio
import gc
import random
import time
from pathlib import Path

from protoref import rpc
from protoref.rpc.agent import Agent
from protoref.rref.runtime import udfs
from support.rref_runtime import (
    TIMEOUT,
    eventually,
    merged_trace,
    start_world,
    stop_world,
    validate_rref,
)

NAMES = ("w0", "w1", "w2")
SEED = 7
ROUNDS = 8


def links_between(a: Agent, b: Agent) -> int:
    return sum(
        peer in links
        for agent, peer in ((a, b.name), (b, a.name))
        for links in (agent.transport.outbound, agent.transport.inbound)
    )


def sever(a: Agent, b: Agent) -> None:
    """Abort every TCP connection between ``a`` and ``b`` (a reset, as a network fault gives,
    not an orderly close) and wait until both sides have dropped their links."""

    async def abort() -> None:
        for links in (a.transport.outbound, a.transport.inbound):
            link = links.get(b.name)
            if link is not None:
                link.writer.transport.abort()

    asyncio.run_coroutine_threadsafe(abort(), a.loop).result(TIMEOUT)
    eventually(lambda: links_between(a, b) == 0, f"{a.name} and {b.name} drop their links")


def test_workers_recover_from_aborted_connections_and_the_spec_accepts_the_traces(
    tmp_path: Path,
) -> None:
    print(f"seed {SEED}")  # the break timings are drawn from it
    rng = random.Random(SEED)
    w0, w1, w2 = agents = start_world(3, tmp_path)
    try:
        for i in range(ROUNDS):
            with w0.use():
                rref = rpc.remote("w1", udfs.add, (i, 1))
                assert rref.to_here() == i + 1
                eventually(rref.confirmed_by_owner, "the creator's UserRRef is confirmed")
                # w2 gets a fork of w0's UserRRef: RREF_FORK_REQUEST to the owner, its ack,
                # RREF_CHILD_ACCEPT back to w0, all retried control messages
                assert rpc.rpc_sync("w2", udfs.fetch, (rref,)) == i + 1
                del rref
            gc.collect()  # the UserRRef's finalizer: RREF_USER_DELETE (G1) once G2 allows
            time.sleep(rng.choice((0.0, 0.002, 0.01, 0.025)))
            for a, b in rng.sample([(w0, w1), (w1, w2), (w0, w2)], k=rng.randint(1, 3)):
                sever(a, b)
            with w0.use():  # every pair dials again on its next frame
                assert rpc.rpc_sync("w1", udfs.add, (20, 22)) == 42
                assert rpc.rpc_sync("w2", udfs.add, (i, i)) == 2 * i
        reports = stop_world(agents)
    finally:
        stop_world([a for a in agents if not a.closed], graceful=False)
    assert all(r.leak_free for r in reports), reports
    for agent in agents:  # nothing was refused: every re-sent frame was expected
        assert list(agent.rejected) == []
        assert list(agent.plugin("rref").node.protocol_errors) == []
    report = validate_rref(merged_trace(tmp_path, len(NAMES)))
    assert report.all_accepted, [v.rejection for v in report.verdicts]
    assert report.coverage.get("AddForkOfOwnerIfNotPresent", 0) >= ROUNDS
