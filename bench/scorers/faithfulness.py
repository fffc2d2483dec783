"""Faithfulness: the share of an answer's claims supported by the passages its strategy retrieved.

The per-probe values need the corpus (and, judged, a judge LM), so they are computed apart, by
:func:`flarebench.bench.faithfulness.faithfulness_rows`, and reach the scorer through
:attr:`Scoring.faithfulness <flarebench.bench.scorers.registry.Scoring>`; without them the columns are empty.
"""

from __future__ import annotations

from typing import Any

from flarebench.bench.agreement import OFFLINE_TEST
from flarebench.bench.faithfulness import LEXICAL_METHOD, NOT_JUDGED, UNREPORTED, summarize_faithfulness
from flarebench.bench.scorers.registry import HIGHER, LOWER, Column, Group, Scoring, scorer


def method_note(scoring: Scoring) -> str:
    """Which faithfulness method scored the run, and how far to trust it: the offline method's
    measured agreement with the labelled claims, or how to measure a judge's ("" when not scored)."""
    rows = scoring.faithfulness or {}
    unjudged = [r["faithfulness_method"] for r in rows.values() if r["faithfulness_method"].startswith(NOT_JUDGED)]
    if unjudged:
        return (
            f"faithfulness: {len(unjudged)} answers {unjudged[0].removeprefix('n/a: ')}, so the strategies with one "
            "have no faithfulness: flarebench score RUN_DIR judges them (--judge none: the offline method)"
        )
    methods = sorted({r["faithfulness_method"] for r in rows.values()} - {LEXICAL_METHOD})
    judged = [m for m in methods if not m.startswith("n/a")]
    offline = f"{OFFLINE_TEST.line()} (flarebench agreement)"
    if judged:
        asked = [r for r in rows.values() if r["faithfulness_method"] in judged]
        failed = sum(1 for r in asked if r["judge_parse_failures"] and r["faithfulness"] is None)
        unparsed = (
            f"; {failed} of {len(asked)} judged answers got no verdict that parsed (left out; a small local judge "
            "may need JUDGE_JSON_MODE=json_schema)"
            if failed
            else ""
        )
        return (
            f"faithfulness: {', '.join(judged)}: a judge LM; its agreement with the labelled claims is not measured "
            f"by a run: flarebench agreement --judge {judged[0].split(':', 1)[1]} measures it (the offline method, "
            f"for comparison: {offline}){unparsed}"
        )
    if not rows:
        return ""  # not scored: the columns are empty and need no note
    return f"faithfulness: {offline}; a judged figure: flarebench score RUN_DIR --judge openai:MODEL"


@scorer(
    Column(
        "faithfulness",
        "Mean share of an answer's claims (its sentences, those that only echo the question left out, and each item "
        "of its stated final answer) "
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
        "How faithfulness was scored: lexical-slots (offline: a claim is supported when one retrieved "
        "passage sentence, or a few adjacent ones, holds all its numbers, versions, ids and names, attached "
        "as the claim attaches them, and most of its other words; its measured agreement is in the notes), "
        "ragas-faithfulness:openai:MODEL (a judge LM), or n/a: no context (or n/a: doc ids not in the "
        "corpus, for a retriever or a service under test that returned ids the probe set's corpus lacks; "
        "for a service under test, n/a: retrievals not reported; n/a: not judged when a run's judge failed or "
        "the run was stopped before it judged them, which flarebench score RUN_DIR judges).",
    ),
    Column(
        "judge_parse_failures",
        "Judge replies that could not be parsed (those probes are left out of faithfulness, "
        "never scored 0); 0 for the offline method.",
        better=LOWER,
    ),
    order=40,
    scores_errors=True,
    settings=method_note,
)
def faithfulness(g: Group) -> dict[str, Any]:
    """:func:`flarebench.bench.faithfulness.summarize_faithfulness` over this strategy's probes; every
    column None for a strategy without faithfulness rows, and none at all without any rows."""
    rows = g.scoring.faithfulness
    if not rows:
        return {}
    keys = set(zip(g.rows["strategy"], g.rows["probe_id"]))
    mine = dict(summarize_faithfulness({k: v for k, v in rows.items() if k in keys}).get(g.strategy, {}))
    if any(rows[k]["faithfulness_method"] == UNREPORTED for k in keys if k in rows):
        # A service that listed no retrievals on some answers: a mean over the others would pass for
        # the whole set's (the retrieval scorer's notes say which answers lacked them).
        mine["faithfulness"] = None
    return {c: mine.get(c) for c in ("faithfulness", "faithfulness_n", "faithfulness_method", "judge_parse_failures")}
