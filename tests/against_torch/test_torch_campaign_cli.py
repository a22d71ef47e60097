"""``tracecheck campaign torch-rendezvous`` as a user runs it: two runs, every one accepted, exit
0 with a line per scenario, and nothing left in the temporary folder (it once exited 2, reading
the traces of a folder it had just removed, and kept about 4 MB per campaign)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType


def test_two_accepted_runs_exit_0_and_leave_nothing(torch_dr: ModuleType, tmp_path: Path) -> None:
    del torch_dr  # (torch 2.13 must be installed)
    temp = tmp_path / "temp"
    temp.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "tracecheck.cli", "campaign", "torch-rendezvous", "--runs", "2"],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
        env=os.environ | {"TMPDIR": str(temp)},
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert any(line.startswith("[1/2] torch-rendezvous min_equals_max seed 1 ") for line in lines)
    assert any(line.startswith("[2/2] ") for line in lines)
    assert any(line.startswith("campaign torch-rendezvous: 2 runs in ") for line in lines)
    assert list(temp.iterdir()) == []
