"""Benchmarks, run as ``python -m benches.<name>`` from the repository's root (``make bench``).

The layer above both protoref and tracecheck: a bench may import either; neither imports a bench.
"""
