"""Long answers: whether the whole output of a long probe (``answer_type`` ``long``) states its
required facts, and whether it states a wrong value of one (see
:func:`flarebench.bench.answers.fact_check`).

Every column is optional (:attr:`flarebench.bench.scorers.registry.Column.optional`): a run without
long probes has none of them, so its summary keeps exactly the columns it had before they existed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from flarebench.bench.answers import fact_check, long_answer_text
from flarebench.bench.scorers.registry import HIGHER, LOWER, Column, Group, Scoring, scorer
from flarebench.strategies.records import Trace


def facts_row(trace: Trace, probe: Any, row: Mapping[str, Any]) -> dict[str, Any]:
    """For a long probe only (other probes get nothing): ``facts_total``, ``facts_found`` (required
    facts whose value, any alias, the output states, its search calls and question echoes left out:
    :func:`flarebench.bench.answers.long_answer_text`), ``facts_missing`` (the ids of the others,
    comma-separated, "" when none) and ``facts_wrong`` (the ids of the facts a wrong value of which
    it states). A probe that raised states nothing."""
    if getattr(probe, "answer_type", None) != "long":
        return {}
    facts = list(getattr(probe, "required_facts", None) or [])
    if row["error"] is None:
        found, wrong = fact_check(long_answer_text(trace.output, getattr(probe, "question", trace.question)), probe)
    else:
        found, wrong = [False] * len(facts), [False] * len(facts)
    return {
        "facts_total": len(facts),
        "facts_found": sum(found),
        "facts_missing": ",".join(f.id for f, ok in zip(facts, found, strict=True) if not ok),
        "facts_wrong": ",".join(f.id for f, bad in zip(facts, wrong, strict=True) if bad),
    }


def long_rows(rows: pd.DataFrame) -> pd.Series:
    """True on the per-probe rows of long probes."""
    if "facts_total" not in rows:
        return pd.Series(False, index=rows.index)
    return rows["facts_total"].notna()


def answer_quality(rows: pd.DataFrame) -> pd.Series:
    """How good each per-probe row's answer is, for the confidence gate's AUROC: ``em`` (right 1,
    wrong 0), and on a long probe ``f1``, the share of its required facts the answer states."""
    em, long = pd.to_numeric(rows["em"], errors="coerce"), long_rows(rows)
    return em.where(~long, pd.to_numeric(rows["f1"], errors="coerce")) if long.any() else em


def fact_flags(g: Group) -> tuple[pd.Series, pd.Series]:
    """On the rows of the long probes only: whether each output misses a required fact, and whether
    it states a wrong value of one (both False for a probe that raised)."""
    long = long_rows(g.rows)
    rows, failed = g.rows[long], g.failed[long]
    missing = (rows["facts_missing"].fillna("") != "") & ~failed
    wrong = (rows["facts_wrong"].fillna("") != "") & ~failed
    return missing, wrong


def _note(summary: pd.DataFrame, scoring: Scoring) -> list[str]:
    """One line when the run has long probes: which definition of incomplete_rate its rows use."""
    for rows in scoring.groups.values():
        long = int(long_rows(rows).sum())
        if long:
            return [
                f"incomplete_rate: {long} of {len(rows)} probes are long answers, counted incomplete when they "
                "miss a required fact (incomplete_facts_rate); of the five incomplete_ reasons only token_cap "
                "counts long answers (those the cap cut before they stated every fact), so incomplete_rate is "
                "their sum plus the other long answers missing a fact"
            ]
    return []


@scorer(
    Column(
        "fact_recall",
        "Long probes only: mean over the long probes of the share of required facts whose value (any "
        "alias, normalised as em normalises, matched as whole words, a dot between digits kept so "
        "that 4.1 is not found in 4.12.0) the output states (search calls and sentences echoing the "
        "question left out), 0-1; a probe that raised counts 0. "
        "Left out of runs without long probes. For long probes em is 1 when every fact and no wrong "
        "value is stated, and f1 is this share.",
        better=HIGHER,
        optional=True,
    ),
    Column(
        "incomplete_facts_rate",
        "Long probes only: share of the long probes whose output misses at least one required fact, "
        "0-1; an errored probe counts among the long probes but never as missing a fact (see errors), and it is "
        "empty when every long probe raised. "
        "This is incomplete_rate's definition for "
        "long probes: incomplete_rate adds these probes to the short probes without a final-answer "
        "statement (the run's notes say when it does).",
        better=LOWER,
        optional=True,
    ),
    Column(
        "wrong_version_rate",
        "Long probes only: share of the long probes whose output states a wrong value of some "
        "required fact (one of its wrong_values: an older release, the staging value, a relative's "
        "name), whether or not the right value is stated too, 0-1; empty when every long probe raised.",
        better=LOWER,
        optional=True,
    ),
    Column(
        "incomplete_or_wrong_rate",
        "Long probes only: share of the long probes whose output misses a required fact or states "
        "a wrong value (either of the two columns before), 0-1; an errored probe counts among the long probes "
        "but in neither (see errors); empty when every long probe raised.",
        better=LOWER,
        optional=True,
    ),
    order=45,
    scores_errors=True,
    per_probe=facts_row,
    findings=_note,
)
def facts(g: Group) -> dict[str, float]:
    """Over the long probes only; every column NaN (and so left out) when there are none."""
    long = long_rows(g.rows)
    if not long.any():
        return {}
    rows, failed = g.rows[long], g.failed[long]
    recall = (rows["facts_found"].astype(float) / rows["facts_total"].astype(float)).where(~failed, 0.0)
    if failed.all():  # no output to judge: empty, not rates of 0 that read as none incomplete or wrong
        return {"fact_recall": float(recall.mean())}
    missing, wrong = fact_flags(g)
    n = len(rows)
    return {
        "fact_recall": float(recall.mean()),
        "incomplete_facts_rate": float(missing.sum()) / n,
        "wrong_version_rate": float(wrong.sum()) / n,
        "incomplete_or_wrong_rate": float((missing | wrong).sum()) / n,
    }
