"""Nineteen planted RRef bugs, for measuring what the checker catches (issue #21).

The eight of :mod:`protoref.rref.sim.faults` (seven protocol bugs and a shutdown bug) and ten more
defined here the same way: the correct core step's result, changed the way the bug breaks it
(a message not sent, a state field not updated), and one where the correct core refuses
(``fork-after-timeout``: the application's fork or fetch of a timed-out UserRRef, offered by
the simulator's rare paths, is accepted), planted for the duration of ``with plant(name):``
through the simulator's fault hook (``faults._machine_with``: every transition
the simulator calls goes through it). Nothing in the implementation is edited.

``python -m support.planted`` (from ``tests/``) runs the issue's exact command, ``tracecheck
campaign rref --runs 200 --seed 1 --invariants``, once per bug with the bug planted, and prints
per bug what the command reported: its exit code, whether it ended in a traceback, and the
campaign's summary line (runs accepted, rejected, raised). docs/conformance.md has the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Final

from protoref.rref.core import events as ev
from protoref.rref.core import machine
from protoref.rref.core.machine import Step
from protoref.rref.core.state import RRefContext
from protoref.rref.sim import faults

__all__ = ["BUGS", "MORE", "PROTOREF_BUGS", "UNGUARDED", "plant"]

Breaks = Callable[[RRefContext, ev.RRefInput, Step], Step]


def _without(types: set[str]) -> Callable[[Step], Step]:
    def drop(result: Step) -> Step:
        sent = tuple(m for m in result.sent if m.type not in types)
        return result if len(sent) == len(result.sent) else result._replace(sent=sent)

    return drop


def _on(kind: type, change: Callable[[RRefContext, ev.RRefInput, Step], Step]) -> Breaks:
    def broken(ctx: RRefContext, inp: ev.RRefInput, result: Step) -> Step:
        return change(ctx, inp, result) if isinstance(inp, kind) else result

    return broken


def _keep(field: str) -> Callable[[RRefContext, ev.RRefInput, Step], Step]:
    """The step leaves ``field`` of the context as it was (an update forgotten)."""

    def change(ctx: RRefContext, inp: ev.RRefInput, result: Step) -> Step:
        del inp
        before = getattr(ctx, field)
        if getattr(result.state, field) == before:
            return result
        return result._replace(state=replace(result.state, **{field: before}))

    return change


def _sending(types: set[str]) -> Callable[[RRefContext, ev.RRefInput, Step], Step]:
    drop = _without(types)
    return lambda ctx, inp, result: drop(result)


#: The ten bugs defined here, by name: what they break (the spec's guarantee) in the docstring
#: of each entry's comment.
MORE: Final[dict[str, Breaks]] = {
    # UserRRef destructor forgets RREF_USER_DELETE (G1): the owner keeps the fork for ever,
    # so a graceful shutdown never ends.
    "skip-user-delete": _on(ev.DelUser, _sending({"RREF_USER_DELETE"})),
    # The owner registers a forked UserRRef but sends no RREF_ACK: it stays pending.
    "forget-ack": _on(ev.ForkRequest, _sending({"RREF_ACK"})),
    # The parent's worker never sends RREF_CHILD_ACCEPT: the child stays pending on it.
    "forget-child-accept": _on(ev.RRefAck, _sending({"RREF_CHILD_ACCEPT"})),
    # The owner answers no fetch: to_here never returns.
    "forget-fetch-ret": _on(ev.RRefFetchCall, _sending({"PYTHON_RREF_FETCH_RET"})),
    # A fetch that arrives before the OwnerRRef is parked nowhere: never answered.
    "park-forgets-fetch": _on(ev.RRefFetchCall, _keep("pending_owners")),
    # rpc.remote's timeout leaves the UserRRef in pendingUsers_ (R5: never deleted).
    "timeout-keeps-pending-user": _on(ev.TimeOutRemote, _keep("pending_users")),
    # The fetch reply does not end the fetch: the UserRRef stays referenced.
    "fetch-stays-pending": _on(ev.RRefFetchRet, _keep("fetching")),
    # The destructor does not record the deletion: it may run (and delete) again.
    "forget-deleted": _on(ev.DelUser, _keep("deleted")),
    # RREF_CHILD_ACCEPT does not clear the pending child: its parent is never deleted.
    "keep-pending-child": _on(ev.ChildAccept, _keep("pending_children")),
    # The shutdown sweep spares OwnerRRefs nobody forked (they leak past destroyInstance).
    "sweep-keeps-unforked-owners": _on(ev.DelAllUsersAndUnforkedOwners, _keep("owners")),
}


def _ignores_timeout(ctx: RRefContext, inp: ev.RRefInput) -> Step:
    """The core forgets that a UserRRef's rpc.remote timed out when the application forks or
    fetches it (torch raises there; RRef.tla's PrepareChildFork and ToHere are not enabled)."""
    f = (
        inp.parent
        if isinstance(inp, ev.PrepareChildFork)
        else inp.f
        if isinstance(inp, ev.ToHere)
        else None
    )
    if f is None or f not in ctx.timed_out:
        return machine.step(ctx, inp)
    result = machine.step(replace(ctx, timed_out=ctx.timed_out - {f}), inp)
    return result._replace(state=replace(result.state, timed_out=ctx.timed_out))


#: Bugs planted as a whole transition (where the correct core refuses, so there is no result
#: to change): the campaigns reach them through the simulator's rare paths.
UNGUARDED: Final[dict[str, Callable[[RRefContext, ev.RRefInput], Step]]] = {
    "fork-after-timeout": _ignores_timeout,
}

#: protoref's eight planted bugs (protoref.rref.sim.faults), by name.
PROTOREF_BUGS: Final = tuple(f.value for f in (*faults.FAULTS, *faults.SHUTDOWN_FAULTS))
#: Every planted bug, by name: protoref's eight and the eleven above.
BUGS: Final = (*PROTOREF_BUGS, *MORE, *UNGUARDED)


def _broken_step(breaks: Breaks) -> Callable[[RRefContext, ev.RRefInput], Step]:
    def step(ctx: RRefContext, inp: ev.RRefInput) -> Step:
        return breaks(ctx, inp, machine.step(ctx, inp))

    return step


@contextmanager
def plant(name: str) -> Iterator[None]:
    """Run the simulator with bug ``name`` planted inside the ``with`` block."""
    known = {f.value: f for f in (*faults.FAULTS, *faults.SHUTDOWN_FAULTS)}
    if name in known:
        with faults.inject(known[name]):
            yield
        return
    step = UNGUARDED.get(name) or _broken_step(MORE[name])

    hook, module = faults._HOOK, faults.sim_module
    saved_step, saved_machine = getattr(module, hook), getattr(module, faults._MACHINE)
    setattr(module, hook, step)
    setattr(module, faults._MACHINE, faults._machine_with(step))
    try:
        yield
    finally:
        setattr(module, hook, saved_step)
        setattr(module, faults._MACHINE, saved_machine)


#: The campaign's summary line: "200 runs, 157 accepted, 43 rejected (...), 0 raised".
_SUMMARY: Final = re.compile(r"\s*\d+ runs, \d+ accepted")


def _measure(name: str, argv: list[str]) -> dict[str, object]:
    from tracecheck.cli import main  # noqa: PLC0415 - the command under measurement

    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with plant(name), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code: int | str = main(argv)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            code = "traceback: " + traceback.format_exception_only(exc)[-1].strip()
    text = out.getvalue()
    summary = next((ln for ln in text.splitlines() if _SUMMARY.match(ln)), "")
    return {
        "bug": name,
        "exit": code,
        "summary": summary.strip(),
        "seconds": round(time.monotonic() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m support.planted")
    parser.add_argument("--bug", action="append", help="only these bugs")
    parser.add_argument("--runs", default="200")
    args = parser.parse_args(argv)
    command = ["campaign", "rref", "--runs", args.runs, "--seed", "1", "--invariants"]
    for name in args.bug or BUGS:
        print(json.dumps(_measure(name, command)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
