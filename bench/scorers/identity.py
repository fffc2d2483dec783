"""Which strategy a summary row is, how many probes it scored and how many of them raised."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from flarebench.bench.scorers.registry import HIGHER, LOWER, Column, Group, Scoring, scorer
from flarebench.strategies.records import Trace


def identity_row(trace: Trace, probe: Any, row: Mapping[str, Any]) -> dict[str, bool]:
    """``service``: whether the trace came from a service under test (``http``), whose row holds
    NaN, never 0, where the service did not report a quantity (the scorers after this one)."""
    return {"service": trace.service is not None}


def errored(summary: pd.DataFrame, scoring: Scoring) -> list[str]:
    """One line per strategy with probes that raised: how many, the first error, and what that
    does to its row (the reference's line says so, as every delta then rests on it)."""
    lines = []
    for _, row in summary.iterrows():
        rows = scoring.groups.get(row["strategy"])
        if rows is None or not (failed := Group(row["strategy"], rows, scoring).failed).any():
            continue
        first = str(rows.loc[failed, "error"].iloc[0]).splitlines()[0]
        every = "every probe" if failed.all() else f"{int(failed.sum())} of {len(rows)} probes"
        rest = "columns are empty" if failed.all() else f"columns average the {int((~failed).sum())} that finished"
        reference = row["strategy"] == scoring.reference
        role = " (the delta reference: the deltas compare with 0 on these probes)" if reference else ""
        lines.append(
            f"{row['strategy']}: {every} raised an error{role}, first: {first}; they score 0 in em and f1, "
            f"and its cost, token, retrieval, recall and latency {rest}"
        )
    return lines


@scorer(
    Column(
        "strategy",
        "The strategy spec as typed (name or name:key=value,...); two settings of one strategy are two rows.",
    ),
    # Fewer probes scored, or more that raised, make every other number incomparable with the
    # baseline's (an average over fewer probes can pass every bound): gated even when not named.
    Column(
        "n",
        "Number of probes scored for this strategy.",
        better=HIGHER,
        tolerance={"max_drop": 0},
        always_gated=True,
    ),
    Column(
        "errors",
        "Number of probes whose run raised an error; they are scored 0 for EM and F1, are not "
        "counted as incomplete answers, and are left out of the cost, token, retrieval, recall and "
        "latency columns (what they used before they raised is unknown).",
        better=LOWER,
        tolerance={"max_rise": 0},
        always_gated=True,
    ),
    order=10,
    scores_errors=True,
    per_probe=identity_row,
    findings=errored,
)
def identity(g: Group) -> dict[str, Any]:
    """The spec, the probes scored and the probes that raised."""
    return {"strategy": g.strategy, "n": len(g.rows), "errors": int(g.failed.sum())}
