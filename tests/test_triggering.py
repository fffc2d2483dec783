"""The triggering scorer (bench/scorers/triggering.py): when active retrieval fires, its latency,
and its tokens and cost against the reference on the same probes, on hand-built traces."""

from __future__ import annotations

import pandas as pd
import pytest

from flarebench.bench.metrics import summarize
from flarebench.bench.prices import Price
from flarebench.strategies.records import FIRST_HOP, Step
from tests.test_metrics import FakeProbe, _rows, call, ret, trace


def _first_hop(prompt=100, completion=10):
    return Step("answer", lm_calls=[call(prompt=prompt, completion=completion)], retrievals=[ret(FIRST_HOP)])


def _runs():
    """single_time answers p1 and p2 in one call each; flare_direct retrieves once mid-answer on p1
    (two calls, 330 tokens, 5 s) and not on p2 (110 tokens, 1.5 s)."""
    single = [trace([_first_hop()], "single_time", p, seconds=s) for p, s in (("p1", 1.0), ("p2", 2.0))]
    fired = Step("s2", lm_calls=[call(prompt=200, completion=20)], retrievals=[ret("low_confidence")])
    flare = [
        trace([_first_hop(), fired], "flare_direct", "p1", seconds=5.0),
        trace([_first_hop()], "flare_direct", "p2", seconds=1.5),
    ]
    return _rows([(t, FakeProbe(t.probe_id, answers=["x"])) for t in single + flare])


def test_triggered_share_latency_split_and_tokens_against_the_reference():
    s = summarize(_runs(), reference="single_time").set_index("strategy")
    flare, single = s.loc["flare_direct"], s.loc["single_time"]
    assert (flare["triggered_share"], flare["retrievals_when_triggered"]) == (0.5, 1.0)
    assert (flare["latency_p95_triggered_s"], flare["latency_p95_untriggered_s"]) == (5.0, 1.5)
    assert flare["tokens_rel_blended"] == pytest.approx((330 + 110) / (110 + 110) - 1)  # 1.0
    assert flare["tokens_rel_triggered"] == pytest.approx(330 / 110 - 1)  # p1 only: 2.0
    # The reference against itself, and a strategy that never fired: nothing to report is empty, not 0.
    assert single["triggered_share"] == 0.0 and single["tokens_rel_blended"] == 0.0
    for col in ("retrievals_when_triggered", "latency_p95_triggered_s", "tokens_rel_triggered"):
        assert pd.isna(single[col])
    assert single["latency_p95_untriggered_s"] == pytest.approx(1.0 + 0.95 * (2.0 - 1.0))
    # Unpriced: no cost columns.
    assert pd.isna(flare["cost_rel_blended"]) and pd.isna(flare["cost_rel_triggered"])


def test_cost_is_relative_at_the_price_tables_prices_and_empty_without_the_reference():
    price = Price("m", prompt_per_1m=1.0, completion_per_1m=3.0, per_retrieval=0.001)
    s = summarize(_runs(), reference="single_time", price=price).set_index("strategy")
    usd = {  # prompt x 1 + completion x 3 per million tokens, plus 0.001 per retrieval
        "single": 100e-6 + 30e-6 + 0.001,
        "flare_p1": 300e-6 + 90e-6 + 0.002,
        "flare_p2": 100e-6 + 30e-6 + 0.001,
    }
    flare = s.loc["flare_direct"]
    assert flare["cost_rel_blended"] == pytest.approx((usd["flare_p1"] + usd["flare_p2"]) / (2 * usd["single"]) - 1)
    assert flare["cost_rel_triggered"] == pytest.approx(usd["flare_p1"] / usd["single"] - 1)
    alone = summarize(_runs(), reference="ircot").set_index("strategy").loc["flare_direct"]
    assert pd.isna(alone["tokens_rel_blended"]) and alone["triggered_share"] == 0.5
