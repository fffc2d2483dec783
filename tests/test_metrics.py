"""Unit tests of flarebench.bench.metrics: each metric definition, on hand-built traces (no model, no files)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pytest

from flarebench.bench.answers import (
    exact_match,
    last_clause,
    normalize_answer,
    score_answer,
    split_items,
    to_yes_no,
    token_f1,
)
from flarebench.bench.metrics import column_docs, optional_columns, probe_row, summarize, summary_columns
from flarebench.strategies.records import FIRST_HOP, LMCall, Retrieval, Step, Trace


@dataclass
class FakeProbe:
    """Stand-in with the attributes of flarebench.probes.model.Probe that metrics reads."""

    id: str
    question: str = "q?"
    answers: list[str] = field(default_factory=list)
    answer_type: str = "single"
    gold_doc_ids: list[str] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)


def call(seconds=0.5, prompt=100, evaluated=40, completion=10, purpose="generate"):
    return LMCall(
        purpose=purpose,
        prompt_tokens=prompt,
        evaluated_tokens=evaluated,
        completion_tokens=completion,
        text="x",
        finish_reason="stop",
        seconds=seconds,
    )


def ret(reason="low_confidence", doc_ids=("d1",), seconds=0.1):
    return Retrieval(query="q", reason=reason, doc_ids=list(doc_ids), seconds=seconds)


def trace(steps, strategy="s", probe_id="p1", answer="x", seconds=1.0, error=None, stop_reason="answer"):
    # The scored answer is read again from the output, so the output states it.
    return Trace(
        question="q?",
        output=f"So the answer is {answer}." if answer else "",
        answer=answer,
        stop_reason=stop_reason,
        steps=steps,
        probe_id=probe_id,
        strategy=strategy,
        seconds=seconds,
        error=error,
    )


# ---------------------------------------------------------------- normalisation, single answers


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("The  Cat!", "cat"),
        ("cat", "cat"),
        ("  An apple, a pear and THE plum. ", "apple pear and plum"),
        ("theory of the thesis", "theory of thesis"),  # articles only as whole words
        ("U.S.A.", "usa"),
        ("", ""),
        (None, ""),
    ],
)
def test_normalize_answer(raw, expected):
    assert normalize_answer(raw) == expected


def _squad_normalize(s: str) -> str:
    """The official SQuAD v1.1 evaluation script's normalize_answer, as it is written there."""
    import re
    import string

    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def test_ascii_text_is_normalised_exactly_as_squads_script_does():
    import random
    import string

    rng = random.Random(0)
    alphabet = string.printable + " the a an " * 3
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(5000)]
    assert [normalize_answer(t) for t in texts] == [_squad_normalize(t) for t in texts]


@pytest.mark.parametrize(
    "pred, gold",
    [
        ("Jos\u00e9 M\u00fcller", "Jose\u0301 Mu\u0308ller"),  # composed and decomposed accents (NFC, NFD)
        ("\u201cLeda Cormier\u201d", "Leda Cormier"),  # curly quotes
        ("\u00abLeda Cormier\u00bb", "Leda Cormier"),  # guillemets
        ("\u6771\u4eac\u3002", "\u6771\u4eac"),  # an ideographic full stop
        ("\uff2c\uff25\uff24\uff21", "Leda"),  # full-width letters
        ("Leda\u200bCormier", "Leda Cormier"),  # a zero-width space
        ("Leda\u00a0Cormier", "Leda Cormier"),  # a no-break space
        ("STRASSE", "Stra\u00dfe"),  # case folding
        ("Jean\u2010Luc", "Jean-Luc"),  # a Unicode hyphen, dropped as ASCII's is
        ("\u22125", "-5"),  # the minus sign
    ],
)
def test_text_that_reads_the_same_scores_the_same(pred, gold):
    # Scored 0 before: SQuAD's normalisation knows ASCII punctuation and lowercase only.
    assert exact_match(pred, [gold]) == 1.0 and token_f1(pred, [gold]) == 1.0
    assert exact_match("Jos\u00e9 M\u00fcller", ["Jose Muller"]) == 0.0  # an accent is no punctuation


def test_exact_match_alias_aware():
    assert exact_match("The  Cat!", ["dog", "cat"]) == 1.0
    assert exact_match("a cat", ["the cat"]) == 1.0
    assert exact_match("cats", ["cat"]) == 0.0
    assert exact_match("Paris", "Paris") == 1.0  # a bare string is one alias, not characters
    assert exact_match("P", "Paris") == 0.0


def test_token_f1_partial_by_hand():
    # pred tokens {kate, brown} vs gold {kate, elizabeth, brown}: P = 1, R = 2/3, F1 = 0.8
    assert token_f1("Kate Brown", ["Kate Elizabeth Brown"]) == pytest.approx(0.8)
    assert exact_match("Kate Brown", ["Kate Elizabeth Brown"]) == 0.0


def test_token_f1_max_over_aliases():
    answers = ["Kate Elizabeth Brown", "Kate Brown"]
    assert token_f1("Kate Brown", answers) == 1.0
    # "Brown" vs "Kate Brown": P = 1, R = 1/2 -> 2/3; vs the long alias: R = 1/3 -> 0.5
    assert token_f1("Brown", answers) == pytest.approx(2 / 3)


def test_token_f1_counts_repeated_tokens_once_each():
    # pred "brown brown" vs gold "kate brown": overlap 1, P = 1/2, R = 1/2 -> 0.5
    assert token_f1("brown brown", ["kate brown"]) == pytest.approx(0.5)


@pytest.mark.parametrize("pred", [None, "", "   ", "the", "!!"])
def test_empty_or_none_prediction_scores_zero(pred):
    assert exact_match(pred, ["cat"]) == 0.0
    assert token_f1(pred, ["cat"]) == 0.0
    for kind, answers in [("single", ["cat"]), ("set", ["a", "b"]), ("yes_no", ["yes"])]:
        assert score_answer(pred, FakeProbe("p", answers=answers, answer_type=kind)) == (0.0, 0.0)


# ---------------------------------------------------------------- set answers


