"""Many traces at once: seeded campaigns of a protocol's implementation through the checker
(:mod:`~tracecheck.campaigns.campaign`), traces of TLC's own simulation
(:mod:`~tracecheck.campaigns.simtraces`), and ``make bench``: the deep models against TLC's
ceiling (:mod:`~tracecheck.campaigns.bench`) and trace validation
(:mod:`~tracecheck.campaigns.tvbench`)."""
