"""flarebench.bench.uncertainty: the paired bootstrap, on cases whose answer is known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from flarebench.bench.uncertainty import paired_bootstrap


def test_identical_scores_give_a_zero_interval():
    d = paired_bootstrap([1, 0, 1, 0], [1, 0, 1, 0])
    assert (d.delta, d.lo, d.hi, d.significant) == (0.0, 0.0, 0.0, False)


def test_constant_difference_is_significant():
    # every probe one better: every resample's mean difference is exactly 1
    d = paired_bootstrap([1, 1, 1], [0, 0, 0])
    assert (d.delta, d.lo, d.hi, d.significant) == (1.0, 1.0, 1.0, True)
    d = paired_bootstrap([0, 0, 0], [1, 1, 1])
    assert (d.lo, d.hi, d.significant) == (-1.0, -1.0, True)
    # one probe: its "interval" is its own difference, which says nothing of chance
    d = paired_bootstrap([1], [0])
    assert (d.delta, d.lo, d.hi, d.n, d.significant) == (1.0, 1.0, 1.0, 1, False)


def test_pairing_matters():
    # unpaired, these two look alike; paired, the first is always exactly 0.1 above the second
    a = np.linspace(0, 1, 20) + 0.1
    b = np.linspace(0, 1, 20)
    d = paired_bootstrap(a, b)
    assert d.lo == pytest.approx(0.1) and d.hi == pytest.approx(0.1) and d.significant


def test_interval_matches_a_known_bootstrap_and_is_seeded():
    rng = np.random.default_rng(123)
    a = rng.integers(0, 2, 50).astype(float)
    b = rng.integers(0, 2, 50).astype(float)
    d1 = paired_bootstrap(a, b)
    assert d1 == paired_bootstrap(a, b)  # same inputs, same interval
    # the same bootstrap written out directly: default_rng(0), 10,000 resamples of 50 indices
    gen = np.random.default_rng(0)
    idx = np.concatenate([gen.integers(0, 50, size=(1000, 50)) for _ in range(10)])
    means = (a - b)[idx].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    assert (d1.lo, d1.hi) == (pytest.approx(lo), pytest.approx(hi))
    assert d1.lo <= d1.delta <= d1.hi
    # a 50/50 coin against another: the interval straddles 0 and is about +-2 standard errors wide
    se = (a - b).std(ddof=0) / math.sqrt(50)
    assert d1.hi - d1.lo == pytest.approx(2 * 1.96 * se, rel=0.15)
    # the seed is what fixes it (continuous scores, so two seeds' percentiles differ)
    f1a, f1b = rng.random(50), rng.random(50)
    assert paired_bootstrap(f1a, f1b, seed=1).lo != paired_bootstrap(f1a, f1b).lo


def test_empty_and_mismatched():
    d = paired_bootstrap([], [])
    assert d.n == 0 and math.isnan(d.delta) and not d.significant
    with pytest.raises(ValueError):
        paired_bootstrap([1, 0], [1])
