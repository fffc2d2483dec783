"""The report's plots, drawn with matplotlib (no display: ``Figure`` objects rendered to PNG bytes).

Each function takes the summary (one row per strategy spec) or the per-probe rows and returns PNG
bytes, or None when the run holds nothing to draw (e.g. no strategy drafts, no sweep).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from flarebench.strategies.registry import with_param
from flarebench.strategies.triggers import fires_high

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: The quality axis of every plot: F1 of the stated answer (graded, unlike EM, so small models
#: with few exact answers still show differences).
QUALITY = "f1"
_DPI = 110
_RIGHT, _WRONG, _FRONT = "#1b7837", "#b2182b", "#d95f02"


def pareto_front(cost: Sequence[float], quality: Sequence[float]) -> list[int]:
    """Indices of the points no other point beats: none is at most as costly and at least as good
    with one of the two strictly better. Sorted by cost (then quality, best first); NaNs never qualify."""
    points = [
        (float(c), -float(q), i)
        for i, (c, q) in enumerate(zip(cost, quality))
        if not (math.isnan(float(c)) or math.isnan(float(q)))
    ]
    front, best = [], -math.inf
    for _cost, neg_q, i in sorted(points):
        if -neg_q > best:
            front.append(i)
            best = -neg_q
    return front


def _figure(width: float, height: float) -> Figure:
    """A new figure of that size in inches. matplotlib is imported here, when a plot is drawn: a
    command that only scores (``flarebench score``) never pays for its import (about 0.25 s)."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height))


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, bbox_inches="tight")
    return buf.getvalue()


def cost_axis(summary: pd.DataFrame) -> tuple[str, str, str]:
    """The column, label and caption note of the cost axis: cost_per_q when any strategy has a
    price above 0, else the tokens per question (sent + generated; what a hosted API would bill)."""
    cost = pd.to_numeric(summary["cost_per_q"], errors="coerce")
    if (cost.fillna(0) > 0).any():
        return "cost_per_q", "cost per question (USD)", ""
    why = "priced at 0 (a local model)" if cost.notna().any() else "not in the price table"
    return "tokens_per_q", "tokens per question (prompt sent + completion)", f" The LM is {why}, so cost is tokens."


