"""Trace files and their values: loading, peeking and merging JSON-lines traces
(:mod:`~tracecheck.traces.load`), the implementation's event schema
(:mod:`~tracecheck.traces.schema`), logged JSON values as TLA+ (:mod:`~tracecheck.traces.jsonvalue`)
and logged sets as differences (:mod:`~tracecheck.traces.postdelta`)."""
