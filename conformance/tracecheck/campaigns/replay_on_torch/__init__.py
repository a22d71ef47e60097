"""``tracecheck replay-on-torch``: every PyTorch-variant counterexample driven on real torch.

:mod:`.steps` reads a counterexample's message order, :mod:`.recipes` says per model how torch
follows it (or why it cannot), :mod:`.run` runs TLC and torch, :mod:`.command` is the CLI.
"""

from tracecheck.campaigns.replay_on_torch.run import ReplayResult, pytorch_models, replay_model

__all__ = ["ReplayResult", "pytorch_models", "replay_model"]
