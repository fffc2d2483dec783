"""Retrieval latency: the median and 95th percentile of one search's wall time, over every timed
retrieval of a strategy's answers (a reranker's LM calls are LM time, not search time)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from flarebench.bench.scorers.registry import LOWER, Column, Group, scorer
from flarebench.strategies.records import Trace

_HOW = "over every timed retrieval of the strategy's answers (numpy percentile, linear interpolation); "
_EMPTY = "empty when it made none (a service's retrievals are not timed)."


def search_seconds(trace: Trace, probe: Any, row: Mapping[str, Any]) -> dict[str, str]:
    """``retrieval_seconds``: the wall time of each retrieval of the answer that flarebench timed, as
    a JSON list (a row holds scalars, so that it survives a CSV round trip)."""
    return {"retrieval_seconds": json.dumps([r.seconds for r in trace.retrievals if r.seconds is not None])}


@scorer(
    Column("retrieval_latency_p50_s", "Median wall time of one retrieval in seconds, " + _HOW + _EMPTY, better=LOWER),
    Column(
        "retrieval_latency_p95_s",
        "95th percentile of one retrieval's wall time in seconds, " + _HOW + _EMPTY,
        better=LOWER,
    ),
    order=82,
    per_probe=search_seconds,
)
def retrieval_latency(g: Group) -> dict[str, float]:
    """Percentiles of the pooled searches (not of per-probe means): every search weighs the same."""
    # Rows scored before the column existed have none.
    column = g.rows["retrieval_seconds"].dropna() if "retrieval_seconds" in g.rows else []
    seconds = np.array([s for probe in column for s in json.loads(probe)], dtype=float)
    if not len(seconds):
        return {"retrieval_latency_p50_s": float("nan"), "retrieval_latency_p95_s": float("nan")}
    p50, p95 = np.percentile(seconds, [50, 95])
    return {"retrieval_latency_p50_s": float(p50), "retrieval_latency_p95_s": float(p95)}
