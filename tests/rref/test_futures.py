"""protoref.rpc.futures against torch.futures: the same operations, the same observable outcomes.

Each scenario runs on a Future class and its collect_all/wait_all and returns what a program
can see (values; exception types and first message lines). The table of expected outcomes is
ours; where torch is installed the same scenarios run on torch.futures and must agree.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable
from typing import Any

import pytest

from protoref import rpc
from protoref.rpc import futures
from protoref.rref.runtime import udfs
from support.rref_runtime import world

Seen = tuple[Any, ...]
Kit = tuple[Any, Callable[..., Any], Callable[..., Any]]  # Future, collect_all, wait_all


def seen(fn: Callable[[], Any]) -> Seen:
    try:
        return ("ok", fn())
    except BaseException as err:  # what a program sees: the type and the first line
        return ("raises", type(err).__name__, str(err).splitlines()[0] if str(err) else "")


def completed(kit: Kit) -> list[Seen]:
    future_cls, _, _ = kit
    f = future_cls()
    before = seen(f.done)
    f.set_result(5)
    return [before, seen(f.done), seen(f.value), seen(f.wait), seen(lambda: f.set_result(6))]


def failed(kit: Kit) -> list[Seen]:
    future_cls, _, _ = kit
    f = future_cls()
    bad = seen(lambda: f.set_exception("not an exception"))
    f.set_exception(ValueError("boom"))
    return [
        bad,
        seen(f.wait),
        seen(f.value),
        seen(lambda: f.set_exception(KeyError("again"))),
        seen(lambda: f.then(lambda x: x.value()).wait()),  # the callback reads the error
        seen(lambda: f.then(lambda x: 7).wait()),  # the callback ignores it
    ]


def chains(kit: Kit) -> list[Seen]:
    future_cls, _, _ = kit
    f = future_cls()
    order: list[str] = []
    chained = f.then(lambda x: x.value() + 1).then(lambda x: x.wait() * 2)
    f.add_done_callback(lambda x: order.append("callback"))
    f.add_done_callback(lambda x: 1 / 0)  # a failing callback is logged, nothing else
    f.set_result(5)
    done_then = f.then(lambda x: "inline")  # on a completed future: runs at once
    raising = f.then(lambda x: 1 / 0)
    return [seen(chained.wait), ("order", order), seen(done_then.wait), seen(raising.wait)]


def collecting(kit: Kit) -> list[Seen]:
    future_cls, collect_all, wait_all = kit
    a, b = future_cls(), future_cls()
    combined = collect_all([a, b])
    b.set_exception(KeyError("B"))
    a.set_exception(ValueError("A"))  # later, but first in the list
    ok = [future_cls(), future_cls()]
    for i, f in enumerate(ok):
        f.set_result(i)
    return [
        seen(combined.wait),
        seen(lambda: [f.wait() for f in collect_all(ok).wait()]),
        seen(lambda: wait_all(ok)),
        seen(lambda: collect_all([]).wait()),
        seen(lambda: wait_all([])),
    ]


def wait_all_waits_for_all(kit: Kit) -> list[Seen]:
    """torch 2.13's wait_all waits for every future, then raises the first error (its
    docstring says it exits early; it does not)."""
    future_cls, _, wait_all = kit
    a, b = future_cls(), future_cls()
    a.set_exception(ValueError("early"))
    gate = threading.Event()

    def later() -> None:
        gate.wait(30)
        b.set_result(2)

    threading.Thread(target=later).start()
    threading.Timer(0.2, gate.set).start()
    outcome = seen(lambda: wait_all([a, b]))
    return [outcome, seen(b.done)]


SCENARIOS: dict[str, Callable[[Kit], list[Seen]]] = {
    "completed": completed,
    "failed": failed,
    "chains": chains,
    "collecting": collecting,
    "wait_all_waits_for_all": wait_all_waits_for_all,
}
TWICE = (
    "Attempting to mark a completed Future as complete again. Note that a Future can only be "
    "marked completed once."
)
CALLBACK = "Got the following error when running the callback: "
EXPECTED: dict[str, list[Seen]] = {
    "completed": [
        ("ok", False),
        ("ok", True),
        ("ok", 5),
        ("ok", 5),
        ("raises", "RuntimeError", TWICE),
    ],
    "failed": [
        (
            "raises",
            "AssertionError",
            "not an exception is of type <class 'str'>, not an Exception.",
        ),
        ("raises", "ValueError", "boom"),
        ("raises", "ValueError", "boom"),
        ("raises", "RuntimeError", TWICE),
        ("raises", "RuntimeError", CALLBACK + "ValueError: boom"),
        ("ok", 7),
    ],
    "chains": [
        ("ok", 12),
        ("order", ["callback"]),
        ("ok", "inline"),
        ("raises", "RuntimeError", CALLBACK + "ZeroDivisionError: division by zero"),
    ],
    "collecting": [
        ("raises", "ValueError", "A"),
        ("ok", [0, 1]),
        ("ok", [0, 1]),
        ("ok", []),
        ("ok", []),
    ],
    "wait_all_waits_for_all": [("raises", "ValueError", "early"), ("ok", True)],
}
OURS: Kit = (futures.Future, futures.collect_all, futures.wait_all)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_protoref_futures(name: str) -> None:
    assert SCENARIOS[name](OURS) == EXPECTED[name]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_torch_futures_agree(name: str) -> None:
    torch_futures = pytest.importorskip("torch.futures")
    kit: Kit = (torch_futures.Future, torch_futures.collect_all, torch_futures.wait_all)
    assert SCENARIOS[name](kit) == EXPECTED[name]


def test_value_before_completion_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="not completed yet"):
        futures.Future().value()
    with pytest.raises(ValueError, match="no CUDA"):
        futures.Future(devices=["cuda:0"])


def test_callbacks_of_rpc_replies_run_on_the_rpc_pool_and_may_block_on_rpc() -> None:
    # A reply completes its future on the worker's loop thread; a then() callback that made
    # another blocking call there would stall every call of the worker.
    with world(2) as (w0, _w1), w0.use():
        threads: list[str] = []

        def again(fut: futures.Future[int]) -> int:
            threads.append(threading.current_thread().name)
            return int(rpc.rpc_sync("w1", udfs.add, (fut.wait(), 1)))

        rpc.rpc_sync("w1", udfs.close_gate)
        pending = rpc.rpc_async("w1", udfs.gate, (3,))  # held on w1 until the gate opens
        chained = pending.then(again)  # attached before the reply: it completes on the loop
        rpc.rpc_sync("w1", udfs.open_gate)
        assert chained.wait(30) == 4  # on the loop thread it would never complete
        assert threads[0].startswith("udf-w0"), threads
        many = [rpc.rpc_async(f"w{i % 2}", udfs.add, (i, i)) for i in range(6)]
        assert futures.wait_all(many) == [0, 2, 4, 6, 8, 10]
        assert [f.wait() for f in futures.collect_all(many).wait()] == [0, 2, 4, 6, 8, 10]
