"""Retrieval: how often generation retrieved, and how many retriever calls a question cost."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from flarebench.bench.scorers.registry import LOWER, Column, Group, Scoring, probes_without, ratio, scorer, unreported
from flarebench.strategies.records import Trace

NAN = float("nan")


def retrieval_row(trace: Trace, probe: Any, row: Mapping[str, Any]) -> dict[str, float]:
    """``steps``, ``triggered_steps`` (steps that retrieved during generation) and ``retrievals``
    (every retriever call, the first hop included). A service under test (``http``) reports no
    generation steps (NaN), and its retrievals only when it lists them (NaN otherwise)."""
    if trace.service is not None:
        listed = trace.service.listed_retrievals
        return {"steps": NAN, "triggered_steps": NAN, "retrievals": len(trace.retrievals) if listed else NAN}
    return {
        "steps": len(trace.steps),
        "triggered_steps": sum(1 for s in trace.steps if s.triggered),
        "retrievals": len(trace.retrievals),
    }


#: The columns a service's traces leave missing, as it reports no generation steps (this scorer's and
#: the triggering scorer's), and as it may list no retrievals (this scorer's, the recall scorer's and
#: the faithfulness scorer's).
NO_STEPS = (
    "retrieval_rate",
    "triggered_share",
    "retrievals_when_triggered",
    "latency_p95_triggered_s",
    "latency_p95_untriggered_s",
)
NO_RETRIEVALS = ("retrievals_per_q", "recall_at_k", "recall", "faithfulness")


def unreported_retrieval(summary: pd.DataFrame, scoring: Scoring) -> list[str]:
    """A service reports no generation steps (so when it retrieved is unknown), and maybe no retrievals."""
    steps = "a service reports no generation steps, so whether a retrieval fired during generation is unknown"
    # Faithfulness that was not scored at all (no passages read) is missing for that reason instead.
    listed = NO_RETRIEVALS if scoring.faithfulness else tuple(c for c in NO_RETRIEVALS if c != "faithfulness")
    return unreported(summary, scoring, NO_STEPS, lambda g: steps) + unreported(summary, scoring, listed, unlisted)


def unlisted(g: Group) -> str | None:
    """Why a service's retrieval columns are missing: it listed no retrievals (on some probes)."""
    if not g.rows.loc[g.service, "retrievals"].isna().any():
        return None
    return f"the service reported no retrievals{probes_without(g, 'retrievals')}"


@scorer(
    # Lower is cheaper; whether retrieving less also answers worse is what em and f1 gate.
    Column(
        "retrieval_rate",
        "Generation steps that triggered a retrieval (the first-hop retrieval with the question not counted) "
        "divided by generation steps, summed over all probes, 0-1; empty when there are no steps. A step is the "
        "strategy's own unit (a sentence, a window, a turn: docs/metrics.md), so compare it within a strategy, and "
        "retrievals_per_q across strategies.",
        better=LOWER,
    ),
    Column(
        "retrievals_per_q",
        "Mean number of retriever calls per question, the first hop included.",
        better=LOWER,
        tolerance={"max_rise_rel": 0.10},
    ),
    order=60,
    per_probe=retrieval_row,
    needs=("steps", "triggered_steps", "retrievals"),
    findings=unreported_retrieval,
)
def retrieval(g: Group) -> dict[str, float]:
    """The retrieval rate is a ratio of sums, not a mean of per-probe ratios: every generation step
    weighs the same. Both are NaN where a service did not report what they count."""
    steps, triggered = g.rows["steps"].astype(float), g.rows["triggered_steps"].astype(float)
    unknown = steps.isna().any() or triggered.isna().any()
    return {
        "retrieval_rate": NAN if unknown else ratio(triggered.sum(), steps.sum()),
        "retrievals_per_q": g.mean_of_all("retrievals"),
    }