def tokens_frame(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary with a tokens_per_q column (prompt tokens sent + completion tokens per question)."""
    frame = summary.copy()
    frame["tokens_per_q"] = frame["prompt_tokens_per_q"].astype(float) + frame["completion_tokens_per_q"].astype(float)
    return frame


def probe_counts_differ(summary: pd.DataFrame) -> bool:
    """Whether the strategies have run different numbers of probes (a run stopped or going on
    part-way; a strategy not started yet, ``attrs["pending"]``, has run none): their means are then
    over different probes, and comparing them compares nothing."""
    if summary.attrs.get("pending"):
        return True
    return "n" in summary.columns and pd.to_numeric(summary["n"], errors="coerce").nunique() > 1


def tradeoff(summary: pd.DataFrame, x: str, x_label: str) -> bytes | None:
    """Quality against ``x`` (a cost or latency column), one labelled point per strategy, the Pareto
    front (cheaper or faster and at least as good) drawn as a step line with its points ringed
    unless the strategies have run different numbers of probes; None when fewer than two strategies
    have both values (one point trades nothing off)."""
    frame = tokens_frame(summary)
    xs = pd.to_numeric(frame[x], errors="coerce").to_numpy(dtype=float)
    ys = pd.to_numeric(frame[QUALITY], errors="coerce").to_numpy(dtype=float)
    if (~np.isnan(xs) & ~np.isnan(ys)).sum() < 2:
        return None
    fig = _figure(6.4, 4.2)
    ax = fig.subplots()
    ax.scatter(xs, ys, color="#4c78a8", zorder=3)
    right_half = np.nanmin(xs) + (np.nanmax(xs) - np.nanmin(xs)) / 2
    for label, px, py in zip(frame["strategy"], xs, ys):
        if not (math.isnan(px) or math.isnan(py)):
            # Labels point inwards so none runs off the plot.
            left = px > right_half
            ax.annotate(
                str(label),
                (px, py),
                textcoords="offset points",
                xytext=(-5 if left else 5, 4),
                ha="right" if left else "left",
                fontsize=8,
            )
    front = [] if probe_counts_differ(summary) else pareto_front(xs, ys)
    if front:
        ax.step(xs[front], ys[front], where="post", color=_FRONT, linewidth=1.5, label="Pareto front", zorder=2)
        ax.scatter(xs[front], ys[front], s=140, facecolors="none", edgecolors=_FRONT, linewidths=1.5, zorder=4)
        ax.legend(loc="best", fontsize=8)
    ax.margins(x=0.08, y=0.12)
    ax.set_xlabel(x_label)
    ax.set_ylabel(f"{QUALITY.upper()} (stated answer)")
    ax.grid(alpha=0.3)
    return _png(fig)


def sweep(summary: pd.DataFrame, study: dict) -> bytes | None:
    """For a sweep: retrieval rate (left) and quality (right) against the swept value, one line per
    swept strategy (the shape of the FLARE paper's Figure 5 for theta)."""
    param, values, bases = study.get("param"), study.get("values") or [], study.get("strategies") or []
    if not param or not values:
        return None
    rows = {s: r for s, r in zip(summary["strategy"], summary.to_dict("records"))}
    try:
        xs = [float(v) for v in values]
        numeric = True
    except ValueError:
        xs, numeric = list(range(len(values))), False
    fig = _figure(9.6, 3.8)
    left, right = fig.subplots(1, 2)
    drawn = False
    for base in bases:
        specs = [with_param(base, param, v) for v in values]
        points = [(x, rows[s]) for x, s in zip(xs, specs) if s in rows]
        if not points:
            continue
        drawn = True
        px = [p[0] for p in points]
        left.plot(px, [p[1]["retrieval_rate"] for p in points], marker="o", label=base)
        right.plot(px, [p[1]["em"] for p in points], marker="o", label=f"{base} EM")
        right.plot(px, [p[1]["f1"] for p in points], marker="s", linestyle="--", label=f"{base} F1")
    if not drawn:
        return None
    for ax, ylabel in ((left, "retrieval rate (share of steps)"), (right, "answer quality")):
        ax.set_xlabel(param)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if not numeric:
            ax.set_xticks(xs, values)
    left.set_ylim(-0.03, 1.03)
    right.legend(fontsize=8)
    left.legend(fontsize=8)
    return _png(fig)


def calibration_axes(study: dict) -> tuple[str, str]:
    """The calibration plot's (x, y) columns: the goal's metric against what the calibration
    optimises (a budget's objective; F1 for a target), or against the retrieval rate when that is
    the goal's metric itself (a target on F1)."""
    goal = study.get("goal") or {}
    x = goal.get("metric", "retrieval_rate")
    y = goal.get("objective") or QUALITY
    return x, ("retrieval_rate" if y == x else y)


def calibration(summary: pd.DataFrame, study: dict) -> bytes | None:
    """For a calibrated run: the objective (F1 for a target) against the goal's metric, one curve per
    calibrated strategy through the grid points run on dev, its chosen point ringed, and where that
    point landed on test (a cross); the goal as a dashed line."""
    records = study.get("calibration") or []
    metric, quality = calibration_axes(study)
    if not records:
        return None
    test = {r["strategy"]: r for r in summary.to_dict("records")}
    fig = _figure(7.2, 4.4)
    ax = fig.subplots()
    for cal in records:
        points = sorted((p[metric], p[quality]) for p in cal["points"] if not _missing(p.get(metric), p.get(quality)))
        if not points:
            continue
        (line,) = ax.plot(*zip(*points), marker="o", markersize=4, label=f"{cal['base']} (dev)")
        chosen = cal["dev"]
        ax.scatter([chosen[metric]], [chosen[quality]], s=140, facecolors="none", edgecolors=line.get_color())
        landed = test.get(cal["chosen"], {})
        if not _missing(landed.get(metric), landed.get(quality)):
            ax.scatter([landed[metric]], [landed[quality]], marker="x", s=70, color=line.get_color())
    ax.axvline(float(study["goal"]["value"]), color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel(f"{metric} (dev curve; x: the chosen value on test)")
    ax.set_ylabel(f"{QUALITY.upper()} (stated answer)" if quality == QUALITY else quality)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _png(fig)


def _missing(*values) -> bool:
    return any(v is None or (isinstance(v, float) and math.isnan(v)) for v in values)


def latency(rows: pd.DataFrame, order: list[str]) -> bytes | None:
    """Per-question wall time per strategy as box plots (median, quartiles, whiskers at 1.5 IQR,
    outliers as points) with p95 marked."""
    data = [(s, rows.loc[rows["strategy"] == s, "latency_s"].astype(float).to_numpy()) for s in order]
    data = [(s, v) for s, v in data if len(v)]
    if not data:
        return None
    fig = _figure(6.4, 0.5 * len(data) + 1.4)
    ax = fig.subplots()
    ax.boxplot([v for _, v in data], orientation="horizontal", tick_labels=[s for s, _ in data])
    p95 = [float(np.percentile(v, 95)) for _, v in data]
    ax.scatter(p95, range(1, len(data) + 1), marker="|", s=250, color=_FRONT, label="p95", zorder=3)
    ax.invert_yaxis()
    ax.set_xlabel("seconds per question (wall time)")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3, axis="x")
    return _png(fig)


def threshold_of(rows: pd.DataFrame) -> float | None:
    """The one threshold the gate records of these rows used, or None (no record, or several)."""
    if "gate_threshold" not in rows:
        return None
    values = pd.to_numeric(rows["gate_threshold"], errors="coerce").dropna().unique()
    return float(values[0]) if len(values) == 1 else None


def gate(rows: pd.DataFrame, order: list[str]) -> bytes | None:
    """For strategies with a confidence gate: each answer's least confident gate score (for
    ``min_prob``, the lowest token probability), right answers (EM 1) against wrong ones, with the
    threshold the steps recorded marked; one panel per strategy."""
    if "gate_score" not in rows:
        return None
    specs = [s for s in order if rows.loc[rows["strategy"] == s, "gate_score"].notna().any()]
    if not specs:
        return None
    cols = min(3, len(specs))
    n_rows = math.ceil(len(specs) / cols)
    fig = _figure(3.6 * cols, 2.8 * n_rows)
    axes = np.atleast_1d(fig.subplots(n_rows, cols, squeeze=False)).ravel()
    for ax, spec in zip(axes, specs):
        g = rows[(rows["strategy"] == spec) & rows["gate_score"].notna()]
        right = g.loc[g["em"] > 0, "gate_score"].astype(float)
        wrong = g.loc[g["em"] <= 0, "gate_score"].astype(float)
        theta = threshold_of(g)
        triggers = g["gate_trigger"].dropna().unique() if "gate_trigger" in g else []
        trigger = str(triggers[0]) if len(triggers) == 1 else None
        default = trigger in (None, "min_prob")  # FLARE's own gate: a probability, its threshold theta
        # Probabilities on [0, 1]; other scores (a mean logprob, an entropy) over their own range.
        seen = [*right, *wrong, *([theta] if theta is not None else [])]
        lo, hi = (0.0, 1.0) if min(seen) >= 0 and max(seen) <= 1 else (min(seen), max(seen))
        bins = np.linspace(lo, hi if hi > lo else lo + 1, 21)
        ax.hist(wrong, bins=bins, alpha=0.6, color=_WRONG, label=f"wrong ({len(wrong)})")
        ax.hist(right, bins=bins, alpha=0.6, color=_RIGHT, label=f"right ({len(right)})")
        if theta is not None:
            name = "theta" if default else "threshold"
            ax.axvline(theta, color="black", linestyle="--", linewidth=1, label=f"{name} {theta:g}")
        ax.set_title(spec, fontsize=9)
        worst = "highest" if fires_high(trigger) else "lowest"
        label = "min token probability of the drafts" if default else f"{trigger} score of the drafts ({worst})"
        ax.set_xlabel(label, fontsize=8)
        ax.set_ylabel("answers", fontsize=8)
        ax.legend(fontsize=7)
    for ax in axes[len(specs) :]:
        ax.set_visible(False)
    fig.tight_layout()
    return _png(fig)
