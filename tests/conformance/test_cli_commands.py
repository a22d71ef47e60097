"""The command line as the README uses it: options taken from the manifest, bad options and
manifests refused with a typed error, output that reads in a pipe, and signals that stop TLC."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tracecheck.cli import main

TOY = {
    "protocol": "toy",
    "models": [
        {
            "name": "ToyStops",
            "module": "Counter.tla",
            "cfg": "Counter_deadlock.cfg",
            "class": "quick",
            "expect": "pass",
            "check_deadlock": False,
            "description": "x stops at its limit: a terminal state, not a deadlock",
        }
    ],
}


def _toy_root(tmp_path: Path, specs: Path, manifest: dict[str, Any] | None = None) -> Path:
    folder = tmp_path / "spec" / "toy"
    folder.mkdir(parents=True)
    for path in specs.glob("Counter*"):
        shutil.copy(path, folder)
    (folder / "models.json").write_text(json.dumps(manifest or TOY), encoding="utf-8")
    return tmp_path / "spec"


def test_tlc_takes_deadlock_checking_from_the_manifest(
    tmp_path: Path, specs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _toy_root(tmp_path, specs)
    spec, cfg = str(root / "toy" / "Counter.tla"), str(root / "toy" / "Counter_deadlock.cfg")
    # the README's form: module and cfg, no flag; the manifest says deadlock checking is off
    assert main(["tlc", spec, "--config", cfg]) == 0
    out = capsys.readouterr().out
    assert "ToyStops of" in out
    assert "deadlock checking off" in out
    # a flag wins over the manifest
    assert main(["tlc", spec, "--config", cfg, "--deadlock"]) == 1
    assert "deadlock" in capsys.readouterr().out
    # the same pair outside any manifest: TLC's default, deadlock checking on
    alone = tmp_path / "alone"
    alone.mkdir()
    for path in specs.glob("Counter*"):
        shutil.copy(path, alone)
    assert (
        main(["tlc", str(alone / "Counter.tla"), "--config", str(alone / "Counter_deadlock.cfg")])
        == 1
    )


def test_negative_workers_runs_and_timeouts_are_refused(
    tmp_path: Path, specs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _toy_root(tmp_path, specs)
    assert main(["check", "--spec-root", str(root), "--workers", "-1"]) == 2
    assert "--workers takes a number from 1 or auto, not '-1'" in capsys.readouterr().err
    assert main(["check", "--spec-root", str(root), "--workers", "0"]) == 2
    for argv in (
        ["campaign", "rref", "--runs", "-3"],
        ["campaign", "rref", "--steps", "0"],
        ["check", "--timeout", "-5"],
        ["tlc", "X.tla", "--depth", "-1"],
    ):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2  # argparse's usage error
        assert "takes a number" in capsys.readouterr().err
    bad = _toy_root(tmp_path / "bad", specs, TOY | {"models": [TOY["models"][0] | {"workers": -2}]})
    assert main(["check", "--spec-root", str(bad)]) == 2
    assert "workers" in capsys.readouterr().err


def test_a_manifest_that_is_not_utf8_is_a_typed_error(
    tmp_path: Path, specs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _toy_root(tmp_path, specs)
    (root / "toy" / "models.json").write_bytes(b'{"protocol": "toy\xff", "models": []}')
    assert main(["check", "--spec-root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "models.json: not UTF-8 text: byte 17 (0xff)" in err
    assert "Traceback" not in err


def test_json_is_all_that_is_printed_and_uses_the_manifest_names(
    tmp_path: Path, specs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _toy_root(tmp_path, specs)
    assert main(["check", "--spec-root", str(root), "--json"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("[")
    (check,) = json.loads(out)
    assert check["entry"]["class"] == "quick"  # models.json's field name, not "klass"
    assert "klass" not in check["entry"]
    assert check["ok"] is True


def test_tables_in_a_pipe_are_whole_with_one_line_per_row(tmp_path: Path, specs: Path) -> None:
    long = {**TOY["models"][0], "name": "ToyStops_with_a_name_longer_than_eighty_columns_allow"}
    root = _toy_root(tmp_path, specs, {"protocol": "toy", "models": [long]})
    proc = subprocess.run(
        [sys.executable, "-m", "tracecheck.cli", "check", "--spec-root", str(root)],
        capture_output=True,
        text=True,
        check=False,
        env=os.environ | {"COLUMNS": "80"},
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "" not in lines  # no blank line where a progress display stood
    (row,) = [line for line in lines if "ToyStops_with" in line and "quick" in line]
    assert long["name"] in row  # not cut to "ToyStops_w…"
    assert "…" not in proc.stdout


def _tlc_java_processes(marker: str) -> list[int]:
    """The Java processes whose command line names ``marker`` (their private temp folder)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "tlc2.TLC" in cmdline and marker in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_stops_tlc_and_removes_the_temporary_folders(
    tmp_path: Path, specs: Path, sig: signal.Signals
) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracecheck.cli", "tlc", str(specs / "Slow.tla")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | {"TMPDIR": str(temp)},
    )
    deadline = time.monotonic() + 120
    while not _tlc_java_processes(str(temp)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "TLC did not start"
        time.sleep(0.2)
    assert list(temp.iterdir())  # TLC's metadir and temp folder exist while it runs
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, (out, err)
    assert f"stopped by {sig.name}" in err
    assert "Traceback" not in err
    assert not _tlc_java_processes(str(temp))
    assert list(temp.iterdir()) == []


def test_sigkill_ends_tlc_and_the_next_run_removes_the_folders(tmp_path: Path, specs: Path) -> None:
    # SIGKILL runs no handler: TLC (in a session of its own) ends through its watchdog, whose
    # stdin pipe the kernel closes; the folders left behind go at the next tracecheck's start.
    temp = tmp_path / "temp"
    temp.mkdir()
    env = os.environ | {"TMPDIR": str(temp)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracecheck.cli", "tlc", str(specs / "Slow.tla")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    deadline = time.monotonic() + 120
    while not _tlc_java_processes(str(temp)):
        assert proc.poll() is None
        assert time.monotonic() < deadline, "TLC did not start"
        time.sleep(0.2)
    left = [p.name for p in temp.iterdir()]
    assert left
    assert all(name.startswith(f"tlc-meta-{proc.pid}-") for name in left)
    proc.kill()
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while _tlc_java_processes(str(temp)):
        assert time.monotonic() < deadline, "TLC outlived the tracecheck that started it"
        time.sleep(0.2)
    assert [p.name for p in temp.iterdir()] == left  # nothing ran to remove them
    other = temp / "tlc-meta-notapid-x"  # not tracecheck's naming: left alone
    other.mkdir()
    again = subprocess.run(
        [sys.executable, "-m", "tracecheck.cli", "tlc", str(specs / "Counter.tla"), "--dry-run"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert [p.name for p in temp.iterdir()] == [other.name]


def test_bench_never_writes_a_failed_run_into_the_docs(
    tmp_path: Path, specs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A "ceiling" that must pass but violates its invariant: the bench fails, the doc stays.
    ceiling = {
        "name": "Ceiling",
        "module": "Counter.tla",
        "cfg": "Counter_inv.cfg",
        "class": "deep",
        "expect": "pass",
        "description": "a ceiling that fails",
    }
    root = _toy_root(tmp_path, specs, {"protocol": "bench", "models": [ceiling]})
    (root / "toy").rename(root / "bench")
    doc = tmp_path / "performance.md"
    doc.write_text("# before\n", encoding="utf-8")
    argv = ["bench", "--spec-root", str(root), "--out", str(doc), "--tv-runs", "0"]
    assert main([*argv, "--workers", "auto"]) == 1
    assert doc.read_text(encoding="utf-8") == "# before\n"
    assert "unchanged" in capsys.readouterr().out
    fixed = {**ceiling, "expect": "invariant", "violates": "SmallInv"}
    (root / "bench" / "models.json").write_text(
        json.dumps({"protocol": "bench", "models": [fixed]}), encoding="utf-8"
    )
    assert main([*argv, "--workers", "auto"]) == 0
    written = doc.read_text(encoding="utf-8")
    assert "| bench/Ceiling | invariant SmallInv | yes |" in written
    assert "crash" not in written