@pytest.mark.parametrize(
    "pred, expected",
    [
        ("Alice, Bob and Carol", ["alice", "bob", "carol"]),
        ("Alice, Bob, and Carol", ["alice", "bob", "carol"]),
        ("Alice and Bob", ["alice", "bob"]),
        ("Alice; Bob", ["alice", "bob"]),
        ("Alice\u3001Bob\uff0cCarol\uff1b Dan", ["alice", "bob", "carol", "dan"]),  # ideographic, full-width
        ("Alice\uff64Bob\u060c Carol\u061b Dan", ["alice", "bob", "carol", "dan"]),  # half-width, Arabic
        ("Alice\nBob\n", ["alice", "bob"]),
        ("The Alice & the Bob.", ["alice", "bob"]),
        ("Alice", ["alice"]),
        ("Sandy Andrews and Randall", ["sandy andrews", "randall"]),  # "and" only as a word
        ("", []),
        (None, []),
    ],
)
def test_split_items(pred, expected):
    assert split_items(pred) == expected


def test_split_items_keeps_known_items_with_separators_inside():
    gold = ["Tom and Jerry", "Washington, D.C.", "Bob"]
    assert split_items("Tom and Jerry, Washington, D.C. and Bob", keep=gold) == [
        "tom and jerry",
        "washington dc",
        "bob",
    ]
    assert split_items("Tom and Jerry") == ["tom", "jerry"]  # without keep, "and" splits


def test_a_long_list_is_split_around_known_items_in_time_linear_in_its_items(monkeypatch):
    # A model rambling a list of hundreds of items under a large token cap: every span of every
    # length was normalised (the cube of the items: minutes per summary); only spans as wide as a
    # kept item can be are.
    from flarebench.bench import answers

    calls = []
    real = answers.normalize_answer
    monkeypatch.setattr(answers, "normalize_answer", lambda s: calls.append(s) or real(s))
    pred = ", ".join(f"Person {i}" for i in range(400)) + ", Tom and Jerry"
    items = answers.split_items(pred, keep=["Tom and Jerry", "Person 7"])
    assert len(items) == 401 and items[-1] == "tom and jerry" and items[7] == "person 7"
    assert len(calls) < 401 * 14  # the widest kept item: 11 characters


def test_set_exact_match_and_f1():
    probe = FakeProbe("p", answers=["Alice", "Bob", "Carol"], answer_type="set")
    assert score_answer("Alice, Bob and Carol", probe) == (1.0, 1.0)
    assert score_answer("carol, the Bob, and ALICE.", probe) == (1.0, 1.0)  # order, case, articles
    assert score_answer("Alice, Bob, Bob and Carol", probe) == (1.0, 1.0)  # repeats collapse
    # partial: 2 of 3 gold, no wrong item: P = 1, R = 2/3 -> F1 = 0.8, EM 0
    em, f1 = score_answer("Alice and Bob", probe)
    assert (em, f1) == (0.0, pytest.approx(0.8))
    # 2 right + 2 wrong: P = 2/4, R = 2/3 -> F1 = 2 * (1/2)(2/3) / (1/2 + 2/3) = 4/7
    em, f1 = score_answer("Alice, Bob, Dave and Eve", probe)
    assert (em, f1) == (0.0, pytest.approx(4 / 7))
    assert score_answer("Dave", probe) == (0.0, 0.0)


def test_set_answer_with_and_inside_gold_item():
    probe = FakeProbe("p", answers=["Tom and Jerry", "Popeye"], answer_type="set")
    assert score_answer("Popeye and Tom and Jerry", probe) == (1.0, 1.0)


# ---------------------------------------------------------------- yes/no


@pytest.mark.parametrize(
    "pred, expected",
    [
        ("yes", "yes"),
        ("Yes.", "yes"),
        ("YES, because penguins swim", "yes"),
        ("True", "yes"),
        ("no", "no"),
        ("No, it cannot.", "no"),
        ("false", "no"),
        ("Nope", None),
        ("I think yes", "yes"),  # the first yes/no word of the final answer counts
        ("No, yes", "no"),  # ... the first one, not the last
        ("Nobody knows", None),  # whole words only: "nobody" is not "no"
        ("maybe", None),
        ("", None),
        (None, None),
    ],
)
def test_to_yes_no(pred, expected):
    assert to_yes_no(pred) == expected


def test_yes_no_accuracy():
    probe = FakeProbe("p", answers=["no"], answer_type="yes_no")
    assert score_answer("False.", probe) == (1.0, 1.0)
    assert score_answer("Yes", probe) == (0.0, 0.0)
    assert score_answer("maybe", probe) == (0.0, 0.0)
    assert score_answer("True", FakeProbe("p", answers=["Yes"], answer_type="yes_no")) == (1.0, 1.0)


def test_unknown_answer_type_raises():
    with pytest.raises(ValueError, match="answer_type"):
        score_answer("x", FakeProbe("p", answers=["x"], answer_type="multiple_choice"))


# ---------------------------------------------------------------- probe rows


def test_probe_row_counts_tokens_times_and_metadata():
    probe = FakeProbe("p1", answers=["cat"], gold_doc_ids=["d1", "d2"], metadata={"hops": 2, "type": "comp"})
    t = trace(
        [
            Step("s1", lm_calls=[call(0.5, 100, 100, 10)], retrievals=[ret(FIRST_HOP, ["d1"], 0.2)]),
            Step(
                "s2",
                lm_calls=[call(0.25, 120, 20, 5), call(0.25, 130, 10, 6)],
                retrievals=[ret("low_confidence", ["d3"], 0.3)],
            ),
            Step("s3", lm_calls=[call(0.5, 140, 10, 7)]),
        ],
        answer="The cat",
        seconds=2.0,
    )
    row = probe_row(t, probe)
    assert row["strategy"] == "s" and row["probe_id"] == "p1"
    assert (row["em"], row["f1"]) == (1.0, 1.0)
    assert row["answer"] == "The cat" and row["stop_reason"] == "answer" and row["error"] is None
    assert (row["steps"], row["triggered_steps"], row["retrievals"], row["lm_calls"]) == (3, 1, 2, 4)
    assert (row["prompt_tokens"], row["evaluated_tokens"], row["completion_tokens"]) == (490, 140, 28)
    assert row["lm_s"] == pytest.approx(1.5)
    assert row["retrieval_s"] == pytest.approx(0.5)
    assert row["latency_s"] == 2.0
    assert row["harness_s"] == pytest.approx(0.0)
    assert row["recall"] == pytest.approx(0.5)  # d1 of {d1, d2}; d3 is not gold
    assert row["meta_hops"] == 2 and row["meta_type"] == "comp"


