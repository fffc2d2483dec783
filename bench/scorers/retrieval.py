"""Retrieval: how often generation retrieved, and how many retriever calls a question cost."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flarebench.bench.scorers.registry import LOWER, Column, Group, ratio, scorer
from flarebench.strategies.records import Trace


def retrieval_row(trace: Trace, probe: Any, row: Mapping[str, Any]) -> dict[str, int]:
    """``steps``, ``triggered_steps`` (steps that retrieved during generation) and ``retrievals``
    (every retriever call, the first hop included)."""
    return {
        "steps": len(trace.steps),
        "triggered_steps": sum(1 for s in trace.steps if s.triggered),
        "retrievals": len(trace.retrievals),
    }


@scorer(
    # Lower is cheaper; whether retrieving less also answers worse is what em and f1 gate.
    Column(
        "retrieval_rate",
        "Generation steps that triggered a retrieval (the first-hop retrieval with the "
        "question not counted) divided by generation steps, summed over all probes; 0 when there are no steps.",
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
)
def retrieval(g: Group) -> dict[str, float]:
    """The retrieval rate is a ratio of sums, not a mean of per-probe ratios: every generation step
    weighs the same."""
    return {
        "retrieval_rate": ratio(g.rows["triggered_steps"].sum(), g.rows["steps"].sum()),
        "retrievals_per_q": g.mean("retrievals"),
    }
