"""Where the project's TLA+ specs are, for a tracecheck that may run from any folder.

The specs are written once, in the repository's ``spec/``. A built wheel carries them as data of
this package (``tracecheck/spec/``, copied there by ``setup.py``'s build step), so that an
installed tracecheck validates traces on a machine that only ``pip install``ed the project; a
source checkout or an editable install (``make setup``) reads the checkout's ``spec/`` itself.
``--spec-root`` still names any other folder (a spec under development).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from tracecheck.errors import ManifestError

__all__ = ["PACKAGED", "default_spec_root"]

#: The specs' folder inside the installed package (present in a wheel's install).
PACKAGED = Path(__file__).resolve().parent.parent / "spec"


@cache
def default_spec_root() -> Path:
    """The packaged specs, else those of the checkout this package was loaded from."""
    checkout = PACKAGED.parent.parent.parent / "spec"
    for folder in (PACKAGED, checkout):
        if any(folder.glob("*/models.json")):
            return folder
    raise ManifestError(
        f"no TLA+ specs found: neither {PACKAGED} (an installed wheel's) nor {checkout} (a "
        "checkout's); pass --spec-root"
    )
