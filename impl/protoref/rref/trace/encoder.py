"""The fast path of tracing: an RRef event's JSON line rendered straight from the core's values.

:class:`EventEncoder` writes the same bytes as ``encode_line(make_event(...))`` without building
the event models: one generated function per action, and a process-wide cache of the JSON of
every string, id and tuple it writes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeAlias

from protoref.ids import GloballyUniqueId, WorkerId
from protoref.rref.core.events import Message, MessageBase
from protoref.rref.core.state import RRefContext, UserRRef
from protoref.rref.trace.args import ActionArgs
from protoref.rref.trace.events import ACTION_ARGS, DELTAS, HISTORY, SHAPES, new_keys
from protoref.rref.trace.post import _Post

__all__ = ["EventEncoder"]

Gid: TypeAlias = GloballyUniqueId


# --------------------------------------------------------------------------- direct JSON
# The fast path of tracing: an event's JSON line written straight from the core's values, the
# same bytes as ``encode_line(make_event(...))`` (pydantic's compact JSON: fields in model
# order, no spaces, non-ASCII as is), without building the models. Sets keep the contract's
# order (see "set encodings" above). Tests compare the two renderings on every event of many
# runs, and the golden traces regenerate unchanged. A delta is computed here from the value the
# encoder last wrote for the node and variable (the contract's definition), there from the step's
# pre-state: the two agree because every step that changes a node's set logs it.

#: A JSON string literal as pydantic writes it (UTF-8 as is, the same escapes).
_json_str: Final = json.JSONEncoder(ensure_ascii=False).encode
_EMPTY_SET: Final = '{"#set":[]}'
_UNCHANGED_JSON: Final = '{"#add":[],"#del":[]}'
_NOTHING: Final[frozenset[Any]] = frozenset()
# How a field is written: a per-node set as a delta; what a step added to a history variable
# (the UserRRef records, or a set); the delivered message; a string, an id or a tuple (cached);
# a number; a bool; an argument that is a message.
_DELTA, _USERS_ADDED, _ADDED, _DELIVERED, _ATOM, _INT, _BOOL, _MESSAGE = range(8)
_POST_KINDS: Final = {
    **dict.fromkeys(HISTORY, _ADDED),
    "users_added": _USERS_ADDED,
    "delivered": _DELIVERED,
    "phase": _ATOM,
    "next_id": _INT,
    "stopping": _BOOL,
}
_ARG_KINDS: Final = {"m": _MESSAGE}
Layout: TypeAlias = tuple[tuple[str, str, int], ...]


def _post_layout(post_cls: type[_Post]) -> Layout:
    """(field name, its JSON key and colon, kind) for every field of a post model, in order."""
    return tuple(
        (name, _json_str(info.alias or name) + ":", _POST_KINDS.get(name, _DELTA))
        for name, info in post_cls.model_fields.items()
    )


def _args_layout(args_cls: type[ActionArgs]) -> Layout:
    return tuple(
        (name, _json_str(name) + ":", _ARG_KINDS.get(name, _ATOM)) for name in args_cls.model_fields
    )


#: Entries the process-wide atom cache (:data:`_ATOMS`) holds before it starts over. The bench
#: workload (100 runs of 200 steps) writes 2,643 distinct atoms; a longer run's ids go past
#: any bound, and the cache's memory must not grow with them.
_ATOM_LIMIT: Final = 1 << 14


class _Atoms(dict[Any, str]):
    """The JSON of strings, ids and tuples of those (id pairs, parked fetches), computed on
    first use: ``atoms[value]`` is one dictionary lookup once the value was seen.

    One per process (:data:`_ATOMS`), shared by every encoder: an atom's JSON is a function of
    its value alone, and the same worker names and ids recur in every run. Bounded: once it
    holds ``limit`` entries it is emptied and fills again. Keys compare by equality, which is
    sound because an atom holds only strings and ints (``True == 1`` would merge a bool with an
    int: numbers and bools are never cached, see :func:`_plain`). Threads may share it: a
    lookup and an insertion are single dictionary operations, and two threads computing the same
    missing atom store the same text.
    """

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __missing__(self, value: str | tuple[Any, ...]) -> str:
        if len(self) >= self.limit:
            self.clear()
        if isinstance(value, str):
            text = _json_str(value)
        elif type(value) is GloballyUniqueId:  # the common case: (worker, int)
            text = f"[{self[value[0]]},{value[1]:d}]"
        else:
            text = (
                "[" + ",".join([_plain(v) if isinstance(v, int) else self[v] for v in value]) + "]"
            )
        self[value] = text
        return text


_ATOMS: Final = _Atoms(_ATOM_LIMIT)


# One node's slots: per-node set variable -> the value the encoder last wrote for it (the empty
# set before the first). Contexts share the sets a step does not change, so most deltas of an
# event are found unchanged by identity.
_Slots: TypeAlias = dict[str, frozenset[Any]]
# One encoder's UserRRef records: ForkId -> (the record, its JSON). By ForkId and identity, not
# by value: a frozen model hashes its fields in Python, and a record is written once or twice.
_Records: TypeAlias = dict[Gid, tuple[UserRRef, str]]


def _source(name: str, args_layout: Layout, post_layout: Layout) -> str:
    """Python source of ``make(A, delta, grown, grown_users, message)``, which returns the
    function that renders one action's events: one f-string holding every field of the line, a
    set that did not change since the node's slot written as the constant unchanged delta."""
    lines = ["def encode(a, node, seq, lamport, d, delivered, S, b, R, t):"]
    receives = any(kind == _DELIVERED for _, _, kind in post_layout)
    if receives:
        lines.append("    if delivered is None:")
        message = f"{name} logs the delivered message; none was given"
        lines.append(f"        raise ValueError({message!r})")
        # sent_by (schema 4): the message's sender and its clock at the send, when known
        lines.append(
            "    sb = '' if t is None else ',\"sent_by\":[' + A[delivered.src] + ',' + str(t) + ']'"
        )
    if any(kind in (_ADDED, _USERS_ADDED, _DELTA) for _, _, kind in post_layout):
        # (a delta is computed from the slot, but the event's contract, make_event's, needs it)
        lines.append("    if b is None:")
        message = f"{name} logs what it changed in a set; no pre-state was given"
        lines.append(f"        raise ValueError({message!r})")
    arg_parts = []
    for field, key, kind in args_layout:
        value = f'message(a["{field}"])' if kind == _MESSAGE else f'A[a["{field}"]]'
        arg_parts.append(_lit(key) + "{" + value + "}")
    post_parts = []
    for i, (field, key, kind) in enumerate(post_layout):
        if kind == _DELTA:
            lines.append(f'    v{i} = d["{field}"]')
            value = f'(U if S["{field}"] is v{i} else delta(S, "{field}", v{i}))'
        elif kind in (_ADDED, _USERS_ADDED):
            attr = HISTORY[field]
            lines.append(f'    v{i} = d["{attr}"]; w{i} = b["{attr}"]')
            grow = f"grown_users(R, v{i}, w{i})" if kind == _USERS_ADDED else f"grown(v{i}, w{i})"
            value = f"(E if v{i} is w{i} else {grow})"
        elif kind == _DELIVERED:
            value = "'{\"#set\":[' + message(delivered) + ']}'"
        elif kind == _ATOM:
            value = f'A[d["{field}"]]'
        elif kind == _INT:
            value = f'd["{field}"]!s'
        else:
            value = f'("true" if d["{field}"] else "false")'
        post_parts.append(_lit(key) + "{" + value + "}")
    prefix = '{"kind":"event","event":' + _json_str(name) + ',"node":'
    body = (
        _lit(prefix)
        + '{A[node]},"seq":{seq!s},"lamport":{lamport!s}'
        + ("{sb}" if receives else "")
        + ',"args":{{'
        + ",".join(arg_parts)
        + '}},"post":{{'
        + ",".join(post_parts)
        + "}}}}"
    )
    lines.append(f"    return f'''{body}'''")
    inner = "".join(f"    {line}\n" for line in lines)
    constants = f"E={_EMPTY_SET!r}, U={_UNCHANGED_JSON!r}"
    return (
        f"def make(A, delta, grown, grown_users, message, {constants}):\n{inner}    return encode\n"
    )


