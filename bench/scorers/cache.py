"""The cache: how much of a run was served from --cache, and latency apart for cold and warm probes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from flarebench.bench.scorers.registry import LOWER, Column, Group, Scoring, ratio, scorer
from flarebench.strategies.records import Trace


def cache_row(trace: Trace, probe: Any, row: Mapping[str, Any]) -> dict[str, int]:
    """``cache_hits``: LM calls and retrievals served from the cache; ``cacheable``: all of them (a
    probe is warm when the two are equal, cold when there is no hit)."""
    calls, retrievals = trace.lm_calls, trace.retrievals
    return {
        "cache_hits": sum(1 for c in calls if c.cached) + sum(1 for r in retrievals if r.cached),
        "cacheable": len(calls) + len(retrievals),
    }


def warm_note(summary: pd.DataFrame, scoring: Scoring) -> list[str]:
    """A run served partly from the cache: its latency mixes lookup and model time."""
    warm = summary[summary["cached_share"] > 0]
    if warm.empty:
        return []
    return [
        "warm run: "
        + ", ".join(f"{r['strategy']} {r['cached_share']:.0%}" for _, r in warm.iterrows())
        + " of LM calls and retrievals were served from --cache; latency_p50_s/p95_s mix lookup and model "
        "time: compare the cold and warm latency columns"
    ]


@scorer(
    # How the run was served, not how the strategy did: not gated.
    Column("cached_share", "Share of LM calls and retrievals served from the --cache (0 without it), 0-1."),
    Column(
        "latency_p50_cold_s",
        "Median wall time per question over cold probes (none of their LM calls and "
        "retrievals came from the cache); empty when there are none.",
        better=LOWER,
    ),
    Column(
        "latency_p95_cold_s",
        "95th percentile of wall time per question over cold probes; empty when there are none.",
        better=LOWER,
    ),
    Column(
        "latency_p50_warm_s",
        "Median wall time per question over warm probes (every LM call and retrieval served "
        "from the cache: lookup time, not model time); empty when there are none.",
        better=LOWER,
    ),
    Column(
        "latency_p95_warm_s",
        "95th percentile of wall time per question over warm probes; empty when there are none.",
        better=LOWER,
    ),
    order=90,
    needs=("latency_s",),
    per_probe=cache_row,
    findings=warm_note,
)
def cache(g: Group) -> dict[str, float]:
    """The cached share is a ratio of sums; a probe served partly from the cache is neither cold nor warm."""
    rows = g.rows
    latency = rows["latency_s"].astype(float).to_numpy()
    # Rows made before the cache columns existed: nothing was served from a cache.
    hits = rows["cache_hits"].astype(float) if "cache_hits" in rows else pd.Series(0.0, index=rows.index)
    cacheable = rows["cacheable"].astype(float) if "cacheable" in rows else pd.Series(0.0, index=rows.index)
    out = {"cached_share": ratio(hits.sum(), cacheable.sum())}
    for warmth, probes in (("cold", hits == 0), ("warm", (hits == cacheable) & (cacheable > 0))):
        part = latency[probes.to_numpy()]
        p50, p95 = np.percentile(part, [50, 95]) if len(part) else (np.nan, np.nan)
        out.update({f"latency_p50_{warmth}_s": float(p50), f"latency_p95_{warmth}_s": float(p95)})
    return out
