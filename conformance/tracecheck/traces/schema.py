"""Checking a loaded trace against the implementation's own event schema, cheaper.

The implementation's schema (for RRef ``protoref.rref.trace:EVENT_ADAPTER``) is a pydantic
discriminated union of event models whose ``post`` logs the acting node's whole slice of each
variable the action touches: TLA+ sets, ``{"#set": [...]}``, that grow along a trace and are
logged again at every event of the node, changed by an element or not at all. Validating every
event whole rebuilt every element of every logged set (a named tuple, a model) again and again.
On 20 RRef traces of the bench workload (40,889 events) an event logs 31.4 set elements; 1.05
of them were not validated earlier in the trace.

So each event is validated by the same adapter, whole, but with each post-state set cut down to
the elements that no earlier event of the trace validated in a set of the same element schema.
Everything else (the event's name and header fields, ``args``, the other post fields, the post's
keys, the set encoding) is validated in every event as before. A set is cut only where the
compiled pydantic-core schema makes its validity the conjunction of its elements' validity
(:func:`_kind`): the field is the trace contract's set (``tla_set_in`` before a ``frozenset``
without length bounds or strictness), and neither the event model nor its post model has a
validator that could see the cut set (a model validator, a validator taking ``info``, a custom
``__init__``; one taking ``info`` in a type shared between fields turns the cut off). When a
cut event fails, the event is validated again whole and the first error of that is reported:
the message is the one the schema gives for the event as logged.

An element is skipped only if an element validated before has the same JSON text (orjson;
subclasses of str, int, dict and list refused) and is equal to it (``==``): True where 1 was
(equal, other JSON) or a tuple where a list was (same JSON, not equal) is validated again. For
the loader's values (what orjson decodes) that is identity of value and type; an enum member
equal to its plain value is the one pair a Python-built trace could hold that passes both, and
pydantic's lax mode accepts such a member wherever it accepts its value. Finding the elements
to validate costs one orjson call per set and one C-level comparison per element against the
node's last set of the variable (:func:`_cut`); both are far cheaper than pydantic building the
elements, but not free: the check went from 74-95 to 40-52 µs per event (1.6-2.1x, old and new
alternating 8 times on a busy machine), of which about 15-20 µs is pydantic validating the cut
events and about 30 µs finding what to validate, most of it for the 1.8 sets per event that
changed since the node logged them (6-10 µs of Python each on that machine).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from itertools import compress, count, repeat
from operator import ne
from typing import Any, Final, TypeAlias

import orjson
from pydantic import TypeAdapter, ValidationError
from pydantic_core import CoreSchema

from tracecheck.traces.load import Trace, TraceEvent, TraceFormatError
from traceformat import DELTA_OR_WHOLE, tla_set_in

__all__ = ["check_events"]

#: Subclasses of str, int, dict and list would be encoded as their base type: refused
#: (a TypeError), so that such an element is validated as it is.
_OPTIONS: Final = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)
_dumps: Final = orjson.dumps
#: A set field is cut only while cutting pays: after this many of its sets in a trace, only if
#: at least half of their elements had been validated before. (Since trace schema 3 the RRef
#: implementation logs its per-node sets as deltas; what is left whole, ``delivered`` and the
#: ``Added`` fields, holds new elements: finding none to skip cost more than validating them.)
_PROBE: Final = 16
_MISSING: Final = object()
_EMPTY: Final[dict[str, Any]] = {"#set": []}
# Keys of a set field's schemas that leave its validity the conjunction of its elements'
# (anything else, such as min_length or strict, and the field is validated whole).
_SET_KEYS: Final = frozenset({"type", "items_schema", "metadata", "serialization", "ref"})
_BEFORE_KEYS: Final = frozenset({"type", "function", "schema", "metadata", "serialization", "ref"})
_UNION_KEYS: Final = frozenset(
    {"type", "choices", "discriminator", "custom_error_type", "custom_error_message", "metadata"}
    | {"serialization", "ref"}
)
_MODEL_KEYS: Final = frozenset(
    {"type", "cls", "schema", "custom_init", "root_model", "config", "ref", "metadata"}
)


@dataclass(frozen=True, slots=True)
class _Kind:
    """How to reduce the events of one kind: its post's exact keys, and for each set field its
    JSON key and the number of its element schema (the memo of validated elements)."""

    keys: frozenset[str]
    sets: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class _Plan:
    kinds: dict[str, _Kind]
    #: How many distinct element schemas (one memo of validated elements each per trace).
    classes: int


def check_events(trace: Trace, adapter: TypeAdapter[Any]) -> None:
    """Validate every event of ``trace`` with ``adapter``; a :class:`TraceFormatError` names the
    line and field of the first invalid one."""
    plan = _plan(adapter)
    kinds = plan.kinds
    validate = adapter.validate_python
    # per element schema: the JSON of each element validated so far in this trace -> that element
    memos: list[dict[bytes, Any]] = [{} for _ in range(plan.classes)]
    # (node, post key) -> the set last validated there
    slots: dict[tuple[str, str], _Slot] = {}
    # (event, post key) -> [sets cut, their elements, the elements cut away]
    payoff: dict[tuple[str, str], list[int]] = {}
    # event -> the set fields still cut (those whose cutting pays, _PROBE)
    live = {name: kind.sets for name, kind in kinds.items()}
    for event, line in zip(trace.events, trace.lines, strict=True):
        # a copy of the event's fields as they are: TraceEvent has no private attributes and
        # no extras, so its __dict__ is dict(event) (which cost 8 µs: dict() first looks for a
        # keys() method, and pydantic's __getattr__ builds an AttributeError for it)
        fields = _fields(event)
        name = fields["event"]
        sets = live.get(name)
        post = fields["post"]
        gained: list[tuple[tuple[str, str], _Slot, dict[bytes, Any], list[tuple[bytes, Any]]]] = []
        if sets and post.keys() == kinds[name].keys:
            reduced = dict(post)
            node = fields["node"]
            for key, number in sets:
                value = post[key]
                if type(value) is dict and len(value) == 1 and type(value.get("#set")) is list:
                    tally = payoff.get((name, key))
                    if tally is None:
                        tally = payoff[(name, key)] = [0, 0, 0]
                    elif tally[0] >= _PROBE and tally[2] * 2 < tally[1]:
                        # cutting this field does not pay: from now on it is validated whole
                        live[name] = tuple(x for x in live[name] if x[0] != key)
                        continue
                    where = (node, key)
                    memo = memos[number]
                    items = value["#set"]
                    cut = _cut(items, slots.get(where), number, memo)
                    if cut is not None:
                        slot, new = cut
                        tally[0] += 1
                        tally[1] += len(items)
                        tally[2] += len(items) - len(new)
                        if new:
                            reduced[key] = {"#set": [x for _, x in new]}
                            gained.append((where, slot, memo, new))
                        else:  # (most sets: pydantic does not change its input)
                            reduced[key] = _EMPTY
                            if slot is not slots.get(where):
                                gained.append((where, slot, memo, new))
            fields["post"] = reduced
        try:
            validate(fields)
        except ValidationError:
            # the error as the schema reports it for the event as logged (the reduced sets
            # would put another element's index into the field's path)
            _check_whole(trace, line, validate, _fields(event))
            continue  # not reached: the reduced event is valid when the whole one is
        for where, slot, memo, new in gained:
            slots[where] = slot
            memo.update(new)


# A set validated at a node: (its list, its JSON, its elements' JSON, the number of its
# element schema).
_Slot: TypeAlias = tuple[list[Any], bytes, list[bytes], int]


def _cut(
    items: list[Any], slot: _Slot | None, number: int, memo: dict[bytes, Any]
) -> tuple[_Slot, list[tuple[bytes, Any]]] | None:
    """The set's slot and the elements to validate, with their JSON: those not validated
    before (the memo has no element equal to them with the same JSON); None when the set is
    to be validated whole (orjson cannot encode it: not JSON values).

    The node's last set of this variable is the reference: the elements equal to its elements
    at its start and at its end (one C-level comparison per element, stopped at the first
    unequal one) are the same elements if the set's JSON is theirs with the middle's between
    (a value equal in Python but not in JSON, such as True for 1, fails this)."""
    try:
        code = _dumps(items, None, _OPTIONS)
        if slot is None or slot[3] != number:
            codes = fresh_codes = list(map(_dumps, items, repeat(None), repeat(_OPTIONS)))
            fresh = items
        else:
            last, last_code, known, _ = slot
            if code == last_code and items == last:
                # the node logs the set it logged last time (same JSON, equal values)
                return slot, []
            n = len(items)
            m = len(last)
            short = min(n, m)
            i = next(compress(count(), map(ne, items, last)), short)
            k = min(
                next(compress(count(), map(ne, reversed(items), reversed(last))), short), short - i
            )
            fresh = items[i : n - k]
            fresh_codes = list(map(_dumps, fresh, repeat(None), repeat(_OPTIONS)))
            codes = known[:i]
            codes += fresh_codes
            codes += known[m - k :]
            if b",".join(codes) != code[1:-1]:  # (orjson writes a list as "[" a "," b ... "]")
                codes = fresh_codes = list(map(_dumps, items, repeat(None), repeat(_OPTIONS)))
                fresh = items
    except TypeError:  # orjson.JSONEncodeError
        return None
    get = memo.get
    new = [(c, x) for c, x in zip(fresh_codes, fresh, strict=True) if get(c, _MISSING) != x]
    return (items, code, codes, number), new


def _fields(event: TraceEvent) -> dict[str, Any]:
    """The event's fields as logged: ``sent_by`` (schema 4, on a step that takes a message)
    only when it was."""
    fields = dict(event.__dict__)
    if fields["sent_by"] is None:
        del fields["sent_by"]
    return fields


def _check_whole(trace: Trace, line: int, validate: Any, fields: dict[str, Any]) -> None:
    """Validate the event whole; its first error as a :class:`TraceFormatError`."""
    try:
        validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"][1:] or first["loc"])
        problem = f"field {field}: {first['msg']} ({fields['event']} schema)"
        raise TraceFormatError(trace.source, line, problem) from exc


@cache
def _plan(adapter: TypeAdapter[Any]) -> _Plan:
    classes: dict[str, int] = {}
    return _Plan(_kinds(adapter.core_schema, classes), len(classes))


def _kinds(schema: CoreSchema, classes: dict[str, int]) -> dict[str, _Kind]:
    """The event kinds whose post-state sets can be reduced, from the compiled schema: a union
    tagged by ``event`` of plain models (see the module docstring)."""
    if schema["type"] == "definitions":
        # Shared types (models, named tuples) are defined once and referred to; a validator
        # taking ``info`` in one of them is not looked for where it is used: none is allowed.
        if any(s.get("type") == "with-info" for s in _dicts(schema["definitions"], set())):
            return {}
        schema = schema["schema"]
    if schema["type"] != "tagged-union" or schema["discriminator"] != "event":
        return {}
    kinds: dict[str, _Kind] = {}
    for tag, choice in schema["choices"].items():
        kind = _kind(choice, classes) if isinstance(tag, str) and isinstance(choice, dict) else None
        if kind is not None and kind.sets:  # (an event without such a set is validated as it is)
            kinds[tag] = kind
    return kinds


def _kind(choice: Any, classes: dict[str, int]) -> _Kind | None:
    if not _plain_model(choice):
        return None
    post_field = choice["schema"]["fields"].get("post")
    if post_field is None or post_field.get("validation_alias", "post") != "post":
        return None
    post = post_field["schema"]
    if not _plain_model(post):
        return None
    config = post.get("config", {})
    by_alias = config.get("validate_by_alias", True)
    keys: list[str] = []
    sets: list[tuple[str, int]] = []
    items: list[Any] = []
    for name, field in post["schema"]["fields"].items():
        alias = field.get("validation_alias")
        if alias is not None and not isinstance(alias, str):
            return None  # AliasChoices or a path: which key holds the field is not one key
        key = alias if alias is not None and by_alias else name
        keys.append(key)
        element = _set_items(field["schema"])
        if element is not None:
            # the enclosing model's config shapes the element validators pydantic-core builds
            number = classes.setdefault(_class(config, element), len(classes))
            sets.append((key, number))
            items.append(element)
    if len(set(keys)) != len(keys) or _sees_other_fields(choice, items):
        return None
    return _Kind(frozenset(keys), tuple(sets))


def _class(config: Any, element: Any) -> str:
    """A key equal for the element schemas of two set fields when pydantic-core validates
    their elements alike: the element's schema (the first use of a type defines it inline
    under its ``ref``, later uses point to it) and its model's config but its title."""
    if isinstance(element, dict) and "ref" in element:
        element = {"type": "definition-ref", "schema_ref": element["ref"]}
    return repr(({k: v for k, v in config.items() if k != "title"}, element))