def _lit(text: str) -> str:
    """``text`` as the literal part of a generated f-string (delimited by three quotes ')."""
    if "\\" in text or "'" in text:
        raise ValueError(f"unexpected character in a trace key: {text!r}")
    return text.replace("{", "{{").replace("}", "}}")


Encode: TypeAlias = Callable[..., str]


def _compile(name: str, args_layout: Layout, post_layout: Layout) -> Callable[..., Encode]:
    namespace: dict[str, Any] = {}
    # The source is generated above from the event models' field names, nothing from outside.
    code = compile(_source(name, args_layout, post_layout), f"<trace encoder {name}>", "exec")
    exec(code, namespace)
    make: Callable[..., Encode] = namespace["make"]
    return make


def _delta(slots: _Slots, field: str, value: frozenset[Any]) -> str:
    """A set whose object changed since this node last logged it: what it gained and lost
    since, each side sorted (the contract's order) and written from the atoms' cache. A step
    usually adds or removes one element (33,752 of the 37,872 set objects the bench workload's
    steps changed; 4,068 more were equal to the last): when the size moved by one and one set
    difference finds one element, the other side is empty and needs no second difference."""
    last = slots[field]
    slots[field] = value
    size = len(value) - len(last)
    if size == 1:
        gained = value - last
        if len(gained) == 1:
            for x in gained:
                return '{"#add":[' + _ATOMS[x] + '],"#del":[]}'
    elif size == -1:
        lost = last - value
        if len(lost) == 1:
            for x in lost:
                return '{"#add":[],"#del":[' + _ATOMS[x] + "]}"
    elif value == last:
        return _UNCHANGED_JSON
    return _changed(value - last, last - value)


