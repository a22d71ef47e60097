"""The torch-shaped API over the in-process world: the program shapes of issue #19, each with
hand-computed gradients, written as a torch program would be (``dist_autograd.*``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

import protoref.autograd as dist_autograd
from protoref.autograd import Tensor, tensor
from protoref.autograd.core.ids import from_int
from protoref.autograd.runtime.local import LocalWorld
from protoref.optim import SGD, DistributedOptimizer

WORLD: LocalWorld | None = None


def world() -> LocalWorld:
    assert WORLD is not None
    return WORLD


@pytest.fixture
def w() -> Iterator[LocalWorld]:
    global WORLD  # noqa: PLW0603 - the UDFs below reach the world the test runs in
    WORLD = LocalWorld(3)
    try:
        with WORLD.acting(0):
            yield WORLD
    finally:
        WORLD.close()
        WORLD = None


def settle(w: LocalWorld, done: Callable[[], bool]) -> None:
    """Wait (a bounded while) for the asynchronous cleanups to arrive."""
    deadline = time.monotonic() + 10
    while not done():
        assert time.monotonic() < deadline, "the cleanups did not settle"
        time.sleep(0.01)


def gone_everywhere(w: LocalWorld) -> bool:
    return all(not x.node.container.ctxs for x in w.workers)


# UDFs (run on the callee, under the caller's context)
def mul3(x: Tensor) -> Tensor:
    return x * 3


def nested(x: Tensor, y: Tensor) -> Tensor:
    return world().rpc_sync("worker2", mul3, (x,)) + y


def log_value(x: Tensor) -> None:
    del x  # a logging call: the request carries grad, the answer none


def square(x: Tensor) -> Tensor:
    return x * x


GATE = threading.Event()


def current_id() -> int:
    """The context the UDF runs under (the caller's: DistAutogradContextGuard)."""
    return dist_autograd._current_context()._context_id()


def open_context() -> str:
    try:
        dist_autograd.context().__enter__()
    except RuntimeError as err:
        return str(err)
    return "opened"


def gated_square(x: Tensor) -> Tensor:
    """Answers only once the test opens the gate (after its block exited)."""
    assert GATE.wait(timeout=30)
    return x * x


def test_forward_across_three_workers_rpc_sync_remote_to_here_nested(w: LocalWorld) -> None:
    p = tensor(2.0, requires_grad=True)
    q = tensor(5.0, requires_grad=True)
    with dist_autograd.context() as context_id:
        assert context_id >> 48 == 0  # worker_id << 48 | n
        a = w.rpc_sync("worker1", nested, (p * p, q))  # 3 p^2 + q (nested call to worker2)
        b = w.remote("worker1", mul3, (q,)).to_here()  # 3 q
        loss = a * b
        dist_autograd.backward(context_id, [loss])
        grads = dist_autograd.get_gradients(context_id)
        assert float(loss) == 17.0 * 15.0
        assert float(grads[p]) == 6 * 2.0 * 15.0  # d/dp = 6p * 3q
        assert float(grads[q]) == 15.0 + 17.0 * 3  # d/dq = 3q + (3p^2 + q) * 3
        assert p.grad is None  # never in .grad
    with pytest.raises(
        RuntimeError, match=f"Could not find autograd context with id: {context_id}"
    ):
        dist_autograd.get_gradients(context_id)
    with pytest.raises(RuntimeError, match="Could not find autograd context"):
        dist_autograd.backward(context_id, [loss])
    settle(w, lambda: gone_everywhere(w))


def test_one_leaf_reached_by_two_paths_gets_the_sum(w: LocalWorld) -> None:
    x = tensor(3.0, requires_grad=True)
    with dist_autograd.context() as cid:
        y1 = w.rpc_sync("worker1", mul3, (x,))
        y2 = w.rpc_sync("worker2", square, (x,))
        dist_autograd.backward(cid, [y1 + y2 + x])
        assert float(dist_autograd.get_gradients(cid)[x]) == 3 + 2 * 3.0 + 1


def test_retain_graph_passes_accumulate_and_a_freed_graph_raises_adding_nothing(
    w: LocalWorld,
) -> None:
    x = tensor(2.0, requires_grad=True)
    with dist_autograd.context() as cid:
        y = w.rpc_sync("worker1", square, (x,)) * x  # x^3 across two workers
        dist_autograd.backward(cid, [y], retain_graph=True)
        assert float(dist_autograd.get_gradients(cid)[x]) == 12.0
        dist_autograd.backward(cid, [y], retain_graph=False)
        assert float(dist_autograd.get_gradients(cid)[x]) == 24.0
        with pytest.raises(
            RuntimeError,
            match="Error on Node 0: Trying to backward through the graph a second time",
        ):
            dist_autograd.backward(cid, [y])
        assert float(dist_autograd.get_gradients(cid)[x]) == 24.0


def test_threads_running_contexts_at_once_never_mix_gradients(w: LocalWorld) -> None:
    results: dict[int, float] = {}
    errors: list[BaseException] = []

    def train(k: int) -> None:
        try:
            with w.acting(0):
                x = tensor(float(k), requires_grad=True)
                with dist_autograd.context() as cid:
                    y = w.rpc_sync(f"worker{1 + k % 2}", square, (x,))
                    for _ in range(k % 3):
                        y = w.rpc_sync("worker2", mul3, (y,))
                    dist_autograd.backward(cid, [y])
                    results[k] = float(dist_autograd.get_gradients(cid)[x])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=train, args=(k,)) for k in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert results == {k: 2.0 * k * 3 ** (k % 3) for k in range(1, 9)}
    settle(w, lambda: gone_everywhere(w))


