"""Progress of long runs (tracecheck.cli.progress) and the check command's schedule: smoke
models first, several at once, a ``[k/N]`` line for each with an ETA, and a total; the
plain-output fixes of issue 29 (``tlc --dry-run --json``, ``campaign --help``)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from tracecheck.cli import main
from tracecheck.cli.models import schedule
from tracecheck.cli.progress import ProgressLog, duration
from tracecheck.runner.manifest import ModelEntry, Recorded


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200, highlight=False), out


def test_the_eta_comes_from_the_records_scaled_by_what_was_seen() -> None:
    now = [0.0]
    console, out = _console()
    log = ProgressLog(
        console, 3, expected={"a": 10.0, "b": 20.0, "c": 30.0}, jobs=2, clock=lambda: now[0]
    )
    assert log.eta() == pytest.approx(30.0)  # 60 s recorded, two at a time
    log.finished("a", "ok a", 5.0)  # half its record: the rest is taken to be, too
    assert log.eta() == pytest.approx(50 * 0.5 / 2)
    log.finished("b", "ok b", 10.0)
    log.finished("c", "ok c", 15.0)
    assert log.eta() is None
    lines = out.getvalue().splitlines()
    assert lines[0] == "[1/3] ok a 5.0 s  (ETA 12 s)"
    assert lines[2] == "[3/3] ok c 15 s"
    now[0] = 125.0
    assert log.total_line("models") == "3 models in 2 min 05 s"


def test_without_records_the_eta_is_the_mean_of_the_finished() -> None:
    console, out = _console()
    log = ProgressLog(console, 4)
    log.finished("1", "run 1", 2.0)
    assert log.eta() == pytest.approx(6.0)
    log.finished("2", "run 2", 4.0, quiet=True)
    assert log.done == 2
    assert len(out.getvalue().splitlines()) == 1
    assert log.eta() == pytest.approx(6.0)


def test_durations_read_as_seconds_then_minutes() -> None:
    assert [duration(s) for s in (3.21, 42.4, 185)] == ["3.2 s", "42 s", "3 min 05 s"]


def _entry(name: str, seconds: float | None, *, smoke: bool = False) -> ModelEntry:
    return ModelEntry.model_validate(
        {
            "name": name,
            "module": "M.tla",
            "cfg": "M.cfg",
            "class": "quick",
            "expect": "pass",
            "smoke": smoke,
            "description": "d",
            "recorded": Recorded(seconds=seconds).model_dump(),
        }
    )


def test_smoke_models_start_first_then_the_longest() -> None:
    picked = [
        ("p", _entry("short", 5.0)),
        ("p", _entry("long", 90.0)),
        ("q", _entry("smoke", 8.0, smoke=True)),
        ("p", _entry("unrecorded", None)),
    ]
    assert [e.name for _, e in schedule(picked)] == ["smoke", "long", "short", "unrecorded"]


def test_the_manifests_mark_one_smoke_model_per_protocol(repo_root: Path) -> None:
    for path in sorted((repo_root / "spec").glob("*/models.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        if not any(m["class"] == "quick" for m in raw["models"]):
            continue
        smoke = [m for m in raw["models"] if m.get("smoke")]
        assert len(smoke) == 1, path
        assert smoke[0]["class"] == "quick"


def test_check_prints_a_line_per_model_and_a_total_in_a_pipe(tmp_path: Path, specs: Path) -> None:
    folder = tmp_path / "spec" / "toy"
    folder.mkdir(parents=True)
    for path in specs.glob("Counter*"):
        shutil.copy(path, folder)
    base = {"module": "Counter.tla", "class": "quick", "description": "d"}
    models = [
        base | {"name": "Passes", "cfg": "Counter_pass.cfg", "expect": "pass", "smoke": True},
        base
        | {
            "name": "Breaks",
            "cfg": "Counter_inv.cfg",
            "expect": "invariant",
            "violates": "SmallInv",
        },
    ]
    (folder / "models.json").write_text(json.dumps({"protocol": "toy", "models": models}))
    proc = subprocess.run(
        [sys.executable, "-m", "tracecheck.cli", "check", "--spec-root", str(tmp_path / "spec")],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    progress = [line for line in lines if line.startswith("[")]
    assert progress[0].startswith("[1/2] ")
    assert progress[1].startswith("[2/2] ")
    assert any("toy/Passes: pass" in line for line in progress)
    assert "\x1b" not in proc.stdout  # plain in a pipe
    assert any("2 models: all as expected (2 models in" in line for line in lines)


def test_tlc_dry_run_json_prints_json(specs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tlc", str(specs / "Counter.tla"), "--dry-run", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["cwd"] == str(specs.resolve())
    assert "tlc2.TLC" in printed["command"]
    assert "tracecheck.Watchdog" not in printed["command"]  # a command to run by hand


def test_campaign_help_lists_the_protocols(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["campaign", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "one of: autograd, rendezvous, rref, torch-rendezvous" in out
