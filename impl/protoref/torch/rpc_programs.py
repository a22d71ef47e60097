"""torch programs that replay RRef and autograd counterexamples (run by :mod:`rpc_worker`).

Each program runs on rank 0 (worker ``w0``) of a world started by
:func:`protoref.torch.rpc_repro.run_program`, drives unchanged torch with the user API only
(``rpc.remote``, ``rpc.RRef``, ``to_here``, ``dist_autograd.context``, ``backward``) plus torch's
own shutdown sweep, and returns facts read from torch's debug counters
(``_rref_context_get_debug_info``, ``dist_autograd._get_debug_info``). The faults come from the
agent (:class:`~protoref.torch.rpc_repro.FaultPlan`); the timing the agent cannot give (an owner
still unpickling a request while a later one is processed) comes from the program: an argument
whose unpickling takes ``unpickle_seconds`` in the owner's RPC thread, a UDF that sleeps.

The functions the workers call on each other must be importable module-level functions, as
torch pickles them by name.
"""

from __future__ import annotations

import gc
import importlib
import threading
import time
from collections.abc import Callable
from typing import Any, Final

from pydantic import JsonValue

__all__ = ["PROGRAMS"]

Facts = dict[str, JsonValue]


def _torch() -> tuple[Any, Any, Any]:
    # torch is the optional [torch] extra, untyped here (Any)
    torch = importlib.import_module("torch")
    rpc = importlib.import_module("torch.distributed.rpc")
    dist_autograd = importlib.import_module("torch.distributed.autograd")
    return torch, rpc, dist_autograd


def rref_info() -> dict[str, JsonValue]:
    """This worker's RRefContext counters (owner RRefs, forks, pending users and futures)."""
    _, rpc, _ = _torch()
    return {k: int(v) for k, v in rpc._rref_context_get_debug_info().items()}


def autograd_info() -> dict[str, JsonValue]:
    """This worker's dist-autograd counters (contexts held, backward passes running)."""
    _, _, dist_autograd = _torch()
    return {k: int(v) for k, v in dist_autograd._get_debug_info().items()}


