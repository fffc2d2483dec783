"""Retrieval quality: the share of a probe's gold documents that its retrievals found."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from flarebench.bench.faithfulness import FOREIGN_DOCS
from flarebench.bench.scorers.registry import HIGHER, Column, Group, Scoring, scorer
from flarebench.strategies.records import Trace

_DOC = (
    "Mean share of a probe's gold documents found among all documents retrieved while answering "
    "it (the union of every retrieval, first hop included; each retrieval returns k documents), 0-1; "
    "probes without gold documents are left out (empty if none has any)."
)


_PER_QUERY = (
    "Each query's recall is the share of the probe's gold documents among the k it returned; "
    "probes without gold documents are left out (empty if none is left)."
)


def recall_row(trace: Trace, probe: Any, row: Mapping[str, Any]) -> dict[str, float | None]:
    """``recall``: the share of the probe's gold doc ids in the union of every retrieval's doc ids;
    None when the probe has no gold docs, 0.0 when it has some but nothing was retrieved, None
    when a service under test (``http``) did not list its retrievals (the summary is then missing).
    ``recall_first_hop``: the first-hop query's recall (None without a first hop);
    ``recall_later_hops``: the mean recall of the queries made while generating (None without one)."""
    gold = set(getattr(probe, "gold_doc_ids", None) or [])
    if not gold or (trace.service is not None and not trace.service.listed_retrievals):
        return dict.fromkeys(("recall", "recall_first_hop", "recall_later_hops"))
    retrieved = {d for r in trace.retrievals for d in r.doc_ids}
    first = [len(gold & set(r.doc_ids)) / len(gold) for r in trace.retrievals if r.first_hop]
    later = [len(gold & set(r.doc_ids)) / len(gold) for r in trace.retrievals if not r.first_hop]
    return {
        "recall": len(gold & retrieved) / len(gold),
        "recall_first_hop": first[0] if first else None,
        "recall_later_hops": sum(later) / len(later) if later else None,
    }


def _foreign(g: Group) -> int:
    """How many of the group's probes retrieved a doc id the probe set's corpus lacks (a service or a
    plugin's retriever under other ids): whether their gold documents were found is unknown."""
    rows = g.scoring.faithfulness or {}
    ids = g.rows["probe_id"] if "probe_id" in g.rows else ()
    return sum((rows.get((g.strategy, p)) or {}).get("faithfulness_method") == FOREIGN_DOCS for p in ids)


def foreign_ids(summary: pd.DataFrame, scoring: Scoring) -> list[str]:
    """Why a strategy's recall is missing when its retrievals named documents outside the corpus."""
    lines = []
    for strategy, rows in scoring.groups.items():
        group = Group(strategy, rows, scoring).finished
        if n := _foreign(group):
            lines.append(
                f"recall, recall_at_k, recall_first_hop, recall_later_hops: missing for {strategy}: "
                f"{n} of its {len(group.rows)} answers retrieved doc ids the probe set's corpus lacks"
            )
    return lines


@scorer(
    Column("recall", _DOC + " Same value as recall_at_k (kept for baselines that name it).", better=HIGHER),
    Column("recall_at_k", _DOC, better=HIGHER),
    Column(
        "recall_first_hop",
        "Mean recall, 0-1, of the first-hop query (the question, before generating) over the probes that made one. "
        + _PER_QUERY,
        better=HIGHER,
    ),
    Column(
        "recall_later_hops",
        "Mean recall, 0-1, of the queries made while generating (every retrieval but the first hop; per probe, "
        "the mean over its queries), over the probes that made one. " + _PER_QUERY,
        better=HIGHER,
    ),
    order=30,
    per_probe=recall_row,
    needs=("recall",),
    findings=foreign_ids,
)
def recall(g: Group) -> dict[str, float]:
    """The mean over the probes that have gold documents; NaN when none has, and when a service
    did not list its retrievals (the retrieval scorer's ``retrievals`` NaN on some probe; its notes
    say so), and when some probe retrieved doc ids the corpus lacks (its gold documents may be among
    them under other ids)."""
    unknown = ("retrievals" in g.rows and g.rows.loc[g.service, "retrievals"].isna().any()) or bool(_foreign(g))

    def mean(column: str) -> float:
        # Rows scored before a column existed have none: missing, never 0.
        values = pd.to_numeric(g.rows[column], errors="coerce") if column in g.rows else pd.Series(dtype=float)
        return float(values.mean()) if values.notna().any() and not unknown else float("nan")

    return {
        "recall": mean("recall"),
        "recall_at_k": mean("recall"),
        "recall_first_hop": mean("recall_first_hop"),
        "recall_later_hops": mean("recall_later_hops"),
    }
