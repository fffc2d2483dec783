"""flarebench harness: pytest plugin, runner, metrics, reports and gates."""

import functools
from importlib import metadata


@functools.cache  # metadata.version() scans sys.path; asked for by every run, cache and scaffold
def version() -> str:
    """The installed flarebench version: part of every run's configuration and of the cache key,
    so answers made by another version are neither resumed into a run nor served from the cache."""
    try:
        return metadata.version("flarebench")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"
