"""Is FLARE's confidence gate informative? What the gate judged against whether the answer turned
out right.

Every step a confidence trigger judged carries a record (``Step.gate``: the trigger, its score over
the tokens it judged, the threshold it used, whether it fired). Per answer, ``gate_score`` is the
least confident score over its judged steps: the lowest for the triggers that fire at or below
their threshold (``min_prob``: the lowest token probability of any drafted sentence;
``mean_logprob``, ``margin``), the highest for those that fire at or above it (``entropy``,
``self_check``; :func:`flarebench.strategies.triggers.fires_high`); ``gate_trigger`` names the
trigger and ``gate_fired`` says whether the gate fired on any step. Nothing is read from the
strategy's parameters or today's defaults: the records alone decide. Per strategy:

* ``gate_auroc``: the probability that a random right answer (EM 1) is judged more confident than a
  random wrong one (EM 0): a higher ``gate_score``, or a lower one for a trigger that fires high,
  ties counting one half (the Mann-Whitney form of the area under the ROC curve). 1 = low
  confidence marks exactly the wrong answers, 0.5 = no better than chance, below 0.5 = low
  confidence marks the right ones. A long answer is graded by the share of its required facts it
  states (its F1, :func:`flarebench.bench.scorers.facts.answer_quality`): of two answers of
  different shares, the chance that the one stating more is judged more confident (the same area
  generalised to graded answers: the concordance index), since a small model's long answers are
  nearly never complete, which would leave one class. Undefined (NaN) without two answers of
  different quality: it is not 0.5.
* ``gate_fire_right`` / ``gate_fire_wrong``: the share of right / of wrong answers on which the
  gate fired at least once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from flarebench.strategies.records import Trace
from flarebench.strategies.triggers import fires_high


@dataclass(frozen=True)
class GateRecord:
    """What the gate judged over one answer: its least confident score, whether it fired at least
    once, the threshold it used (None when the steps disagree, which one strategy spec never does)
    and the trigger (None for records that name none)."""

    score: float
    fired: bool
    threshold: float | None
    trigger: str | None = None


def gate_record(trace: Trace) -> GateRecord | None:
    """The answer's gate record from its steps' ``gate`` records; None when no step was judged."""
    judged = [s.gate for s in trace.steps if s.gate and s.gate.get("score") is not None]
    if not judged:
        return None
    thresholds = {g.get("threshold") for g in judged}
    triggers = {g.get("trigger") for g in judged}
    trigger = triggers.pop() if len(triggers) == 1 else None
    worst = max if fires_high(trigger) else min
    return GateRecord(
        score=float(worst(g["score"] for g in judged)),
        fired=any(bool(g.get("fired")) for g in judged),
        threshold=thresholds.pop() if len(thresholds) == 1 else None,
        trigger=trigger,
    )


def auroc(scores: Sequence[float], quality: Sequence[float]) -> float:
    """Area under the ROC curve of ``scores`` for telling the better answers of ``quality`` (True /
    1 right, False / 0 wrong, or a grade such as a share of facts) from the worse: over every pair of
    answers of different quality, the share in which the better one has the higher score, ties in
    score counted one half (with two classes, the Mann-Whitney AUROC; with grades, the concordance
    index). NaN when no two answers differ in quality."""
    s = np.asarray(scores, dtype=float)
    q = np.asarray(quality, dtype=float)
    wins = pairs = 0.0
    for i in range(len(s)):  # one row of the pair matrix at a time: memory stays linear in the answers
        worse = q < q[i]
        pairs += worse.sum()
        wins += (s[i] > s[worse]).sum() + 0.5 * (s[i] == s[worse]).sum()
    return float(wins / pairs) if pairs else float("nan")


def gate_summary(
    scores: Sequence[float | None],
    fired: Sequence[bool | None],
    em: Sequence[float],
    high: Sequence[bool] | None = None,
    quality: Sequence[float] | None = None,
) -> dict[str, float]:
    """``gate_auroc``, ``gate_fire_right``, ``gate_fire_wrong`` over the answers that have a gate
    record (a score; others are left out); NaN where undefined. ``high`` marks the scores of
    triggers that fire high (a higher score is less confident): they enter the AUROC negated. The
    AUROC judges against ``quality`` (:func:`flarebench.bench.scorers.facts.answer_quality`),
    ``em`` when None; the fire shares against ``em``."""
    nan = float("nan")
    signs = [-1.0 if h else 1.0 for h in high] if high is not None else [1.0] * len(scores)
    grades = em if quality is None else quality
    kept = [
        (sign * float(s), bool(f), float(e) > 0, float(g))
        for s, f, e, sign, g in zip(scores, fired, em, signs, grades)
        if s is not None and not _isnan(s)
    ]
    if not kept:
        return {"gate_auroc": nan, "gate_fire_right": nan, "gate_fire_wrong": nan}
    score, fires, right, graded = (np.array(column) for column in zip(*kept))

    def share(mask: np.ndarray) -> float:
        return float(fires[mask].mean()) if mask.any() else nan

    return {"gate_auroc": auroc(score, graded), "gate_fire_right": share(right), "gate_fire_wrong": share(~right)}


def _isnan(x) -> bool:
    try:
        return math.isnan(x)
    except TypeError:
        return False
