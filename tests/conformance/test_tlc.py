"""The TLC runner against real TLC runs: one purpose-built spec per verdict path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracecheck.runner.results import Progress, Verdict
from tracecheck.runner.tlc import TLCOptions, cores, run_sany, run_tlc, tlc_command
from tracecheck.runner.toolchain import toolchain
from tracecheck.tla.values import ModelValue, Record, TLAFunction


def test_pass_reports_figures_and_revision(specs: Path) -> None:
    seen: list[Progress] = []
    result = run_tlc(specs / "Counter.tla", specs / "Counter_pass.cfg", on_progress=seen.append)
    assert result.verdict is Verdict.SUCCESS
    assert (result.stats.distinct, result.stats.generated, result.stats.depth) == (15, 23, 4)
    assert result.tlc_revision == "d5b5a7f"
    assert result.tlc_version == "2.15"
    assert result.counterexample is None
    assert result.errors == []
    # TLC reports progress at least once, when it finishes.
    assert seen
    assert seen[-1].distinct == 15


def test_invariant_violation_names_it_and_parses_the_counterexample(specs: Path) -> None:
    result = run_tlc(specs / "Counter.tla", specs / "Counter_inv.cfg")
    assert result.verdict is Verdict.INVARIANT
    assert result.violated == "SmallInv"
    assert result.counterexample is not None
    states = result.counterexample.states
    assert [s.action for s in states] == ["Initial predicate", "Inc", "Inc"]
    last = states[-1].values
    assert last["x"] == 2
    assert last["log"][0] == Record(node=ModelValue("a"), val=1)
    assert isinstance(last["who"], TLAFunction)
    assert sum(last["who"].values()) == 2
    assert states[1].location is not None
    assert states[1].location.module == "Counter"
    assert result.errors == []


def test_temporal_violation_is_a_lasso_named_by_the_single_property(specs: Path) -> None:
    result = run_tlc(specs / "Counter.tla", specs / "Counter_temporal.cfg")
    assert result.verdict is Verdict.PROPERTY
    assert result.violated == "NeverResetProp"
    assert result.counterexample is not None
    assert result.counterexample.loops_to is not None
    assert "Reset" in [s.action for s in result.counterexample.states]


def test_temporal_violation_among_several_is_attributed(specs: Path) -> None:
    result = run_tlc(specs / "Counter.tla", specs / "Counter_two_props.cfg")
    assert result.verdict is Verdict.PROPERTY
    assert result.violated == "NeverResetProp"


def test_temporal_attribution_can_be_turned_off(specs: Path) -> None:
    options = TLCOptions(attribute_properties=False)
    result = run_tlc(specs / "Counter.tla", specs / "Counter_two_props.cfg", options)
    assert result.verdict is Verdict.PROPERTY
    assert result.violated is None


def test_action_property_violation(specs: Path) -> None:
    result = run_tlc(specs / "Counter.tla", specs / "Counter_action.cfg")
    assert result.verdict is Verdict.ACTION_PROPERTY
    assert result.violated == "StepProp"
    assert result.counterexample is not None
    assert result.counterexample.states[-1].action == "Reset"


def test_deadlock_and_its_switch(specs: Path) -> None:
    result = run_tlc(specs / "Counter.tla", specs / "Counter_deadlock.cfg")
    assert result.verdict is Verdict.DEADLOCK
    assert result.counterexample is not None
    assert result.counterexample.states[-1].values["x"] == 2
    quiet = run_tlc(
        specs / "Counter.tla", specs / "Counter_deadlock.cfg", TLCOptions(check_deadlock=False)
    )
    assert quiet.verdict is Verdict.SUCCESS


def test_cfg_check_deadlock_is_read_and_cut_for_tlc_2_15(specs: Path, tmp_path: Path) -> None:
    # TLC 2.15 cannot parse CHECK_DEADLOCK: the runner reads it and passes -deadlock instead.
    text = (specs / "Counter_deadlock.cfg").read_text(encoding="utf-8")
    for setting, verdict in (("FALSE", Verdict.SUCCESS), ("TRUE", Verdict.DEADLOCK)):
        cfg = tmp_path / f"Counter_{setting}.cfg"
        cfg.write_text(text + f"CHECK_DEADLOCK {setting}\n", encoding="utf-8")
        result = run_tlc(specs / "Counter.tla", cfg)
        assert result.verdict is verdict, result.summary
    # an option given wins over the cfg
    cfg = tmp_path / "Counter_FALSE.cfg"
    forced = run_tlc(specs / "Counter.tla", cfg, TLCOptions(check_deadlock=True))
    assert forced.verdict is Verdict.DEADLOCK


def test_workers_auto_is_the_number_of_cores(specs: Path, tmp_path: Path) -> None:
    cmd = tlc_command(specs / "Counter.tla", None, TLCOptions(workers="auto"), tmp_path / "m")
    assert cmd[cmd.index("-workers") + 1] == str(cores())
    result = run_tlc(specs / "Counter.tla", specs / "Counter_pass.cfg", TLCOptions(workers="auto"))
    assert result.verdict is Verdict.SUCCESS, result.summary
    for bad in (0, -2, "many"):
        with pytest.raises(ValueError, match="workers is a number from 1 or auto"):
            TLCOptions(workers=bad)


def test_sany_fails_on_garbage_and_on_a_jar_that_is_not_tlc(
    tmp_path: Path, specs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    garbage = tmp_path / "Garbage.tla"
    garbage.write_text("garbage\n", encoding="utf-8")
    result = run_sany(garbage)
    assert result.verdict is Verdict.PARSE_ERROR
    assert result.exit_code != 0
    assert run_sany(tmp_path / "Missing.tla").verdict is Verdict.PARSE_ERROR
    not_tlc = tmp_path / "not-tlc.jar"
    not_tlc.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip: a jar without TLA+'s tools
    monkeypatch.setenv("TLA2TOOLS_JAR", str(not_tlc))
    toolchain.cache_clear()
    try:
        result = run_sany(specs / "Counter.tla")
        assert result.verdict is Verdict.CRASH
        assert "not SANY" in result.errors[0].message
        assert run_tlc(specs / "Counter.tla", specs / "Counter_pass.cfg").verdict is Verdict.CRASH
    finally:
        monkeypatch.delenv("TLA2TOOLS_JAR")
        toolchain.cache_clear()


def test_parse_error_has_module_line_and_column(specs: Path) -> None:
    for result in (run_tlc(specs / "Broken.tla"), run_sany(specs / "Broken.tla")):
        assert result.verdict is Verdict.PARSE_ERROR
        location = result.errors[0].location
        assert location is not None
        assert (location.module, location.line, location.column) == ("Broken", 6, 1)
        assert "Encountered" in result.errors[0].message


def test_semantic_error_names_the_unknown_operator(specs: Path) -> None:
    for result in (run_tlc(specs / "Unbound.tla"), run_sany(specs / "Unbound.tla")):
        assert result.verdict is Verdict.SEMANTIC_ERROR
        error = result.errors[0]
        assert "Unknown operator" in error.message
        assert error.location is not None
        assert (error.location.module, error.location.line) == ("Unbound", 5)


def test_sany_accepts_a_good_module(specs: Path) -> None:
    assert run_sany(specs / "Counter.tla").verdict is Verdict.SUCCESS


def test_false_assume(specs: Path) -> None:
    result = run_tlc(specs / "Assume.tla")
    assert result.verdict is Verdict.ASSUME_FALSE
    location = result.errors[0].location
    assert location is not None
    assert (location.module, location.line) == ("Assume", 4)


def test_evaluation_error_is_a_crash_with_its_position(specs: Path) -> None:
    result = run_tlc(specs / "Crash.tla")
    assert result.verdict is Verdict.CRASH
    text = "\n".join(e.message for e in result.errors)
    assert "second argument of \\div is 0" in text
    assert any(e.location and e.location.module == "Crash" for e in result.errors)


def test_timeout_kills_tlc(specs: Path) -> None:
    result = run_tlc(specs / "Slow.tla", options=TLCOptions(timeout=4))
    assert result.verdict is Verdict.TIMEOUT


def test_simulation_mode_runs_bounded(specs: Path) -> None:
    options = TLCOptions(simulate=True, depth=5, traces=20, seed=7)
    result = run_tlc(specs / "Counter.tla", specs / "Counter_inv.cfg", options)
    assert result.mode == "simulation"
    assert result.verdict is Verdict.INVARIANT
    assert result.violated == "SmallInv"


def test_each_run_has_its_own_metadir_and_leaves_no_states_folder(specs: Path) -> None:
    run_tlc(specs / "Counter.tla", specs / "Counter_pass.cfg")
    assert not (specs / "states").exists()


def test_command_line_is_exact(specs: Path, tmp_path: Path) -> None:
    options = TLCOptions(
        workers="auto",
        heap="2g",
        check_deadlock=False,
        seed=3,
        extra=("-view",),
        library=(tmp_path,),
    )
    cmd = tlc_command(specs / "Counter.tla", specs / "Counter_pass.cfg", options, tmp_path / "m")
    assert cmd[1] == f"-DTLA-Library={tmp_path}"
    assert "-Xmx2g" in cmd
    # a private temporary folder: TLC copies its standard modules there and deletes them
    assert cmd.index(f"-Djava.io.tmpdir={tmp_path}") < cmd.index("tlc2.TLC")
    tail = cmd[cmd.index("tlc2.TLC") :]
    assert tail == [
        "tlc2.TLC",
        "-tool",
        "-workers",
        str(cores()),  # TLC 2.15 takes no "auto": the runner counts the cores
        "-metadir",
        str(tmp_path / "m"),
        "-config",
        str(specs / "Counter_pass.cfg"),
        "-deadlock",
        "-seed",
        "3",
        "-view",
        "Counter.tla",
    ]


def test_library_path_reaches_sany(tmp_path: Path) -> None:
    # A module that EXTENDS one found only through the library path.
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "Helper.tla").write_text(
        "---- MODULE Helper ----\nEXTENDS Naturals\nDouble(x) == 2 * x\n====\n", encoding="utf-8"
    )
    spec = tmp_path / "UsesHelper.tla"
    spec.write_text(
        "---- MODULE UsesHelper ----\nEXTENDS Naturals, Helper\nVARIABLE x\n"
        "Init == x = Double(1)\nNext == UNCHANGED x\nInv == x = 2\n====\n",
        encoding="utf-8",
    )
    cfg = tmp_path / "UsesHelper.cfg"
    cfg.write_text("INIT Init\nNEXT Next\nINVARIANT Inv\n", encoding="utf-8")
    without = run_tlc(spec, cfg)
    assert without.verdict in {Verdict.PARSE_ERROR, Verdict.SEMANTIC_ERROR}
    with_lib = run_tlc(spec, cfg, TLCOptions(library=(tmp_path / "lib",)))
    assert with_lib.verdict is Verdict.SUCCESS, with_lib.summary


def test_jvm_flags_go_before_the_class_and_reach_java(specs: Path, tmp_path: Path) -> None:
    options = TLCOptions(jvm=("-XX:TieredStopAtLevel=1",), library=(tmp_path,))
    cmd = tlc_command(specs / "Counter.tla", specs / "Counter_pass.cfg", options, tmp_path / "m")
    assert cmd[1] == "-XX:TieredStopAtLevel=1"
    assert cmd.index("-XX:TieredStopAtLevel=1") < cmd.index("tlc2.TLC")
    assert cmd[2] == f"-DTLA-Library={tmp_path}"
    bad = run_tlc(specs / "Counter.tla", specs / "Counter_pass.cfg", TLCOptions(jvm=("-XX:Nope",)))
    assert bad.verdict is Verdict.CRASH  # the JVM refused the flag: it was passed to it
    good = run_tlc(specs / "Counter.tla", specs / "Counter_pass.cfg", options)
    assert good.verdict is Verdict.SUCCESS


def test_tlc_output_is_never_kept_unbounded(tmp_path: Path) -> None:
    # TLC echoes a value it fails on into its error: a 200,000-character one comes back cut.
    spec = tmp_path / "Echo.tla"
    spec.write_text(
        "---- MODULE Echo ----\nEXTENDS TLC\nVARIABLE x\n"
        f'Init == x = 0 /\\ Assert(FALSE, "{"y" * 200_000}")\nNext == UNCHANGED x\n====\n',
        encoding="utf-8",
    )
    (tmp_path / "Echo.cfg").write_text("INIT Init\nNEXT Next\n", encoding="utf-8")
    result = run_tlc(spec)
    assert result.verdict is Verdict.CRASH
    assert result.errors
    assert all(len(e.message) < 5000 for e in result.errors)
    assert len(result.summary) < 600
    assert "characters cut" in "".join(e.message for e in result.errors)
