"""The benches' alternation: ours and torch measured one after the other in the same run, pair
by pair, so that a change of the machine's load hits both sides alike and the ratios stand side
by side (docs/performance.md); and the ratios of those pairs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = ["alternate", "ratios"]

T = TypeVar("T")


def alternate(repeat: int, ours: Callable[[], T], theirs: Callable[[], T]) -> list[tuple[T, T]]:
    """``repeat`` (ours, theirs) pairs, each side measured right after the other."""
    return [(ours(), theirs()) for _ in range(repeat)]


def ratios(
    results: Sequence[T], value: Callable[[T], float | None], *, inverse: bool = False
) -> list[float]:
    """Per (ours, theirs) pair of ``results`` (flat: ours, theirs, ours, ...) where both sides
    have a ``value``: ours / theirs, or theirs / ours with ``inverse`` (a rate)."""
    out = []
    for o, t in zip(results[::2], results[1::2], strict=False):
        a, b = value(o), value(t)
        if a and b:
            out.append(b / a if inverse else a / b)
    return out
