"""The manifest: validation with typed errors, and the comparison of verdicts both ways."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tracecheck.cli import main
from tracecheck.errors import ManifestError
from tracecheck.runner.manifest import load_manifest, models_markdown, record_results, run_model


def _model(
    name: str, cfg: str, expect: str, violates: str | None = None, **extra: Any
) -> dict[str, Any]:
    entry = {
        "name": name,
        "module": "Counter.tla",
        "cfg": f"{cfg}.cfg",
        "class": "quick",
        "expect": expect,
        "violates": violates,
        "description": f"{name} for the tests",
    }
    return entry | extra


def _root(tmp_path: Path, specs: Path, models: list[dict[str, Any]]) -> Path:
    folder = tmp_path / "spec" / "toy"
    folder.mkdir(parents=True)
    for path in specs.glob("Counter*"):
        shutil.copy(path, folder)
    (folder / "models.json").write_text(
        json.dumps({"protocol": "toy", "models": models}), encoding="utf-8"
    )
    return tmp_path / "spec"


def test_verdicts_as_expected(tmp_path: Path, specs: Path) -> None:
    root = _root(
        tmp_path,
        specs,
        [
            _model("pass", "Counter_pass", "pass", recorded={"distinct": 15, "depth": 4}),
            _model("inv", "Counter_inv", "invariant", "SmallInv"),
            _model("dead", "Counter_deadlock", "deadlock"),
            _model("dead-off", "Counter_deadlock", "pass", check_deadlock=False),
        ],
    )
    manifest = load_manifest(root)
    checks = [run_model(manifest, p, m) for p, m in manifest.select()]
    assert [(c.entry.name, c.ok, c.problem) for c in checks] == [
        ("pass", True, None),
        ("inv", True, None),
        ("dead", True, None),
        ("dead-off", True, None),
    ]
    assert checks[0].drift == []


def test_must_fail_model_that_passes_is_an_error(tmp_path: Path, specs: Path) -> None:
    root = _root(tmp_path, specs, [_model("teeth", "Counter_pass", "invariant", "TypeOK")])
    manifest = load_manifest(root)
    check = run_model(manifest, "toy", manifest.select()[0][1])
    assert not check.ok
    assert check.problem is not None
    assert "but passed" in check.problem


def test_pass_model_that_fails_is_an_error(tmp_path: Path, specs: Path) -> None:
    root = _root(tmp_path, specs, [_model("should-pass", "Counter_inv", "pass")])
    manifest = load_manifest(root)
    check = run_model(manifest, "toy", manifest.select()[0][1])
    assert not check.ok
    assert check.problem is not None
    assert "must pass" in check.problem
    assert "SmallInv" in check.problem


def test_wrong_property_is_an_error(tmp_path: Path, specs: Path) -> None:
    root = _root(tmp_path, specs, [_model("wrong", "Counter_inv", "invariant", "TypeOK")])
    manifest = load_manifest(root)
    check = run_model(manifest, "toy", manifest.select()[0][1])
    assert not check.ok
    assert check.problem == "must violate TypeOK, but TLC reports SmallInv"


def test_drift_is_reported_and_record_writes_figures(tmp_path: Path, specs: Path) -> None:
    root = _root(
        tmp_path, specs, [_model("pass", "Counter_pass", "pass", recorded={"distinct": 99})]
    )
    manifest = load_manifest(root)
    check = run_model(manifest, "toy", manifest.select()[0][1])
    assert check.ok
    assert check.drift == ["distinct 99 -> 15"]
    assert record_results(manifest, [check]) == [root / "toy" / "models.json"]
    again = load_manifest(root)
    recorded = again.protocols["toy"].models[0].recorded
    assert (recorded.distinct, recorded.depth, recorded.generated) == (15, 4, 23)
    assert "| `pass` | quick | pass | 15 | 4 |" in models_markdown(again)


def test_cli_check_exit_codes(
    tmp_path: Path, specs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(
        tmp_path,
        specs,
        [
            _model("inv", "Counter_inv", "invariant", "SmallInv"),
            _model("bad", "Counter_inv", "pass"),
        ],
    )
    assert main(["check", "--spec-root", str(root), "--model", "inv"]) == 0
    assert main(["check", "--spec-root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "1 differ" in out
    assert main(["check", "--spec-root", str(root), "--model", "nope"]) == 2
    assert main(["check", "--spec-root", str(root), "--json", "--model", "inv"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[0]["result"]["violated"] == "SmallInv"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda m: m.pop("description"), "models.0.description: Field required"),
        (lambda m: m.update(expect="explode"), "models.0.expect"),
        (lambda m: m.update(violates=None), "needs `violates`"),
        (lambda m: m.update(cfg="Missing.cfg"), "names missing Missing.cfg"),
        (lambda m: m.update(surprise=1), "models.0.surprise: Extra inputs are not permitted"),
        (lambda m: m.update({"class": "medium"}), "models.0.class"),
    ],
)
def test_bad_manifest_names_the_file_and_field(
    tmp_path: Path, specs: Path, mutate: Any, message: str
) -> None:
    entry = _model("inv", "Counter_inv", "invariant", "SmallInv")
    mutate(entry)
    root = _root(tmp_path, specs, [entry])
    with pytest.raises(ManifestError) as caught:
        load_manifest(root)
    assert message in str(caught.value)
    assert "models.json" in str(caught.value)


def test_malformed_json_and_duplicates(tmp_path: Path, specs: Path) -> None:
    root = _root(tmp_path, specs, [_model("a", "Counter_inv", "invariant", "SmallInv")] * 2)
    with pytest.raises(ManifestError, match="'a' is also in"):
        load_manifest(root)
    (root / "toy" / "models.json").write_text('{"protocol": "toy",\n "models": [}', "utf-8")
    with pytest.raises(ManifestError, match="line 2, column"):
        load_manifest(root)


def test_protocol_must_match_folder(tmp_path: Path, specs: Path) -> None:
    root = _root(tmp_path, specs, [])
    (root / "toy" / "models.json").write_text('{"protocol": "other", "models": []}', "utf-8")
    with pytest.raises(ManifestError, match="differs from its folder"):
        load_manifest(root)
