"""What a bad request is, and the exit status each kind of failure gives (a leaf: imports nothing
of the project, so every layer may raise these).

    2  USAGE    a bad flag or value, a dataset name or option the registry rejects
    1  FAILURE  the data or the run failed (missing or corrupt file, dead worker, out of memory)
"""

USAGE, FAILURE = 2, 1


class UsageError(ValueError):
    """A bad flag or value: exit status 2."""
