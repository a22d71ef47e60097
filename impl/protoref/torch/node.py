"""One node of a multi-process torch run: ``python -m protoref.torch.node '<json>'``.

The JSON says where the store is (``{"kind": "tcp", "port": P}`` or ``{"kind": "file",
"path": F}``), the node's address, the run's clock (``origin_ns``, ``tick_real``), settings,
seed, the raw record file and the step-lock file, and the plan: a list of steps, each a name or
``[name, ticks]``:

- ``join``: ``next_rendezvous()``; ``shutdown``: ``shutdown()``;
- ``[poll_waiting, t]``: ``num_nodes_waiting()`` once a tick, up to ``t`` ticks or until > 0;
- ``[rejoin_if_waiting, t]``: the same, then ``next_rendezvous()`` if some node waits;
- ``[poll_closed, t]``: ``is_closed()`` once a tick, up to ``t`` ticks or until True;
- ``[sleep, t]``; ``hold``: sleep until the driver kills the process (at most a minute).

It prints one line per fact the driver may wait for: ``node <name>`` first, ``event <action>``
for every traced step, ``joined <rank> <world> <round>`` or ``outcome <what>``, ``done``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from protoref.torch.compat import TorchUnavailableError
from protoref.torch.observe import NodeObserver
from protoref.torch.run import TorchRun
from protoref.torch.stage import Agent, Joined, Stage
from protoref.torch.values import TorchSettings

__all__ = ["main"]

_HOLD_LIMIT = 60.0


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _store(run: TorchRun, spec: dict[str, Any]) -> Any:
    if spec["kind"] == "tcp":
        return run.tcp_client(int(spec["port"]))
    if spec["kind"] == "file":
        return run.file_store(Path(spec["path"]))
    raise ValueError(f"unknown store {spec['kind']!r}")


def _step(agent: Agent, step: str | list[Any]) -> None:
    name, ticks = (step, 0) if isinstance(step, str) else (str(step[0]), int(step[1]))
    if name == "join":
        out = agent.join()
        _say(
            f"joined {out.rank} {out.world} {out.round}"
            if isinstance(out, Joined)
            else f"outcome {out}"
        )
    elif name == "shutdown":
        _say(f"shutdown {agent.shutdown()}")
    elif name in ("poll_waiting", "rejoin_if_waiting"):
        waiting = agent.poll_waiting(ticks)
        _say(f"waiting {waiting}")
        if waiting and name == "rejoin_if_waiting":
            _step(agent, "join")
    elif name == "poll_closed":
        _say(f"closed {agent.poll_closed(ticks)}")
    elif name == "sleep":
        agent.sleep(ticks)
    elif name == "hold":
        time.sleep(_HOLD_LIMIT)
    else:
        raise ValueError(f"unknown plan step {step!r}")


def main(argv: list[str] | None = None) -> int:
    args = json.loads((argv if argv is not None else sys.argv[1:])[0])
    cfg = TorchSettings(**args["cfg"])
    try:
        run = TorchRun(
            Path(args["folder"]),
            cfg,
            seed=int(args["seed"]),
            tick_real=float(args["tick_real"]),
            origin_ns=int(args["origin_ns"]),
            raw_name=str(args["raw"]),
            lock=Path(args["lock"]),
        )
    except TorchUnavailableError as err:
        _say(f"error {err}")
        return 3
    with run:
        stage = Stage(run, lambda: _store(run, args["store"]))
        agent = stage.add(str(args["addr"]))
        _say(f"node {agent.name}")

        def tell(event: str, _: NodeObserver) -> None:
            _say(f"event {event}")

        agent.observer.listeners.append(tell)
        if args.get("gate"):
            sys.stdin.readline()  # the driver says when to begin
        for step in args["plan"]:
            _step(agent, step)
    _say("done")
    return 0


if __name__ == "__main__":
    code = main()
    # Everything is written and closed; skip interpreter teardown, where torch's store
    # clients' threads can keep a finished node alive.
    os._exit(code)
