"""What differs between two TLA+ values, said briefly: the elements a set has that the other
lacks, the record fields and function entries that changed (and within them, what changed),
rather than two whole values printed side by side in different orders.

A rejection that says ``post.forks: logged {... 31 elements ...}, the spec allows {... 31
elements ...}`` leaves the reader to find the one element that differs; :func:`difference`
finds it.
"""

from __future__ import annotations

from collections.abc import Iterable

from tracecheck.tla.values import Record, TLAFunction, TLAValue, format_value

__all__ = ["difference"]

#: How many differing elements or fields are named before "and N more".
SHOWN = 6


def difference(logged: TLAValue, allowed: TLAValue, *, depth: int = 0) -> str:
    """One line on how ``logged`` differs from ``allowed`` ("" when they are equal)."""
    if logged == allowed:
        return ""
    if depth < 4:
        if isinstance(logged, frozenset) and isinstance(allowed, frozenset):
            return _sets(logged, allowed)
        if isinstance(logged, Record) and isinstance(allowed, Record):
            fields: dict[TLAValue, TLAValue] = dict(logged.items())
            return _entries(fields, dict(allowed.items()), depth, record=True)
        if isinstance(logged, TLAFunction) and isinstance(allowed, TLAFunction):
            return _entries(dict(logged), dict(allowed), depth, record=False)
        if isinstance(logged, tuple) and isinstance(allowed, tuple) and len(logged) == len(allowed):
            changed = {
                i: (a, b) for i, (a, b) in enumerate(zip(logged, allowed, strict=True), 1) if a != b
            }
            return _named([(f"[{i}]", a, b) for i, (a, b) in changed.items()], depth)
    return f"logged {format_value(logged)}, the spec's {format_value(allowed)}"


def _sets(logged: frozenset[TLAValue], allowed: frozenset[TLAValue]) -> str:
    extra = sorted(format_value(v) for v in logged - allowed)
    missing = sorted(format_value(v) for v in allowed - logged)
    parts = []
    if extra:
        parts.append(f"logged but not in the spec's: {_listed(extra)}")
    if missing:
        parts.append(f"in the spec's but not logged: {_listed(missing)}")
    return "; ".join(parts)


def _entries(
    logged: dict[TLAValue, TLAValue], allowed: dict[TLAValue, TLAValue], depth: int, *, record: bool
) -> str:
    def key(k: TLAValue) -> str:
        return f".{k}" if record else f"[{format_value(k)}]"

    parts = []
    only_logged = [k for k in logged if k not in allowed]
    only_allowed = [k for k in allowed if k not in logged]
    if only_logged:
        parts.append(f"keys logged but not in the spec's: {_listed([key(k) for k in only_logged])}")
    if only_allowed:
        parts.append(
            f"keys in the spec's but not logged: {_listed([key(k) for k in only_allowed])}"
        )
    changed = [(key(k), logged[k], allowed[k]) for k in logged if k in allowed]
    changed = [(name, a, b) for name, a, b in changed if a != b]
    if changed:
        parts.append(_named(changed, depth))
    return "; ".join(parts)


def _named(changed: Iterable[tuple[str, TLAValue, TLAValue]], depth: int = 0) -> str:
    items = list(changed)
    shown = [f"{name}: {difference(a, b, depth=depth + 1)}" for name, a, b in items[:SHOWN]]
    more = len(items) - SHOWN
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


def _listed(texts: list[str]) -> str:
    more = len(texts) - SHOWN
    return ", ".join(texts[:SHOWN]) + (f" and {more} more" if more > 0 else "")
