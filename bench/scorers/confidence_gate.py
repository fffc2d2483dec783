"""Is FLARE's confidence gate informative? What the gate judged against whether the answer turned
out right (the measures are :mod:`flarebench.bench.confidence`'s)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from flarebench.bench.confidence import gate_record, gate_summary
from flarebench.bench.scorers.facts import answer_quality, long_rows
from flarebench.bench.scorers.registry import HIGHER, LOWER, Column, Group, Scoring, scorer
from flarebench.strategies.records import Trace
from flarebench.strategies.triggers import fires_high


def gate_row(trace: Trace, probe: Any, row: Mapping[str, Any]) -> dict[str, Any]:
    """``gate_score``, ``gate_fired``, ``gate_threshold`` and ``gate_trigger``: what the gate judged
    over the answer (:func:`flarebench.bench.confidence.gate_record`); None for strategies without
    a gate."""
    gate = gate_record(trace)
    return {
        "gate_score": gate.score if gate else None,
        "gate_fired": gate.fired if gate else None,
        "gate_threshold": gate.threshold if gate else None,
        "gate_trigger": gate.trigger if gate else None,
        # Judgements with no score (a self_check reply naming no verdict): they never fire.
        "gate_unparsed": sum(1 for s in trace.steps if s.gate and s.gate.get("unparsed")),
        # Firings a cap on retrievals (max_retrievals) kept from retrieving.
        "gate_capped": sum(1 for s in trace.steps if s.gate and s.gate.get("skipped") == "retrieval_cap"),
    }


def _has_drafts(rows: pd.DataFrame) -> bool:
    return "gate_score" in rows and pd.to_numeric(rows["gate_score"], errors="coerce").notna().any()


def _trigger(rows: pd.DataFrame) -> str | None:
    """The one trigger the rows' gate records name, or None (none named, or several)."""
    names = rows["gate_trigger"].dropna().unique() if "gate_trigger" in rows else []
    return str(names[0]) if len(names) == 1 else None


def _total(rows: pd.DataFrame, column: str) -> int:
    """The sum of a per-probe count (0 for rows scored before the column existed)."""
    return int(pd.to_numeric(rows[column], errors="coerce").sum()) if column in rows else 0


def gate_notes(summary: pd.DataFrame, scoring: Scoring) -> list[str]:
    """Per strategy with a gate: an undefined or low AUROC, and a gate that fires on nearly everything."""
    notes = []
    for _, row in summary.iterrows():
        rows = scoring.groups[row["strategy"]]
        if unparsed := _total(rows, "gate_unparsed"):
            notes.append(
                f"gate of {row['strategy']}: {unparsed} judgement(s) had no score (the check's reply named no "
                "verdict) and did not fire"
                + ("" if _has_drafts(rows) else "; none had one, so the gate never fired and its columns are empty")
            )
        if not _has_drafts(rows):
            continue
        trigger = _trigger(rows)
        low, threshold = (
            ("a low draft probability", "this theta")
            if trigger in (None, "min_prob")
            else ("low draft confidence", f"this {trigger} threshold")
        )
        if pd.isna(row["gate_auroc"]):
            alike = "all state the same share of facts" if long_rows(rows).any() else "are all right or all wrong"
            notes.append(f"gate_auroc of {row['strategy']}: undefined: its answers with drafts {alike}")
        elif row["gate_auroc"] < 0.6:
            notes.append(
                f"gate of {row['strategy']}: AUROC {row['gate_auroc']:.2f}: {low} barely "
                "(or inversely) marks wrong answers on this model and probe set"
            )
        if row["gate_fire_right"] >= 0.9 and row["gate_fire_wrong"] >= 0.9:
            capped = _total(rows, "gate_capped")
            notes.append(
                f"gate of {row['strategy']}: fired on {row['gate_fire_right']:.0%} of right and "
                f"{row['gate_fire_wrong']:.0%} of wrong answers: at {threshold} it "
                + (
                    f"fires on nearly everything, and its cap on retrievals kept {capped} firing(s) from retrieving "
                    f"(retrieval_rate {float(row['retrieval_rate']):.2f})"
                    if capped
                    else "retrieves for nearly everything"
                )
            )
    return notes


@scorer(
    Column(
        "gate_auroc",
        "Is the confidence gate informative? Over answers whose steps a confidence gate judged "
        "(flare_direct's drafted sentences, adaptive's whole draft), the AUROC of the answer's least confident gate "
        "score (for the default trigger min_prob, the lowest token probability of its drafts, as recorded in each "
        "step) for telling right answers "
        "(em 1) from wrong ones (em 0): the chance that a random right answer is judged more confident than a random "
        "wrong one (a higher score; a lower one for triggers that fire high, entropy and self_check), ties 1/2. "
        "0-1: 1 = informative, 0.5 = chance, below 0.5 = inverted. A long answer is graded by its share of required "
        "facts (its f1): over pairs of answers of different shares, the chance that the one stating more is judged "
        "more confident (the concordance index; with em alone a small model's long answers, nearly never complete, "
        "would leave one class). Empty for strategies without a gate and when no two such answers differ (all right "
        "or all wrong; undefined, not 0.5).",
        better=HIGHER,
    ),
    Column(
        "gate_fire_right",
        "Share of right answers (em 1), 0-1, on which the gate fired at least once (a step's recorded "
        "score at or below the threshold the step recorded, at or above it for triggers that fire high); "
        "empty without a gate or right answers.",
        better=LOWER,
    ),
    Column(
        "gate_fire_wrong",
        "Share of wrong answers (em 0), 0-1, on which the gate fired at least once; a useful gate fires "
        "far more often here than on right answers.",
        better=HIGHER,
    ),
    order=110,
    per_probe=gate_row,
    needs=("em", "f1"),
    findings=gate_notes,
)
def confidence_gate(g: Group) -> dict[str, float]:
    """Over the answers with a gate record, probes that raised left out; NaN where undefined."""
    rows = g.rows
    # Rows made before the gate columns existed: no gate.
    if "gate_score" in rows:
        score = pd.to_numeric(rows["gate_score"], errors="coerce")
    else:
        score = pd.Series(np.nan, index=rows.index)
    usable = score.notna() & ~g.failed
    fired = rows["gate_fired"] if "gate_fired" in rows else pd.Series(None, index=rows.index)
    # Triggers that fire high (entropy, self_check): a higher score is less confident.
    high = rows["gate_trigger"].map(fires_high) if "gate_trigger" in rows else pd.Series(False, index=rows.index)
    columns = (score, fired, g.scores("em"), high, answer_quality(g.rows))
    return gate_summary(*(list(column[usable]) for column in columns))