def _changed(gained: frozenset[Any], lost: frozenset[Any]) -> str:
    """Any other change: both sides, each sorted."""
    atom = _ATOMS.__getitem__
    add = ",".join(map(atom, sorted(gained))) if gained else ""
    delete = ",".join(map(atom, sorted(lost))) if lost else ""
    return '{"#add":[' + add + '],"#del":[' + delete + "]}"


def _grown(now: frozenset[Any], then: frozenset[Any]) -> str:
    """What a step added to a history set, when its object changed: usually one element (then
    nothing to sort or join)."""
    new = now - then
    if len(new) == 1:
        for x in new:
            return '{"#set":[' + _ATOMS[x] + "]}"
    return '{"#set":[' + ",".join(map(_ATOMS.__getitem__, sorted(new))) + "]}"


def _grown_users(
    records: _Records, now: Mapping[Gid, UserRRef], then: Mapping[Gid, UserRRef]
) -> str:
    """The UserRRef records a step created (``users`` is a mapping by ForkId), when its object
    changed, in ForkId order."""
    new = new_keys(now, then)
    if len(new) == 1:
        for f in new:
            return '{"#set":[' + _record(records, now[f]) + "]}"
    return '{"#set":[' + ",".join([_record(records, now[f]) for f in sorted(new)]) + "]}"


def _record(records: _Records, u: UserRRef) -> str:
    known = records.get(u.fork)
    if known is not None and known[0] is u:
        return known[1]
    a = _ATOMS
    parent = "[]" if u.parent is None else a[u.parent]
    text = (
        f'{{"fork":{a[u.fork]},"rref":{a[u.rref]},"owner":{a[u.owner]},'
        f'"on":{a[u.on]},"parent":{parent}}}'
    )
    records[u.fork] = (u, text)
    return text


def _message(m: MessageBase) -> str:
    v = m.__dict__
    a = _ATOMS
    parent = "[]" if v["parent"] is None else a[v["parent"]]
    return (
        f'{{"type":{a[v["type"]]},"src":{a[v["src"]]},"dst":{a[v["dst"]]},'
        f'"rref":{a[v["rref"]]},"owner":{a[v["owner"]]},"fork":{a[v["fork"]]},'
        f'"parent":{parent},"dup":{v["dup"]!s}}}'
    )


#: Args model -> the function rendering its events. Made once per process and shared by every
#: encoder (the per-trace state, the slots and the records, is passed in): made per encoder,
#: each run's 22 closures with their cells and bound methods (about 240 objects) lived as long
#: as the run, and the garbage collector traced them over and over. Tracing's share of the
#: collector's time on the bench (gen-1 collections 0.55 -> 0.30 us per event) and the
#: closures' creation went with them (tracing on 16.5 -> 16.1 us per event, with a list sink).
_RENDERERS: Final[dict[type[ActionArgs], Encode]] = {
    ACTION_ARGS[name]: _compile(name, _args_layout(ACTION_ARGS[name]), _post_layout(post_cls))(
        _ATOMS, _delta, _grown, _grown_users, _message
    )
    for name, (_cls, post_cls, _names) in SHAPES.items()
}


class EventEncoder:
    """Renders RRef trace events as JSON lines, straight from the acting node's context.

    ``line(args, node, seq, lamport, ctx, delivered, before)`` is ``encode_line(make_event(args,
    node, seq, lamport, ctx, delivered=..., before=...))`` without building the models. Each
    action has a function generated from its event model's layout (one f-string, no loop over
    fields), shared by all encoders, as is the JSON of every string, id and tuple written
    (:class:`_Atoms`). One encoder per trace: it keeps, per node and per-node set variable, the
    last value it wrote a delta to (the value the node logged last, which the next delta is
    relative to), and the JSON of the UserRRef records it has written.
    """

    def __init__(self) -> None:
        self._records: _Records = {}
        self._slots: dict[str, _Slots] = {}

    def line(  # noqa: PLR0917 - positional: the simulator calls it for every event
        self,
        args: ActionArgs,
        node: WorkerId,
        seq: int,
        lamport: int,
        ctx: RRefContext,
        delivered: Message | None = None,
        before: RRefContext | None = None,
        sent_at: int | None = None,
    ) -> str:
        """The event's JSON line (no newline). ``delivered`` and ``before`` (the pre-state, for
        the history variables; required wherever :func:`make_event` requires it) may be passed
        by position (the simulator does: a keyword argument costs a little more on every
        event); ``sent_at``, the sender's clock at the delivered message's send, makes the
        line's ``sent_by`` (make_event's ``sent_by=(delivered.src, sent_at)``)."""
        slots = self._slots.get(node)
        if slots is None:
            slots = self._slots[node] = dict.fromkeys(DELTAS, _NOTHING)
        return _RENDERERS[type(args)](
            args.__dict__,
            node,
            seq,
            lamport,
            ctx.__dict__,
            delivered,
            slots,
            None if before is None else before.__dict__,
            self._records,
            sent_at,
        )


def _plain(value: int | bool) -> str:
    """A number or a bool (never cached: ``True == 1``)."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)
