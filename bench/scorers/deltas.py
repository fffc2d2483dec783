"""Deltas: each strategy's em and f1 minus the reference strategy's, paired by probe, with a 95%
paired-bootstrap interval (:mod:`flarebench.bench.uncertainty`)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from flarebench.bench.scorers.registry import HIGHER, Column, Group, Scoring, scorer
from flarebench.bench.uncertainty import Delta, Statistic, paired_bootstrap

_METRICS = ("em", "f1")
_DOC = "{m} of this strategy minus {m} of the reference strategy (`delta_reference`), over the probes both answered"


def reference_note(scoring: Scoring) -> str:
    """What the delta columns compare with, or why they are empty."""
    if scoring.reference in scoring.groups:
        return (
            f"delta columns: each strategy minus {scoring.reference}, paired bootstrap over the probes both "
            "answered, 95% interval, 10,000 resamples, seed 0"
        )
    if scoring.reference in scoring.pending:
        return f"delta columns: empty: the reference strategy {scoring.reference} has not run yet"
    return f"delta columns: empty: the reference strategy {scoring.reference} is not in this run (--reference SPEC)"


def paired(mine: pd.Series, theirs: pd.Series, statistic: Statistic | None = None) -> Delta:
    """``mine`` minus ``theirs`` (values indexed by probe id, as :meth:`Group.by_probe` gives them) over
    the probes both have, in the reference's order, with its 95% paired-bootstrap interval
    (:func:`flarebench.bench.uncertainty.paired_bootstrap`: the mean difference, or the difference of
    ``statistic``)."""
    common = [p for p in theirs.index if p in mine.index]
    return paired_bootstrap(mine[common].to_numpy(), theirs[common].to_numpy(), statistic=statistic)


@scorer(
    Column(
        "delta_reference",
        "The reference strategy of the delta columns (--reference, default single_time); "
        "empty when it is not in the run (the delta columns are then empty too).",
    ),
    Column("em_delta", _DOC.format(m="em") + " (the mean of the paired per-probe differences).", better=HIGHER),
    Column(
        "em_delta_lo",
        "Lower end of the 95% paired-bootstrap interval of em_delta: probes resampled together "
        "for both strategies, 10,000 resamples, numpy default_rng(0), 2.5th percentile.",
        better=HIGHER,
    ),
    Column("em_delta_hi", "Upper end of that interval (97.5th percentile).", better=HIGHER),
    Column("em_delta_sig", "True where the 95% interval of em_delta excludes 0 (never on one probe)."),
    Column("f1_delta", _DOC.format(m="f1") + ".", better=HIGHER),
    Column(
        "f1_delta_lo", "Lower end of the 95% paired-bootstrap interval of f1_delta (as em_delta_lo).", better=HIGHER
    ),
    Column("f1_delta_hi", "Upper end of that interval.", better=HIGHER),
    Column("f1_delta_sig", "True where the 95% interval of f1_delta excludes 0 (never on one probe)."),
    order=120,
    scores_errors=True,
    needs=_METRICS,
    settings=reference_note,
)
def deltas(g: Group) -> dict[str, Any]:
    """Over the probes both strategies answered; every column None when the reference did not run."""
    reference = g.scoring.reference
    if reference not in g.scoring.groups:
        return {c.name: None for c in deltas.columns}
    ref = Group(reference, g.scoring.groups[reference], g.scoring)
    out: dict[str, Any] = {"delta_reference": reference}
    for metric in _METRICS:
        d = paired(g.by_probe(g.scores(metric)), ref.by_probe(ref.scores(metric)))  # errors as 0
        out.update(
            {
                f"{metric}_delta": d.delta,
                f"{metric}_delta_lo": d.lo,
                f"{metric}_delta_hi": d.hi,
                f"{metric}_delta_sig": d.significant if d.n else None,
            }
        )
    return out
