"""TLC's distributed mode (issue #21, section 3): `tracecheck check --distributed N` starts a
TLCServer and N TLCWorkers on this machine and gives the verdicts a local run gives."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tracecheck.cli import main
from tracecheck.errors import ToolchainError
from tracecheck.runner.distributed import (
    Distribution,
    distributable,
    run_distributed,
    worker_command,
)
from tracecheck.runner.results import Verdict
from tracecheck.runner.tlc import TLCOptions

SAFE = "\\* Passes, and checks no temporal property (distributable).\n" + (
    "CONSTANTS Limit = 3  Nodes = {a, b}\nSPECIFICATION Spec\nINVARIANT TypeOK\n"
)


def _model(name: str, cfg: str, expect: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "module": "Counter.tla",
        "cfg": cfg,
        "class": "quick",
        "expect": expect,
        "description": name,
        **extra,
    }


@pytest.fixture
def root(tmp_path: Path, specs: Path) -> Path:
    folder = tmp_path / "spec" / "toy"
    folder.mkdir(parents=True)
    for path in specs.glob("Counter*"):
        shutil.copy(path, folder)
    (folder / "Counter_safe.cfg").write_text(SAFE, encoding="utf-8")
    models = [
        _model("pass", "Counter_safe.cfg", "pass"),
        _model("inv", "Counter_inv.cfg", "invariant", violates="SmallInv"),
        _model("dead", "Counter_deadlock.cfg", "deadlock"),
        _model("dead-off", "Counter_deadlock.cfg", "pass", check_deadlock=False),
        _model("temporal", "Counter_temporal.cfg", "property", violates="NeverResetProp"),
    ]
    (folder / "models.json").write_text(
        json.dumps({"protocol": "toy", "models": models}), encoding="utf-8"
    )
    return tmp_path / "spec"


def _results(out: str) -> list[dict[str, Any]]:
    return [
        {k: c[k] for k in ("ok", "mode")}
        | {"verdict": c["result"]["verdict"], "violated": c["result"]["violated"]}
        for c in json.loads(out)
    ]


def test_distributed_verdicts_are_the_local_ones(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "--spec-root", str(root), "--json"]) == 0
    local = _results(capsys.readouterr().out)
    argv = ["check", "--spec-root", str(root), "--distributed", "2", "--worker-threads", "1"]
    assert main([*argv, "--json"]) == 0
    distributed = _results(capsys.readouterr().out)
    assert [(r["verdict"], r["violated"], r["ok"]) for r in distributed] == [
        (r["verdict"], r["violated"], r["ok"]) for r in local
    ]
    modes = [r["mode"] for r in distributed]
    assert modes[:4] == ["distributed"] * 4
    # TLC 2.15's server skips temporal properties without a word: that model runs locally
    assert modes[4].startswith("local: it checks temporal properties (NeverResetProp)")
    # the readable form says how each model ran, and prints the command for other hosts
    assert main([*argv, "--model", "pass"]) == 0
    out = capsys.readouterr().out
    assert "(distributed)" in out
    assert "tlc2.tool.distributed.TLCWorker" in out


def test_a_distributed_error_is_named_by_a_local_run(specs: Path) -> None:
    # The server reports an invariant's counterexample without the invariant's name; the
    # verdict then comes from a local run, and says so.
    result = run_distributed(
        specs / "Counter.tla",
        specs / "Counter_inv.cfg",
        TLCOptions(),
        Distribution(workers=1, worker_threads=1),
    )
    assert result.verdict is Verdict.INVARIANT
    assert result.violated == "SmallInv"
    assert "this verdict is a local run's" in result.printed[0]


def test_models_with_temporal_properties_are_not_distributable(specs: Path) -> None:
    text = (specs / "Counter_temporal.cfg").read_text(encoding="utf-8")
    assert distributable(text) is not None
    assert distributable(SAFE) is None
    with pytest.raises(ToolchainError, match="not distributable"):
        run_distributed(
            specs / "Counter.tla", specs / "Counter_temporal.cfg", TLCOptions(), Distribution()
        )


def test_the_command_for_another_host_names_the_server(specs: Path) -> None:
    cmd = worker_command(Distribution(host="10.0.0.5"), 10997)
    assert cmd[-2:] == ["tlc2.tool.distributed.TLCWorker", "10.0.0.5"]
    assert "-Dtlc2.tool.distributed.TLCServer.port=10997" in cmd
    del specs


def test_no_worker_on_loopback_is_refused(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--spec-root", str(root), "--distributed", "0"]) == 2
    assert "give --host" in capsys.readouterr().err
