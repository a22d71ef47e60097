"""Demos and entry points over protoref's runtimes, run as ``python -m examples.<name>``."""
