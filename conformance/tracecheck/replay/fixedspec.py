"""The checked-in trace specs: ``spec/<p>/Trace<Module>.tla``, one per protocol.

A trace spec's text depends on the protocol's mapping table and nothing of a trace (the
wrappers, the end step, the cursor machinery:
:func:`~tracecheck.replay.tracespec.fixed_trace_spec`), so it is kept beside the spec, as
CCF keeps ``Traceccfraft.tla`` and etcd-io/raft ``Traceetcdraft.tla``; a run generates only
its data module, its root (the constants) and its cfg. Each TLC run checks that the file is
what the mapping says
(:func:`~tracecheck.replay.tlcrun.trace_spec`), and so does a test; after a mapping changes,

    python -m tracecheck.replay.fixedspec --write

rewrites the files (``--check`` only says which differ; exit 1 if any).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tracecheck.protocols import load_mapping
from tracecheck.protocols.mapping import ProtocolMap
from tracecheck.replay.tlcrun import spec_library, spec_variables
from tracecheck.replay.tracespec import fixed_name, fixed_trace_spec
from tracecheck.runner.specs import default_spec_root

__all__ = ["PROTOCOLS", "expected", "main"]

#: The protocols whose trace specs are checked in.
PROTOCOLS = ("rref", "rendezvous", "autograd")


def expected(mapping: ProtocolMap, spec_root: Path) -> tuple[Path, str]:
    """Where a protocol's trace spec is checked in, and the text its mapping gives."""
    library = spec_library(spec_root, mapping)
    text = fixed_trace_spec(mapping, spec_variables(library, mapping))
    return spec_root / mapping.protocol / f"{fixed_name(mapping)}.tla", text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tracecheck.replay.fixedspec")
    parser.add_argument("--spec-root", type=Path, default=None)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--write", action="store_true", help="rewrite the trace specs")
    what.add_argument("--check", action="store_true", help="say which differ (exit 1 if any)")
    args = parser.parse_args(argv)
    spec_root = args.spec_root or default_spec_root()
    stale = 0
    for protocol in PROTOCOLS:
        path, text = expected(load_mapping(protocol), spec_root)
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current == text:
            continue
        stale += 1
        if args.write:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
        else:
            print(f"stale: {path}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
