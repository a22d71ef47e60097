"""The ``tracecheck`` command: run the model manifest (``check``), one model (``tlc``), or SANY.

Exit codes: 0 everything as expected; 1 a verdict differs from the manifest (``check``) or TLC
found a violation or error (``tlc``, ``sany``); 2 bad usage, a bad manifest, or no Java/TLC.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence

from rich.markup import escape

from tracecheck.campaigns.replay_on_torch.command import add_replay_on_torch
from tracecheck.cli import models, tlc, validation
from tracecheck.cli.common import make_console, spec_root_of
from tracecheck.errors import TracecheckError
from tracecheck.runner.tlc import resume, stop_all, sweep_stale

# The docstring above is the --help description. One module per command group: models (check,
# docs, bench), tlc (tlc, sany), validation (validate, campaign, simtraces, contract); common
# holds what they share.

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tracecheck`` console script."""
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:  # everything after -- goes to TLC verbatim
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    args = parser.parse_args(argv)
    args.extra = extra
    console = make_console()
    sweep_stale()  # what a tracecheck killed by SIGKILL left in the temporary folder
    try:
        with _stopping_tlc_on_signals():
            spec_root_of(args)
            code: int = args.func(args, console)
    except _Signalled as exc:
        make_console(stderr=True).print(
            f"[bold red]stopped by {signal.Signals(exc.signum).name}[/]: TLC killed, "
            "temporary folders removed"
        )
        return 128 + exc.signum
    except TracecheckError as exc:
        make_console(stderr=True).print(f"[bold red]error:[/] {escape(str(exc))}")
        return 2
    except BrokenPipeError:  # `tracecheck ... | head`: the reader has what it wanted
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115, PTH123 - for the exit's flush
        return 1
    return code


#: The signals that stop tracecheck cleanly: Ctrl-C, kill, and a closed terminal.
_STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Signalled(BaseException):
    """SIGINT, SIGTERM or SIGHUP arrived: raised where the main thread was, after TLC was killed, so
    that every ``finally`` on the way out (temporary folders, thread pools) runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _stopping_tlc_on_signals() -> Iterator[None]:
    """On SIGINT, SIGTERM or SIGHUP: kill every running TLC (its process group: TLC runs in its
    own session, so a terminal's Ctrl-C or hang-up does not reach it) and refuse to start more,
    then unwind (a SIGKILL runs no handler: TLC's watchdog ends it, :mod:`tracecheck.runner.tlc`).
    Thread pools wait for their TLC threads on the way out, which end once TLC is dead."""
    if threading.current_thread() is not threading.main_thread():
        yield  # (signal handlers belong to the main thread)
        return

    def stop(signum: int, _frame: object) -> None:
        stop_all()
        raise _Signalled(signum)

    # (a SIGHUP ignored on purpose, as under nohup, stays ignored)
    wanted = [s for s in _STOPPING if signal.getsignal(s) is not signal.SIG_IGN]
    saved = {sig: signal.signal(sig, stop) for sig in wanted}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        resume()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tracecheck", description=__doc__)
    sub = parser.add_subparsers(required=True, metavar="COMMAND")
    models.add_check(sub)
    tlc.add_tlc(sub)
    validation.add_validate(sub)
    validation.add_campaign(sub)
    models.add_bench(sub)
    models.add_docs(sub)
    tlc.add_sany(sub)
    tlc.add_toolchain(sub)
    validation.add_simtraces(sub)
    validation.add_contract(sub)
    add_replay_on_torch(sub)
    return parser
