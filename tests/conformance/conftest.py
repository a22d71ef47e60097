"""Where the conformance tests' failure artefacts go (see tracecheck.replay.artifacts).

Some tests reject traces on purpose through the CLI, which writes an artefact folder each time;
unless the environment names a folder (CI sets ``TRACECHECK_ARTIFACTS`` to the one it uploads),
they go under pytest's temporary folder rather than into the working tree. A failing test's
message prints the folder either way.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tracecheck.replay.artifacts import ARTIFACTS_ENV


@pytest.fixture(autouse=True, scope="session")
def _artifacts_out_of_the_tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    if os.environ.get(ARTIFACTS_ENV):
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ARTIFACTS_ENV, str(tmp_path_factory.getbasetemp() / "tracecheck-artifacts"))
        yield
