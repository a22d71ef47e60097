"""Replaying traces through the spec with TLC: the generated trace spec
(:mod:`~tracecheck.replay.tracespec`, with the Java trace reader of
:mod:`~tracecheck.replay.javareader`), batch verdicts (:mod:`~tracecheck.replay.validate`), why a
rejected event has no step (:mod:`~tracecheck.replay.explain`), the spec's invariants on accepted
behaviours (:mod:`~tracecheck.replay.witness`), action coverage, the report, and what a failure
leaves behind (:mod:`~tracecheck.replay.artifacts`)."""
