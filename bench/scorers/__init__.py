"""Scorers: one module per metric, each declaring its summary columns, their definitions, how they
aggregate and whether the regression gate may bound them (see :mod:`flarebench.bench.scorers.registry`).

The summary (:mod:`flarebench.bench.metrics`), the report's column definitions, the gate's metric
list and default tolerances (:mod:`flarebench.bench.gate`) and the generated column tables of
README.md and docs/metrics.md (``python -m flarebench.bench.scorers --write``) all read these
declarations: adding a metric is adding one module here, and its test.
"""


class ScorerError(ValueError):
    """A declaration that contradicts itself or another scorer, or a scorer that failed on the traces:
    it raised, returned no dict or a column it does not declare, gave text for a gateable column, or
    set a probe's row value another scorer set. Here, not in the registry, so that the command line
    catches it without importing pandas."""
