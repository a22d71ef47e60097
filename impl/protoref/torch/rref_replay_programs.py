"""torch programs for three more RRef counterexamples (run by :mod:`protoref.torch.rpc_worker`).

As in :mod:`protoref.torch.rpc_programs`: each program runs on rank 0 of a world started by
:func:`protoref.torch.rpc_repro.run_program`, uses torch's user API only and returns facts read
from ``_rref_context_get_debug_info`` and the values the calls returned. The order the agent
cannot give (an owner still unpickling its ``PYTHON_REMOTE_CALL`` while later messages about
the same RRef are handled) comes from an argument whose unpickling takes ``unpickle_seconds``
in one of the owner's RPC threads: torch unpickles a Python call's arguments before
``processPythonRemoteCall`` looks the OwnerRRef up.

- :func:`unforked_owner` (``MCRRef_pytorch_unforkedOwner``): the owner unpickles its own RRef
  before the creating call (``getOrCreateOwnerRRef`` makes an empty OwnerRRef), another user's
  delete erases it, and the late call creates a second OwnerRRef: the owner's UDF waits on the
  first for ever.
- :func:`self_share` (``MCRRef_pytorch_selfShare``): the same empty OwnerRRef, shared by the
  owner with itself: unpickling that self call runs ``delForkOfOwner``, which erases it.
- :func:`retries_exhausted` (``MCRRef_pytorch_retriesExhausted``): every attempt of the child's
  RREF_FORK_REQUEST fails; the parent's ``pendingChildren_`` keeps its UserRRef, so the
  parent's own drop sends no RREF_USER_DELETE and the owner keeps the OwnerRRef.
- :func:`leak_then_shutdown` (``MCRRef_pytorch_lateRemoteLeak_shutdown``): the leak of
  ``late_remote_leak``, then ``rpc.shutdown()`` on both workers, each waited for ``grace``
  seconds: torch's join barrier (``syncCallCount`` over the store) fails on every worker at
  the store's timeout while the owner's sweep still waits for the leaked OwnerRRef.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Final

from protoref.torch.rpc_programs import (
    SlowToUnpickle,
    _outcome,
    _torch,
    _waited,
    create_and_drop,
    identity,
    rref_info,
)

__all__ = ["PROGRAMS"]

Facts = dict[str, Any]

_HELD: list[Any] = []


def keep(rref: Any) -> None:
    """Hold a shared RRef on this worker."""
    _HELD.append(rref)


def drop_kept() -> dict[str, Any]:
    """Drop every RRef :func:`keep` holds (a UserRRef's destructor sends RREF_USER_DELETE)."""
    _HELD.clear()
    gc.collect()
    time.sleep(0.3)
    return rref_info()


def wait_local_value(rref: Any, grace: float) -> str:
    """The owner's UDF: ``local_value`` of the OwnerRRef it unpickled, or that it still waits."""
    return _waited(rref.local_value, grace)


def share_with_self(rref: Any, grace: float) -> dict[str, Any]:
    """The owner's UDF: share the (still empty) OwnerRRef with this worker itself, then wait on
    its ``local_value``; the counters in between show whether ``owners_`` still holds it."""
    _, rpc, _ = _torch()
    me = rpc.get_worker_info().name
    rpc.rpc_sync(me, keep, (rref,))
    between = rref_info()
    return {"after_self_share": between, "local_value": _waited(rref.local_value, grace)}


def unforked_owner(knobs: dict[str, float]) -> Facts:
    """w0 creates on w1 (the call takes ``unpickle_seconds`` to unpickle), shares the RRef with
    the owner w1 (a UDF waiting on its value) and with w2, which then drops it."""
    _, rpc, _ = _torch()
    grace = knobs["grace"]
    rref = rpc.remote("w1", identity, args=(SlowToUnpickle(knobs["unpickle_seconds"]),))
    time.sleep(0.2)
    owner_udf = rpc.rpc_async("w1", wait_local_value, (rref, grace))
    time.sleep(0.3)  # the owner has unpickled its own RRef: an empty OwnerRRef in owners_
    facts: Facts = {"owner_early": rpc.rpc_sync("w1", rref_info)}
    rpc.rpc_sync("w2", keep, (rref,))  # RREF_FORK_REQUEST, ACK, CHILD_ACCEPT
    facts["owner_with_user"] = rpc.rpc_sync("w1", rref_info)
    facts["user_after_drop"] = rpc.rpc_sync("w2", drop_kept)  # its RREF_USER_DELETE
    facts["owner_after_delete"] = rpc.rpc_sync("w1", rref_info)
    facts["owner_udf"] = owner_udf.wait()
    facts["creator_to_here"] = _outcome(rref.to_here)
    facts["owner"] = rpc.rpc_sync("w1", rref_info)
    return facts


def self_share(knobs: dict[str, float]) -> Facts:
    """w0 creates on w1 (slow to unpickle) and shares the RRef with the owner w1, whose UDF
    shares it with w1 itself before the creating call has run."""
    _, rpc, _ = _torch()
    rref = rpc.remote("w1", identity, args=(SlowToUnpickle(knobs["unpickle_seconds"]),))
    time.sleep(0.2)
    facts: Facts = {"owner_udf": rpc.rpc_sync("w1", share_with_self, (rref, knobs["grace"]))}
    facts["creator_to_here"] = _outcome(rref.to_here)
    facts["owner"] = rpc.rpc_sync("w1", rref_info)
    return facts


def retries_exhausted(knobs: dict[str, float]) -> Facts:
    """w0 creates an RRef on w1 and shares it with w2, whose agent fails every attempt of the
    RREF_FORK_REQUEST; after the retries w0 drops its own RRef: does the owner hear of it?"""
    _, rpc, _ = _torch()
    rref = rpc.remote("w1", identity, ([1.0],))
    rref.to_here()
    rpc.rpc_async("w2", keep, (rref,), timeout=0)
    facts: Facts = {"owner_before": rpc.rpc_sync("w1", rref_info)}
    time.sleep(knobs["retry_window"])
    del rref
    gc.collect()
    time.sleep(1.0)  # a RREF_USER_DELETE, if sent, has reached the owner
    facts["parent_after_drop"] = rref_info()
    facts["owner_after_drop"] = rpc.rpc_sync("w1", rref_info)
    return facts


#: the line a worker's shutdown outcome is reported with on stderr (the runner keeps lines
#: that say "error"): after a failed shutdown the agent is gone and cannot be asked over RPC
SHUTDOWN_REPORT: Final = "shutdown error report"


def _timed_shutdown() -> str:
    _, rpc, _ = _torch()
    began = time.monotonic()
    try:
        rpc.shutdown()
    except Exception as err:  # torch raises DistStoreError (a RuntimeError) or others
        seen = f"raised {type(err).__name__}: {str(err).splitlines()[0][:160]}"
    else:
        seen = "returned"
    return f"{seen} after {time.monotonic() - began:.0f} s"


def shutdown_and_report() -> None:
    """Start ``rpc.shutdown()`` here in a thread; its outcome goes to stderr."""
    _, rpc, _ = _torch()
    me = rpc.get_worker_info().name

    def run() -> None:
        print(f"{SHUTDOWN_REPORT} {me}: {_timed_shutdown()}", file=sys.stderr, flush=True)

    threading.Thread(target=run, daemon=True).start()


def leak_then_shutdown(knobs: dict[str, float]) -> Facts:
    """w0 owns, w1 creates with a timeout and drops (the leak), then both shut down."""
    _, rpc, _ = _torch()
    facts: Facts = {"creator_side": rpc.rpc_sync("w1", create_and_drop, ("w0", knobs))}
    time.sleep(knobs["unpickle_seconds"] + 1.0)  # the late PYTHON_REMOTE_CALL has run
    facts["owner"] = rref_info()
    facts["creator"] = rpc.rpc_sync("w1", rref_info)
    rpc.rpc_sync("w1", shutdown_and_report)
    facts["owner_shutdown"] = _waited(lambda: _noted(facts, _timed_shutdown()), knobs["grace"])
    time.sleep(1.0)  # w1's report is on its stderr
    return facts


def _noted(facts: Facts, outcome: str) -> None:
    facts["owner_shutdown_outcome"] = outcome


PROGRAMS: Final[dict[str, Callable[[dict[str, float]], Facts]]] = {
    "leak_then_shutdown": leak_then_shutdown,
    "unforked_owner": unforked_owner,
    "self_share": self_share,
    "retries_exhausted": retries_exhausted,
}
