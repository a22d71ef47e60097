"""Reading a trace file back: the header, the events through a protocol's event adapter, and
the end line of a run that finished."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import (
    Any,
    Final,
)

from pydantic import (
    TypeAdapter,
    ValidationError,
)

from protoref.errors import TraceFormatError
from traceformat import TraceEnd, TraceEventBase, TraceHeader

# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class Trace:
    header: TraceHeader
    events: tuple[TraceEventBase, ...]
    #: The closing line of a run that finished (schema 4), or None.
    end: TraceEnd | None = None


_HEADER: Final = TypeAdapter(TraceHeader)
_END: Final = TypeAdapter(TraceEnd)


def read_trace(lines: Iterable[str], events: TypeAdapter[Any], *, source: str = "<trace>") -> Trace:
    """Parse a trace (header line then event lines) with a protocol's event ``TypeAdapter``.

    Raises :class:`TraceFormatError` naming the line and the field that is wrong.
    """
    header: TraceHeader | None = None
    parsed: list[TraceEventBase] = []
    end: TraceEnd | None = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if end is not None:
            raise TraceFormatError(source, number, "a line after the end line")
        try:
            if header is None:
                header = _HEADER.validate_json(line)
            elif '"kind":"end"' in line.replace(" ", ""):
                end = _END.validate_json(line)
            else:
                parsed.append(events.validate_json(line))
        except ValidationError as err:
            first = err.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise TraceFormatError(source, number, f"{loc}: {first['msg']}") from err
    if header is None:
        raise TraceFormatError(source, 1, "empty trace: no header line")
    return Trace(header, tuple(parsed), end)


def read_trace_file(path: Path | str, events: TypeAdapter[Any]) -> Trace:
    """:func:`read_trace` on a file."""
    p = Path(path)
    with p.open(encoding="utf-8") as fh:
        return read_trace(fh, events, source=str(p))