def test_harness_time_is_wall_minus_lm_minus_retrieval_floored_at_zero():
    steps = [Step("s", lm_calls=[call(1.25)], retrievals=[ret(seconds=0.5)])]
    row = probe_row(trace(steps, seconds=2.0), FakeProbe("p1", answers=["x"]))
    assert row["harness_s"] == pytest.approx(0.25)
    # timer granularity can make the parts exceed the wall time: never negative
    row = probe_row(trace(steps, seconds=1.5), FakeProbe("p1", answers=["x"]))
    assert row["harness_s"] == 0.0


def test_recall_over_union_of_all_retrievals():
    probe = FakeProbe("p1", answers=["x"], gold_doc_ids=["a", "b", "c"])
    steps = [
        Step("s1", retrievals=[ret(FIRST_HOP, ["a", "z"])]),
        Step("s2", retrievals=[ret("low_confidence", ["b", "a"])]),
        Step("s3", retrievals=[ret("low_confidence", ["y"])]),
    ]
    assert probe_row(trace(steps), probe)["recall"] == pytest.approx(2 / 3)
    # gold exists but nothing retrieved -> 0; no gold docs -> None
    assert probe_row(trace([Step("s")]), probe)["recall"] == 0.0
    assert probe_row(trace(steps), FakeProbe("p1", answers=["x"]))["recall"] is None


def test_error_scores_zero_even_with_a_correct_answer():
    t = trace([Step("s")], answer="cat", error="TimeoutError: boom", stop_reason="error")
    row = probe_row(t, FakeProbe("p1", answers=["cat"]))
    assert (row["em"], row["f1"]) == (0.0, 0.0)
    assert row["error"] == "TimeoutError: boom"


def test_probe_row_rejects_mismatched_probe():
    with pytest.raises(ValueError, match="p2"):
        probe_row(trace([], probe_id="p1"), FakeProbe("p2", answers=["x"]))


def test_probe_row_with_real_probe_model():
    model = pytest.importorskip("flarebench.probes.model")
    probe = model.Probe(
        id="p1",
        question="Who?",
        answers=["Kate Elizabeth Brown"],
        answer_type="single",
        gold_doc_ids=["d1"],
        metadata={"hops": 1},
    )
    row = probe_row(trace([Step("s", retrievals=[ret(FIRST_HOP, ["d1"])])], answer="Kate Brown"), probe)
    assert row["f1"] == pytest.approx(0.8) and row["recall"] == 1.0 and row["meta_hops"] == 1


# ---------------------------------------------------------------- summary


def _rows(pairs):
    return pd.DataFrame([probe_row(t, p) for t, p in pairs])


def test_summary_column_order_exact():
    rows = _rows([(trace([Step("s")]), FakeProbe("p1", answers=["x"]))])
    assert list(summarize(rows).columns) == summary_columns()
    expected = [
        "strategy", "n", "errors", "em", "f1", "em_lenient", "f1_lenient", "recall", "recall_at_k",
        "incomplete_rate", "incomplete_token_cap", "incomplete_step_cap", "incomplete_no_answer",
        "incomplete_abstain", "incomplete_empty", "retrieval_rate", "retrievals_per_q",
        "lm_calls_per_q", "prompt_tokens_per_q", "evaluated_tokens_per_q", "completion_tokens_per_q",
        "cost_per_q", "latency_p50_s", "latency_p95_s", "lm_s_per_q", "retrieval_s_per_q", "harness_s_per_q",
        "harness_share", "gate_auroc", "gate_fire_right", "gate_fire_wrong", "delta_reference",
        "em_delta", "em_delta_lo", "em_delta_hi", "em_delta_sig",
        "f1_delta", "f1_delta_lo", "f1_delta_hi", "f1_delta_sig",
    ]  # fmt: skip
    # Other metric modules (e.g. faithfulness) may add columns; these stay, in this order.
    assert [c for c in summary_columns() if c in expected] == expected
    assert set(column_docs()) == set(summary_columns()) | set(optional_columns())  # optional: only where computed
    assert all(isinstance(v, str) and v for v in column_docs().values())


def test_retrieval_rate_excludes_first_hop():
    probe = FakeProbe("p1", answers=["x"])
    # single_time-like: one step whose only retrieval is the first hop
    single = trace([Step("answer", lm_calls=[call()], retrievals=[ret(FIRST_HOP)])], strategy="single_time")
    # FLARE-like: 4 steps, first hop at step 1, low-confidence retrievals at steps 2 and 4
    flare = trace(
        [
            Step("s1", retrievals=[ret(FIRST_HOP)]),
            Step("s2", retrievals=[ret("low_confidence")]),
            Step("s3"),
            Step("s4", retrievals=[ret("low_confidence")]),
        ],
        strategy="flare_direct",
    )
    # every step triggered, first hop alongside step 1's mid-generation retrieval
    every = trace(
        [
            Step("s1", retrievals=[ret(FIRST_HOP), ret("low_confidence")]),
            Step("s2", retrievals=[ret("low_confidence")]),
        ],
        strategy="flare_direct:theta=1",
    )
    none = trace([], strategy="no_retrieval")  # no steps at all: no rate (missing), not 0 or a division error
    rows = _rows([(single, probe), (flare, probe), (every, probe), (none, probe)])
    s = summarize(rows).set_index("strategy")
    assert s.loc["single_time", "retrieval_rate"] == 0.0
    assert s.loc["single_time", "retrievals_per_q"] == 1.0
    assert s.loc["flare_direct", "retrieval_rate"] == 0.5
    assert s.loc["flare_direct", "retrievals_per_q"] == 3.0
    assert s.loc["flare_direct:theta=1", "retrieval_rate"] == 1.0
    assert s.loc["flare_direct:theta=1", "retrievals_per_q"] == 3.0
    assert math.isnan(s.loc["no_retrieval", "retrieval_rate"])


def test_retrieval_rate_is_ratio_of_sums_over_probes():
    probe = FakeProbe("p1", answers=["x"])
    a = trace([Step("s1", retrievals=[ret()])])  # 1 of 1
    b = trace([Step("s1"), Step("s2"), Step("s3")], probe_id="p2")  # 0 of 3
    rows = _rows([(a, probe), (b, FakeProbe("p2", answers=["x"]))])
    assert summarize(rows)["retrieval_rate"].iloc[0] == pytest.approx(0.25)  # not mean(1, 0) = 0.5


