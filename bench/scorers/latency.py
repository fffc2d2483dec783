"""Latency: the median and 95th percentile of wall time per question, as the runner measured it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from flarebench.bench.scorers.registry import LOWER, Column, Group, Scoring, scorer
from flarebench.strategies.records import Trace


def latency_row(trace: Trace, probe: Any, row: Mapping[str, Any]) -> dict[str, float]:
    """``latency_s``: the probe's wall time."""
    return {"latency_s": float(trace.seconds)}


#: Below this many probes a 95th percentile has no probe beyond it: it is the slowest probe, or
#: interpolated between the two slowest, and one slow probe moves it.
FEW = 20


def few_probes(summary: pd.DataFrame, scoring: Scoring) -> list[str]:
    """A line when a strategy's p95 rests on fewer than :data:`FEW` finished probes."""
    timed = [int((~Group(s, rows, scoring).failed).sum()) for s, rows in scoring.groups.items()]
    if not timed or min(timed) >= FEW:
        return []
    low, high = min(timed), max(timed)
    count = "1 probe" if high == 1 else f"{low} probes" if low == high else f"{low} to {high} probes"
    return [
        f"p95 columns rest on {count} per strategy: under {FEW}, a p95 is the slowest probe or "
        "near it, and one slow probe (a busy machine) moves it; read the p50 columns too, or run more probes"
    ]


@scorer(
    Column(
        "latency_p50_s",
        "Median wall time per question in seconds, as measured by the runner (numpy percentile, linear interpolation).",
        better=LOWER,
    ),
    # Seconds depend on the machine: the gate bounds latency by its ratio to a reference strategy
    # of the same run (flarebench.bench.gate.RATIO_METRICS), not by these.
    Column(
        "latency_p95_s",
        "95th percentile of wall time per question in seconds (numpy percentile, linear interpolation).",
        better=LOWER,
    ),
    order=80,
    per_probe=latency_row,
    findings=few_probes,
    needs=("latency_s",),
)
def latency(g: Group) -> dict[str, float]:
    """numpy's default percentile method (linear interpolation); missing when no probe finished."""
    seconds = g.rows["latency_s"].astype(float).to_numpy()
    p50, p95 = np.percentile(seconds, [50, 95]) if len(seconds) else (np.nan, np.nan)
    return {"latency_p50_s": float(p50), "latency_p95_s": float(p95)}
