"""Where the time went: seconds per question in LM calls, in retriever calls, and in the harness."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flarebench.bench.scorers.registry import LOWER, Column, Group, ratio, scorer
from flarebench.strategies.records import Trace


def timing_row(trace: Trace, probe: Any, row: Mapping[str, Any]) -> dict[str, float]:
    """``lm_s`` and ``retrieval_s`` (as the LM and the retriever timed their calls) and ``harness_s``:
    what the runner spent outside them (prompting, parsing, caching)."""
    lm_s = float(sum(c.seconds for c in trace.lm_calls))
    retrieval_s = float(sum(r.seconds for r in trace.retrievals))
    # Clamped at 0: timer granularity can make the parts sum slightly above the wall time.
    return {"lm_s": lm_s, "retrieval_s": retrieval_s, "harness_s": max(0.0, row["latency_s"] - lm_s - retrieval_s)}


@scorer(
    Column("lm_s_per_q", "Mean seconds per question spent in LM calls.", better=LOWER),
    Column("retrieval_s_per_q", "Mean seconds per question spent in retriever calls.", better=LOWER),
    Column(
        "harness_s_per_q",
        "Mean seconds per question spent outside LM and retriever calls "
        "(wall time minus LM time minus retrieval time, floored at 0).",
        better=LOWER,
    ),
    Column(
        "harness_share",
        "Harness seconds divided by wall seconds, summed over all probes, 0-1; 0 when no time was recorded.",
        better=LOWER,
    ),
    order=100,
    per_probe=timing_row,
    needs=("lm_s", "retrieval_s", "harness_s", "latency_s"),
)
def timing(g: Group) -> dict[str, float]:
    """Means over every probe; the harness share is a ratio of sums."""
    return {
        "lm_s_per_q": g.mean("lm_s"),
        "retrieval_s_per_q": g.mean("retrieval_s"),
        "harness_s_per_q": g.mean("harness_s"),
        "harness_share": ratio(g.rows["harness_s"].sum(), g.rows["latency_s"].sum()),
    }