def _latency_rows(lat):
    ids = [f"p{i}" for i in range(len(lat))]
    return _rows([(trace([], probe_id=i, seconds=x), FakeProbe(i, answers=["x"])) for i, x in zip(ids, lat)])


def test_latency_percentiles_linear_interpolation():
    lat = [1.0, 2.0, 3.0, 4.0, 10.0]
    s = summarize(_latency_rows(lat)).iloc[0]
    assert s["latency_p50_s"] == pytest.approx(3.0)
    # rank 0.95 * 4 = 3.8 -> 4 + 0.8 * (10 - 4) = 8.8
    assert s["latency_p95_s"] == pytest.approx(8.8)
    assert s["latency_p95_s"] == pytest.approx(np.percentile(lat, 95))
    lat = [1.0, 2.0, 3.0, 4.0]
    s = summarize(_latency_rows(lat)).iloc[0]
    assert s["latency_p50_s"] == pytest.approx(2.5)
    assert s["latency_p95_s"] == pytest.approx(3.85)  # 3 + 0.85 * (4 - 3)


def test_summary_times_tokens_and_harness_share():
    p = [FakeProbe("p1", answers=["x"]), FakeProbe("p2", answers=["x"])]
    t1 = trace([Step("s", lm_calls=[call(1.0, 100, 50, 10)], retrievals=[ret(seconds=0.5)])], seconds=2.0)
    t2 = trace([Step("s", lm_calls=[call(2.0, 300, 150, 30), call(1.0, 0, 0, 0)])], probe_id="p2", seconds=4)
    s = summarize(_rows([(t1, p[0]), (t2, p[1])])).iloc[0]
    assert s["n"] == 2 and s["errors"] == 0
    assert s["lm_calls_per_q"] == 1.5
    assert s["retrievals_per_q"] == 0.5
    assert s["prompt_tokens_per_q"] == 200
    assert s["evaluated_tokens_per_q"] == 100
    assert s["completion_tokens_per_q"] == 20
    assert s["lm_s_per_q"] == pytest.approx(2.0)
    assert s["retrieval_s_per_q"] == pytest.approx(0.25)
    # harness: probe 1 = 2 - 1 - 0.5 = 0.5, probe 2 = 4 - 3 = 1.0
    assert s["harness_s_per_q"] == pytest.approx(0.75)
    assert s["harness_share"] == pytest.approx(1.5 / 6.0)


def test_errors_counted_and_scored_zero():
    probe = FakeProbe("p1", answers=["cat"])
    ok = trace([Step("s")], answer="cat")
    bad = trace([Step("s")], answer="cat", probe_id="p2", error="RuntimeError: x", stop_reason="error")
    rows = _rows([(ok, probe), (bad, FakeProbe("p2", answers=["cat"]))])
    s = summarize(rows).iloc[0]
    assert s["n"] == 2 and s["errors"] == 1
    assert s["em"] == 0.5 and s["f1"] == 0.5
    # even if a row carries a score (edited / reloaded rows), an error counts as 0
    rows.loc[1, "em"] = 1.0
    assert summarize(rows).iloc[0]["em"] == 0.5


def test_a_probe_that_raised_is_left_out_of_what_it_used_and_said():
    # The runner keeps an empty trace for a probe that raised: its calls, tokens, retrievals and
    # time are unknown, not 0. They are left out of those columns, never averaged in as 0.
    probe = FakeProbe("p1", answers=["cat"], gold_doc_ids=["d1"])
    step = Step("s", lm_calls=[call(prompt=300, completion=20)], retrievals=[ret(FIRST_HOP), ret()])
    ok = trace([step, Step("s2")], answer="cat", seconds=4.0)
    bad = trace([], answer=None, probe_id="p2", seconds=0.01, error="RuntimeError: x (a.py:1)", stop_reason="error")
    down = [trace([], answer=None, probe_id=p, strategy="down", error="LMError: gone", stop_reason="error")
            for p in ("p1", "p2")]  # fmt: skip
    other = FakeProbe("p2", answers=["cat"], gold_doc_ids=["d1"])
    rows = _rows([(ok, probe), (bad, other), (down[0], probe), (down[1], other)])
    s = summarize(rows, reference="down").set_index("strategy")
    half = s.loc["s"]
    assert (half["n"], half["errors"], half["em"]) == (2, 1, 0.5)  # scored 0 in em
    assert (half["lm_calls_per_q"], half["prompt_tokens_per_q"], half["retrievals_per_q"]) == (1.0, 300.0, 2.0)
    assert (half["retrieval_rate"], half["recall"], half["triggered_share"]) == (0.5, 1.0, 1.0)
    assert half["latency_p50_s"] == half["latency_p95_s"] == 4.0  # not the 0.01 s of the probe that raised
    assert pd.isna(half["latency_p95_untriggered_s"])
    # Every probe raised: nothing it used is known, so every such column is missing, not 0.
    none = s.loc["down"]
    assert (none["n"], none["errors"], none["em"], none["f1"]) == (2, 2, 0.0, 0.0)
    for column in ("lm_calls_per_q", "retrieval_rate", "recall", "latency_p95_s", "harness_share", "triggered_share",
                   "incomplete_rate", "incomplete_no_answer"):  # fmt: skip
        assert pd.isna(none[column]), column
    assert pd.isna(half["tokens_rel_blended"])  # the reference used nothing known
    notes = summarize(rows, reference="down").attrs["notes"]
    assert (
        "s: 1 of 2 probes raised an error, first: RuntimeError: x (a.py:1); they score 0 in em and f1, and "
        "its cost, token, retrieval, recall and latency columns average the 1 that finished" in notes
    )
    assert any(n.startswith("down: every probe raised an error (the delta reference: ") for n in notes)


