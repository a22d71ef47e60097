"""The trace's record types, what every writer and reader of a trace shares: frozen pydantic
models built without validation where the values are the implementation's own
(:func:`trusted`), per-node set deltas (:class:`SetDelta`, schema 3), the header, the end line
of a finished run (schema 4), the event base and the Lamport clock."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import (
    Annotated,
    Any,
    Final,
    Generic,
    Literal,
    Self,
    TypeVar,
    get_args,
    get_origin,
)

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    JsonValue,
    Tag,
    WrapSerializer,
)
from pydantic.alias_generators import to_camel

from traceformat.values import sort_key

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

#: The version this package writes: 4, version 3 (the per-node sets of a post-state as deltas)
#: plus what a trace claims about itself (``sent_by`` on a step that takes a message, and the
#: :class:`TraceEnd` line of a run that finished).
SCHEMA_VERSION: Final = 4
#: The versions a reader of this package's traces takes: 2 (every post-state set whole; the
#: history variables as what a step added), 3 (2, plus the delta form of a per-node set) and 4
#: (3, plus what a trace claims about itself: a step that takes a message names its send,
#: ``sent_by``, and a run that finished closes its file with a :class:`TraceEnd` line).
SUPPORTED_SCHEMA_VERSIONS: Final = (2, 3, 4)


# --------------------------------------------------------------------------- records


class FrozenModel(BaseModel):
    """Base of every trace record and protocol message: immutable, no unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class PostModel(FrozenModel):
    """Base of an event's post-state: its Python fields (snake_case, the implementation's
    attribute names) are logged under the spec's camelCase variable names, and either name
    validates (by alias: pydantic's default; frozen and no unknown fields: FrozenModel's)."""

    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, serialize_by_alias=True
    )


_set_attr: Final = object.__setattr__
_new: Final = object.__new__
# BaseModel's slots, set through their descriptors (cheaper than object.__setattr__ by name).
_set_fields_set: Final = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra: Final = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private: Final = BaseModel.__dict__["__pydantic_private__"].__set__


def trusted(cls: type[M], values: dict[str, Any]) -> M:
    """An instance of ``cls`` holding ``values`` (every field, in field order), unvalidated.

    For values that are already well typed (statically checked: the core's own messages and
    action arguments, trace records built from its state), where pydantic's validation costs
    more than the rest of a simulator step. It sets exactly the instance attributes pydantic
    documents for a model, so equality, hashing, copying and serialization behave as for a
    validated instance with the same values. Anything from outside (a wire frame, a trace line)
    is still parsed with validation.

    ``__pydantic_fields_set__`` is one set per class, shared by its trusted instances: it holds
    every field, so nothing pydantic does with it (adding a field it sets) changes it.
    """
    model = _new(cls)
    _set_attr(model, "__dict__", values)
    fields_set = _FIELDS_SET.get(cls)
    if fields_set is None or len(fields_set) != len(values):
        fields_set = _FIELDS_SET[cls] = set(values)
    _set_fields_set(model, fields_set)
    _set_extra(model, None)
    _set_private(model, None)
    return model


#: Model class -> the set of its field names (trusted instances hold every field).
_FIELDS_SET: Final[dict[type[BaseModel], set[str]]] = {}


# --------------------------------------------------------------------------- set deltas


def _elements_out(value: Any, handler: Callable[[Any], Any]) -> Any:
    items = handler(value)
    return items if len(items) < 2 else sorted(items, key=sort_key)


#: The elements of one side of a delta: a frozenset in Python, a JSON list in set order.
_Elements = Annotated[frozenset[T], WrapSerializer(_elements_out, when_used="json")]


