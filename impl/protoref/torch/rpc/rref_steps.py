"""The RRef steps the conductor asks of a worker, as user RPCs (``rpc_sync(w, step, ...)``).

Each step takes the conductor's Lamport clock first, logs what the program does with the
events of ``TraceRRefTorch.tla`` (op names are its ``Obs*`` wrappers' names), and returns the
worker's clock. Values are small tensors made by :func:`make_value` (a Python UDF, so
``rpc.remote`` sends PYTHON_REMOTE_CALL and ``to_here`` PYTHON_RREF_FETCH_CALL).
"""

from __future__ import annotations

import gc
import time
from typing import Any

import torch
from torch.distributed import rpc

from protoref.torch.rpc.world import world

__all__ = [
    "counters",
    "create_local",
    "drop",
    "finish",
    "give",
    "make_value",
    "receive",
    "remote",
    "settle",
    "share",
    "take",
    "to_here",
    "wait_remote",
]


def make_value(x: float, delay: float = 0.0) -> torch.Tensor:
    """The remote function: ``delay`` makes its owner assign the OwnerRRef late."""
    if delay:
        time.sleep(delay)
    return torch.full((2,), x)


def _start(clock: int) -> None:
    world().recorder.merge(clock)


def _done() -> int:
    return world().recorder.clock


def create_local(clock: int, label: str) -> int:
    _start(clock)
    world().handles[label] = rpc.RRef(torch.ones(2))
    world().recorder.log("CreateLocalRRef", label=label)
    return _done()


def remote(clock: int, dst: str, label: str, delay: float, timeout: float) -> int:
    _start(clock)
    ref = rpc.remote(dst, make_value, args=(1.0, delay), timeout=timeout)
    world().handles[label] = ref
    world().recorder.log("Remote", peer=dst, label=label)
    return _done()


def wait_remote(clock: int, label: str) -> int:
    """Wait for the rpc.remote future: it completes or fails with a timeout."""
    _start(clock)
    try:
        world().handles[label]._get_future().wait()
        outcome = "ok"
    except RuntimeError as err:
        text = str(err).lower()
        # torch 2.13 says "RPC ran for more than set timeout (200 ms) ..."
        outcome = "timeout" if "timeout" in text or "timed out" in text else "error: " + text[:80]
    world().recorder.log("RemoteDone", label=label, outcome=outcome)
    return _done()


def receive(clock: int, label: str, ref: Any) -> int:
    """The UDF that receives an RRef as an argument (on the receiving worker)."""
    _start(clock)
    world().handles[label] = ref
    world().recorder.log("GetOrCreateRRef", label=label)
    return _done()


def share(clock: int, dst: str, label: str, child: str) -> int:
    """Send the RRef named ``label`` to ``dst`` as an argument; ``dst`` names it ``child``."""
    _start(clock)
    ref = world().handles[label]
    at = world().recorder.log("PrepareChildFork", peer=dst, label=label, child=child)
    world().recorder.merge(rpc.rpc_sync(dst, receive, args=(at, child, ref)))
    return _done()


def give(clock: int, caller: str, label: str, child: str) -> tuple[int, Any]:
    """Return the RRef named ``label`` to ``caller`` (a result), which names it ``child``."""
    _start(clock)
    world().recorder.log("PrepareChildFork", peer=caller, label=label, child=child)
    return _done(), world().handles[label]


def take(clock: int, src: str, label: str, child: str) -> int:
    """Ask ``src`` for its RRef ``label`` as the result of a call; name it ``child``."""
    _start(clock)
    me = world().recorder.node
    theirs, ref = rpc.rpc_sync(src, give, args=(world().recorder.clock, me, label, child))
    world().recorder.merge(theirs)
    world().handles[child] = ref
    world().recorder.log("GetOrCreateRRef", label=child)
    return _done()


def to_here(clock: int, label: str, timeout: float) -> int:
    _start(clock)
    ref = world().handles[label]
    try:
        ref.to_here(timeout=timeout)
        outcome = "ToHereOk"
    except RuntimeError as err:
        text = str(err)
        # torch refuses a deleted or timed-out UserRRef at once, before any fetch is sent
        if "rpc.remote() timed out" in text or "has been deleted" in text:
            world().recorder.log("ToHereRefused", label=label)
            return _done()
        outcome = "ToHereTimeout"
    # (logged after the call returned: nothing else ran on this worker's program meanwhile,
    # and the checker may place the fetch's handling between the two events)
    world().recorder.log("ToHere", label=label)
    world().recorder.log(outcome, label=label)
    return _done()


def drop(clock: int, label: str) -> int:
    """The program drops its reference: the destructor may send RREF_USER_DELETE."""
    _start(clock)
    del world().handles[label]
    gc.collect()
    world().recorder.log("DropRRef", label=label)
    return _done()


def _debug() -> dict[str, int]:
    return {k: int(v) for k, v in rpc._rref_context_get_debug_info().items()}


def settle(clock: int, wait: float) -> int:
    """Wait (at most ``wait`` s) until the worker's control sends are acknowledged and its
    counters hold still: the quiet point where :func:`counters` samples. Logs nothing."""
    _start(clock)
    end = time.monotonic() + wait
    last = _debug()
    while time.monotonic() < end:
        time.sleep(0.05)
        now = _debug()
        if now == last and now["num_pending_futures"] == 0 and now["num_pending_users"] == 0:
            break
        last = now
    return _done()


def counters(clock: int) -> int:
    _start(clock)
    info = _debug()
    world().recorder.log(
        "Counters",
        owners=info["num_owner_rrefs"],
        users=info["num_pending_users"],
        forks=info["num_forks"],
        futures=info["num_pending_futures"],
    )
    return _done()


def finish(clock: int) -> int:
    """The conductor is done: this worker may call rpc.shutdown."""
    _start(clock)
    world().finished.set()
    return _done()
