"""The checked-in trace specs (spec/<p>/Trace<Module>.tla): each is what its protocol's mapping
says (a stale one fails here and is refused before TLC runs), and SANY parses each with a
generated data module around it. The golden traces validating through them is
tests/conformance/test_stream.py's and each protocol's golden tests' part."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tracecheck.protocols import load_mapping
from tracecheck.replay.fixedspec import PROTOCOLS, expected, main
from tracecheck.replay.tlcrun import CheckerError, spec_library, trace_spec
from tracecheck.replay.tracespec import TRACE_MODULE, fixed_name, render_batch
from tracecheck.runner.results import Verdict
from tracecheck.runner.tlc import run_sany
from tracecheck.traces.load import load_trace

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "spec"
GOLDEN = {
    "rref": ROOT / "tests/rref/golden/user_to_user.ndjson",
    "rendezvous": ROOT / "tests/rendezvous/golden/last_call.ndjson",
    "autograd": ROOT / "tests/autograd/golden/crash.ndjson",
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_checked_in_trace_spec_is_what_the_mapping_says(protocol: str) -> None:
    mapping = load_mapping(protocol)
    path, text = expected(mapping, SPEC)
    assert path == SPEC / protocol / f"{fixed_name(mapping)}.tla"
    assert path.is_file(), f"{path} is missing: python -m tracecheck.replay.fixedspec --write"
    assert path.read_text(encoding="utf-8") == text, (
        f"{path} is stale: python -m tracecheck.replay.fixedspec --write"
    )
    # and it is the one TLC runs
    assert trace_spec(mapping, spec_library(SPEC, mapping)) == (text, path)


def test_a_stale_trace_spec_is_refused_and_rewritten(tmp_path: Path) -> None:
    root = tmp_path / "spec"
    for protocol in PROTOCOLS:
        shutil.copytree(SPEC / protocol, root / protocol)
    mapping = load_mapping("rref")
    path = root / "rref" / f"{fixed_name(mapping)}.tla"
    path.write_text(path.read_text(encoding="utf-8").replace("tvCursor + 1", "tvCursor + 2"))
    with pytest.raises(CheckerError, match="stale"):
        trace_spec(mapping, spec_library(root, mapping))
    assert main(["--check", "--spec-root", str(root)]) == 1
    assert main(["--write", "--spec-root", str(root)]) == 0
    assert main(["--check", "--spec-root", str(root)]) == 0
    trace_spec(mapping, spec_library(root, mapping))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_sany_parses_each_trace_spec_with_a_generated_batch(protocol: str, tmp_path: Path) -> None:
    mapping = load_mapping(protocol)
    folder = tmp_path / protocol
    shutil.copytree(SPEC / protocol, folder)  # the spec, and the checked-in trace spec
    rendered = render_batch([load_trace(GOLDEN[protocol])], mapping, compact=True)
    for name, text in rendered.modules().items():
        (folder / f"{name}.tla").write_text(text, encoding="utf-8")
    result = run_sany(folder / f"{TRACE_MODULE}.tla")
    assert result.verdict is Verdict.SUCCESS, result.summary
