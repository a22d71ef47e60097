"""What a protocol's traces must contain, read off its mapping table: the trace contract.

Another implementation (a port, an instrumented PyTorch) that wants its traces replayed needs to
know exactly which header settings, events, arguments and post-state fields the checker will ask
for. That is all in the :class:`~tracecheck.protocols.mapping.ProtocolMap`; this module presents it,
as data (``tracecheck contract PROTOCOL --json``) and as Markdown, so the documentation is derived
from the table the checker runs on and cannot drift from it.
"""

from __future__ import annotations

import json
import re

from pydantic import BaseModel, ConfigDict, JsonValue

from tracecheck.plugins import plugin_refs
from tracecheck.protocols.mapping import NODE, ProtocolMap

__all__ = ["Contract", "EventContract", "contract_markdown", "contract_of"]

_SETTING = re.compile(r"\{settings\[([^\]]+)\]\}")


class EventContract(BaseModel):
    """One event: its action's parameters, the ``args`` it carries and the ``post`` it logs."""

    model_config = ConfigDict(frozen=True)

    event: str
    #: The spec action's parameters in order; ``"node"`` is the event's acting node.
    params: tuple[str, ...]
    args: tuple[str, ...]
    #: Logged post field -> the TLA+ expression it must equal (``@`` is the acting node).
    post: dict[str, str]
    #: Who takes the step, which the event's ``node`` must be (an argument, ``arg.field``,
    #: ``env:<actor>``, or ``node`` when the acting node is a parameter).
    actor: str = NODE
    #: The step takes a message: in schema 4 the event names its send, ``sent_by``.
    receives: bool = False


class Contract(BaseModel):
    """Everything a trace of ``protocol`` must carry to be replayed through ``module``."""

    model_config = ConfigDict(frozen=True)

    protocol: str
    module: str
    #: Header ``settings`` keys the spec's constants are built from.
    settings: tuple[str, ...]
    #: Of those, the ones a trace may leave out, with their value then (JSON).
    setting_defaults: dict[str, JsonValue] = {}
    #: What the contract says beyond the table (e.g. how time is observed).
    notes: tuple[str, ...] = ()
    #: Spec constant -> TLA+ template over ``{nodes}`` and ``{settings[...]}``.
    constants: dict[str, str]
    #: True when some constants are computed from the traces themselves (e.g. id bounds).
    derived_constants: bool
    events: tuple[EventContract, ...]
    #: Spec actions no trace logs, with the reason.
    hidden: dict[str, str]
    #: Spec actions the replay may take unlogged between two events, at most ``max_hidden``.
    hidden_steps: tuple[str, ...]
    max_hidden: int
    #: ``module:ATTRIBUTE`` of the plug-in whose implementation's event schema every event is
    #: validated against first, when it is installed (:mod:`tracecheck.plugins`).
    event_schema: str | None
    #: What logged arguments hold, by name (checked before TLC runs).
    arg_kinds: dict[str, str] = {}
    #: Named conditions the spec state after the last event of a finished run must meet.
    quiescence: dict[str, str] = {}


def contract_of(mapping: ProtocolMap) -> Contract:
    """The trace contract of ``mapping``."""
    settings = sorted({s for t in mapping.constants.values() for s in _SETTING.findall(t)})
    return Contract(
        protocol=mapping.protocol,
        module=mapping.module,
        settings=tuple(settings),
        setting_defaults=dict(mapping.setting_defaults),
        notes=mapping.notes,
        constants=dict(mapping.constants),
        derived_constants=mapping.derive is not None,
        events=tuple(
            EventContract(
                event=a.event,
                params=a.params,
                args=a.args,
                post=dict(a.post),
                actor=a.actor or NODE,
                receives=a.receives,
            )
            for a in mapping.actions
        ),
        hidden=dict(mapping.hidden),
        hidden_steps=mapping.hidden_steps,
        max_hidden=mapping.max_hidden,
        event_schema=plugin_refs().get(mapping.protocol),
        arg_kinds=dict(mapping.arg_kinds),
        quiescence=dict(mapping.quiescence),
    )


def _code(items: tuple[str, ...] | list[str]) -> str:
    return ", ".join(f"`{i}`" for i in items) or "—"


