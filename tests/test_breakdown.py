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


def _rows_with(metas: list[dict]):
    """Strategies "s" and "b" on one probe per metadata dict: "s" right on every probe, "b" on none."""
    pairs = []
    for i, meta in enumerate(metas):
        p = FakeProbe(f"p{i}", answers=["cat"], gold_doc_ids=["d1"], metadata=meta)
        pairs += [(trace([Step("s")], probe_id=p.id, answer="cat"), p),
                  (trace([Step("s")], strategy="b", probe_id=p.id, answer="dog"), p)]  # fmt: skip
    return _rows(pairs)


@pytest.mark.parametrize("field", ["em", "n", "strategy", "_v", "_s"])
def test_a_field_named_like_a_column_is_kept_apart_and_hides_nothing(field):
    # Every value 2 or "x": a result column it replaced would show it.
    data = _rows_with([{field: 2}, {field: 2}, {field: "x"}])
    table = breakdown(data, field)
    assert list(table.columns[:3]) == ["strategy", f"meta_{field}" if field in ("em", "n", "strategy") else field, "n"]
    assert list(table["strategy"]) == ["s", "s", "b", "b"]
    assert list(table.iloc[:, 1]) == [2, "x", 2, "x"]
    assert (list(table["n"]), list(table["em"])) == ([2, 1, 2, 1], [1.0, 1.0, 0.0, 0.0])


def test_values_that_read_the_same_are_one_row_shown_as_the_number():
    data = _rows_with([{"d": "1"}, {"d": 1}, {"d": 1.0}, {"d": True}, {"d": "10"}, {"d": 9}, {}])
    table = breakdown(data, "d")
    s = table[table["strategy"] == "s"]
    assert list(zip(s["d"], s["n"])) == [(1, 3), (9, 1), ("10", 1), ("<none>", 1), (True, 1)]
    assert type(s["d"].iloc[0]) is int and s["d"].map(str).is_unique


def test_a_breakdown_shows_every_long_answer_column():
    # README: `--by` shows "the long-answer columns" on a set with long probes: all of them.
    from flarebench.bench.breakdown import COLUMNS
    from flarebench.bench.scorers.registry import optional_columns

    long_answer = [c for c in optional_columns() if not c.startswith("tool_calls_")]
    assert long_answer and set(long_answer) <= set(COLUMNS)
