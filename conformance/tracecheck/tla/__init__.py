"""TLA+ as text, the layer under the runner and the trace files: TLA+ values in Python and as TLC
prints them (:mod:`~tracecheck.tla.values`), read back by :mod:`~tracecheck.tla.parser`, and TLC's
cfg files (:mod:`~tracecheck.tla.cfgfile`)."""
