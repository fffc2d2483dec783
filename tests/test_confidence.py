"""bench.confidence: AUROC by hand, draft minimum probabilities, theta from a spec."""

from __future__ import annotations

import math

import pytest

from bench.confidence import auroc, draft_min_p, gate_summary, theta_of
from strategies.records import LMCall, Step, Trace


def test_auroc_hand_made_cases():
    # perfect separation: every positive above every negative
    assert auroc([0.9, 0.8, 0.2, 0.1], [True, True, False, False]) == 1.0
    # inverted
    assert auroc([0.1, 0.2, 0.8, 0.9], [True, True, False, False]) == 0.0
    # positives 0.9, 0.4; negatives 0.5, 0.1: pairs won 0.9>0.5, 0.9>0.1, 0.4>0.1; lost 0.4<0.5 -> 3/4
    assert auroc([0.9, 0.4, 0.5, 0.1], [True, True, False, False]) == 0.75
    # ties count one half: all scores equal -> 0.5
    assert auroc([0.3, 0.3, 0.3], [True, False, False]) == 0.5
    # positive 0.5 vs negatives 0.5, 0.2 -> (0.5 + 1) / 2
    assert auroc([0.5, 0.5, 0.2], [True, False, False]) == 0.75


def test_auroc_matches_the_pairwise_definition():
    import itertools

    scores = [0.91, 0.3, 0.3, 0.77, 0.05, 0.6, 0.6, 0.6, 0.2]
    labels = [True, False, True, True, False, False, True, False, True]
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
    assert auroc(scores, labels) == pytest.approx(wins / (len(pos) * len(neg)))


def test_auroc_undefined_with_one_class():
    assert math.isnan(auroc([0.1, 0.9], [True, True]))
    assert math.isnan(auroc([0.1, 0.9], [False, False]))
    assert math.isnan(auroc([], []))


def _call(purpose, probs):
    return LMCall(purpose, 10, 10, len(probs), "x", "stop", 0.0, logprobs=[math.log(p) for p in probs])


def test_draft_min_p_over_all_drafts_only():
    t = Trace("q", "x", "x", "answer", steps=[
        Step("a", lm_calls=[_call("draft", [0.9, 0.7])]),
        Step("b", lm_calls=[_call("draft", [0.95, 0.6]), _call("regenerate", [0.01]), _call("query", [0.02])]),
    ])  # fmt: skip
    assert draft_min_p(t) == pytest.approx(0.6)
    no_logprobs = LMCall("draft", 1, 1, 1, "x", "stop", 0.0)
    assert draft_min_p(Trace("q", "x", "x", "answer", steps=[Step("a", lm_calls=[no_logprobs])])) is None
    assert draft_min_p(Trace("q", "x", "x", "answer", steps=[Step("a", lm_calls=[_call("generate", [0.1])])])) is None


def test_theta_of_spec():
    assert theta_of("flare_direct") == 0.8
    assert theta_of("flare_direct:theta=0.4") == 0.4
    assert theta_of("single_time") is None
    assert theta_of("not_a_strategy") is None


def test_gate_summary_shares_at_or_below_theta():
    out = gate_summary([0.4, 0.5, 0.9, None, 0.4], [1, 1, 0, 1, 0], theta=0.4)
    # right: 0.4, 0.5 (the None is left out) -> 1 of 2 at or below 0.4; wrong: 0.9, 0.4 -> 1 of 2
    assert out["gate_fire_right"] == 0.5 and out["gate_fire_wrong"] == 0.5
    # right 0.4, 0.5 vs wrong 0.9, 0.4: wins 0.5>0.4 (1), tie 0.4=0.4 (0.5) -> 1.5 / 4
    assert out["gate_auroc"] == pytest.approx(0.375)
    assert math.isnan(gate_summary([0.2], [1], theta=None)["gate_fire_right"])