def test_summary_scores_mean_and_recall_skips_probes_without_gold():
    pairs = [
        (trace([Step("s", retrievals=[ret(FIRST_HOP, ["a"])])], answer="Kate Brown"),
         FakeProbe("p1", answers=["Kate Elizabeth Brown"], gold_doc_ids=["a", "b"])),
        (trace([Step("s")], answer="cat", probe_id="p2"),
         FakeProbe("p2", answers=["cat"], gold_doc_ids=["c"])),
        (trace([Step("s")], answer="dog", probe_id="p3"), FakeProbe("p3", answers=["cat"])),
    ]  # fmt: skip
    s = summarize(_rows(pairs)).iloc[0]
    assert s["em"] == pytest.approx(1 / 3)
    assert s["f1"] == pytest.approx((0.8 + 1.0 + 0.0) / 3)
    assert s["recall"] == pytest.approx((0.5 + 0.0) / 2)  # p3 has no gold docs: left out
    no_gold = summarize(_rows(pairs[2:])).iloc[0]
    assert math.isnan(no_gold["recall"])


@pytest.mark.slow
def test_summary_order():
    probe = FakeProbe("p1", answers=["x"])
    rows = _rows([(trace([], strategy=name), probe) for name in ["b", "a", "c"]])
    assert list(summarize(rows)["strategy"]) == ["b", "a", "c"]  # first appearance
    assert list(summarize(rows, order=["c", "a", "b"])["strategy"]) == ["c", "a", "b"]
    # names without rows are skipped; strategies missing from order are kept, after the listed ones
    assert list(summarize(rows, order=["zzz", "c"])["strategy"]) == ["c", "b", "a"]


def test_summary_survives_csv_round_trip(tmp_path):
    # rows reloaded from disk (None -> NaN) give the same summary
    pairs = [
        (trace([Step("s", retrievals=[ret(FIRST_HOP, ["a"])])], answer="x"),
         FakeProbe("p1", answers=["x"], gold_doc_ids=["a"])),
        (trace([Step("s")], probe_id="p2", error="boom"), FakeProbe("p2", answers=["x"])),
    ]  # fmt: skip
    rows = _rows(pairs)
    rows.to_csv(tmp_path / "rows.csv", index=False)
    again = pd.read_csv(tmp_path / "rows.csv")
    pd.testing.assert_frame_equal(summarize(rows), summarize(again))


def test_summary_of_no_rows_is_empty_with_columns():
    one = probe_row(trace([]), FakeProbe("p1", answers=["x"]))
    empty = pd.DataFrame(columns=list(one))
    out = summarize(empty)
    assert out.empty and list(out.columns) == summary_columns()


def test_summary_requires_row_columns():
    with pytest.raises(KeyError, match="latency_s"):
        summarize(pd.DataFrame({"strategy": ["a"], "em": [1.0]}))


# ---------------------------------------------------------------- which answer is scored


def test_statement_answer_is_scored_not_the_output():
    probe = FakeProbe("p1", question="Who is the mother of Bea Tull?", answers=["Rosa Tull"])
    t = trace([Step("s")], answer="Rosa Tull")
    t.output = "The mother of Bea Tull is Rosa Tull. So the answer is Rosa Tull. Rosa Tull is a baker."
    row = probe_row(t, probe)
    assert (row["em"], row["f1"], row["answer_rule"], row["answer"]) == (1.0, 1.0, "statement", "Rosa Tull")
    assert row["incomplete"] is None


@pytest.mark.parametrize(
    "output, clause",
    [
        ("The mother of Bea Tull is Rosa Tull.", "Rosa Tull"),
        ("Bea Tull has a friend. The friends of Ruth Kell are Ada Moss, Bo Fink.", "Ada Moss, Bo Fink"),
        ("Answer: Paris", "Paris"),
        ("The answer might be Paris.", "Paris"),
        ("Rosa Tull", "Rosa Tull"),
        ("Rosa Tull.\n", "Rosa Tull"),
        ("", None),
        ("  ... ", None),
    ],
)
def test_last_clause(output, clause):
    assert last_clause(output) == clause


def test_fallback_answer_earns_lenient_credit_only_and_counts_as_no_answer():
    probe = FakeProbe("p1", question="Who is the mother of Bea Tull?", answers=["Rosa Tull"])
    t = trace([Step("s")], answer=None, stop_reason="eos")
    t.output = "The friend of Ivo is Bea Tull. The mother of Bea Tull is Rosa Tull."
    row = probe_row(t, probe)
    assert row["answer_rule"] == "last_clause" and row["answer"] == "Rosa Tull"
    assert (row["em"], row["f1"]) == (0.0, 0.0)  # main columns: statement answers only
    assert (row["em_lenient"], row["f1_lenient"]) == (1.0, 1.0)
    assert row["incomplete"] == "no_answer"
    s = summarize(_rows([(t, probe)])).iloc[0]
    assert (s["em"], s["em_lenient"], s["incomplete_no_answer"], s["incomplete_rate"]) == (0.0, 1.0, 1.0, 1.0)


def test_answers_are_read_again_from_the_output_at_scoring_time():
    # A trace written by an older extraction (answer field stale or empty) scores what its output states.
    probe = FakeProbe("p1", question="Who is the mother of Bea Tull?", answers=["Rosa Tull"])
    t = trace([Step("s")], answer="Tull")
    t.output = "The mother of Bea Tull is Rosa Tull. So the answer is Rosa Tull."
    row = probe_row(t, probe)
    assert (row["answer"], row["answer_rule"], row["em"]) == ("Rosa Tull", "statement", 1.0)


@pytest.mark.parametrize(
    "output",
    [
        "The documents do not say. So the answer is not in the documents.",
        "So the answer is: cannot be determined from the documents.",
        "So the answer is that there is no information about her mother.",
        "Her mother is not mentioned in the documents.",
    ],
)
def test_an_answer_that_says_there_is_none_is_an_abstention(output):
    probe = FakeProbe("p1", question="Who is the mother of Bea Tull?", answers=["Rosa Tull"])
    t = trace([Step("s")], answer=None, stop_reason="answer")
    t.output = output
    row = probe_row(t, probe)
    assert (row["answer"], row["answer_rule"], row["incomplete"]) == (None, "abstain", "abstain")
    assert (row["em_lenient"], row["f1_lenient"]) == (0.0, 0.0)
    s = summarize(_rows([(t, probe)])).iloc[0]
    assert (s["incomplete_abstain"], s["incomplete_rate"]) == (1.0, 1.0)


