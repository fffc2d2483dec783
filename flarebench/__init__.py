"""flarebench: benchmark retrieval strategies for retrieval-augmented generation.

One import namespace over the three parts the repository is laid out in: ``flarebench.strategies``
(the strategies, LMs and retrievers), ``flarebench.probes`` (probe sets) and ``flarebench.bench``
(runner, metrics, reports, gates, the CLI and the pytest plugin). ``python -m flarebench`` runs the CLI.

In a built wheel the three are folders of this package. In the repository they stay at the top
(``bench/``, ``strategies/``, ``probes/``; pyproject.toml maps them here), so a source checkout adds
its root to this package's path: the same imports then work from any checkout or worktree, without
relying on which one the environment's editable install points at.
"""

from pathlib import Path

_root = Path(__file__).resolve().parent.parent
#: The source checkout this package runs from (its root, holding pyproject.toml), or None when it
#: is installed from a wheel.
CHECKOUT = _root if (_root / "pyproject.toml").is_file() and (_root / "strategies" / "__init__.py").is_file() else None
if CHECKOUT is not None:
    __path__.append(str(CHECKOUT))  # noqa: F821 (a package's __path__ is set by the import system)
