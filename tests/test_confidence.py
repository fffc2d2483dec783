"""flarebench.bench.confidence: AUROC by hand, the gate records of a trace, the gate columns."""

from __future__ import annotations

import math

import pytest

from flarebench.bench.confidence import auroc, gate_record, gate_summary
from flarebench.bench.scorers.facts import answer_quality
from flarebench.strategies.records import LMCall, Step, Trace


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


def test_graded_answers_count_every_pair_of_different_grades():
    # shares of facts 1, 2/3, 2/3, 0: pairs of different grades (1 > 2/3 twice, 1 > 0, 2/3 > 0 twice)
    scores = [0.9, 0.4, 0.6, 0.5]
    quality = [1.0, 2 / 3, 2 / 3, 0.0]
    # won: 0.9>0.4, 0.9>0.6, 0.9>0.5, 0.6>0.5; lost 0.4<0.5 -> 4 / 5 (the tie in grade is no pair)
    assert auroc(scores, quality) == pytest.approx(4 / 5)
    # with two grades it is the two-class AUROC
    assert auroc([0.9, 0.4, 0.5, 0.1], [1.0, 1.0, 0.0, 0.0]) == auroc([0.9, 0.4, 0.5, 0.1], [True, True, False, False])
    assert math.isnan(auroc([0.1, 0.9], [0.5, 0.5]))  # one grade: undefined


def test_a_long_answer_is_graded_by_its_share_of_facts_a_short_one_by_em():
    import pandas as pd

    rows = pd.DataFrame({"em": [1.0, 0.0, 0.0], "f1": [1.0, 0.5, 2 / 3], "facts_total": [None, 2, 3]})
    assert list(answer_quality(rows)) == [1.0, 0.5, 2 / 3]
    assert list(answer_quality(rows.drop(columns="facts_total"))) == [1.0, 0.0, 0.0]
    # No long answer is right: by em alone the gate could not be judged at all.
    out = gate_summary([0.2, 0.7], [True, False], [0.0, 0.0], quality=[1 / 3, 2 / 3])
    assert out["gate_auroc"] == 1.0 and math.isnan(out["gate_fire_right"]) and out["gate_fire_wrong"] == 0.5


def _step(score=None, fired=None, threshold=0.8, **calls):
    gate = None if score is None else {"trigger": "min_prob", "score": score, "threshold": threshold, "fired": fired}
    return Step("a", gate=gate)


def test_gate_record_reads_the_steps_records_only():
    t = Trace("q", "x", "x", "answer", steps=[_step(0.9, False), _step(0.6, True), _step()])
    rec = gate_record(t)
    assert rec.score == pytest.approx(0.6) and rec.fired and rec.threshold == 0.8
    # Logprobs of calls are not read: a trace without gate records has no gate record.
    call = LMCall("draft", 10, 10, 1, "x", "stop", 0.0, logprobs=[math.log(0.01)])
    assert gate_record(Trace("q", "x", "x", "answer", steps=[Step("a", lm_calls=[call])])) is None
    # The threshold comes from the records, whatever today's default theta is.
    assert gate_record(Trace("q", "x", "x", "answer", steps=[_step(0.5, True, threshold=0.55)])).threshold == 0.55


def test_gate_summary_uses_the_recorded_fired_flags():
    out = gate_summary([0.4, 0.5, 0.9, None, 0.4], [True, False, False, True, True], [1, 1, 0, 1, 0])
    # right: 0.4 (fired), 0.5 (not) -> 1 of 2; the None is left out; wrong: 0.9 (not), 0.4 (fired) -> 1 of 2
    assert out["gate_fire_right"] == 0.5 and out["gate_fire_wrong"] == 0.5
    # right 0.4, 0.5 vs wrong 0.9, 0.4: wins 0.5>0.4 (1), tie 0.4=0.4 (0.5) -> 1.5 / 4
    assert out["gate_auroc"] == pytest.approx(0.375)
    assert math.isnan(gate_summary([0.2], [True], [0])["gate_fire_right"])
