"""The one build step ``pyproject.toml`` cannot declare: the TLA+ specs become package data.

tracecheck replays traces through the specs in ``spec/``; an installed tracecheck must find
them from any folder, on a machine that has no checkout (``pip install`` of the project, then
``tracecheck validate`` on another implementation's traces). setuptools' package data lives
inside a package's own folder, and the specs are written once, in ``spec/``, so the wheel's
build copies their modules, cfgs and manifests into ``tracecheck/spec/``
(:mod:`tracecheck.runner.specs` reads them there). Nothing is copied in the repository; an
editable install (``make setup``) reads ``spec/`` directly.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SPEC = Path(__file__).resolve().parent / "spec"
#: What a spec folder holds that tracecheck reads (the .py helpers there are not its).
SPEC_FILES = ("*.tla", "*.cfg", "models.json")


class BuildPyWithSpecs(build_py):
    """build_py, then the specs into the built ``tracecheck/spec/``."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads spec/ where it is
            return
        target = Path(self.build_lib) / "tracecheck" / "spec"
        for pattern in SPEC_FILES:
            for source in sorted(SPEC.glob(f"*/{pattern}")):
                destination = target / source.relative_to(SPEC)
                self.mkpath(str(destination.parent))
                self.copy_file(str(source), str(destination))


setup(cmdclass={"build_py": BuildPyWithSpecs})
