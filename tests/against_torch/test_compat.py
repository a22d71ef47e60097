"""torch absent or not 2.13 to 2.15: a typed error with what to do, and the exit code 3."""

from __future__ import annotations

import importlib
import re
from types import ModuleType

import pytest

from protoref.torch import compat
from protoref.torch.compat import TorchUnavailableError, require_torch
from tracecheck.cli import main
from tracecheck.cli.torchcampaign import TORCH_UNAVAILABLE

_real_import = importlib.import_module


def _without_torch(name: str, package: str | None = None) -> ModuleType:
    if name == "torch" or name.startswith("torch."):
        raise ImportError(f"No module named {name!r}")
    return _real_import(name, package)


def test_absent_torch_is_a_typed_error_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(compat.importlib, "import_module", _without_torch)
    assert compat.torch_version() is None
    with pytest.raises(TorchUnavailableError, match=r"torch is not installed; pip install"):
        require_torch()


@pytest.mark.parametrize("version", ["2.12.1+cpu", "2.16.0", "unknown"])
def test_another_torch_is_refused_by_version(monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    monkeypatch.setattr(compat, "torch_version", lambda: version)
    with pytest.raises(
        TorchUnavailableError,
        match=rf"torch {re.escape(version)} is installed; .* 2\.13, 2\.14, 2\.15 only",
    ):
        require_torch()


@pytest.mark.parametrize("version", ["2.13.0+cpu", "2.14.1", "2.15.0"])
def test_the_three_releases_pass_the_version_gate(
    monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    monkeypatch.setattr(compat, "torch_version", lambda: version)
    assert require_torch().__name__.endswith("dynamic_rendezvous")


def test_the_campaign_without_torch_says_so_and_exits_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(compat, "torch_version", lambda: None)
    code = main(["campaign", "torch-rendezvous", "--runs", "1"])
    assert code == TORCH_UNAVAILABLE == 3
    err = capsys.readouterr().err
    assert "campaign torch-rendezvous not run: torch is not installed" in err
    assert "Traceback" not in err
