"""The application in the simulator: RRefs created, shared, fetched and dropped at random.

The application API (``remote``, ``share``, ``to_here``, ``drop``, ...) is what scripted
scenarios call; the random workload picks among every worker's enabled application steps with
fixed weights, without listing them (:meth:`Workload._pick_app`).
"""

from __future__ import annotations

from collections.abc import Sequence

from protoref.ids import GloballyUniqueId, WorkerId
from protoref.rref.core.state import RRefContext
from protoref.rref.sim import base
from protoref.rref.sim.base import AppAction, AppOptions, Mode, SimBase

__all__ = ["Workload"]

Gid = GloballyUniqueId


class Workload:
    """The application's steps."""

    def __init__(self, sim: SimBase) -> None:
        self.sim = sim

    # ------------------------------------------------------------------ application API

    def create_local_rref(self, w: WorkerId) -> Gid:
        r = self.sim.contexts[w].new_id()
        self.sim._apply(w, base.machine.create_local_rref, ())
        return r

    def remote(self, w: WorkerId, dst: WorkerId) -> tuple[Gid, Gid]:
        """rpc.remote: returns (RRefId, ForkId of the caller's UserRRef; = RRefId for self)."""
        ctx = self.sim.contexts[w]
        r, f = ctx.new_id(), (ctx.new_id(1) if dst != w else ctx.new_id())
        self.sim._apply(w, base.machine.remote, (dst,))
        self.sim.deadlines[(w, r, f)] = self.sim.now + self.sim.config.rpc_timeout
        return r, f

    def share(self, w: WorkerId, dst: WorkerId, r: Gid, parent: Gid) -> Gid:
        """Pass RRef ``r`` (held as ``parent``) to ``dst`` in a user RPC; returns the child fork."""
        c = self.sim.contexts[w].new_id()
        self.sim._apply(w, base.machine.prepare_child_fork, (dst, r, parent))
        return c

    def to_here(self, w: WorkerId, f: Gid) -> None:
        self.sim._apply(w, base.machine.to_here, (f,))

    def drop(self, w: WorkerId, f: Gid) -> None:
        self.sim._apply(w, base.machine.drop_rref, (f,))

    def drop_owner(self, w: WorkerId, r: Gid) -> None:
        self.sim._apply(w, base.machine.drop_owner_rref, (r,))

    def _remote_any(self, w: WorkerId, targets: Sequence[WorkerId]) -> None:
        self.remote(w, self.sim.rng.choice(targets))

    def _share_any(self, w: WorkerId, others: Sequence[WorkerId], r: Gid, parent: Gid) -> None:
        # share() without drawing the child's id it returns (nobody here reads it).
        self.sim._apply(
            w, base.machine.prepare_child_fork, (self.sim.rng.choice(others), r, parent)
        )

    def _app_enabled(self, mode: Mode) -> bool:
        """Whether :meth:`_app_options` would offer anything (without building the options: the
        scheduler needs them only when it picks an application step)."""
        if mode == "system":
            return False
        if mode == "workload":
            return True  # every worker may always create a local RRef or call rpc.remote
        for ctx in self.sim.contexts.values():  # noqa: SIM110 - a plain loop: no generator per step
            if ctx.held or ctx.owner_held:
                return True
        return False

    def _app_options(self, mode: Mode) -> AppOptions:
        """Every worker's application options, as parallel lists (weights, actions): what
        :meth:`_pick_app` picks from without listing them."""
        weights: list[float] = []
        actions: list[AppAction] = []
        workload = mode == "workload"
        for w, ctx in self.sim.contexts.items():
            worker_weights, worker_actions = self._worker_app_options(w, ctx, workload=workload)
            weights += worker_weights
            actions += worker_actions
        return weights, actions

    def _pick_app(self, mode: Mode) -> AppAction:
        """``rng.choices(actions, weights)[0]`` over ``_app_options(mode)``, without listing
        every worker's options.

        Application weights are multiples of 0.5, so every cumulative sum of the concatenated
        list is exact: the one at a worker's option is (the totals of the workers before it)
        + (its own cumulative weight), whichever way it is added up, and a worker's total
        follows from the sizes of its sets (:meth:`_app_total`). The same ``random()`` draw
        is compared with the same values, so the same option is picked; only the picked
        worker's options are listed."""
        workload = mode == "workload"
        cache = self.sim._app_totals
        totals = []
        total = 0.0
        for w, ctx in self.sim.contexts.items():
            # A step changes one worker's context: the others' totals are reused.
            cached = cache.get(w)
            if cached is not None and cached[0] is ctx and cached[1] is workload:
                worker_total = cached[2]
            else:
                worker_total = self._app_total(ctx, workload)
                cache[w] = (ctx, workload, worker_total)
            totals.append((w, ctx, worker_total))
            total += worker_total
        x = self.sim._random() * (total + 0.0)
        offset = 0.0
        last = None
        for w, ctx, worker_total in totals:
            if not worker_total:
                continue
            last = (w, ctx)
            if offset + worker_total > x:
                picked = self._pick_in_worker(w, ctx, workload, offset, x)
                if picked is None:  # the worker's options add up to less than _app_total says
                    raise AssertionError(f"{w}: application options and their total disagree")
                return picked
            offset += worker_total
        if last is None:
            raise IndexError("no application step is enabled")
        # x rounded up to the total: the last option, as bisect gives.
        w, ctx = last
        return self._worker_app_options(w, ctx, workload=workload)[1][-1]

    def _pick_in_worker(
        self, w: WorkerId, ctx: RRefContext, workload: bool, offset: float, x: float
    ) -> AppAction | None:
        """The first of ``w``'s options (:meth:`_worker_app_options`, in order) whose
        cumulative weight plus ``offset`` exceeds ``x``, found part by part from set sizes:
        only the part it falls in is sorted, and no option list is built. Every sum compared
        is a multiple of 0.5, so exact."""
        base = offset
        n = len(ctx.held)
        if n and base + n > x:
            return self.drop, (w, sorted(ctx.held)[_first_over(x, base, 1.0, n)])
        base += n
        n = len(ctx.owner_held)
        if n and base + 0.5 * n > x:
            return self.drop_owner, (w, sorted(ctx.owner_held)[_first_over(x, base, 0.5, n)])
        base += 0.5 * n
        if not workload:
            return None
        others = self.sim._others[w]
        if base + 0.5 > x:
            return self.create_local_rref, (w,)
        if base + 2.0 > x:
            return self._remote_any, (w, self.sim._targets[w])
        base += 2.0
        shared = ctx.owner_held | ctx.owners
        n = len(shared)
        if n and base + n > x:
            r = sorted(shared)[_first_over(x, base, 1.0, n)]
            return self._share_any, (w, others, r, r)
        base += n
        users, fetched = ctx.users, ctx.fetched
        for f in sorted(ctx.held - ctx.timed_out - ctx.deleted):
            base += 1.5
            if base > x:
                return self._share_any, (w, others, users[f].rref, f)
            if f not in fetched:
                base += 1.0
                if base > x:
                    return self.to_here, (w, f)
        return None

    @staticmethod
    def _app_total(ctx: RRefContext, workload: bool) -> float:
        """The sum of the weights :meth:`_worker_app_options` gives ``ctx``'s worker, from set
        sizes (exact: every weight is a multiple of 0.5)."""
        total = len(ctx.held) + 0.5 * len(ctx.owner_held)
        if workload:
            usable = ctx.held
            if ctx.timed_out or ctx.deleted:
                usable = usable - ctx.timed_out - ctx.deleted
            total += 2.0 + len(ctx.owner_held | ctx.owners) + 1.5 * len(usable)
            total += len(usable - ctx.fetched) if ctx.fetched else len(usable)
        return total

    def _worker_app_options(self, w: WorkerId, ctx: RRefContext, *, workload: bool) -> AppOptions:
        """``w``'s application options in their fixed order: drop each held UserRRef, drop
        each held OwnerRRef, then (workload) create a local RRef, rpc.remote, share each
        OwnerRRef, share and fetch each usable UserRRef."""
        weights, actions = self._drop_part(w, ctx)
        if workload:
            for part in (self._owned_part(w, ctx), self._user_part(w, ctx)):
                weights += part[0]
                actions += part[1]
        return weights, actions

    def _drop_part(self, w: WorkerId, ctx: RRefContext) -> AppOptions:
        held, owner_held = sorted(ctx.held), sorted(ctx.owner_held)
        weights = [1.0] * len(held) + [0.5] * len(owner_held)
        drop, drop_owner = self.drop, self.drop_owner
        actions: list[AppAction] = [(drop, (w, f)) for f in held]
        actions += [(drop_owner, (w, r)) for r in owner_held]
        return weights, actions

    def _owned_part(self, w: WorkerId, ctx: RRefContext) -> AppOptions:
        others, targets = self.sim._others[w], self.sim._targets[w]
        share = self._share_any
        shared = sorted(ctx.owner_held | ctx.owners)
        weights = [0.5, 1.5] + [1.0] * len(shared)
        actions: list[AppAction] = [
            (self.create_local_rref, (w,)),
            (self._remote_any, (w, targets)),
        ]
        actions += [(share, (w, others, r, r)) for r in shared]
        return weights, actions

    def _user_part(self, w: WorkerId, ctx: RRefContext) -> AppOptions:
        # Reads the records of held UserRRefs too, but a record never changes and a new
        # UserRRef is held (``held`` changes with it).
        others = self.sim._others[w]
        share, users, fetched, to_here = self._share_any, ctx.users, ctx.fetched, self.to_here
        weights: list[float] = []
        actions: list[AppAction] = []
        for f in sorted(ctx.held - ctx.timed_out - ctx.deleted):
            weights.append(1.5)
            actions.append((share, (w, others, users[f].rref, f)))
            if f not in fetched:
                weights.append(1.0)
                actions.append((to_here, (w, f)))
        return weights, actions


def _first_over(x: float, base: float, weight: float, n: int) -> int:
    """The least k < n with ``base + (k + 1) * weight > x``, given ``base + n * weight > x``
    (estimated by division, then settled with the exact comparisons)."""
    k = min(max(int((x - base) / weight), 0), n - 1)
    while k > 0 and base + k * weight > x:
        k -= 1
    while not base + (k + 1) * weight > x:
        k += 1
    return k
