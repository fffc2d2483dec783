"""Breakdown of results by a probe metadata field."""

import pandas as pd
import pytest

from flarebench.bench.breakdown import BreakdownError, breakdown, metadata_fields


def rows():
    base = {"em": 0.0, "f1": 0.0, "recall": 0.5, "steps": 2, "triggered_steps": 0, "lm_calls": 1}
    data = [
        {"strategy": "a", "meta_difficulty": 10, "em": 1.0, "steps": 4, "triggered_steps": 1},
        {"strategy": "a", "meta_difficulty": 2},
        {"strategy": "a", "meta_difficulty": 2, "em": 1.0, "f1": 1.0, "recall": None},
        {"strategy": "b", "meta_difficulty": 2, "lm_calls": 3},
        {"strategy": "b", "meta_difficulty": None},
    ]
    return pd.DataFrame([{**base, **d} for d in data])


def test_groups_by_strategy_and_value_in_numeric_order():
    table = breakdown(rows(), "difficulty")
    assert list(zip(table["strategy"], table["difficulty"])) == [("a", 2), ("a", 10), ("b", 2), ("b", "<none>")]
    a2 = table.iloc[0]
    assert (a2["n"], a2["em"], a2["f1"], a2["recall"]) == (2, 0.5, 0.5, 0.5)
    a10 = table.iloc[1]
    assert a10["retrieval_rate"] == 0.25 and a10["em"] == 1.0
    assert table.iloc[2]["lm_calls_per_q"] == 3


def test_unknown_field_names_the_known_ones():
    assert metadata_fields(rows()) == ["difficulty"]
    with pytest.raises(BreakdownError, match="no probe metadata field 'hops'; fields: difficulty"):
        breakdown(rows(), "hops")
