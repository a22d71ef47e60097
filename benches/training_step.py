"""A training step of two torch programs on 3 workers, protoref vs torch (issue 26 "Measured").

``python -m benches.training_step --out docs/performance.md`` runs, one after the other and
alternately (ours, torch, ours, torch, ...; never at the same time: they would share the cores):

- ``parameter_server.py`` (the shape of pytorch/examples' distributed/rpc/parameter_server: a
  server holding the model, two trainers each running forward through it, distributed backward
  and a DistributedOptimizer(SGD) step over the server's parameter RRefs);
- ``rnn.py`` (the shape of distributed/rpc/rnn: embedding on worker1, LSTM on the trainer,
  decoder on worker2; DistributedOptimizer over remote and local parameter RRefs);

both from tests/autograd/programs/, the same text with protoref's imports and with torch's
(``torch.distributed.autograd``/``rpc`` over TensorPipe, ``torch.distributed.optim``). Each
run times ``--steps`` steps after a first warm-up step, inside the trainer (process start-up and
``init_rpc`` excluded), and reports the time per step. Tiny models on the CPU, so the figure is
the protocol's and the runtime's cost, not arithmetic. The median of the ``--repeat`` pairs'
ratios is the verdict against the goal (at most 1.5x torch's time). The block between this
module's markers in ``--out`` is replaced; a failed run writes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Final

from benches.alternation import alternate

__all__ = ["PROGRAMS", "main", "run_program", "table", "torch_text"]

START: Final = "<!-- bench:training_step:start -->"
END: Final = "<!-- bench:training_step:end -->"
HEADING: Final = "## Distributed autograd on torch tensors: a training step vs torch"
PROGRAMS: Final = Path(__file__).resolve().parent.parent / "tests" / "autograd" / "programs"
SHAPES: Final = ("parameter_server.py", "rnn.py")
IMPORTS: Final = {
    "import protoref.autograd as dist_autograd\n": "import torch.distributed.autograd as "
    "dist_autograd\n",
    "import protoref.rpc as rpc\n": "import torch.distributed.rpc as rpc\n",
    "from protoref.optim import DistributedOptimizer\n": "from torch.distributed.optim import "
    "DistributedOptimizer\n",
}


def torch_text(program: str) -> str:
    """The program with torch's imports: the only lines that change."""
    text = (PROGRAMS / program).read_text(encoding="utf-8")
    for ours, theirs in IMPORTS.items():
        text = text.replace(ours, theirs)
    return text


def _free_port() -> int:
    from protoref.rpc.options import free_port  # noqa: PLC0415 - the runtime's helper

    return free_port()


def run_program(script: Path, steps: int, home: Path, limit: float = 600.0) -> float:
    """Seconds per training step that rank 0 reports; raises if a process fails."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROTOREF_RPC_")}
    env.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(_free_port()),
        XDG_CONFIG_HOME=str(home),
        STEPS=str(steps),
        PROTOREF_BENCH="1",
    )
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(rank)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for rank in range(3)
    ]
    outs = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=limit)
            if proc.returncode != 0:
                raise RuntimeError(f"{script.name}: a process exited {proc.returncode}")
            outs.append(out)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
    return float(json.loads(outs[0].strip().splitlines()[-1])["seconds_per_step"])


def table(results: dict[str, list[tuple[float, float]]], steps: int) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    machine = f"{os.cpu_count()} cores, load average {load}, Python {platform.python_version()}"
    lines = [
        START,
        f"Measured {stamp} by `python -m benches.training_step` ({machine}): a training step "
        f"(forward over RPC, distributed backward, DistributedOptimizer(SGD) step), {steps} "
        "steps after a warm-up step, timed inside the trainer; 3 worker processes on loopback; "
        "protoref and torch 2.13 (TensorPipe) alternately, on the same program text.",
        "",
        "| program | pair | protoref ms / step | torch ms / step | ours / torch |",
        "|---|---:|---:|---:|---:|",
    ]
    verdicts = []
    for program, pairs in results.items():
        for i, (ours, theirs) in enumerate(pairs, 1):
            lines.append(
                f"| {program} | {i} | {1000 * ours:.2f} | {1000 * theirs:.2f} | "
                f"{ours / theirs:.2f}x |"
            )
        ratio = statistics.median(o / t for o, t in pairs)
        verdict = "within" if ratio <= 1.5 else "outside"
        verdicts.append(f"{program}: median **{ratio:.2f}x** ({verdict} the 1.5x goal)")
    lines += ["", "; ".join(verdicts) + ".", END]
    return "\n".join(lines)


def write_marked(path: Path, block: str) -> None:
    """Replace the marked block in ``path``, or append it under its heading."""
    from tracecheck.campaigns.bench import write_marked as write  # noqa: PLC0415 - only --out

    text = path.read_text(encoding="utf-8") if path.exists() else ""
    write(path, block if START in text else HEADING + "\n\n" + block, START, END)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benches.training_step", description=__doc__)
    p.add_argument("--steps", type=int, default=30, help="timed steps per run (after 1)")
    p.add_argument("--repeat", type=int, default=3, help="(ours, torch) pairs per program")
    p.add_argument("--out", type=Path, default=None, help="replace the marked block here")
    args = p.parse_args(argv)
    try:
        import torch  # noqa: F401, PLC0415 - only to know it is there
    except ImportError:
        print("skipped: torch is not installed (make torch)", file=sys.stderr)
        return 0
    results: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        for program in SHAPES:
            theirs = home / f"torch_{program}"
            theirs.write_text(torch_text(program), encoding="utf-8")
            try:
                results[program] = alternate(
                    args.repeat,
                    partial(run_program, PROGRAMS / program, args.steps + 1, home),
                    partial(run_program, theirs, args.steps + 1, home),
                )
            except (RuntimeError, subprocess.TimeoutExpired, ValueError) as err:
                print(f"not written: {err}", file=sys.stderr)
                return 1
    block = table(results, args.steps)
    print(block)
    if args.out is not None:
        write_marked(args.out, block)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
