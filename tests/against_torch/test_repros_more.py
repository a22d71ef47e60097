"""The two standalone upstream repros added for issue 27 §2 still show their defect on the
installed torch: each exits 0 only when it does (and prints why)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPROS = Path(__file__).resolve().parents[2] / "examples" / "torch-repros"


@pytest.mark.parametrize(
    ("program", "shown"),
    [
        ("rref_empty_owner_erased.py", "DEFECT: the OwnerRRef was erased"),
        ("rendezvous_bootstrap_d7.py", "DEFECT: B waited for a MASTER_ADDR"),
    ],
)
def test_the_repro_shows_its_defect(torch_dr: ModuleType, program: str, shown: str) -> None:
    del torch_dr  # (torch must be installed)
    done = subprocess.run(
        [sys.executable, str(REPROS / program)],
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert shown in done.stdout
