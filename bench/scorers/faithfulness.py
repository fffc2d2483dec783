"""Faithfulness: the share of an answer's claims supported by the passages its strategy retrieved.

The per-probe values need the corpus (and, judged, a judge LM), so they are computed apart, by
:func:`flarebench.bench.faithfulness.faithfulness_rows`, and reach the scorer through
:attr:`Scoring.faithfulness <flarebench.bench.scorers.registry.Scoring>`; without them the columns are empty.
"""

from __future__ import annotations

from typing import Any

from flarebench.bench.faithfulness import summarize_faithfulness
from flarebench.bench.scorers.registry import HIGHER, LOWER, Column, Group, scorer


@scorer(
    Column(
        "faithfulness",
        "Mean share of an answer's claims (its sentences, and each item of its stated final answer) "
        "supported by the passages the strategy retrieved (union of all its retrievals), over probes that got a "
        "score, 0-1; empty for a strategy that retrieved nothing (see faithfulness_method).",
        better=HIGHER,
    ),
    Column(
        "faithfulness_n",
        "Number of answers the faithfulness mean was taken over (those with context, claims and, "
        "with a judge, a parsed verdict); 0 when faithfulness is empty.",
        better=HIGHER,
    ),
    Column(
        "faithfulness_method",
        "How faithfulness was scored: lexical-overlap (offline: a claim is supported when one "
        "sentence of one retrieved passage holds >= 90% of its content words and all its numbers), "
        "ragas-faithfulness:openai:MODEL (a judge LM), or n/a: no context.",
    ),
    Column(
        "judge_parse_failures",
        "Judge replies that could not be parsed (those probes are left out of faithfulness, "
        "never scored 0); 0 for the offline method.",
        better=LOWER,
    ),
    order=40,
)
def faithfulness(g: Group) -> dict[str, Any]:
    """:func:`flarebench.bench.faithfulness.summarize_faithfulness` over this strategy's probes; every
    column None for a strategy without faithfulness rows, and none at all without any rows."""
    rows = g.scoring.faithfulness
    if not rows:
        return {}
    keys = set(zip(g.rows["strategy"], g.rows["probe_id"]))
    mine = summarize_faithfulness({k: v for k, v in rows.items() if k in keys}).get(g.strategy, {})
    return {c: mine.get(c) for c in ("faithfulness", "faithfulness_n", "faithfulness_method", "judge_parse_failures")}
