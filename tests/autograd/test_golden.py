"""Golden distributed autograd traces (tests/autograd/golden/, as tests/rref/golden/ for RRef):
they are what the simulator produces now, TLC accepts each, and a mutant of each (its first
event dropped, or one event moved to another worker) is rejected, all in one TLC run."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from tracecheck.protocols.autograd import AUTOGRAD
from tracecheck.replay.validate import validate_files

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "autograd" / "golden"
NAMES = ("two_creators", "nested_calls", "crash")


def _regenerate() -> Any:
    spec = importlib.util.spec_from_file_location("regenerate", GOLDEN / "regenerate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_golden_files_are_what_the_simulator_produces_now(tmp_path: Path) -> None:
    module = _regenerate()
    assert set(module.RUNS) == set(NAMES)
    assert module.main(["--out", str(tmp_path)]) == 0
    for name in NAMES:
        committed = (GOLDEN / f"{name}.ndjson").read_text(encoding="utf-8")
        now = (tmp_path / f"{name}.ndjson").read_text(encoding="utf-8")
        assert now == committed, f"{name}: run tests/autograd/golden/regenerate.py, review the diff"


def _rows(name: str) -> list[dict[str, Any]]:
    lines = (GOLDEN / f"{name}.ndjson").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def _write(path: Path, header: dict[str, Any], events: list[dict[str, Any]]) -> Path:
    """A well-formed trace of ``events`` (no end line: a run that did not say it finished):
    per-node ``seq`` and the Lamport clocks renumbered in file order, so only the spec decides."""
    seqs: dict[str, int] = {}
    lines = [json.dumps(header)]
    for position, event in enumerate(events, start=1):
        seqs[event["node"]] = seqs.get(event["node"], 0) + 1
        row = {k: v for k, v in event.items() if k != "sent_by"}
        lines.append(json.dumps({**row, "seq": seqs[event["node"]], "lamport": position}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_tlc_accepts_every_golden_trace_and_rejects_their_mutants(tmp_path: Path) -> None:
    paths = [GOLDEN / f"{name}.ndjson" for name in NAMES]
    mutants: list[str] = []
    for name in NAMES:
        rows = _rows(name)
        header, events = rows[0], [r for r in rows if r.get("kind") == "event"]
        assert events[0]["event"] == "NewContext", name
        paths.append(_write(tmp_path / f"{name}-first-dropped.ndjson", header, events[1:]))
        mutants.append(f"{name}-first-dropped")
        # the first context's creation logged by another worker than its creator
        moved = dict(events[0])
        nodes = [n for n in header["nodes"] if n != moved["node"]]
        moved["node"] = nodes[0]
        paths.append(_write(tmp_path / f"{name}-moved.ndjson", header, [moved, *events[1:]]))
        mutants.append(f"{name}-moved")
    _, report = validate_files(paths, AUTOGRAD, ROOT / "spec", explain=False)
    verdicts = [v.accepted for v in report.verdicts]
    assert verdicts[: len(NAMES)] == [True] * len(NAMES), "a golden trace was rejected"
    rejected = dict(zip(mutants, verdicts[len(NAMES) :], strict=True))
    assert not any(rejected.values()), f"mutants accepted: {[m for m, a in rejected.items() if a]}"
