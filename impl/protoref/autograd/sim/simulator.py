"""Deterministic simulator of the Reference distributed autograd protocol (DistAutograd.tla).

N workers, one thread, no time: a seeded :class:`random.Random` owns every choice. A run is a
workload phase, in which any enabled step may happen next: an application step of a creator's
thread (open a context, make a wrapped call with or without grad, run backward once its calls
have returned, leave the block, with calls still in flight or not), a UDF step of a running
request (call on, once; return, with or without grad), the delivery of any message in flight
in any order, a recv function firing, a graph task completing, a holder releasing a context
whose creator died, and the spec's faults: a retried cleanup delivered twice
(``RetryCleanup``), a crash (``Crash``, then ``Discard`` of what was sent to the dead worker).
Forward messages arrive late (after the block exits) and outputs miss the loss (``loss``
FALSE) because nothing orders them. A drain phase then leaves every block and delivers
everything; at the end the spec's liveness properties must hold (every dead context released
everywhere, every graph task and every call over). In test mode every spec invariant is checked
after every step.

Every run is reproducible from its seed: ``python -m protoref.autograd.sim.simulator --seed N``.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Final, TypeAlias

from protoref.autograd.core import echo as bw
from protoref.autograd.core import forward as fw
from protoref.autograd.core import invariants
from protoref.autograd.core import network as nw
from protoref.autograd.core.events import Msg
from protoref.autograd.core.ids import AutogradId
from protoref.autograd.core.state import Container, Handler, RecvFn
from protoref.autograd.core.transition import Step
from protoref.autograd.sim.simworld import SimConfig, SimWorld
from protoref.autograd.trace import args as a
from protoref.errors import InvariantViolationError, ProtocolError
from protoref.tracing import JsonlSink, TraceSink

__all__ = ["RunSummary", "SimConfig", "Simulator", "main"]

Option: TypeAlias = tuple[float, Callable[[], None]]
#: Drain steps allowed before the run is declared stuck (a liveness failure).
MAX_DRAIN_STEPS: Final = 100_000


@dataclass(frozen=True)
class RunSummary:
    seed: int
    events: int
    counts: dict[str, int]


class Simulator:
    """Workers ``0..N-1`` of one autograd system, driven by one seeded scheduler."""

    def __init__(self, seed: int, config: SimConfig | None = None, sink: TraceSink | None = None):
        self.seed = seed
        self.config = config or SimConfig()
        self.rng = random.Random(seed)
        self.sim = SimWorld(seed, self.config, sink)
        self.opened = dict.fromkeys(self.config.creators, 0)
        self.calls: dict[object, int] = {}
        self.crashed = False
        #: A crash came while a graph task ran: the pass may never complete (the spec's crash
        #: model has backward off; BackwardTerminatesProp is not claimed for such a run).
        self.crashed_in_pass = False
        self.draining = False

    # ------------------------------------------------------------------ options

    def _app_options(self) -> list[Option]:
        out: list[Option] = []
        cfg = self.config
        for w in cfg.creators:
            ctn = self.sim.containers[w]
            if not ctn.alive:
                continue
            c = ctn.cur
            if c is None:
                if not self.draining and self.opened[w] < cfg.contexts:
                    out.append((1.0, partial(self._new_context, w)))
                # its released contexts (the horizon covers them, no tombstone remains)
                gone = sorted(
                    c for x, c in self.sim.released if x == w == c.worker and c not in ctn.late
                )
                if gone and not self.draining:  # #40880: a call with the id after the block
                    out.append((0.1, partial(self._retrieve, w, gone[-1])))
                continue
            if not self.draining:
                out.append((0.05, partial(self._refused, w)))
            if ctn.running(c):
                continue  # backward runs on this very thread
            calls = self.calls.get(c, 0)
            if not self.draining and not ctn.started(c) and calls < cfg.calls:
                for dst in range(cfg.workers):
                    if dst != w:
                        for grad in (True, False):
                            weight = self._grad_weight(grad)
                            out.append((weight, partial(self._send, w, dst, grad)))
            backward = cfg.backward and not self.crashed and not self.draining
            passes = ctn.finished(c)
            if backward and passes < cfg.passes and not ctn.pending_of(c) and calls:
                out.append((3.0 if not passes else 0.5, partial(self._backward, w, c)))
            if ctn.handlers_of(c):
                continue  # the Reference's release waits for them ("defer")
            # leaving with calls in flight (late forward messages) or unmade is rarer than
            # leaving when done, so that most contexts reach their backward pass
            busy = ctn.pending_of(c) or (calls < cfg.calls and not ctn.started(c))
            weight = 0.15 if busy and not self.draining else 1.0
            out.append((weight, partial(self._release, w)))
        for w, ctn in self.sim.containers.items():
            if ctn.alive:
                for h in sorted(ctn.handlers, key=lambda h: (h.ctx, h.req)):
                    out.extend(self._udf_options(w, ctn, h))
        return out

    def _udf_options(self, w: int, ctn: Container, h: Handler) -> list[Option]:
        out: list[Option] = []
        if h.wait is not None:
            return out
        cfg = self.config
        nest = cfg.nested and not self.draining and h.called < cfg.max_nested and not h.err
        if nest and h.ctx in ctn.ctxs:
            for dst in range(cfg.workers):
                if dst != w:
                    for grad in (True, False):
                        for await_ in (True, False):
                            weight = 0.4 if await_ else 0.1
                            out.append((weight, partial(self._nested, w, h, dst, grad, await_)))
        if any((h.ctx, m) in ctn.detached for m in h.forgot):
            return out  # the Reference's answer waits for its forgotten calls ("joinNested")
        for grad in (True, False):
            weight = self._grad_weight(grad)
            out.append((weight, partial(self._finish, w, h, grad)))
        return out

    def _grad_weight(self, grad: bool) -> float:
        """Crash runs favour messages that carry grad: the gradient requests they lead to are
        what a crash during a pass meets (Discard, ProcessBackwardAutogradResp)."""
        return 3.0 if grad and self.config.crash else 1.0

    def _dead(self) -> frozenset[int]:
        """The failure detector's verdict: the workers that have crashed."""
        return frozenset(w for w, ctn in self.sim.containers.items() if not ctn.alive)

    def _system_options(self) -> list[Option]:
        out: list[Option] = []
        containers = self.sim.containers
        for m in list(self.sim.net):
            if not containers[m.dst].alive:
                out.append((1.0, partial(self._discard, m)))
                continue
            if self._deliverable(m):
                out.append((1.0, partial(self._deliver, m)))
            elif m.type in ("FWD_RESP", "RESP"):
                out.append((1.0, partial(self._discard, m)))  # its future timed out
            if self.config.dup_cleanup and m.type == "CLEANUP" and m.dup == 0:
                out.append((0.3, partial(self._retry, m)))
        dead = self._dead()
        for w, ctn in containers.items():
            if not ctn.alive:
                continue
            for c, _, state in sorted(ctn.bstate):
                if state not in ("run", "err"):
                    continue
                for r in bw.ready_recvs(ctn, c):
                    out.append((1.0, partial(self._apply_recv, w, c, r)))
                if c in ctn.ctxs and bw.complete(ctn, c, dead):
                    out.append((1.0, partial(self._cleanup_pass, w, c)))
                if state == "run" and c in ctn.ctxs and not self.draining:
                    out.append((0.03, partial(self._backward_error, w, c)))
            for c in sorted(ctn.ctxs):
                if c.worker in dead and not ctn.handlers_of(c):
                    out.append((1.0, partial(self._orphan, w, c)))
            if not self.draining:
                for mid in sorted(self._timeouts(ctn)):
                    out.append((0.05, partial(self._timeout, w, mid)))
        return out

    def _timeouts(self, ctn: Container) -> set[AutogradId]:
        """The futures of ``ctn`` that may time out: those of contexts their creator has left.
        (A timed-out call's late answer is dropped; had it carried grad, its send function on
        the callee would never get a gradient request, and a later pass of the context would
        wait for it for ever: the spec claims no BackwardTerminatesProp with timeouts.)"""
        futures = {(c, m) for c, m in ctn.pending | ctn.detached}
        futures |= {(h.ctx, h.wait) for h in ctn.handlers if h.wait is not None}
        return {m for c, m in futures if self.sim.containers[c.worker].refused(c)}

    def _maybe_crash(self) -> bool:
        """Crash a worker now? A fault, drawn apart from the enabled steps (so an idle system
        does not make it certain): rare, but certain for a worker that another worker's running
        graph task still owes a gradient request (a recv function from it not yet fired): the
        request then meets a dead worker (Discard, ProcessBackwardAutogradResp: the failure
        path of a pass; requests already in flight are answered with errors)."""
        if not self.config.crash or self.crashed or self.draining:
            return False
        crashable = set(self.config.crash_workers)
        owed = {
            r.src
            for ctn in self.sim.containers.values()
            for c, _, state in ctn.bstate
            if state == "run"
            for r in ctn.recvs_of(c)
            if r.mid not in ctn.fired_of(c)
        }
        targets = sorted(owed & crashable)
        if targets:
            self._crash(self.rng.choice(targets))
            return True
        alive = [w for w in sorted(crashable) if self.sim.containers[w].alive]
        if alive and self.rng.random() < 0.004:
            self._crash(self.rng.choice(alive))
            return True
        return False

    def _deliverable(self, m: Msg) -> bool:
        ctn = self.sim.containers[m.dst]
        if m.type == "CLEANUP":
            return not ctn.handlers_of(m.ctx)  # the Reference's "defer"
        if m.type in ("FWD_RESP", "RESP"):
            return ctn.someone_waits(m.ctx, m.req)
        return True

    # ------------------------------------------------------------------ steps

    def _c(self, w: int) -> Container:
        return self.sim.containers[w]

    def _step(self, w: int, step: Step, consumed: Msg | None = None) -> None:
        self.sim.apply(w, step, consumed)

    def _new_context(self, w: int) -> None:
        self.opened[w] += 1
        self._step(w, fw.new_context(self._c(w)))

    def _refused(self, w: int) -> None:
        self._step(w, fw.new_context_refused(self._c(w)))

    def _retrieve(self, w: int, c: AutogradId) -> None:
        self._step(w, fw.retrieve_context(self._c(w), c))

    def _send(self, w: int, dst: int, grad: bool) -> None:
        c = self._c(w).cur
        self.calls[c] = self.calls.get(c, 0) + 1
        self._step(w, fw.send_message_with_autograd(self._c(w), dst, grad))

    def _nested(self, w: int, h: Handler, dst: int, grad: bool, await_: bool) -> None:
        self._step(w, fw.nested_send_message_with_autograd(self._c(w), h, dst, grad, await_))

    def _finish(self, w: int, h: Handler, grad: bool) -> None:
        self._step(w, fw.finish_forward_autograd_req(self._c(w), h, grad))

    def _apply_recv(self, w: int, c: AutogradId, r: RecvFn) -> None:
        self._step(w, bw.recv_rpc_backward_apply(self._c(w), c, r))

    def _backward(self, w: int, c: AutogradId) -> None:
        ctn = self._c(w)
        last = ctn.finished(c) + 1 >= self.config.passes
        retain = not last and self.rng.random() < 0.7
        self._step(w, bw.dist_engine_execute(ctn, c, 0, retain))

    def _backward_error(self, w: int, c: AutogradId) -> None:
        self._step(w, bw.backward_error(self._c(w), c))

    def _timeout(self, w: int, m: AutogradId) -> None:
        self._step(w, fw.poll_timeout_rpcs(self._c(w), m))

    def _release(self, w: int) -> None:
        self._step(w, fw.release_context(self._c(w)))

    def _cleanup_pass(self, w: int, c: AutogradId) -> None:
        self._step(w, bw.cleanup_backward_pass(self._c(w), c, self._dead()))

    def _orphan(self, w: int, c: AutogradId) -> None:
        self._step(w, fw.release_orphaned_context(self._c(w), c, creator_dead=True))

    def _deliver(self, m: Msg) -> None:
        ctn = self._c(m.dst)
        match m.type:
            case "FWD_REQ":
                step = fw.process_forward_autograd_req(ctn, m)
            case "FWD_RESP":
                app = (m.ctx, m.req) in ctn.pending
                loss = self.rng.random() < 0.7 if app else True
                step = fw.deserialize_forward_autograd_resp(ctn, m, loss)
            case "RESP":
                step = fw.deserialize_response(ctn, m)
            case "CLEANUP":
                step = fw.process_cleanup_autograd_context_req(ctn, m)
            case "BWD_REQ":
                step = bw.process_backward_autograd_req(ctn, m)
            case "BWD_RESP":
                step = bw.process_backward_autograd_resp(ctn, m)
            case "BWD_START":
                step = bw.process_backward_start(ctn, m)
            case _:
                step = bw.process_backward_ack(ctn, m)
        self._step(m.dst, step, m)

    def _retry(self, m: Msg) -> None:
        self.sim.apply_network(m.src, a.RetryCleanupArgs.of(m=m), m, nw.retry_cleanup(m))

    def _discard(self, m: Msg) -> None:
        """A message to a dead worker (logged by its sender's agent), or an answer nobody waits
        for any more (logged by its receiver's agent, which drops it)."""
        dst_alive = self.sim.containers[m.dst].alive
        node = m.dst if dst_alive else m.src
        made = nw.discard(m, dst_alive=dst_alive)
        self.sim.apply_network(node, a.DiscardArgs.of(msg=m), m, made)

    def _crash(self, w: int) -> None:
        self.crashed = True
        self.crashed_in_pass = any(
            state == "run" for ctn in self.sim.containers.values() for _, _, state in ctn.bstate
        )
        self._step(w, fw.crash(self._c(w)))
        stamp = self.sim.clocks[w].lamport
        kept: dict[Msg, int] = {}
        for m, at in self.sim.net.items():
            if m.dst != w:
                kept[m] = at
        for m in nw.crash_network([m for m in self.sim.net if m.dst == w], w):
            kept.setdefault(m, stamp)
        self.sim.replace_net(kept)

    # ------------------------------------------------------------------ run

    def _pick(self, app: list[Option], system: list[Option]) -> Option | None:
        """One enabled step, drawn by weight from all of them: an application step's weight is
        scaled by ``app_weight`` (so the application waiting for its calls, whose only
        application step is leaving early, mostly lets the messages move instead)."""
        scale = self.config.app_weight
        options = [(w * scale, f) for w, f in app] + system
        if not options:
            return None
        return self.rng.choices(options, [o[0] for o in options])[0]

    def run(self, steps: int) -> RunSummary:
        """``steps`` workload steps, then the drain; raises on a violated property."""
        for _ in range(steps):
            if self._maybe_crash():
                continue
            chosen = self._pick(self._app_options(), self._system_options())
            if chosen is None:
                break
            chosen[1]()
        self.draining = True
        for _ in range(MAX_DRAIN_STEPS):
            chosen = self._pick(self._app_options(), self._system_options())
            if chosen is None:
                break
            chosen[1]()
        else:
            raise InvariantViolationError("drain", "the drain did not terminate", seed=self.seed)
        skip = {"BackwardTerminatesProp"} if self.crashed_in_pass else set()
        invariants.check_quiescent(self.sim.world(), seed=self.seed, skip=skip)
        self.sim.sink.close()
        counts = dict(self.sim.counts)
        return RunSummary(self.seed, sum(counts.values()), counts)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m protoref.autograd.sim.simulator",
        description="Run the seeded autograd simulator and write its trace.",
    )
    p.add_argument("--seed", type=int, default=None, help="scheduler seed (random if omitted)")
    p.add_argument("--steps", type=int, default=100, help="workload steps (then the drain)")
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--crash", action="store_true", help="one worker may crash (no backward)")
    p.add_argument("--trace", help="write the JSON-lines trace here")
    p.add_argument("--check", action="store_true", help="check the invariants after every step")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print(f"seed {seed}", flush=True)  # first, so a failing run can be replayed
    config = replace(
        SimConfig(), workers=args.workers, crash=args.crash, check_invariants=args.check
    )
    sink = JsonlSink(args.trace) if args.trace else None
    started = time.perf_counter()
    try:
        summary = Simulator(seed, config, sink).run(args.steps)
    except (ProtocolError, InvariantViolationError) as exc:
        print(f"FAILED (seed {seed}): {exc}", file=sys.stderr)
        return 1
    took = time.perf_counter() - started
    print(f"{summary.events} events in {took:.3f} s: {summary.counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
