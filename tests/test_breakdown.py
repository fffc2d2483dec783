"""Breakdown of results by a probe metadata field."""

import pandas as pd
import pytest

from flarebench.bench.breakdown import BreakdownError, breakdown, metadata_fields
from flarebench.bench.metrics import summarize
from flarebench.strategies.records import FIRST_HOP, Step
from tests.test_metrics import FakeProbe, _rows, call, ret, trace


def probe(pid, difficulty, answer="cat"):
    meta = {} if difficulty is None else {"difficulty": difficulty}
    return FakeProbe(pid, answers=[answer], gold_doc_ids=["d1"], metadata=meta)


def rows():
    one_call = Step("s", lm_calls=[call()], retrievals=[ret(FIRST_HOP)])
    triggered = Step("s2", lm_calls=[call(), call()], retrievals=[ret(doc_ids=["d2"])])
    pairs = [
        (trace([one_call, triggered, Step("s3"), Step("s4")], answer="cat"), probe("p1", 10)),
        (trace([one_call, Step("s2")], probe_id="p2", answer="dog"), probe("p2", 2)),
        (trace([one_call], probe_id="p3", answer="cat", seconds=3.0), probe("p3", 2)),
        (trace([], strategy="b", probe_id="p2", answer=None, error="LMError: gone", stop_reason="error"),
         probe("p2", 2)),
        (trace([one_call, triggered], strategy="b", probe_id="p3", answer="cat"), probe("p3", 2)),
        (trace([one_call], strategy="b", probe_id="p4", answer="cat"), probe("p4", None)),
    ]  # fmt: skip
    return _rows(pairs)


def test_groups_by_strategy_and_value_in_numeric_order():
    table = breakdown(rows(), "difficulty")
    assert list(zip(table["strategy"], table["difficulty"])) == [("s", 2), ("s", 10), ("b", 2), ("b", "<none>")]
    s2, s10, b2 = table.iloc[0], table.iloc[1], table.iloc[2]
    assert (s2["n"], s2["errors"], s2["em"], s2["recall"], s2["latency_p95_s"]) == (2, 0, 0.5, 1.0, 2.9)
    assert (s10["retrieval_rate"], s10["lm_calls_per_q"]) == (0.25, 3.0)  # triggered steps / steps
    # The probe that raised counts in n and errors and as wrong, and is left out of what it used.
    assert (b2["n"], b2["errors"], b2["em"], b2["retrieval_rate"], b2["lm_calls_per_q"]) == (2, 1, 0.5, 0.5, 3.0)


def test_each_value_scores_as_the_summary_of_its_probes():
    data = rows()
    table = breakdown(data, "difficulty").set_index(["strategy", "difficulty"])
    for value in (2, 10):
        alone = summarize(data[data["meta_difficulty"] == value]).set_index("strategy")
        for strategy in alone.index:
            got = table.loc[(strategy, value)]
            pd.testing.assert_series_equal(
                got.astype(float), alone.loc[strategy, got.index].astype(float), check_names=False
            )


def test_a_value_where_every_probe_raised_leaves_what_it_used_empty():
    data = rows()
    table = breakdown(data[data["probe_id"] == "p2"], "difficulty").set_index("strategy")
    assert (table.loc["b", "n"], table.loc["b", "errors"], table.loc["b", "em"]) == (1, 1, 0.0)
    assert pd.isna(table.loc["b", "lm_calls_per_q"]) and pd.isna(table.loc["b", "retrieval_rate"])


def test_unknown_field_names_the_known_ones():
    assert metadata_fields(rows()) == ["difficulty"]
    with pytest.raises(BreakdownError, match="no probe metadata field 'hops'; fields: difficulty"):
        breakdown(rows(), "hops")