def test_distributed_optimizer_updates_remote_parameters(w: LocalWorld) -> None:
    p1 = w.remote("worker1", tensor, (2.0,), {"requires_grad": True})
    p2 = w.remote("worker2", tensor, (3.0,), {"requires_grad": True})
    x = tensor(1.5)
    with dist_autograd.context() as cid:
        loss = x * p1.to_here() * p2.to_here()
        dist_autograd.backward(cid, [loss])
        opt = DistributedOptimizer(SGD, [p1, p2], lr=0.1)
        opt.step(cid)
    with w.acting(1):
        assert float(p1.local_value()) == pytest.approx(2.0 - 0.1 * 1.5 * 3.0)
    with w.acting(2):
        assert float(p2.local_value()) == pytest.approx(3.0 - 0.1 * 1.5 * 2.0)


def test_an_rpc_in_flight_at_exit_resurrects_nothing(w: LocalWorld) -> None:
    x = tensor(2.0, requires_grad=True)
    GATE.clear()
    with dist_autograd.context() as cid:
        fut = w.rpc_async("worker1", gated_square, (x,))
    settle(w, lambda: w.workers[0].node.container.refused(from_int(cid)))
    GATE.set()
    value = fut.wait()  # the answer came after the release: its autograd part is dropped
    assert float(value) == 4.0
    assert value.grad_fn is None
    settle(w, lambda: gone_everywhere(w))
    time.sleep(0.05)
    assert gone_everywhere(w)  # nothing came back, on the caller nor on the callee
    assert w.workers[0].node.container.refused(from_int(cid))  # its horizon covers cid


def test_backward_with_unused_rpc_outputs_terminates(w: LocalWorld) -> None:
    x = tensor(2.0, requires_grad=True)
    with dist_autograd.context() as cid:
        unused = w.rpc_sync("worker1", mul3, (x,))  # FAST mode would wait for its gradient
        w.rpc_sync("worker2", log_value, (x,))  # grad in, none out: hangs torch 2.13
        loss = w.rpc_sync("worker1", square, (x,))
        dist_autograd.backward(cid, [loss])
        assert float(dist_autograd.get_gradients(cid)[x]) == 4.0
        del unused


def test_errors_and_helpers_as_torch_has_them(w: LocalWorld) -> None:
    assert dist_autograd.is_available()
    assert dist_autograd._get_max_id() == (1 << 48) - 1
    with dist_autograd.context() as cid:
        with pytest.raises(RuntimeError, match=r"Already have an autograd context id for this"):
            dist_autograd.context().__enter__()
        assert dist_autograd._current_context()._context_id() == cid
        assert dist_autograd._retrieve_context(cid)._context_id() == cid
        dist_autograd._is_valid_context(cid)
        assert dist_autograd._get_debug_info() == {
            "num_autograd_contexts": 1,
            "num_current_backward_passes": 0,
        }
        leaf = tensor(1.0, requires_grad=True)
        with pytest.raises(RuntimeError, match="No tensors provided"):
            dist_autograd.backward(cid, [])
        with pytest.raises(RuntimeError, match="requires_grad not set on root"):
            dist_autograd.backward(cid, [tensor(1.0)])
        with pytest.raises(RuntimeError, match="does not have a valid gradient function"):
            dist_autograd.backward(cid, [leaf])
        with pytest.raises(TypeError, match="incompatible function arguments"):
            dist_autograd.backward(cid, leaf * 2)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="Current thread doesn't have a valid autograd context"):
        dist_autograd._current_context()
    for call in (
        dist_autograd._retrieve_context,
        dist_autograd._is_valid_context,
        dist_autograd._release_context,
    ):
        with pytest.raises(RuntimeError, match=f"Could not find autograd context with id: {cid}"):
            call(cid)
    with pytest.raises(RuntimeError, match="Container is already initialized with worker_id: 0"):
        dist_autograd._init(4)
    dist_autograd._init(0)


def test_the_context_is_released_when_the_block_raises(w: LocalWorld) -> None:
    opened: list[int] = []

    def block() -> None:
        with dist_autograd.context() as context_id:
            opened.append(context_id)
            w.rpc_sync("worker1", mul3, (tensor(1.0, requires_grad=True),))
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        block()
    (cid,) = opened
    with pytest.raises(RuntimeError, match="Could not find autograd context"):
        dist_autograd._retrieve_context(cid)
    settle(w, lambda: gone_everywhere(w))


def test_a_udf_runs_under_its_callers_context(w: LocalWorld) -> None:
    with dist_autograd.context() as cid:
        assert w.rpc_sync("worker1", current_id) == cid
        assert w.rpc_sync("worker1", open_context) == (
            "Already have an autograd context id for this thread."
        )
    with pytest.raises(RuntimeError, match="Current thread doesn't have a valid"):
        w.rpc_sync("worker1", current_id)  # outside a context: not wrapped, no guard
