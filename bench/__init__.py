"""flarebench harness: pytest plugin, runner, metrics, reports and gates."""

import functools
import tomllib
from importlib import metadata

from flarebench import CHECKOUT


@functools.cache  # metadata.version() scans sys.path; asked for by every run, cache and scaffold
def version() -> str:
    """The flarebench version of the code running: part of every run's configuration and of the
    cache key, so answers made by another version are neither resumed into a run nor served from
    the cache. From a source checkout (:data:`flarebench.CHECKOUT`), that checkout's version:
    the environment's installed metadata may be another checkout's (an editable install of one
    worktree, this one on PYTHONPATH)."""
    if CHECKOUT is not None:
        project = tomllib.loads((CHECKOUT / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
        if project.get("name") == "flarebench" and isinstance(project.get("version"), str):
            return project["version"]
    try:
        return metadata.version("flarebench")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"
