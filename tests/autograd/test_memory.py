"""Autograd memory over many contexts (issue 28 §7): what a worker remembers of released
contexts stays flat. Before the horizons, each context left one tombstone on every worker it
touched and one ``results`` entry on its creator (about 1.26 KiB a context); now a worker keeps
one horizon per creator and no tombstone of a live creator (``TombBoundInv`` and
``HorizonBoundInv``, checked by TLC in the ``MCDistAutograd_horizon_*`` models). Entries are
counted, not bytes or seconds, so the test is exact on any machine."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

import protoref.autograd as dist_autograd
from protoref.autograd import Tensor, tensor
from protoref.autograd.core.state import Container
from protoref.autograd.runtime.local import LocalWorld

WORLD: LocalWorld | None = None


@pytest.fixture
def w() -> Iterator[LocalWorld]:
    global WORLD  # noqa: PLW0603 - the UDF below reaches the world the test runs in
    WORLD = LocalWorld(3)
    try:
        with WORLD.acting(0):
            yield WORLD
    finally:
        WORLD.close()
        WORLD = None


def mul3(x: Tensor) -> Tensor:
    return x * 3


def nested(x: Tensor) -> Tensor:
    assert WORLD is not None
    answer: Tensor = WORLD.rpc_sync("worker2", mul3, (x,))
    return answer * 2


def settle(done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not done():
        assert time.monotonic() < deadline, "the cleanups did not settle"
        time.sleep(0.005)


def entries(ctn: Container) -> int:
    """Everything a container holds that could grow with the contexts it has seen."""
    per_context = (
        ctn.ctxs, ctn.known, ctn.sends, ctn.recvs, ctn.handlers, ctn.pending, ctn.detached,
        ctn.tomb, ctn.execd, ctn.fired, ctn.grads, ctn.bstate, ctn.outst, ctn.awaiting,
        ctn.parent, ctn.echo_wait, ctn.results, ctn.freed, ctn.late,
    )  # fmt: skip
    return sum(map(len, per_context)) + sum(1 + len(h[1]) for h in ctn.horizon.values())


def footprint(w: LocalWorld) -> list[int]:
    return [entries(x.node.container) + len(x.node._data) for x in w.workers]


def run_contexts(w: LocalWorld, n: int) -> None:
    """n training steps as a torch program writes them: a context, a nested RPC chain with
    grad, backward, the block exits; a second thread does the same at the same time."""

    def steps(count: int) -> None:
        for _ in range(count):
            x = tensor(1.5, requires_grad=True)
            with dist_autograd.context() as cid:
                loss = w.rpc_sync("worker1", nested, (x,))
                dist_autograd.backward(cid, [loss])
                assert dist_autograd.get_gradients(cid)[x] == 6.0

    def second() -> None:
        with w.acting(0):
            steps(n // 2)

    other = threading.Thread(target=second)
    other.start()
    steps(n - n // 2)
    other.join()
    settle(lambda: all(not x.node.container.ctxs for x in w.workers))


def test_what_workers_remember_of_released_contexts_stays_flat(w: LocalWorld) -> None:
    run_contexts(w, 100)
    first = footprint(w)
    run_contexts(w, 2_000)
    assert footprint(w) == first
    # what is left: one horizon per creator heard (worker 0's, on every worker, naming no open
    # context), no tombstone, no backward result
    for x in w.workers:
        ctn = x.node.container
        assert (ctn.tomb, ctn.results, ctn.late) == (frozenset(), frozenset(), frozenset())
        assert set(ctn.horizon) == {0}
        assert ctn.horizon[0][1] == frozenset()
        assert ctn.horizon[0][0] == w.workers[0].node.container.next_ctx == 2_100
