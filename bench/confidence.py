"""Is FLARE's confidence gate informative? The draft's minimum token probability against whether the
answer turned out right.

For each answer whose LM calls include drafts with per-token logprobs (FLARE direct: purpose
``"draft"``), ``draft_min_p`` is the minimum token probability over all of that answer's drafts.
Per strategy:

* ``gate_auroc``: the probability that a random right answer (EM 1) has a higher ``draft_min_p``
  than a random wrong one (EM 0), ties counting one half (the Mann-Whitney form of the area under
  the ROC curve, from average ranks). 1 = low confidence marks exactly the wrong answers, 0.5 =
  no better than chance, below 0.5 = low confidence marks the right ones. Undefined (NaN) when
  only one class is present: it is not 0.5.
* ``gate_fire_right`` / ``gate_fire_wrong``: the share of right / of wrong answers whose
  ``draft_min_p`` is at or below the strategy's theta, i.e. on which the gate fired at least once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from scipy.stats import rankdata

from strategies.records import Trace

#: The LM call purpose whose logprobs the gate reads.
DRAFT = "draft"


def draft_min_p(trace: Trace) -> float | None:
    """The minimum token probability over the trace's drafts; None when it has no draft with logprobs."""
    logprobs = [lp for c in trace.lm_calls if c.purpose == DRAFT and c.logprobs for lp in c.logprobs]
    if not logprobs:
        return None
    return float(math.exp(min(logprobs)))


def auroc(scores: Sequence[float], positive: Sequence[bool]) -> float:
    """Area under the ROC curve of ``scores`` for ``positive`` labels (higher score = more likely
    positive), ties counted one half; NaN when either class is empty."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(positive, dtype=bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(s)  # average ranks for ties
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


@lru_cache(maxsize=256)
def theta_of(spec: str) -> float | None:
    """The confidence threshold of a strategy spec (its ``theta`` parameter), None when it has none."""
    from strategies.registry import parse_spec

    try:
        strategy = parse_spec(spec)
    except Exception:  # not a registered spec (e.g. hand-made rows): no threshold known
        return None
    theta = getattr(strategy, "theta", None)
    return float(theta) if theta is not None else None


def gate_summary(min_p: Sequence[float | None], em: Sequence[float], theta: float | None) -> dict[str, float]:
    """``gate_auroc``, ``gate_fire_right``, ``gate_fire_wrong`` over the answers that have a
    ``draft_min_p`` (others are left out); NaN where undefined."""
    nan = float("nan")
    pairs = [(float(p), float(e) > 0) for p, e in zip(min_p, em) if p is not None and not _isnan(p)]
    if not pairs:
        return {"gate_auroc": nan, "gate_fire_right": nan, "gate_fire_wrong": nan}
    p = np.array([x for x, _ in pairs])
    right = np.array([r for _, r in pairs])

    def fired(mask: np.ndarray) -> float:
        if theta is None or not mask.any():
            return nan
        return float((p[mask] <= theta).mean())

    return {"gate_auroc": auroc(p, right), "gate_fire_right": fired(right), "gate_fire_wrong": fired(~right)}


def _isnan(x) -> bool:
    try:
        return math.isnan(x)
    except TypeError:
        return False
