"""tracecheck: run TLC on the project's models and check implementation traces against the specs.

The public API: the TLC runner (:func:`run_tlc`, :func:`run_sany`), the model manifest
(:func:`load_manifest`, :func:`run_model`), trace loading (:func:`load_trace`,
:func:`merge_traces`), mapping tables (:class:`ProtocolMap`, :class:`ActionMap`), and
validation (:func:`validate_traces`, :func:`run_campaign`), action coverage
(:func:`action_coverage`), invariants on accepted behaviours (:func:`check_invariants`) and
the artefacts of a failure (:func:`keep_failures`).

The sub-packages are layers, each importing only those before it: ``tla`` (TLA+ as text),
``runner`` (TLC), ``traces`` (trace files), ``plugins`` (the implementations: the only
modules that import protoref), ``protocols`` (mapping tables), ``replay`` (traces through the
spec), ``campaigns`` (many traces at once), ``cli`` (the command); docs/conformance.md says what
each module holds. The trace format itself is the package :mod:`traceformat`, which protoref
imports too.
"""

from tracecheck.campaigns.campaign import CampaignResult, run_campaign
from tracecheck.errors import (
    JavaNotFoundError,
    ManifestError,
    TLCJarNotFoundError,
    ToolchainError,
    TracecheckError,
)
from tracecheck.protocols.mapping import ActionMap, ProtocolMap, spec_actions
from tracecheck.replay.artifacts import keep_failures
from tracecheck.replay.coverage import CoverageSummary, action_coverage
from tracecheck.replay.explain import Explanation
from tracecheck.replay.tlcrun import CheckerError
from tracecheck.replay.validate import validate_traces
from tracecheck.replay.verdicts import TraceVerdict, ValidationReport
from tracecheck.replay.witness import WitnessReport, check_invariants
from tracecheck.runner.manifest import Manifest, ModelCheck, load_manifest, run_model
from tracecheck.runner.results import Counterexample, TLCResult, Verdict
from tracecheck.runner.tlc import TLCOptions, run_sany, run_tlc
from tracecheck.traces.load import Trace, TraceFormatError, load_trace, merge_traces

__all__ = [
    "ActionMap",
    "CampaignResult",
    "CheckerError",
    "Counterexample",
    "CoverageSummary",
    "Explanation",
    "JavaNotFoundError",
    "Manifest",
    "ManifestError",
    "ModelCheck",
    "ProtocolMap",
    "TLCJarNotFoundError",
    "TLCOptions",
    "TLCResult",
    "ToolchainError",
    "Trace",
    "TraceFormatError",
    "TraceVerdict",
    "TracecheckError",
    "ValidationReport",
    "Verdict",
    "WitnessReport",
    "action_coverage",
    "check_invariants",
    "keep_failures",
    "load_manifest",
    "load_trace",
    "merge_traces",
    "run_campaign",
    "run_model",
    "run_sany",
    "run_tlc",
    "spec_actions",
    "validate_traces",
]