class SetDelta(FrozenModel, Generic[T]):
    """How a node's slice of a set variable changed since the node last logged it (schema 3):
    ``{"#add": [...], "#del": [...]}``, both keys always, ``#add`` first, each list in the
    contract's set order (:func:`sort_key`) and possibly empty; an unchanged set is
    ``{"#add":[],"#del":[]}``.

    Validated by pydantic-core alone (two required aliased fields, no Python validator), so a
    checker validating every event builds only the elements a step changed. Writers keep the two
    sides disjoint; the schema does not check it (a Python call per set), and :meth:`apply` is
    defined for any delta. In Python the sides are ``add`` and ``delete`` (``del`` is a
    keyword); input is read by the aliases only.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", serialize_by_alias=True)

    add: _Elements[T] = Field(alias="#add")
    delete: _Elements[T] = Field(alias="#del")

    @classmethod
    def of(cls, add: frozenset[T], delete: frozenset[T]) -> Self:
        """The delta, unvalidated (:func:`trusted`: the writer's values are well typed)."""
        return trusted(cls, {"add": add, "delete": delete})

    @classmethod
    def between(cls, then: frozenset[T], now: frozenset[T]) -> Self:
        """The delta from ``then`` (the value the node logged last) to ``now``."""
        return cls.of(now - then, then - now)

    def apply(self, last: frozenset[T]) -> frozenset[T]:
        """The node's value after this delta, from the value it logged last."""
        return (last - self.delete) | self.add


def _delta_or_whole(value: Any) -> str | None:
    """The tag of a per-node set's form: a delta, a whole set, or None (refused) for neither or
    a mix of the two (``{"#set": ..., "#add": ...}``)."""
    if isinstance(value, dict):
        delta = "#add" in value or "#del" in value
        if delta == ("#set" in value):
            return None
        return "delta" if delta else "set"
    if isinstance(value, SetDelta):
        return "delta"
    return "set" if isinstance(value, frozenset | set) else None  # (a bare list is neither)


#: Tag of the :class:`SetDelta` member of a :data:`DELTA_OR_WHOLE` union.
DELTA: Final = Tag("delta")
#: Tag of the whole-set member (``{"#set": [...]}``) of a :data:`DELTA_OR_WHOLE` union.
WHOLE: Final = Tag("set")
#: The discriminator of a per-node set in a post-state: ``Annotated[Annotated[SetDelta[E],
#: DELTA] | Annotated[<a whole set of E>, WHOLE], DELTA_OR_WHOLE]``. One Python call per set
#: picks the member (pydantic-core then validates it alone), and anything that is neither form
#: gets one clear error. A union tried member by member would save that call (about 0.2 µs a set
#: on a checker's Python input, 0.5 µs on JSON) but report a malformed delta with both members'
#: errors, and take a bare list for a set.
DELTA_OR_WHOLE: Final = Discriminator(
    _delta_or_whole,
    custom_error_type="set_delta",
    custom_error_message=(
        'a per-node set is logged as {"#add": [...], "#del": [...]} or {"#set": [...]}'
    ),
)


def delta_model(annotation: Any) -> type[SetDelta[Any]] | None:
    """The :class:`SetDelta` model a field's annotation holds (in a :data:`DELTA_OR_WHOLE`
    union), or None: what a writer builds the field's deltas with."""
    if get_origin(annotation) is None and isinstance(annotation, type):
        return annotation if issubclass(annotation, SetDelta) else None
    for arg in get_args(annotation):
        found = delta_model(arg)
        if found is not None:
            return found
    return None


class TraceHeader(FrozenModel):
    """Line 1 of a trace file."""

    kind: Literal["header"] = "header"
    #: :data:`SUPPORTED_SCHEMA_VERSIONS`; written as :data:`SCHEMA_VERSION`.
    schema_version: Literal[2, 3, 4] = SCHEMA_VERSION
    protocol: str
    nodes: tuple[str, ...]
    settings: dict[str, JsonValue] = Field(default_factory=dict)
    seed: int
    #: Actors that take logged steps but are no spec node (e.g. ``"clock"`` for a ``Tick``,
    #: an action without an acting node): an event's ``node`` is one of ``nodes`` or of these.
    environment: tuple[str, ...] = ()


class TraceEnd(FrozenModel):
    """The last line of a trace file whose run finished (schema 4): the run ended as it meant
    to (it was not killed, did not raise, was not cut short), so the checker also requires
    the spec's quiescence at its last state. ``seqs`` is the last ``seq`` of every node (or
    environment actor) this file logged, so a lost tail is detected too."""

    kind: Literal["end"] = "end"
    seqs: dict[str, int]


class TraceEventBase(FrozenModel):
    """Fields every event has; each protocol narrows ``event`` and adds ``args`` and ``post``.

    ``event`` is the TLA+ action name, ``node`` the acting worker, ``seq`` a per-node counter
    from 1 and ``lamport`` the node's Lamport clock after the step (merges logs causally).
    """

    kind: Literal["event"] = "event"
    event: str
    node: str
    seq: int = Field(ge=1)
    lamport: int = Field(ge=1)


@dataclass(slots=True)
class NodeClock:
    """Per-node ``seq`` and Lamport clock, advanced by drivers once per emitted event."""

    seq: int = 0
    lamport: int = 0

    def local(self) -> tuple[int, int]:
        """A step with no incoming message: returns (seq, lamport) of its event."""
        self.seq += 1
        self.lamport += 1
        return self.seq, self.lamport

    def receive(self, sent_at: int) -> tuple[int, int]:
        """A step that takes a message stamped ``sent_at`` from the inbox."""
        self.seq += 1
        self.lamport = max(self.lamport, sent_at) + 1
        return self.seq, self.lamport