def _cell(text: str) -> str:
    """A TLA+ expression inside a Markdown table cell (``|->`` would split the row)."""
    return text.replace("|", "\\|")


def contract_markdown(c: Contract) -> str:
    """The contract as Markdown: header requirements, one table row per event, hidden actions."""
    out = [
        f"## Trace contract: `{c.protocol}` (spec module `{c.module}`)",
        "",
        f'Header: `"protocol": "{c.protocol}"`, `nodes` (the spec\'s node set), and `settings` '
        f"with {_code(list(c.settings))}.",
    ]
    if c.setting_defaults:
        optional = ", ".join(f"`{k}` = `{json.dumps(v)}`" for k, v in c.setting_defaults.items())
        out.append(f"Settings a trace may leave out, and their value then: {optional}.")
    if c.derived_constants:
        out.append("Some constants (bounds) are computed from the traces themselves.")
    if c.event_schema:
        out.append(
            f"Events are validated first against the event schema of the plug-in "
            f"`{c.event_schema}`, when its implementation is installed."
        )
    out.append(
        'A set-valued `post` field is logged whole, `{"#set": [...]}`, or (trace schema 3) as '
        'what the node\'s value gained and lost since the same node last logged it, `{"#add": '
        '[...], "#del": [...]}`: it must then equal the TLA+ expression once rebuilt.'
    )
    out += ["", "| event | action parameters | `args` | `post` field = TLA+ |", "|---|---|---|---|"]
    for e in c.events:
        params = ", ".join("node" if p == NODE else p for p in e.params)
        post = "<br>".join(f"`{k}` = `{_cell(v)}`" for k, v in e.post.items()) or "—"
        out.append(f"| `{e.event}` | ({params}) | {_code(list(e.args))} | {post} |")
    if c.notes:
        out += ["", "### Beyond the table", ""]
        for note in c.notes:
            out += [note, ""]
        out.pop()
    if c.hidden:
        out += ["", "Spec actions never logged:", ""]
        out += [f"- `{name}`: {reason}" for name, reason in sorted(c.hidden.items())]
    if c.hidden_steps:
        out += [
            "",
            f"Unlogged steps the replay may insert (at most {c.max_hidden} in a row): "
            f"{_code(list(c.hidden_steps))}.",
        ]
    return "\n".join(out + _claims(c)) + "\n"


def _claims(c: Contract) -> list[str]:
    """What a trace claims about itself, and how the checker holds it to it (schema 4)."""
    actors: dict[str, list[str]] = {}
    for e in c.events:
        actors.setdefault(e.actor, []).append(e.event)
    out = [
        "",
        "### What a trace claims about itself",
        "",
        "Each event's `node` is the step's actor, checked per event: "
        + "; ".join(
            f"{_code(events)}: "
            + (
                f"the environment actor `{actor.removeprefix('env:')}` (listed in the header's "
                "`environment`)"
                if actor.startswith("env:")
                else "the acting node"
                if actor == NODE
                else f"`args.{actor}`"
            )
            for actor, events in actors.items()
        )
        + ".",
        "Lamport clocks (`lamport`) grow along each node's events.",
    ]
    receives = [e.event for e in c.events if e.receives]
    if receives:
        out.append(
            f"Since schema 4, a step that takes a message ({_code(receives)}) names its send, "
            '`"sent_by": [sender, its lamport at the send]`: an earlier event of the sender with '
            "that clock, smaller than the receive's (logs merged with `--merge` are ordered by "
            "these clocks)."
        )
    if c.arg_kinds:
        kinds = ", ".join(f"`{k}`: {v}" for k, v in sorted(c.arg_kinds.items()))
        out.append(f"Arguments hold header nodes and ids ({kinds}); anything else is rejected.")
    out.append(
        'A run that finished ends its file with `{"kind": "end", "seqs": {node: last seq, ...}}` '
        "(schema 4; `seqs` names every node and actor the file logged, so a lost tail is a "
        "format error)"
        + (
            "; the spec state after its last event must then be quiescent: "
            + "; ".join(f"{name}: `{_cell(expr)}`" for name, expr in c.quiescence.items())
            + "."
            if c.quiescence
            else "."
        )
    )
    return out
