"""Which torch is installed: the adapter observes the handler of torch 2.13, 2.14 and 2.15.

The observed code paths (``_BackendRendezvousStateHolder.sync``, the op classes, the executor's
``run``) are private to torch and change between releases; an adapter pointed at another
release would trace something it does not understand. So every entry point first asks
:func:`require_torch`, which raises :class:`TorchUnavailableError` (a clear, typed message, no
traceback needed) when torch is absent, is not one of :data:`SUPPORTED`, or was built without
``torch.distributed``. 2.14.1 and 2.15.0 were compared with 2.13.0 line by line
(``dynamic_rendezvous.py``): the only change to the decision logic's module is 2.15's opt-in
``cas_backoff_max_seconds`` sleep after a lost compare-and-set, between the sync and the
decision (off by default; the adapter's runs leave it off, see docs/divergences.md).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Final

from protoref.errors import ProtorefError

__all__ = ["SUPPORTED", "TorchUnavailableError", "require_torch", "torch_version"]

#: The torch releases whose rendezvous the adapter observes (``major.minor``).
SUPPORTED: Final = ("2.13", "2.14", "2.15")

_INSTALL = "pip install 'torch>=2.13,<2.16' numpy (or the project's [torch] extra)"


class TorchUnavailableError(ProtorefError):
    """torch is not installed, is not 2.13 to 2.15, or has no ``torch.distributed``."""


def torch_version() -> str | None:
    """The installed torch's version string, or None when torch cannot be imported."""
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return None
    return str(getattr(torch, "__version__", "unknown"))


def require_torch() -> ModuleType:
    """torch's ``dynamic_rendezvous`` module, once a supported torch with distributed is present."""
    version = torch_version()
    if version is None:
        raise TorchUnavailableError(f"torch is not installed; {_INSTALL}")
    release = ".".join(version.split("+")[0].split(".")[:2])
    if release not in SUPPORTED:
        raise TorchUnavailableError(
            f"torch {version} is installed; the adapter observes torch "
            f"{', '.join(SUPPORTED)} only: {_INSTALL}"
        )
    dist = importlib.import_module("torch.distributed")
    if not dist.is_available():
        raise TorchUnavailableError(f"torch {version} was built without torch.distributed")
    return importlib.import_module("torch.distributed.elastic.rendezvous.dynamic_rendezvous")
