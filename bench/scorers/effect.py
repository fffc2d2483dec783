"""Bounds and per-probe effect: which rows are the never and always bounds of a comparison, how much
of the headroom between never and the per-probe oracle each strategy captures, and on how many
probes it helped, harmed or left unchanged the reference's answer.

The bound specs, the oracle and the oracle row are defined in :mod:`flarebench.bench.bounds`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from flarebench.bench.bounds import (
    ALWAYS,
    ALWAYS_SPEC,
    BOUND,
    NEVER,
    NEVER_SPEC,
    bound_specs,
    common_probes,
    oracle_scores,
    per_probe,
)
from flarebench.bench.scorers.registry import HIGHER, LOWER, Column, Group, Scoring, scorer

#: Two f1 values closer than this are equal (the same answer scores the same; this absorbs float
#: rounding between two answers of equal f1 computed from different counts).
EQUAL = 1e-9
#: The quality headroom_captured is measured in.
QUALITY = "f1"


@scorer(
    Column(
        BOUND,
        "never, always or oracle on the bound rows, empty on every other row. never: the run's "
        "no_retrieval spec (no retrieval at all); always: its flare_direct spec whose trigger fires on "
        "every drafted sentence (theta 1: a token with p <= 1 is always there), retrieval_rate 1; "
        "`flarebench compare` adds both unless its specs hold them or --no-bounds is given. oracle, a comparison's "
        "last row, is "
        "no strategy: per probe the best em and f1 (and fact_recall) among the strategies of the run, "
        "errors counted 0, averaged over the probes all of them answered (n); its other columns are empty.",
    ),
    order=15,
    scores_errors=True,
)
def bound(g: Group) -> dict[str, Any]:
    """The kind of bound this strategy is (the first spec of each kind, preferring the default one)."""
    kinds = {spec: kind for kind, spec in bound_specs(g.scoring.groups).items()}
    return {BOUND: kinds.get(g.strategy)}


def _headroom(scoring: Scoring) -> tuple[list[str], str | None, float | None, float | None, str | None]:
    """(common probes, never spec, never's f1, oracle f1, why headroom_captured is empty or None),
    the same for every strategy of the summary: measured once."""
    return scoring.shared(_headroom, lambda: _measure_headroom(scoring))


def _measure_headroom(scoring: Scoring) -> tuple[list[str], str | None, float | None, float | None, str | None]:
    probes = common_probes(scoring)
    never = bound_specs(scoring.groups).get(NEVER)
    if len(scoring.groups) < 2:
        return probes, never, None, None, "one strategy, nothing to compare"
    if not probes:
        return probes, never, None, None, "no probe was answered by every strategy"
    oracle = float(oracle_scores(scoring, QUALITY, probes).mean())
    if never is None:
        if waiting := bound_specs(sorted(scoring.pending)).get(NEVER):
            return probes, None, None, oracle, f"the never bound {waiting} has not run yet"
        return probes, None, None, oracle, f"no {NEVER_SPEC} spec (the never bound) in this run"
    base = per_probe(Group(never, scoring.groups[never], scoring), QUALITY)
    never_f1 = float(base.reindex(probes).mean())
    if oracle - never_f1 <= EQUAL:
        return probes, never, never_f1, oracle, f"no strategy beats {never} on any probe (the oracle equals never)"
    return probes, never, never_f1, oracle, None


def _note(scoring: Scoring) -> str:
    """What the bound rows and headroom_captured are in this run, or why they are empty."""
    probes, never, never_f1, oracle, empty = _headroom(scoring)
    n = len(scoring.groups)
    if n < 2 or not probes:
        return f"bound rows: none ({empty}); headroom_captured empty"
    always = bound_specs(scoring.groups).get(ALWAYS)
    pending = bound_specs(sorted(scoring.pending))  # asked for, not run yet
    never_text = f"{never} ({QUALITY} {never_f1:.3f})" if never else f"absent (no {NEVER_SPEC} spec)"
    always_text = always if always else f"absent (no spec retrieves for every sentence, as {ALWAYS_SPEC} does)"
    if not never and NEVER in pending:
        never_text = f"{pending[NEVER]} has not run yet"
    if not always and ALWAYS in pending:
        always_text = f"{pending[ALWAYS]} has not run yet"
    line = (
        f"bound rows: never = {never_text}, always = {always_text}, oracle = per probe the best of the {n} "
        f"strategies over the {len(probes)} probes all of them answered ({QUALITY} {oracle:.3f}); "
    )
    if empty:
        return line + f"headroom_captured empty: {empty}"
    return line + f"headroom_captured = ({QUALITY} - never's) / (oracle's - never's) over those probes"


_EFFECT = (
    "Share, 0-1, of the probes both this strategy and the reference (delta_reference) answered on which this "
    "strategy's f1 is {how} the reference's (errors count 0, as in f1_delta); the reference's own row "
    "{own}; empty when the reference is not in the run."
)


@scorer(
    Column("helped", _EFFECT.format(how="higher than", own="is 0"), better=HIGHER),
    Column("harmed", _EFFECT.format(how="lower than", own="is 0"), better=LOWER),
    Column("unchanged", _EFFECT.format(how="equal to (within 1e-9)", own="is 1"), better=None),
    Column(
        "headroom_captured",
        "(f1 - never's f1) / (oracle's f1 - never's f1), over the probes every strategy of the run "
        "answered: the share of the gap between no retrieval (the never row) and the per-probe best "
        "answer of the strategies compared (the oracle row) that this strategy closes; 1 is the "
        "oracle, 0 never, below 0 worse than never. Empty without a never row, or when no strategy "
        "beats never on any probe (the notes say which).",
        better=HIGHER,
    ),
    order=125,
    scores_errors=True,
    needs=(QUALITY,),
    settings=_note,
)
def effect(g: Group) -> dict[str, Any]:
    """Paired per probe with the reference (errors as 0); headroom over the probes all answered."""
    out: dict[str, Any] = {c.name: None for c in effect.columns}
    reference = g.scoring.reference
    if reference in g.scoring.groups:
        ref = Group(reference, g.scoring.groups[reference], g.scoring)
        theirs, mine = per_probe(ref, QUALITY), per_probe(g, QUALITY)
        common = [p for p in theirs.index if p in mine.index]
        if common:
            diff = mine[common].to_numpy() - theirs[common].to_numpy()
            out["helped"] = float(np.mean(diff > EQUAL))
            out["harmed"] = float(np.mean(diff < -EQUAL))
            out["unchanged"] = float(np.mean(np.abs(diff) <= EQUAL))
    probes, never, never_f1, oracle, empty = _headroom(g.scoring)
    if empty is None:
        mine = float(per_probe(g, QUALITY).reindex(probes).mean())
        value = (mine - never_f1) / (oracle - never_f1)
        out["headroom_captured"] = value if math.isfinite(value) else None
    return out
