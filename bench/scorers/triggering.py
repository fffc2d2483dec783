"""When active retrieval fires: on which share of questions, how often then, at what p95 latency,
and what the answers cost in tokens and money against the reference strategy on the same probes.
These are the rows of an adoption study's before/after table (single-shot retrieval against FLARE).

A question "triggered" when at least one generation step retrieved (the first-hop retrieval with
the question does not count, as in ``retrieval_rate``). A service under test (``http``) reports no
generation steps, so its triggering columns are missing, and so are its relative tokens where it
reported no usage and its relative cost (the retrieval and cost scorers' notes say so).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from flarebench.bench.scorers.registry import LOWER, Column, Group, scorer

_REL = "relative to the reference strategy (delta_reference) on the same probes: 0.38 is 38% more, -0.1 is 10% less"


def _tokens(g: Group) -> pd.Series:
    """Prompt tokens sent plus completion tokens, per probe."""
    return g.by_probe(g.rows["prompt_tokens"].astype(float) + g.rows["completion_tokens"].astype(float))


def _cost(g: Group) -> pd.Series | None:
    """USD per probe at the run's prices, or None when the model is not priced or a service answered
    (the price is the run's LM's, not the service's model's)."""
    price = g.scoring.price
    if price is None or g.service.any():
        return None
    rows = g.rows
    usd = [price.cost(p, c, r) for p, c, r in zip(rows["prompt_tokens"], rows["completion_tokens"], rows["retrievals"])]
    return g.by_probe(pd.Series(usd, index=rows.index))


def _relative(mine: pd.Series | None, theirs: pd.Series | None, probes: list[str]) -> float | None:
    """sum(mine) / sum(theirs) - 1 over ``probes`` both have; None when there is nothing to divide by,
    or when a value is missing on some of them (a service that did not report its tokens)."""
    if mine is None or theirs is None:
        return None
    common = [p for p in probes if p in theirs.index]
    if mine[common].isna().any() or theirs[common].isna().any():
        return None
    den = float(theirs[common].sum()) if common else 0.0
    return float(mine[common].sum()) / den - 1.0 if den else None


def _p95(latencies: pd.Series) -> float | None:
    return float(np.percentile(latencies.to_numpy(dtype=float), 95)) if len(latencies) else None


def fired(g: Group) -> pd.Series:
    """True on the rows whose question triggered: at least one generation step retrieved."""
    return g.rows["triggered_steps"].astype(float) > 0


@scorer(
    Column(
        "triggered_share",
        "Share of questions on which retrieval fired during generation at least once (the first-hop "
        "retrieval with the question not counted), 0-1.",
        better=LOWER,
    ),
    Column(
        "retrievals_when_triggered",
        "Mean number of generation steps that retrieved, over the questions where retrieval fired; "
        "empty when it never fired.",
        better=LOWER,
    ),
    Column(
        "latency_p95_triggered_s",
        "95th percentile of wall time per question over the questions where retrieval fired; empty when none.",
        better=LOWER,
    ),
    Column(
        "latency_p95_untriggered_s",
        "95th percentile of wall time per question over the questions where it did not; empty when none.",
        better=LOWER,
    ),
    Column(
        "tokens_rel_blended",
        f"Prompt tokens sent plus completion tokens over all probes, {_REL}; empty without the reference.",
        better=LOWER,
    ),
    Column(
        "tokens_rel_triggered",
        "As tokens_rel_blended, over the probes where this strategy's retrieval fired; empty when it never fired.",
        better=LOWER,
    ),
    Column(
        "cost_rel_blended",
        f"USD per question at the price table's prices (retrievals included) over all probes, {_REL}; "
        "empty when the model is not priced or the reference costs 0 (local models).",
        better=LOWER,
    ),
    Column(
        "cost_rel_triggered",
        "As cost_rel_blended, over the probes where this strategy's retrieval fired.",
        better=LOWER,
    ),
    order=115,
    needs=("probe_id", "triggered_steps", "latency_s", "prompt_tokens", "completion_tokens", "retrievals"),
)
def triggering(g: Group) -> dict[str, Any]:
    """Over the probes that finished, the reference's too: what a probe that raised used is unknown."""
    fired_rows = fired(g)
    latency = g.rows["latency_s"].astype(float)
    triggered_ids = list(dict.fromkeys(g.rows.loc[fired_rows, "probe_id"].astype(str)))
    all_ids = list(dict.fromkeys(g.rows["probe_id"].astype(str)))
    reference = g.scoring.reference
    ref = Group(reference, g.scoring.groups[reference], g.scoring).finished if reference in g.scoring.groups else None
    tokens, ref_tokens = _tokens(g), _tokens(ref) if ref is not None else None
    cost, ref_cost = _cost(g), _cost(ref) if ref is not None else None
    if g.rows["triggered_steps"].isna().any():  # a service under test: where it retrieved is unknown
        return {
            "tokens_rel_blended": _relative(tokens, ref_tokens, all_ids),
            "cost_rel_blended": _relative(cost, ref_cost, all_ids),
        }
    return {
        "triggered_share": float(fired_rows.mean()) if len(fired_rows) else None,
        "retrievals_when_triggered": (
            float(g.rows.loc[fired_rows, "triggered_steps"].mean()) if fired_rows.any() else None
        ),
        "latency_p95_triggered_s": _p95(latency[fired_rows]),
        "latency_p95_untriggered_s": _p95(latency[~fired_rows]),
        "tokens_rel_blended": _relative(tokens, ref_tokens, all_ids),
        "tokens_rel_triggered": _relative(tokens, ref_tokens, triggered_ids) if triggered_ids else None,
        "cost_rel_blended": _relative(cost, ref_cost, all_ids),
        "cost_rel_triggered": _relative(cost, ref_cost, triggered_ids) if triggered_ids else None,
    }
