"""The RRef counterexamples of the empty OwnerRRef (``MCRRef_pytorch_unforkedOwner``,
``MCRRef_pytorch_selfShare``; divergences 45): the owner unpickles its own RRef before the
creating PYTHON_REMOTE_CALL has run, ``getOrCreateOwnerRRef`` puts an empty OwnerRRef in
``owners_``, and a ``delForkOfOwner`` that empties ``forks_`` erases it while the creator is
alive; the late call then creates a second OwnerRRef. torch follows them with no agent fault:
the creating call's argument takes ``unpickle_seconds`` to unpickle on the owner
(:mod:`protoref.torch.rref_replay_programs`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from tracecheck.campaigns.replay_on_torch.recipe_types import (
    Facts,
    Recipe,
    RpcReplay,
    fact,
    waiting,
)
from tracecheck.campaigns.replay_on_torch.steps import Step, first_taken

__all__ = ["EARLY_OWNER_RECIPES"]

_KNOBS: Final = {"unpickle_seconds": 3.0, "grace": 4.0}


def _erasing_step(steps: Sequence[Step], kind: str) -> int | None:
    """The first step taking ``kind`` that erases an OwnerRRef."""
    return next(
        (i for i, s in enumerate(steps) if kind in s.taken and "erasedOwners" in s.changed), None
    )


def _early_owner(steps: Sequence[Step]) -> int | None:
    """The step where the owner unpickles its own RRef (a PYTHON_CALL that adds to owners)."""
    return next(
        (i for i, s in enumerate(steps) if "PYTHON_CALL" in s.taken and "owners" in s.changed),
        None,
    )


def _before_the_call(steps: Sequence[Step], erase: int | None) -> str | None:
    early = _early_owner(steps)
    remote = first_taken(steps, "PYTHON_REMOTE_CALL")
    if early is None:
        return "the counterexample has no owner unpickling its own RRef (an empty OwnerRRef)"
    if erase is None or erase < early:
        return "the counterexample erases no OwnerRRef after the owner created the empty one"
    if remote is not None and remote < erase:
        return "the counterexample runs the PYTHON_REMOTE_CALL before the erase"
    return None


def _unforked_plan(steps: Sequence[Step]) -> dict[str, Any] | str:
    misfit = _before_the_call(steps, _erasing_step(steps, "RREF_USER_DELETE"))
    # another user's delete empties forks_: no agent fault, the call is kept unpickling
    return misfit or {"knobs": dict(_KNOBS)}


def _self_share_plan(steps: Sequence[Step]) -> dict[str, Any] | str:
    early = _early_owner(steps)
    later = steps[early + 1 :] if early is not None else []
    erase = _erasing_step(later, "PYTHON_CALL")
    misfit = _before_the_call(steps, None if erase is None or early is None else early + 1 + erase)
    return misfit or {"knobs": dict(_KNOBS)}


def _second_owner(facts: Facts) -> bool:
    returned: bool = fact(facts, "creator_to_here") == "returned"
    return returned and fact(facts, "owner", "num_owner_rrefs") == 1


def _unforked_symptom(facts: Facts) -> str | None:
    early = fact(facts, "owner_early", "num_owner_rrefs")
    erased = fact(facts, "owner_after_delete", "num_owner_rrefs")
    udf = fact(facts, "owner_udf")
    if early != 1 or erased != 0 or not waiting(udf) or not _second_owner(facts):
        return None
    return (
        "premature delete: the owner's empty OwnerRRef (1 before the creating call ran) was "
        "erased by the other user's RREF_USER_DELETE (0 owner RRefs) while the creator's call "
        "was in flight; the late call made a second OwnerRRef (the creator's to_here returned) "
        f"and the owner's UDF holding the first is {udf}"
    )


def _self_share_symptom(facts: Facts) -> str | None:
    erased = fact(facts, "owner_udf", "after_self_share", "num_owner_rrefs")
    udf = fact(facts, "owner_udf", "local_value")
    if erased != 0 or not waiting(udf) or not _second_owner(facts):
        return None
    return (
        "premature delete: the owner shared its empty OwnerRRef with itself and unpickling that "
        "call erased it (0 owner RRefs) while the creator's call was in flight; the late call "
        f"made a second OwnerRRef (the creator's to_here returned), the owner's UDF is {udf}"
    )


EARLY_OWNER_RECIPES: Final[dict[str, Recipe]] = {
    "MCRRef_pytorch_unforkedOwner": RpcReplay(
        "unforked_owner", _unforked_plan, _unforked_symptom, world=3
    ),
    "MCRRef_pytorch_selfShare": RpcReplay("self_share", _self_share_plan, _self_share_symptom),
}
