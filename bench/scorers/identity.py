"""Which strategy a summary row is, how many probes it scored and how many of them raised."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flarebench.bench.scorers.registry import HIGHER, LOWER, Column, Group, scorer
from flarebench.strategies.records import Trace


def identity_row(trace: Trace, probe: Any, row: Mapping[str, Any]) -> dict[str, bool]:
    """``service``: whether the trace came from a service under test (``http``), whose row holds
    NaN, never 0, where the service did not report a quantity (the scorers after this one)."""
    return {"service": trace.service is not None}


@scorer(
    Column(
        "strategy",
        "The strategy spec as typed (name or name:key=value,...); two settings of one strategy are two rows.",
    ),
    # Fewer probes scored, or more that raised, make every other number incomparable with the
    # baseline's (an average over fewer probes can pass every bound): gated even when not named.
    Column(
        "n",
        "Number of probes scored for this strategy.",
        better=HIGHER,
        tolerance={"max_drop": 0},
        always_gated=True,
    ),
    Column(
        "errors",
        "Number of probes whose run raised an error; they are scored 0 for EM and F1 and are not "
        "counted as incomplete answers.",
        better=LOWER,
        tolerance={"max_rise": 0},
        always_gated=True,
    ),
    order=10,
    per_probe=identity_row,
)
def identity(g: Group) -> dict[str, Any]:
    """The spec, the probes scored and the probes that raised."""
    return {"strategy": g.strategy, "n": len(g.rows), "errors": int(g.failed.sum())}
