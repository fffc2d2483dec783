"""Paired bootstrap confidence intervals for the difference of a metric between two strategies.

Both strategies answered the same probes, so the probes are resampled together: each bootstrap
sample draws n probe indices with replacement and takes the mean of (strategy - reference) over
them (or, for another statistic such as the 95th percentile, that statistic of the strategy's
values minus that of the reference's, on the same draw). The interval is the 2.5th and 97.5th
percentile of those resampled differences (numpy percentile, linear interpolation). Seeded
(``numpy.random.default_rng(seed)``, a fresh generator per comparison), so the same traces give the
same intervals whatever other strategies ran.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: Resamples and seed used by the summary.
RESAMPLES = 10_000
SEED = 0
#: The reference strategy every other one is compared with, unless --reference says otherwise.
DEFAULT_REFERENCE = "single_time"

_CHUNK = 1_000  # resamples drawn at a time, so memory stays small on large probe sets

#: A statistic of paired samples: reduces the last axis of an array (one value per row of a 2-d one).
Statistic = Callable[[np.ndarray], np.ndarray | float]


def p95(values: np.ndarray) -> np.ndarray | float:
    """The 95th percentile over the last axis (numpy's default, linear interpolation: the summary's
    ``latency_p95_s``)."""
    return np.percentile(values, 95, axis=-1)


@dataclass(frozen=True)
class Delta:
    """Mean difference (strategy - reference) and its 95% paired-bootstrap interval."""

    delta: float
    lo: float
    hi: float
    n: int

    @property
    def significant(self) -> bool:
        """True where the interval excludes 0 and rests on two probes or more: one probe's interval
        is that probe's own difference, which says nothing of chance."""
        return bool(self.n >= 2 and (self.lo > 0 or self.hi < 0))


def paired_bootstrap(
    values: np.ndarray | list[float],
    reference: np.ndarray | list[float],
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = 0.95,
    statistic: Statistic | None = None,
) -> Delta:
    """The mean of ``values - reference`` (paired by position) and its bootstrap interval; with a
    ``statistic`` (e.g. :func:`p95`), ``statistic(values) - statistic(reference)`` instead, each
    resample drawing the same positions from both.

    An empty pair list gives NaNs. With one probe every resample is that probe, so the interval
    is that single difference.
    """
    a = np.asarray(values, dtype=float)
    b = np.asarray(reference, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired values must be two equal-length 1-d sequences, got {a.shape} and {b.shape}")
    n = len(a)
    if n == 0:
        return Delta(float("nan"), float("nan"), float("nan"), 0)
    if statistic is None:
        diff = a - b
        point = diff.mean()

        def draw(idx: np.ndarray) -> np.ndarray:
            return diff[idx].mean(axis=1)
    else:
        point = statistic(a) - statistic(b)

        def draw(idx: np.ndarray) -> np.ndarray:
            return statistic(a[idx]) - statistic(b[idx])

    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for start in range(0, resamples, _CHUNK):
        size = min(_CHUNK, resamples - start)
        idx = rng.integers(0, n, size=(size, n))
        means[start : start + size] = draw(idx)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return Delta(float(point), float(lo), float(hi), n)