def _plain_model(schema: Any) -> bool:
    """A model schema without a model validator, a custom ``__init__`` or
    ``model_post_init``: its validity is its fields' (each validated by itself)."""
    return (
        isinstance(schema, dict)
        and schema.get("type") == "model"
        and schema.keys() <= _MODEL_KEYS
        and not schema.get("custom_init")
        and not schema.get("root_model")
        and schema["schema"].get("type") == "model-fields"
    )


def _set_items(schema: Any) -> Any:
    """The element schema of the trace contract's set with no other condition, else None;
    for a set that may be logged as a delta too (trace schema 3, ``DELTA_OR_WHOLE``), the
    element schema of its whole form, which ``{"#set": [...]}``, cut or not, always takes."""
    if (
        schema.get("type") == "tagged-union"
        and schema.keys() <= _UNION_KEYS
        and schema["discriminator"] is DELTA_OR_WHOLE.discriminator
        and "set" in schema["choices"]
    ):
        return _set_items(schema["choices"]["set"])
    if (
        schema.get("type") == "function-before"
        and schema.keys() <= _BEFORE_KEYS
        and schema["function"] == {"type": "no-info", "function": tla_set_in}
    ):
        inner = schema["schema"]
        if inner.get("type") == "frozenset" and inner.keys() <= _SET_KEYS:
            return inner["items_schema"]
    return None


def _sees_other_fields(choice: Any, items: list[Any]) -> bool:
    """Whether a validator in the event's schema (outside the sets' element schemas) takes
    ``info``, through which it could read other fields' values, the reduced sets among them."""
    skip = {id(x) for x in items}
    # a validator function's schema is {"type": "with-info" or "no-info", "function": f, ...}
    return any(s.get("type") == "with-info" for s in _dicts(choice, skip))


def _dicts(value: Any, skip: set[int]) -> Iterator[dict[str, Any]]:
    if id(value) in skip:
        return
    if isinstance(value, dict):
        yield value
        for k, v in value.items():
            if k != "serialization":  # serializers do not take part in validation
                yield from _dicts(v, skip)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _dicts(v, skip)