def test_whole_output_never_scored():
    # The gold answer occurs in the output, but the output's last clause is something else.
    probe = FakeProbe("p1", question="Who is the mother of Bea Tull?", answers=["Rosa Tull"])
    t = trace([Step("s")], answer=None, stop_reason="eos")
    t.output = "Rosa Tull is a name I know. The mother is unknown."
    row = probe_row(t, probe)
    assert row["answer"] == "unknown" and row["f1_lenient"] == 0.0


@pytest.mark.parametrize(
    "answer, answers, question, echo, em, f1",
    [
        # every word from the question, not the gold: no credit (F1 would be 0.5)
        ("a cat or a dog", ["dog"], "Which is bigger, a cat or a dog?", True, 0.0, 0.0),
        ("Bea Tull", ["Rosa Tull"], "Who is the mother of Bea Tull?", True, 0.0, 0.0),  # F1 would be 0.5
        ("the mother of Bea Tull", ["Rosa Tull"], "Who is the mother of Bea Tull?", True, 0.0, 0.0),
        # the gold itself, though its words are in the question, keeps its credit
        ("dog", ["dog"], "Which is bigger, a cat or a dog?", False, 1.0, 1.0),
        # a new word makes it a real answer (partial credit stays)
        ("Rosa Tull", ["Rosa Tull"], "Who is the mother of Bea Tull?", False, 1.0, 1.0),
        ("Rosa Bea Tull", ["Rosa Tull"], "Who is the mother of Bea Tull?", False, 0.0, pytest.approx(0.8)),
    ],
)
def test_answer_echoing_the_question_earns_nothing(answer, answers, question, echo, em, f1):
    probe = FakeProbe("p1", question=question, answers=answers)
    row = probe_row(trace([Step("s")], answer=answer), probe)
    assert (row["echo"], row["em"], row["f1"]) == (echo, em, f1)
    assert row["em_lenient"] == em


def test_echo_rule_for_sets_and_yes_no():
    q = "Who are the friends of Ada and Bo?"
    # the gold set itself is named in the question: an exact set answer keeps its credit
    both = FakeProbe("p1", question=q, answers=["Ada", "Bo"], answer_type="set")
    assert probe_row(trace([Step("s")], answer="Ada and Bo"), both)["em"] == 1.0
    # half of a gold set, made of question words only: an echo
    row = probe_row(trace([Step("s")], answer="Ada"), both)
    assert row["echo"] and row["f1"] == 0.0
    # yes/no answers are never echoes; the first yes/no word of the final answer counts
    yn = FakeProbe("p1", question="Is yes a word?", answers=["yes"], answer_type="yes_no")
    assert probe_row(trace([Step("s")], answer="I think yes"), yn)["em"] == 1.0


# ---------------------------------------------------------------- incomplete answers


def _inc(output, answer, stop_reason, error=None):
    t = trace([Step("s")], answer=answer, stop_reason=stop_reason, error=error)
    t.output = output
    return t


@pytest.mark.parametrize(
    "output, answer, stop_reason, error, reason",
    [
        ("So the answer is x.", "x", "answer", None, None),
        ("It is x", None, "eos", None, "no_answer"),
        ("It is x and then", None, "token_cap", None, "token_cap"),
        ("Step one. Step two.", None, "step_cap", None, "step_cap"),
        (" I am not confident enough to answer this question.", None, "abstain", None, "abstain"),
        ("", None, "eos", None, "empty"),
        ("   \n", None, "token_cap", None, "empty"),
        ("", None, "error", "RuntimeError: x", None),  # errors are counted in `errors` only
        ("So the answer is x.", "x", "token_cap", None, None),  # a statement was reached
        ("whatever", None, "something_new", None, "no_answer"),
    ],
)
def test_incomplete_reason(output, answer, stop_reason, error, reason):
    row = probe_row(_inc(output, answer, stop_reason, error), FakeProbe("p1", answers=["x"]))
    assert row["incomplete"] == reason


def test_incomplete_columns_are_shares_of_all_probes_and_sum_to_the_rate():
    cases = [
        ("So the answer is x.", "x", "answer", None),
        ("It is x", None, "eos", None),
        ("It is x and", None, "token_cap", None),
        ("s1. s2.", None, "step_cap", None),
        ("I abstain.", None, "abstain", None),
        ("", None, "eos", None),
        ("", None, "error", "boom"),
        ("So the answer is y.", "y", "answer", None),
    ]
    pairs = []
    for i, (out, ans, stop, err) in enumerate(cases):
        t = _inc(out, ans, stop, err)
        t.probe_id = f"p{i}"
        pairs.append((t, FakeProbe(f"p{i}", answers=["x"])))
    s = summarize(_rows(pairs)).iloc[0]
    n = len(cases)
    for reason in ("token_cap", "step_cap", "no_answer", "abstain", "empty"):
        assert s[f"incomplete_{reason}"] == pytest.approx(1 / n), reason
    assert s["incomplete_rate"] == pytest.approx(5 / n)  # the error is not incomplete
    assert s["errors"] == 1
    assert s["em"] == pytest.approx(1 / n)
    # the abstention's text is not scored, even leniently
    assert s["em_lenient"] == pytest.approx(2 / n)  # "So the answer is x" and the fallback "x" of "It is x"


# ---------------------------------------------------------------- cost, recall_at_k, deltas, gate


def test_cost_per_q_from_tokens_sent_and_retrievals():
    from flarebench.bench.prices import Price

    price = Price("m", prompt_per_1m=2.0, completion_per_1m=10.0, per_retrieval=0.001)
    p = [FakeProbe("p1", answers=["x"]), FakeProbe("p2", answers=["x"])]
    # evaluated tokens (40) differ from sent (100): billing uses what was sent
    t1 = trace([Step("s", lm_calls=[call(prompt=1000, evaluated=40, completion=100)], retrievals=[ret()])])
    t2 = trace([Step("s", lm_calls=[call(prompt=3000, evaluated=40, completion=300)])], probe_id="p2")
    rows = _rows([(t1, p[0]), (t2, p[1])])
    s = summarize(rows, price=price).iloc[0]
    # per question: 2000 prompt tokens, 200 completion tokens, 0.5 retrievals
    assert s["cost_per_q"] == pytest.approx(2000 * 2 / 1e6 + 200 * 10 / 1e6 + 0.5 * 0.001)
    assert math.isnan(summarize(rows).iloc[0]["cost_per_q"])  # no price: empty, never a silent 0
    local = Price("llamacpp:smollm2", 0.0, 0.0, local=True, matched="llamacpp:*", source="shipped")
    out = summarize(rows, price=local)
    assert out.iloc[0]["cost_per_q"] == 0.0
    assert any("local model llamacpp:smollm2: priced at 0" in n for n in out.attrs["notes"])


