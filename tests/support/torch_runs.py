"""What the torch tests' session campaign runs (tests/against_torch/conftest.py)."""

from __future__ import annotations

from typing import Final

#: Every kind of scenario once (make check's campaign also runs random agents on a TCPStore).
SESSION_SCENARIOS: Final = (
    "min_equals_max",
    "last_call_rejoin",
    "crash_after_completion",
    "crash_during_join",
    "close_and_shutdown",
    "redundancy",
    "redundant_graceful_exit",
    "rollback_participant",
    "rollback_waiter",
    "random_agents",
    "defect_rank_world",
    "defect_pytorch_111646",
    "processes_tcp_kill_after_completion",
    "processes_file_kill_in_join",
)
FIRST_SEED: Final = 1
