"""Running TLC: finding Java and the jar (:mod:`~tracecheck.runner.toolchain`), one TLC or SANY
process and its ``-tool`` output (:mod:`~tracecheck.runner.tlc`,
:mod:`~tracecheck.runner.tooloutput`), the typed result (:mod:`~tracecheck.runner.results`),
and the manifest of models with their expected verdicts (:mod:`~tracecheck.runner.manifest`)."""
