"""tracecheck: run TLC on the project's models and check implementation traces against the specs."""

__all__: list[str] = []
