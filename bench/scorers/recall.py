"""Retrieval quality: the share of a probe's gold documents that its retrievals found."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from flarebench.bench.scorers.registry import HIGHER, Column, Group, scorer
from flarebench.strategies.records import Trace

_DOC = (
    "Mean share of a probe's gold documents found among all documents retrieved while answering "
    "it (the union of every retrieval, first hop included; each retrieval returns k documents), 0-1; "
    "probes without gold documents are left out (empty if none has any)."
)


def recall_row(trace: Trace, probe: Any, row: Mapping[str, Any]) -> dict[str, float | None]:
    """``recall``: the share of the probe's gold doc ids in the union of every retrieval's doc ids;
    None when the probe has no gold docs, 0.0 when it has some but nothing was retrieved, None
    when a service under test (``http``) did not list its retrievals (the summary is then missing)."""
    gold = set(getattr(probe, "gold_doc_ids", None) or [])
    if not gold or (trace.service is not None and not trace.service.listed_retrievals):
        return {"recall": None}
    retrieved = {d for r in trace.retrievals for d in r.doc_ids}
    return {"recall": len(gold & retrieved) / len(gold)}


@scorer(
    Column("recall", _DOC + " Same value as recall_at_k (kept for baselines that name it).", better=HIGHER),
    Column("recall_at_k", _DOC, better=HIGHER),
    order=30,
    per_probe=recall_row,
    needs=("recall",),
)
def recall(g: Group) -> dict[str, float]:
    """The mean over the probes that have gold documents; NaN when none has, and when a service
    did not list its retrievals (the retrieval scorer's ``retrievals`` NaN on some probe; its notes
    say so)."""
    values = pd.to_numeric(g.rows["recall"], errors="coerce")
    unknown = "retrievals" in g.rows and g.rows.loc[g.service, "retrievals"].isna().any()
    mean = float(values.mean()) if values.notna().any() and not unknown else float("nan")
    return {"recall": mean, "recall_at_k": mean}
