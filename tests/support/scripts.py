"""Loading a script of the spec folders (spec/<protocol>/*.py, not a package) as a module, for
the tests of the generated docs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["load_script"]


def load_script(path: Path, name: str) -> ModuleType:
    """The script at ``path`` as the module ``name`` (registered in sys.modules)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it is executed
    spec.loader.exec_module(module)
    return module
