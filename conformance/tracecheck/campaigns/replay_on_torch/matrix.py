"""``make torch-matrix``: the torch campaigns on each installed torch release, as one table.

Usage: ``python -m tracecheck.campaigns.replay_on_torch.matrix --out docs/torch-matrix.md VENV...``
where each VENV is a virtual environment holding the project and one torch release (``make torch
TORCH=2.15.0 VENV=...``). The campaigns are discovered from this checkout's CLI (every
``torch-*`` campaign name it spells), so campaigns added later run too. Each campaign runs with
``--json`` in each venv; a row counts its runs accepted, known torch defects and rejected. A
campaign that did not run (exit 3: torch absent or unsupported) is reported as such, never as a
pass.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tracecheck.campaigns.bench import write_marked

__all__ = ["campaigns", "main"]

START, END = "<!-- TORCH-MATRIX -->", "<!-- /TORCH-MATRIX -->"


def campaigns() -> list[str]:
    """Every ``torch-*`` campaign name this checkout's CLI spells."""
    cli = Path(__file__).resolve().parents[2] / "cli"
    found: set[str] = set()
    for path in cli.glob("*.py"):
        found |= set(re.findall(r"\"(torch-[a-z]+)\"", path.read_text(encoding="utf-8")))
    return sorted(found)


def _row(venv: Path, campaign: str, runs: int) -> tuple[str, str, str]:
    python = venv / "bin" / "python"
    version = (
        subprocess.run(
            [python, "-c", "import torch; print(torch.__version__)"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        or "absent"
    )
    started = time.monotonic()
    done = subprocess.run(
        [python, "-m", "tracecheck.cli", "campaign", campaign, "--runs", str(runs), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.monotonic() - started
    if done.returncode == 3:
        return version, campaign, "not run (torch absent or unsupported)"
    try:
        body = json.loads(done.stdout[done.stdout.index("{") :])
    except ValueError:
        tail = " ".join(done.stderr.strip().splitlines()[-1:])[:120]
        return version, campaign, f"no result (exit {done.returncode}: {tail})"
    results: list[dict[str, object]] = body.get("runs", [])
    outcomes = [str(r.get("outcome")) for r in results]
    accepted = outcomes.count("accepted")
    known = outcomes.count("known-defect")
    rejected = len(outcomes) - accepted - known
    which = [
        f"{r.get('scenario')} seed {r.get('seed')}: {str(r.get('detail', ''))[:100]}"
        for r in results
        if r.get("outcome") not in ("accepted", "known-defect")
    ]
    return (
        version,
        campaign,
        f"{accepted} accepted / {known} known defect / {rejected} rejected "
        f"({len(outcomes)} runs, {seconds:.0f} s)"
        + (f"; rejected: {'; '.join(which)}" if which else ""),
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("venvs", nargs="+", type=Path)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    rows = [_row(v, c, args.runs) for v in args.venvs for c in campaigns()]
    lines = [
        "| torch | campaign | runs: accepted / known defect / rejected |",
        "|---|---|---|",
        *(f"| {v} | `{c}` | {r} |" for v, c, r in rows),
    ]
    table = "\n".join(lines) + "\n"
    print(table, end="")
    write_marked(args.out, f"{START}\n{table}{END}", START, END)
    failed = [r for _, _, r in rows if not r.startswith("not run") and " 0 rejected" not in r]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
