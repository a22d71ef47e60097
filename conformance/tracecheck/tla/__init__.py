"""TLA+ as text, the layer under the runner and the trace files: TLA+ values as TLC prints them
(:mod:`~tracecheck.tla.values`) and TLC's cfg files (:mod:`~tracecheck.tla.cfgfile`)."""