def test_recall_at_k_equals_recall():
    probe = FakeProbe("p1", answers=["x"], gold_doc_ids=["a", "b"])
    s = summarize(_rows([(trace([Step("s", retrievals=[ret(FIRST_HOP, ["a", "z"])])]), probe)])).iloc[0]
    assert s["recall_at_k"] == s["recall"] == 0.5


def _scored(strategy, ems):
    return [
        (
            trace([Step("s")], strategy=strategy, probe_id=f"p{i}", answer="x" if e else "y"),
            FakeProbe(f"p{i}", answers=["x"]),
        )
        for i, e in enumerate(ems)
    ]


@pytest.mark.slow
def test_delta_columns_against_the_reference():
    ref = [0, 1, 0, 1, 0, 1, 0, 1, 0, 1]
    better = [1] * 10  # right on every probe the reference got wrong
    same = list(ref)
    rows = _rows(_scored("single_time", ref) + _scored("better", better) + _scored("same", same))
    s = summarize(rows).set_index("strategy")
    assert s.loc["better", "delta_reference"] == "single_time"
    assert s.loc["better", "em_delta"] == pytest.approx(0.5)
    assert 0 < s.loc["better", "em_delta_lo"] <= 0.5 <= s.loc["better", "em_delta_hi"] <= 1.0
    assert bool(s.loc["better", "em_delta_sig"]) is True
    # identical per-probe scores: every resample differs by 0
    assert (s.loc["same", "em_delta"], s.loc["same", "em_delta_lo"], s.loc["same", "em_delta_hi"]) == (0, 0, 0)
    assert bool(s.loc["same", "em_delta_sig"]) is False
    assert s.loc["single_time", "em_delta"] == 0.0 and bool(s.loc["single_time", "em_delta_sig"]) is False
    assert s.loc["better", "f1_delta"] == pytest.approx(0.5)
    # same traces, same intervals, whatever else ran alongside
    alone = summarize(_rows(_scored("single_time", ref) + _scored("better", better))).set_index("strategy")
    assert alone.loc["better", "em_delta_lo"] == s.loc["better", "em_delta_lo"]
    # another reference; a reference not in the run leaves the columns empty
    other = summarize(rows, reference="better").set_index("strategy")
    assert other.loc["single_time", "em_delta"] == pytest.approx(-0.5)
    none = summarize(rows, reference="no_retrieval")
    assert none[["delta_reference", "em_delta", "em_delta_sig", "f1_delta_hi"]].isna().all().all()
    assert any("no_retrieval is not in this run" in n for n in none.attrs["notes"])


def test_delta_pairs_probes_by_id_not_position():
    # the strategy's rows come in another order: pairing must follow probe ids
    ref = _scored("single_time", [1, 0, 0])
    mine = list(reversed(_scored("mine", [1, 0, 0])))
    s = summarize(_rows(ref + mine)).set_index("strategy")
    assert s.loc["mine", "em_delta"] == 0.0 and s.loc["mine", "em_delta_hi"] == 0.0


def _drafted(strategy, probe_id, min_p, right, theta=None):
    theta = float(strategy.split("theta=")[1]) if theta is None else theta
    draft = call(purpose="draft")
    draft.logprobs = [math.log(0.99), math.log(min_p)]
    regen = call(purpose="regenerate")
    regen.logprobs = [math.log(0.01)]  # logprobs are not read: the step's gate record is
    gate = {"trigger": "min_prob", "score": min_p, "threshold": theta, "fired": min_p <= theta}
    return (
        trace(
            [Step("s", lm_calls=[draft, regen], gate=gate)],
            strategy=strategy,
            probe_id=probe_id,
            answer="x" if right else "y",
        ),
        FakeProbe(probe_id, answers=["x"]),
    )


def test_gate_columns():
    # right answers' min p: 0.9, 0.5; wrong answers': 0.3, 0.5 -> pairs (right > wrong): 0.9>0.3, 0.9>0.5,
    # 0.5>0.3, 0.5=0.5 (one half) -> AUROC 3.5 / 4
    spec = "flare_direct:theta=0.5"
    pairs = [
        _drafted(spec, "p1", 0.9, True),
        _drafted(spec, "p2", 0.5, True),
        _drafted(spec, "p3", 0.3, False),
        _drafted(spec, "p4", 0.5, False),
    ]
    rows = _rows(pairs)
    assert rows["gate_score"].tolist() == pytest.approx([0.9, 0.5, 0.3, 0.5])
    s = summarize(rows).iloc[0]
    assert s["gate_auroc"] == pytest.approx(0.875)
    assert s["gate_fire_right"] == 0.5  # 0.5 <= theta 0.5 (at or below fires)
    assert s["gate_fire_wrong"] == 1.0
    # only one class: AUROC undefined (not 0.5), and the report says so
    out = summarize(_rows(pairs[2:]))
    assert math.isnan(out.iloc[0]["gate_auroc"]) and math.isnan(out.iloc[0]["gate_fire_right"])
    assert out.iloc[0]["gate_fire_wrong"] == 1.0
    assert any("undefined" in n for n in out.attrs["notes"])
    # a strategy without drafts: empty gate columns
    plain = summarize(_rows(_scored("single_time", [1, 0]))).iloc[0]
    assert all(math.isnan(plain[c]) for c in ("gate_auroc", "gate_fire_right", "gate_fire_wrong"))
    # the threshold a step recorded decides, not the spec's (or today's default) theta
    recorded = [_drafted("flare_direct", "p1", 0.5, True, theta=0.4), _drafted("flare_direct", "p2", 0.3, False, 0.4)]
    s = summarize(_rows(recorded)).iloc[0]
    assert s["gate_fire_right"] == 0.0 and s["gate_fire_wrong"] == 1.0


