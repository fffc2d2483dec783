"""Where the time went: seconds per question in LM calls, in retriever calls, and in the harness."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from flarebench.bench.scorers.registry import LOWER, Column, Group, Scoring, ratio, scorer, unreported
from flarebench.strategies.records import Trace

NAN = float("nan")


def timing_row(trace: Trace, probe: Any, row: Mapping[str, Any]) -> dict[str, float]:
    """``lm_s`` and ``retrieval_s`` (as the LM and the retriever timed their calls) and ``harness_s``:
    what the runner spent outside them (prompting, parsing, caching). NaN for a service under test
    (``http``): flarebench times it end to end only (``latency_s``). ``decode_tokens`` and
    ``decode_s``: the tokens after each call's first and the seconds after its prefill, over the
    calls that recorded their prefill (the in-process model's, not served from the cache)."""
    if trace.service is not None:
        return {"lm_s": NAN, "retrieval_s": NAN, "harness_s": NAN, "decode_tokens": NAN, "decode_s": NAN}
    lm_s = float(sum(c.seconds for c in trace.lm_calls))
    retrieval_s = float(sum(r.seconds for r in trace.retrievals))
    timed = [c for c in trace.lm_calls if c.prefill_seconds is not None and not c.cached and c.completion_tokens > 1]
    return {
        "lm_s": lm_s,
        "retrieval_s": retrieval_s,
        # Clamped at 0: timer granularity can make the parts sum slightly above the wall time.
        "harness_s": max(0.0, row["latency_s"] - lm_s - retrieval_s),
        "decode_tokens": float(sum(c.completion_tokens - 1 for c in timed)),
        "decode_s": float(sum(max(0.0, c.seconds - c.prefill_seconds) for c in timed)),
    }


#: Decode speeds of one model's strategies further apart than this are not the model's doing.
UNEVEN_DECODE = 3.0
#: Decode time a strategy needs (seconds, over its probes) before its speed is compared.
MIN_DECODE_S = 1.0


def unreported_time(summary: pd.DataFrame, scoring: Scoring) -> list[str]:
    """A service is timed end to end only; and one model decoding far slower for one strategy than
    for another was slowed by something else (another process on the CPUs)."""
    columns = ("lm_s_per_q", "retrieval_s_per_q", "harness_s_per_q", "harness_share")
    why = "a service is timed end to end only (latency_p50_s, latency_p95_s): where its time went is unknown"
    return unreported(summary, scoring, columns, lambda g: why) + uneven_decode(scoring)


def uneven_decode(scoring: Scoring) -> list[str]:
    """A line when the model decoded one strategy's tokens over :data:`UNEVEN_DECODE` times slower
    than another's: the same model decodes at about one speed (a longer prompt slows it, not 3-fold),
    so the slower strategy's latency was most likely inflated by a busy machine."""
    speeds = {}
    for spec, rows in scoring.groups.items():
        done = rows[~Group(spec, rows, scoring).failed]
        if "decode_s" in done and done["decode_s"].sum() >= MIN_DECODE_S:
            speeds[spec] = done["decode_tokens"].sum() / done["decode_s"].sum()
    if len(speeds) < 2:
        return []
    slow, fast = min(speeds, key=speeds.get), max(speeds, key=speeds.get)
    if speeds[fast] <= UNEVEN_DECODE * speeds[slow]:
        return []
    return [
        f"the model decoded {slow} at {speeds[slow]:.0f} tokens/s and {fast} at {speeds[fast]:.0f}: one model "
        "decodes at about one speed, so something else slowed it while the slower ran (another process on the "
        f"CPUs?), and {slow}'s latency columns overstate its cost: run it again alone"
    ]


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
        "Harness seconds divided by wall seconds, summed over all probes, 0-1; empty when no time was recorded.",
        better=LOWER,
    ),
    order=100,
    per_probe=timing_row,
    needs=("lm_s", "retrieval_s", "harness_s", "latency_s"),
    findings=unreported_time,
)
def timing(g: Group) -> dict[str, float]:
    """Means over the probes; the harness share is a ratio of sums. NaN for a service under test."""
    harness = g.rows["harness_s"].astype(float)
    return {
        "lm_s_per_q": g.mean_of_all("lm_s"),
        "retrieval_s_per_q": g.mean_of_all("retrieval_s"),
        "harness_s_per_q": g.mean_of_all("harness_s"),
        "harness_share": NAN if harness.isna().any() else ratio(harness.sum(), g.rows["latency_s"].sum()),
    }
