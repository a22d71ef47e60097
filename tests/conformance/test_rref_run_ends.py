"""What a simulated RRef run's trace claims about its end and its clocks (issue #21 section 1).

- A run that finished (no step enabled any more) closes its trace with the end line, even when
  its shutdown got stuck; the checker then requires the spec's quiescence after the last event,
  so a planted bug that skips the UserRRef delete (the owner waits for it for ever) is rejected
  at the end. Without the end line the same events are a prefix of a correct run: accepted.
- The Lamport clocks (and each receive's ``sent_by``) let per-node logs of one run merge back
  into an order the spec explains: a simulated trace split per node is accepted by
  ``tracecheck validate --merge``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protoref.errors import LeakError
from support.planted import plant
from tracecheck.cli import main
from tracecheck.plugins.rref import simulate
from tracecheck.protocols.rref import RREF
from tracecheck.replay.explain import Explanation
from tracecheck.replay.validate import validate_traces
from tracecheck.traces.load import load_trace, parse_trace_lines

ROOT = Path(__file__).resolve().parent.parent.parent
SPEC_ROOT = ROOT / "spec"
STEPS = 40  # workload steps per run (then the shutdown phase and the drain)
#: The planted skipped delete's seed: its run's shutdown gets stuck (every seed of 1..10 did)
#: and every event is a spec step (in 3 of 1..10; in the others a DestroyInstance is refused
#: first: the spec still has the skipped delete in flight to or from that worker).
STUCK_SEED = 1
#: Seeds whose traces are split per node and merged back (each had retried messages and
#: deliveries of first attempts after the retry, which the old stamps misordered).
MERGE_SEEDS = (1, 2, 3)


def test_a_stuck_shutdown_says_it_ended_and_is_rejected_there(tmp_path: Path) -> None:
    path = tmp_path / "stuck.ndjson"
    with plant("skip-user-delete"), pytest.raises(LeakError, match="shutdown stuck"):
        simulate(STUCK_SEED, STEPS, path)
    trace = load_trace(path)
    assert trace.finished
    lines = path.read_text(encoding="utf-8").splitlines()
    cut = parse_trace_lines(lines[:-1], "stuck-without-end")  # the same events, no end line
    assert not cut.finished
    report = validate_traces([trace, cut], RREF, SPEC_ROOT)
    stuck, unfinished = report.verdicts
    assert unfinished.accepted, unfinished.rejection  # what the checker could say before
    assert not stuck.accepted
    assert stuck.rejection is not None
    assert stuck.rejection.kind == "end"
    assert stuck.rejection.index == len(trace.events) + 1
    assert stuck.matched == len(trace.events)
    explanation = stuck.explanation
    assert isinstance(explanation, Explanation)
    assert "not quiescent" in explanation.summary
    reasons = {s.reason() for s in explanation.frontier}
    # the delete the bug skipped is still in the spec's network, and its owner never destroys
    assert any("nothing in flight" in r for r in reasons), reasons


def test_the_same_seed_without_the_bug_ends_quiescent(tmp_path: Path) -> None:
    path = tmp_path / "correct.ndjson"
    simulate(STUCK_SEED, STEPS, path)
    trace = load_trace(path)
    assert trace.finished
    assert trace.end is not None
    assert set(trace.end.seqs) == {*trace.header.nodes, "barrier"}
    report = validate_traces([trace], RREF, SPEC_ROOT)
    assert report.verdicts[0].accepted, report.verdicts[0].rejection


def _split(path: Path, folder: Path) -> list[str]:
    """The run's trace as each node (and the barrier) would log it alone: the header, its own
    events, and an end line naming only itself."""
    header, *rows = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    end = rows.pop()
    assert end["kind"] == "end"
    per: dict[str, list[dict[str, object]]] = {}
    for row in rows:
        per.setdefault(str(row["node"]), []).append(row)
    files = []
    for node, events in sorted(per.items()):
        out = folder / f"{node}.ndjson"
        body = [header, *events, {"kind": "end", "seqs": {node: end["seqs"][node]}}]
        out.write_text("".join(json.dumps(r) + "\n" for r in body), encoding="utf-8")
        files.append(str(out))
    return files


@pytest.mark.parametrize("seed", MERGE_SEEDS)
def test_a_run_split_per_node_merges_back_and_is_accepted(
    seed: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "whole.ndjson"
    simulate(seed, STEPS, path)
    whole = load_trace(path)
    names = [e.event for e in whole.events]
    assert "RetrySend" in names
    assert "DestroyInstance" in names
    files = _split(path, tmp_path)
    assert len(files) == len(whole.header.nodes) + 1  # and the barrier's
    code = main(["validate", "--merge", "--no-explain", "--spec-root", str(SPEC_ROOT), *files])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"({len(whole.events)} events)" in out