def test_gate_note_when_it_fires_on_everything():
    spec = "flare_direct:theta=0.8"
    pairs = [_drafted(spec, f"p{i}", p, r) for i, (p, r) in enumerate([(0.2, True), (0.3, False), (0.1, False)])]
    notes = summarize(_rows(pairs)).attrs["notes"]
    assert any("fired on 100% of right and 100% of wrong answers" in n for n in notes)


def test_readme_defines_every_summary_column():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    table = readme.split("### What each number means", 1)[1].split("\n\n|", 1)[1].split("\n\n", 1)[0]
    named = {name for line in table.splitlines() for name in re.findall(r"`([a-z0-9_]+)`", line.split("|")[1])}
    assert [c for c in summary_columns() if c not in named] == []


def test_a_strategy_decoded_far_slower_than_another_is_said_to_have_shared_the_machine():
    # One model decodes at about one speed: a strategy whose tokens came 3 times slower or more was
    # slowed by something else, and its latency is not what the strategy costs.
    def decoding(strategy, seconds_per_token, pid):
        c = call(seconds=0.2 + 100 * seconds_per_token, completion=101)
        c.prefill_seconds = 0.2
        return trace([Step(text="x", lm_calls=[c])], strategy=strategy, probe_id=pid)

    def notes(slow):
        rows = _rows((decoding(s, pace, p), FakeProbe(p)) for s, pace in (("a", 0.01), ("b", slow)) for p in "pq")
        return [n for n in summarize(rows).attrs["notes"] if "decoded" in n]

    assert notes(0.05) == [
        "the model decoded b at 20 tokens/s and a at 100: one model decodes at about one speed, so something else "
        "slowed it while the slower ran (another process on the CPUs?), and b's latency columns overstate its "
        "cost: run it again alone"
    ]
    assert notes(0.02) == []  # 2-fold: a longer prompt can do that
    unrecorded = _rows((trace([Step(text="x", lm_calls=[call()])], strategy=s), FakeProbe("p1")) for s in "ab")
    assert not any("decoded" in n for n in summarize(unrecorded).attrs["notes"])  # no prefill recorded: no claim


def test_recall_is_missing_and_said_when_a_retrieval_named_documents_outside_the_corpus():
    # A plugin's retriever (or a service) indexed under other ids: its gold documents may be among
    # what it found, under ids the probe set does not know, so recall 0 would be a silent number.
    from flarebench.bench.faithfulness import faithfulness_rows

    probe = FakeProbe("p1", answers=["x"], gold_doc_ids=["a"])
    traces = [
        trace([Step("s1", retrievals=[ret(FIRST_HOP, [doc])])], strategy=s)
        for s, doc in [("foreign", "doc-17"), ("known", "z")]
    ]
    rows = pd.DataFrame([probe_row(t, probe) for t in traces])
    faith = faithfulness_rows(traces, {"a": "A.", "z": "Z."})
    summary = summarize(rows, faithfulness=faith).set_index("strategy")
    assert summary.loc["foreign", ["recall", "recall_at_k", "recall_first_hop"]].isna().all()
    assert summary.loc["known", "recall"] == 0.0  # its ids are the corpus's: nothing gold was found
    assert (
        "recall, recall_at_k, recall_first_hop, recall_later_hops: missing for foreign: 1 of its 1 answers "
        "retrieved doc ids the probe set's corpus lacks"
    ) in summary.attrs["notes"]


def test_specs_asked_for_that_have_not_run_yet_are_said_so_not_absent():
    # An interrupted comparison: the reference and the bounds were asked for and had not run.
    from flarebench.bench.report import summary_frame

    probe = FakeProbe("p1", answers=["x"])
    traces = [trace([Step("s")], strategy=s) for s in ("flare_direct", "ircot")]
    order = ["no_retrieval", "single_time", "flare_direct", "ircot", "flare_direct:theta=1"]
    summary = summary_frame(traces, {"p1": probe}, order=order, reference="single_time")
    notes = summary.attrs["notes"]
    assert "delta columns: empty: the reference strategy single_time has not run yet" in notes
    bounds = next(n for n in notes if n.startswith("bound rows:"))
    assert "never = no_retrieval has not run yet, always = flare_direct:theta=1 has not run yet" in bounds
    assert "headroom_captured empty: the never bound no_retrieval has not run yet" in bounds
    assert summary.attrs["adoption"].absent == (
        "No adoption table yet: the reference strategy `single_time` has not run yet."
    )
    # Not asked for at all: absent, as before.
    notes = summarize(pd.DataFrame([probe_row(t, probe) for t in traces]), reference="single_time").attrs["notes"]
    assert "delta columns: empty: the reference strategy single_time is not in this run (--reference SPEC)" in notes


def test_a_gate_whose_judgements_all_went_unparsed_is_said_not_left_blank():
    # A self_check model that never names a verdict: no score, never fired; its columns are empty.
    unparsed = {"trigger": "self_check", "score": None, "threshold": None, "fired": False, "unparsed": True}
    probe = FakeProbe("p1", answers=["x"])
    rows = pd.DataFrame([probe_row(trace([Step("s", gate=dict(unparsed)), Step("t", gate=dict(unparsed))]), probe)])
    summary = summarize(rows)
    assert pd.isna(summary.iloc[0]["gate_auroc"])
    assert (
        "gate of s: 2 judgement(s) had no score (the check's reply named no verdict) and did not fire; none had "
        "one, so the gate never fired and its columns are empty"
    ) in summary.attrs["notes"]


def test_a_gate_that_fires_on_everything_under_a_retrieval_cap_is_not_said_to_retrieve_for_everything():
    # flare_direct:theta=0.99,max_retrievals=0: the gate fires on every draft, the cap retrieves nothing.
    fired = {"trigger": "min_prob", "score": 0.1, "threshold": 0.99, "fired": True, "skipped": "retrieval_cap"}
    right, wrong = FakeProbe("p1", answers=["x"]), FakeProbe("p2", answers=["y"])
    rows = pd.DataFrame([probe_row(trace([Step("s", gate=dict(fired))], probe_id=p.id), p) for p in (right, wrong)])
    notes = summarize(rows).attrs["notes"]
    line = next(n for n in notes if n.startswith("gate of s: fired on 100% of right and 100% of wrong"))
    assert line.endswith(
        "it fires on nearly everything, and its cap on retrievals kept 2 firing(s) from retrieving "
        "(retrieval_rate 0.00)"
    )
