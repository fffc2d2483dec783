"""Scorers: one module per metric, each declaring its summary columns, their definitions, how they
aggregate and whether the regression gate may bound them (see :mod:`flarebench.bench.scorers.registry`).

The summary (:mod:`flarebench.bench.metrics`), the report's column definitions, the gate's metric
list and default tolerances (:mod:`flarebench.bench.gate`) and the generated column tables of
README.md and docs/metrics.md (``python -m flarebench.bench.scorers --write``) all read these
declarations: adding a metric is adding one module here, and its test.
"""