def _arrive_slowly(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


class SlowToUnpickle:
    """An argument whose unpickling on the receiver takes ``seconds`` (the program's timing:
    the receiver's RPC thread is still deserializing a request while later ones are handled)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __reduce__(self) -> tuple[Callable[[float], float], tuple[float]]:
        return (_arrive_slowly, (self.seconds,))


def identity(x: Any) -> Any:
    """The UDF of the remote calls."""
    return x


def _outcome(call: Callable[[], object]) -> str:
    try:
        call()
    except RuntimeError as err:
        return f"raised: {str(err).splitlines()[0][:160]}"
    return "returned"


def _waited(call: Callable[[], object], grace: float) -> str:
    """``call`` in a thread: its outcome, or that it still runs after ``grace`` seconds."""
    seen: dict[str, str] = {}
    thread = threading.Thread(target=lambda: seen.update(out=_outcome(call)), daemon=True)
    thread.start()
    thread.join(grace)
    return seen.get("out", f"still waiting after {grace:g} s")


# -- RRef: an ordinary rpc.remote that times out (MCRRef_pytorch_lateRemoteLeak) --------------


def create_and_drop(owner: str, knobs: dict[str, float]) -> Facts:
    """The creator's part: rpc.remote with a timeout shorter than the owner's unpickling, then
    the timed-out RRef is dropped (its RREF_USER_DELETE overtakes the PYTHON_REMOTE_CALL)."""
    _, rpc, _ = _torch()
    timeout = knobs["remote_timeout"]
    rref = rpc.remote(
        owner, identity, args=(SlowToUnpickle(knobs["unpickle_seconds"]),), timeout=timeout
    )
    time.sleep(timeout + 0.5)
    seen = _outcome(rref.to_here)
    del rref
    gc.collect()
    return {"to_here": seen, "creator": rref_info()}


def _shutdown_soon() -> None:
    _, rpc, _ = _torch()
    threading.Thread(target=rpc.shutdown, daemon=True).start()


def late_remote_leak(knobs: dict[str, float]) -> Facts:
    """w0 owns, w1 creates: after the timed-out remote is dropped and the late call ran, w0 holds
    an OwnerRRef and a fork nobody will delete; with ``shutdown`` set, w0's graceful shutdown is
    then given ``grace`` seconds."""
    _, rpc, _ = _torch()
    facts: Facts = {"creator_side": rpc.rpc_sync("w1", create_and_drop, ("w0", knobs))}
    time.sleep(knobs["unpickle_seconds"] + 1.0)  # the late PYTHON_REMOTE_CALL has run
    facts["owner"] = rref_info()
    facts["creator"] = rpc.rpc_sync("w1", rref_info)
    if knobs.get("shutdown"):
        rpc.rpc_sync("w1", _shutdown_soon)
        facts["owner_shutdown"] = _waited(rpc.shutdown, knobs["grace"])
    return facts


# -- RRef: rpc.remote to self that times out (MCRRef_pytorch71029) ----------------------------


def self_remote_timeout(knobs: dict[str, float]) -> Facts:
    """``rpc.remote`` to this worker itself, timing out while the self call is still being
    unpickled: the timeout's callback removes the self fork and erases the OwnerRRef before the
    call runs, which then asserts in ``getOwnerRRef(forceCreated=true)``."""
    _, rpc, _ = _torch()
    timeout = knobs["remote_timeout"]
    rref = rpc.remote(
        "w0", identity, args=(SlowToUnpickle(knobs["unpickle_seconds"]),), timeout=timeout
    )
    # to_here only after the self call ran: a self RRef's to_here waits on the erased owner
    time.sleep(knobs["unpickle_seconds"] + 3.0)
    return {"to_here": _outcome(rref.to_here), "owner": rref_info()}


# -- RRef: a fetch that reaches the owner after the delete (#40141 family) ---------------------


def fetch_and_sweep(rref: Any, knobs: dict[str, float]) -> Facts:
    """The user's part: to_here in a thread whose PYTHON_RREF_FETCH_CALL the agent delays, while
    torch's own shutdown sweep (``_delete_all_user_and_unforked_owner_rrefs``) sends the
    RREF_USER_DELETE from this thread, so the delete reaches the owner first."""
    _, rpc, _ = _torch()
    seen: dict[str, str] = {}

    def fetch() -> None:
        began = time.monotonic()
        seen["to_here"] = _outcome(lambda: rref.to_here(timeout=knobs["fetch_timeout"]))
        seen["to_here_seconds"] = f"{time.monotonic() - began:.2f}"

    thread = threading.Thread(target=fetch, daemon=True)
    started = time.monotonic()
    thread.start()
    time.sleep(0.2)  # the fetch's thread is inside the agent's delay
    before = rref_info()
    rpc.api._delete_all_user_and_unforked_owner_rrefs()
    swept = time.monotonic() - started
    after = rref_info()
    thread.join(knobs["grace"])
    return {
        "to_here": seen.get("to_here", f"still waiting after {knobs['grace']:g} s"),
        "swept_after": round(swept, 2),
        "to_here_seconds": seen.get("to_here_seconds", "-"),
        "user_before_sweep": before,
        "user_after_sweep": after,
    }


_HELD: list[Any] = []


def hold(rref: Any) -> None:
    """Keep a shared RRef alive on this worker (its fork stays registered on the owner)."""
    _HELD.append(rref)


def fetch_after_delete(knobs: dict[str, float]) -> Facts:
    """w0 owns rpc.RRef(value) and shares it with w1 (PYTHON_CALL); w1's fetch parks on w0's
    pendingOwners_ for the OwnerRRef the delete erased. With ``reshare`` set, w0 then shares the
    RRef again (prepareChildFork re-inserts it in owners_) while the fetch stays stranded."""
    _, rpc, _ = _torch()
    # a value TorchScript can type (List[float]): torch fetches it with SCRIPT_RREF_FETCH_CALL,
    # a plain Python object's with PYTHON_RREF_FETCH_CALL; the plan delays both
    rref = rpc.RRef([1.0, 1.0])
    fut = rpc.rpc_async("w1", fetch_and_sweep, (rref, knobs))
    time.sleep(0.6)  # after the user's sweep (0.2 s), before its delayed fetch (1.0 s)
    facts: Facts = {"owner_during": rref_info()}
    if knobs.get("reshare"):
        time.sleep(knobs["grace"] / 2)
        rpc.rpc_async("w1", hold, (rref,))
        time.sleep(0.5)
        facts["owner_after_reshare"] = rref_info()
    facts["user_side"] = fut.wait()
    facts["owner"] = rref_info()
    facts["owner_value_held"] = rref.local_value() == [1.0, 1.0]
    return facts


# -- RRef: every attempt of a child's RREF_FORK_REQUEST fails (MCRRef_pytorch_forkRequestExhausted)


def fork_request_exhausted(knobs: dict[str, float]) -> Facts:
    """w0 creates an RRef on w1 and shares it with w2, whose agent fails every attempt of the
    RREF_FORK_REQUEST (``sendWithRetries``: 6 attempts over about 13 s): w2's pending user is
    never confirmed, so the UDF it gates never runs and the pending user stays for ever."""
    _, rpc, _ = _torch()
    rref = rpc.remote("w1", identity, ([1.0],))
    rref.to_here()
    fut = rpc.rpc_async("w2", hold, (rref,), timeout=0)
    facts: Facts = {}

    def ask(key: str, worker: str) -> None:
        try:
            facts[key] = rpc.rpc_sync(worker, rref_info)
        except RuntimeError as err:
            facts[key] = f"raised: {str(err).splitlines()[0][:160]}"

    time.sleep(1.0)
    ask("child_early", "w2")
    time.sleep(knobs["retry_window"])
    ask("child_after_retries", "w2")
    facts["gated_udf_ran"] = fut.done()
    ask("owner", "w1")
    return facts


# -- autograd: an RPC still in flight when its context block exits (#38513 family) ------------


def times3_after(t: Any, seconds: float) -> Any:
    """Worker 1's UDF: sleeps, then answers with grad (so the answer is wrapped)."""
    time.sleep(seconds)
    return t * 3


def late_answer(knobs: dict[str, float]) -> Facts:
    """w0 exits ``dist_autograd.context()`` with its call in flight; the CLEANUP it sends on exit
    is delayed by the agent (``cleanup`` delay) or not; what w0 and w1 hold afterwards."""
    torch, rpc, dist_autograd = _torch()
    p = torch.ones(2, requires_grad=True)
    with dist_autograd.context() as ctx_id:
        fut = rpc.rpc_async("w1", times3_after, (p, knobs["udf_seconds"]))
    facts: Facts = {"answer": _outcome(fut.wait)}
    time.sleep(knobs.get("settle", 0.5))
    facts["caller"] = autograd_info()
    try:
        ctx = dist_autograd._retrieve_context(ctx_id)
    except RuntimeError:
        facts["released_context_found"] = False
    else:
        facts["released_context_found"] = True
        facts["send_functions"] = len(ctx._send_functions())
        facts["recv_functions"] = len(ctx._recv_functions())
    facts["get_gradients"] = _outcome(lambda: dist_autograd.get_gradients(ctx_id))
    # asked last: the callee's one RPC thread may sit in a delayed cascade cleanup
    facts["callee"] = rpc.rpc_sync("w1", autograd_info)
    time.sleep(knobs.get("hold", 0.0))
    facts["caller_later"] = autograd_info()
    return facts


def timed_out_call(knobs: dict[str, float]) -> Facts:
    """An RPC awaited in the block but timing out: the block exits, its cleanup reaches the
    callee while the UDF still runs; the callee's handler then fails (its counters show it)."""
    torch, rpc, dist_autograd = _torch()
    p = torch.ones(2, requires_grad=True)
    with dist_autograd.context():
        seen = _outcome(
            lambda: rpc.rpc_sync(
                "w1", times3_after, (p, knobs["udf_seconds"]), timeout=knobs["rpc_timeout"]
            )
        )
    time.sleep(knobs["udf_seconds"] + 0.5)
    return {"call": seen, "caller": autograd_info(), "callee": rpc.rpc_sync("w1", autograd_info)}


# -- autograd: FAST mode waits for a send function that never gets a gradient ------------------


def times3(t: Any) -> Any:
    """Worker 1's UDF: its answer requires grad."""
    return t * 3


def log_value(t: Any) -> None:
    """Worker 1's UDF: takes a tensor that requires grad and answers None (no grad)."""
    del t


def fast_unused_send(knobs: dict[str, float]) -> Facts:
    """``baseline`` backward, then the same with a call whose answer carries no grad."""
    torch, rpc, dist_autograd = _torch()
    facts: Facts = {}
    for case in ("baseline", "answer_without_grad"):
        p = torch.ones(2, requires_grad=True)

        def run(case: str = case, p: Any = p) -> None:
            with dist_autograd.context() as ctx_id:
                y = rpc.rpc_sync("w1", times3, (p,))
                if case == "answer_without_grad":
                    rpc.rpc_sync("w1", log_value, (y,))
                dist_autograd.backward(ctx_id, [(y * 2).sum()])

        facts[case] = _waited(run, knobs["grace"])
    facts["caller"] = autograd_info()
    return facts


def raise_on_value(t: Any) -> None:
    """Worker 1's UDF: takes a tensor that requires grad and raises by itself."""
    del t
    raise ValueError("raise_on_value raises by itself")


def udf_raises(knobs: dict[str, float]) -> Facts:
    """``baseline`` backward, then the same with a call (carrying grad) whose UDF raises; the
    caller catches the error and runs backward over what it has (MCDistAutograd_pytorchUdfRaises).
    """
    torch, rpc, dist_autograd = _torch()
    facts: Facts = {}
    for case in ("baseline", "udf_raised"):
        p = torch.ones(2, requires_grad=True)

        def run(case: str = case, p: Any = p) -> None:
            with dist_autograd.context() as ctx_id:
                y = rpc.rpc_sync("w1", times3, (p,))
                if case == "udf_raised":
                    try:
                        rpc.rpc_sync("w1", raise_on_value, (y,))
                    except Exception as err:  # torch re-raises the UDF's error
                        facts["udf_error"] = f"{type(err).__name__}: {str(err).splitlines()[0]}"
                dist_autograd.backward(ctx_id, [(y * 2).sum()])

        facts[case] = _waited(run, knobs["grace"])
    facts["caller"] = autograd_info()
    return facts


# -- autograd: an error in FAST-mode backward leaves the pass running elsewhere ---------------

_FUNCTIONS: dict[str, Any] = {}


def _functions() -> dict[str, Any]:
    """Worker 2's slow backward and worker 1's raising one (torch classes, made once)."""
    if not _FUNCTIONS:
        torch, _, _ = _torch()

        class Slow(torch.autograd.Function):  # type: ignore[misc,name-defined]
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                del ctx
                return x * 3

            @staticmethod
            def backward(ctx: Any, grad: Any) -> Any:
                del ctx
                time.sleep(1.0)  # the error overtakes this worker's part of the pass
                return grad * 3

        class Boom(torch.autograd.Function):  # type: ignore[misc,name-defined]
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                del ctx
                return x * 2

            @staticmethod
            def backward(ctx: Any, grad: Any) -> Any:
                del ctx, grad
                raise ValueError("a backward function raised")

        _FUNCTIONS.update(slow=Slow, boom=Boom)
    return _FUNCTIONS


def slow(t: Any) -> Any:
    """Worker 2's UDF: its backward takes 1 s."""
    return _functions()["slow"].apply(t)


def boom(t: Any) -> Any:
    """Worker 1's UDF: its backward raises."""
    return _functions()["boom"].apply(t)


def backward_error(knobs: dict[str, float]) -> Facts:
    """One context, p sent to w2 (slow backward) and w1 (raising backward), FAST backward:
    what backward does, and every worker's counters in the block and after the release."""
    torch, rpc, dist_autograd = _torch()

    def snapshot() -> list[JsonValue]:
        return [autograd_info(), *(rpc.rpc_sync(f"w{r}", autograd_info) for r in (1, 2))]

    p = torch.ones(2, requires_grad=True)
    facts: Facts = {}
    with dist_autograd.context() as ctx_id:
        y2 = rpc.rpc_sync("w2", slow, (p,))
        y1 = rpc.rpc_sync("w1", boom, (p,))
        facts["backward"] = _outcome(lambda: dist_autograd.backward(ctx_id, [(y1 + y2).sum()]))
        facts["right_after"] = snapshot()
        time.sleep(knobs["in_block"])
        facts["in_block"] = snapshot()
    time.sleep(knobs["after_release"])
    facts["after_release"] = snapshot()
    return facts


PROGRAMS: Final[dict[str, Callable[[dict[str, float]], Facts]]] = {
    "late_remote_leak": late_remote_leak,
    "fetch_after_delete": fetch_after_delete,
    "fork_request_exhausted": fork_request_exhausted,
    "self_remote_timeout": self_remote_timeout,
    "late_answer": late_answer,
    "timed_out_call": timed_out_call,
    "fast_unused_send": fast_unused_send,
    "udf_raises": udf_raises,
    "backward_error": backward_error,
}
