"""Plain-language findings at the top of a report: what the numbers say, including where the
papers' qualitative findings do not show up for this model and probe set.

Each finding is one sentence computed from the summary alone (no judgement that is not in a
number): which strategies are on the Pareto front, which deltas against the reference are
significant, which strategies harmed more than 5% of the probes against it, how much of the
headroom between never and the oracle the best strategy closes, and for a sweep whether the
retrieval rate rises with the swept value as in the FLARE paper's Figure 5.
"""

from __future__ import annotations

import pandas as pd

from flarebench.bench.bounds import ALWAYS, BOUND, NEVER, ORACLE, never_retrieved, strategy_rows
from flarebench.bench.calibrate import calibration_lines, calibration_table
from flarebench.bench.plots import QUALITY, cost_axis, pareto_front, probe_counts_differ, tokens_frame
from flarebench.bench.report import interval_text
from flarebench.strategies.registry import with_param


def _fmt(x: float) -> str:
    return f"{x:.3f}"


def _front(summary: pd.DataFrame, column: str, label: str) -> str:
    frame = tokens_frame(summary)
    front = pareto_front(frame[column].astype(float).to_numpy(), frame[QUALITY].astype(float).to_numpy())
    closed = set(never_retrieved(summary))  # cheap because it answered without documents: said so
    names = [str(frame["strategy"].iloc[i]) for i in front]
    names = [f"{name} (never retrieved)" if name in closed else name for name in names]
    return f"Pareto front of {QUALITY.upper()} against {label}: {', '.join(names) or 'none'}."


def _deltas(summary: pd.DataFrame) -> str | None:
    if "delta_reference" not in summary or summary["delta_reference"].isna().all():
        return None
    reference = summary["delta_reference"].dropna().iloc[0]
    others = summary[summary["strategy"] != reference]
    if others.empty:
        return None
    significant = [
        f"{r['strategy']} ({interval_text(*(r[f'{QUALITY}_delta{x}'] for x in ('', '_lo', '_hi')))})"
        for _, r in others.iterrows()
        if bool(r[f"{QUALITY}_delta_sig"])
    ]
    n = int(summary["n"].min())
    if not significant:
        return (
            f"No strategy's {QUALITY.upper()} differs from {reference}'s beyond chance on these {n} probes "
            "(every 95% paired-bootstrap interval includes 0): this probe set cannot tell them apart for this model."
        )
    return f"{QUALITY.upper()} differs from {reference}'s beyond chance for: {', '.join(significant)}."


def _retrieval_helps(summary: pd.DataFrame) -> str | None:
    rows = {r["strategy"]: r for _, r in summary.iterrows()}
    if "no_retrieval" not in rows or len(rows) < 2:
        return None
    base = rows["no_retrieval"][QUALITY]
    # A strategy that never retrieved answered closed-book: no evidence either way.
    never = never_retrieved(summary)
    rows = {s: r for s, r in rows.items() if s not in never}
    if len(rows) < 2:
        return None
    better = [s for s, r in rows.items() if s != "no_retrieval" and r[QUALITY] > base]
    left_out = f"{', '.join(never)}, which never retrieved, left out; " if never else ""
    if not better:
        return (
            f"Retrieval does not help here: no strategy beats no_retrieval's {QUALITY.upper()} of {_fmt(base)} "
            f"({left_out}the FLARE and IRCoT papers find that it does on multi-hop questions; this model does not turn "
            "the passages into answers)."
        )
    helps = (
        f"Retrieval helps on average: {len(better)} of {len(rows) - 1} strategies score a higher "
        f"{QUALITY.upper()} than no_retrieval's {_fmt(base)} ({left_out}best: "
        f"{max(better, key=lambda s: rows[s][QUALITY])}, {_fmt(max(rows[s][QUALITY] for s in better))})"
    )
    reference = summary["delta_reference"].dropna()
    if reference.empty or reference.iloc[0] != "no_retrieval":
        helps += "; whether beyond chance: --reference no_retrieval gives the intervals"
    return helps + "."


#: Below this best fact_recall, a set of long answers is beyond the model: no comparison stands on it.
LOW_FACT_RECALL = 0.2


def _long_answers(summary: pd.DataFrame) -> str | None:
    """On long probes: how much of the required facts the best strategy states, and whether the
    model writes such answers at all."""
    if "fact_recall" not in summary or summary["fact_recall"].isna().all():
        return None
    # A strategy whose every probe raised has fact_recall 0 (errors count 0) but wrote no answer.
    answered = summary
    if {"errors", "n"} <= set(summary.columns):
        answered = summary[summary["errors"].astype(float) < summary["n"].astype(float)]
    if answered.empty:
        return "Long answers: every probe of every strategy raised an error, so no answer was judged (see errors)."
    recall = answered["fact_recall"].astype(float)
    top = float(recall.max())
    best = list(answered.loc[recall == top, "strategy"].astype(str))  # a tie names every strategy in it
    if len(best) == len(answered) > 1:
        who = "every strategy states"
    elif len(best) > 1:
        who = f"the best strategies, {', '.join(best)}, state"
    else:
        who = f"the best strategy, {best[0]}, states"
    line = f"Long answers: {who} {_fmt(top)} of the required facts"
    # Empty (left out) where every long probe raised: no output was judged. A strategy with errors
    # counts them in no rate's numerator, so the lowest rate is taken among those without, where any are.
    clean = answered[answered["errors"].astype(float) == 0] if "errors" in answered.columns else answered
    rated = clean if not clean.empty else answered
    wrong = rated.get("incomplete_or_wrong_rate", pd.Series(dtype=float)).astype(float)
    if wrong.notna().any():
        lowest = rated.loc[wrong.idxmin(), "strategy"]
        line += f"; at best ({lowest}), {_fmt(float(wrong.min()))} of answers miss a fact or state a wrong value"
    if top < LOW_FACT_RECALL:
        line += (
            f" (below {LOW_FACT_RECALL}: this model does not write these answers from the passages, so no "
            "strategy's gain on them can show; FLARE's gains on long answers were measured with far larger models)"
        )
    return line + "."


def _sweep(summary: pd.DataFrame, study: dict) -> list[str]:
    param, values = study.get("param"), study.get("values") or []
    rows = {r["strategy"]: r for _, r in summary.iterrows()}
    out = []
    for base in study.get("strategies") or []:
        points = [(v, rows[s]) for v in values if (s := with_param(base, param, v)) in rows]
        if len(points) < 2:
            continue
        rates = [float(r["retrieval_rate"]) for _, r in points]
        trend = " -> ".join(f"{_fmt(x)} at {param}={v}" for (v, _), x in zip(points, rates))
        rising = all(b >= a for a, b in zip(rates, rates[1:]))
        verdict = "rises with" if rising and rates[-1] > rates[0] else "does not rise steadily with"
        out.append(f"{base}: the retrieval rate {verdict} {param} ({trend}).")
        best_v, best = max(points, key=lambda p: float(p[1][QUALITY]))
        spread = max(float(r[QUALITY]) for _, r in points) - min(float(r[QUALITY]) for _, r in points)
        line = (
            f"{base}: best {QUALITY.upper()} {_fmt(float(best[QUALITY]))} at {param}={best_v}; "
            f"{QUALITY.upper()} spans {_fmt(spread)} across the sweep"
        )
        if rising and best_v == points[0][0] and spread > 0:
            line += (
                f"; more retrieval does not buy quality here (the FLARE paper finds quality rising with the "
                f"retrieval rate up to a point; with this model the lowest {param} is best)"
            )
        out.append(line + ".")
    return out


#: Above this harmed share (of the probes paired with the reference) a strategy's harm is a finding.
HARM = 0.05


def _share(x: float) -> str:
    """A share as a percentage for a sentence: 15% (12.2% where a whole number would round)."""
    text = f"{100 * x:.1f}"
    return f"{text.removesuffix('.0')}%"


def _harms(summary: pd.DataFrame) -> list[str]:
    """One line per strategy that gave a lower F1 than the reference on more than :data:`HARM` of
    the probes (the never bound left out: what it loses is what retrieval gains)."""
    if "harmed" not in summary or "delta_reference" not in summary or summary["delta_reference"].isna().all():
        return []
    reference = summary["delta_reference"].dropna().iloc[0]
    return [
        f"{r['strategy']} harmed {_share(float(r['harmed']))} of the probes against {reference} (a lower "
        f"{QUALITY.upper()} than {reference}'s on them) and helped {_share(float(r['helped']))}."
        for _, r in summary.iterrows()
        if r["strategy"] != reference and r.get(BOUND) != NEVER and pd.notna(r["harmed"]) and float(r["harmed"]) > HARM
    ]


def _headroom(summary: pd.DataFrame, oracle: pd.DataFrame) -> str | None:
    """Which strategy closes most of the F1 gap between never and the per-probe oracle, and how much
    always closes."""
    if "headroom_captured" not in summary or BOUND not in summary:
        return None
    bounds = {r[BOUND]: r for _, r in summary.iterrows() if isinstance(r[BOUND], str)}
    scored = summary[summary["headroom_captured"].notna() & (summary[BOUND] != NEVER)]
    if NEVER not in bounds or scored.empty:
        return None
    never = bounds[NEVER]
    best = scored.loc[scored["headroom_captured"].astype(float).idxmax()]
    top = f" ({_fmt(float(oracle[QUALITY].iloc[0]))})" if not oracle.empty else ""
    if float(best["headroom_captured"]) <= 0:  # a tie at nothing: no strategy "closes the most"
        return (
            f"No strategy closes any of the {QUALITY.upper()} gap between never ({never['strategy']}, "
            f"{_fmt(float(never[QUALITY]))}) and the per-probe oracle{top}: headroom_captured is at most "
            f"{_fmt(float(best['headroom_captured']))} for every strategy."
        )
    line = (
        f"Of the {QUALITY.upper()} gap between never ({never['strategy']}, {_fmt(float(never[QUALITY]))}) and "
        f"the per-probe oracle{top}, {best['strategy']} closes the most: headroom_captured "
        f"{_fmt(float(best['headroom_captured']))}"
    )
    always = bounds.get(ALWAYS)
    if always is not None and always["strategy"] != best["strategy"] and pd.notna(always["headroom_captured"]):
        line += f"; always ({always['strategy']}) closes {_fmt(float(always['headroom_captured']))}"
    return line + "."


def findings(summary: pd.DataFrame, study: dict) -> list[str]:
    """The findings for a summary (one row per strategy spec, and a comparison's oracle row) and its
    study record."""
    oracle = summary[summary[BOUND] == ORACLE] if BOUND in summary else summary.iloc[0:0]
    summary = strategy_rows(summary)
    if summary.empty:
        return []
    cost_col, cost_label, _ = cost_axis(summary)
    out = _sweep(summary, study) if study.get("kind") == "sweep" else []
    if "calibration" in study:
        out += calibration_lines(calibration_table(summary, study), study)
    if probe_counts_differ(summary):
        pending = list(summary.attrs.get("pending", []))
        counts = [*pd.to_numeric(summary["n"], errors="coerce"), *([0] if pending else [])]
        # A run stopped (or going on) part-way: means over different probes compare nothing. The
        # paired findings (deltas, harms) stand; the others wait until every strategy has every probe.
        out.append(
            f"The strategies have run different numbers of probes so far ({int(min(counts))} to "
            f"{int(max(counts))}"
            + (f"; not started: {', '.join(pending)}" if pending else "")
            + "): findings that compare their means wait until the run is finished; the "
            "deltas, and adoption.md, pair the probes both have."
        )
        return out + [f for f in (_deltas(summary),) if f] + _harms(summary)
    out += [f for f in (_long_answers(summary), _retrieval_helps(summary), _deltas(summary)) if f]
    out += _harms(summary)
    out += [f for f in (_headroom(summary, oracle),) if f]
    if len(summary) > 1:  # one strategy trades nothing off (as the plots say)
        out.append(_front(summary, cost_col, cost_label))
        out.append(_front(summary, "latency_p95_s", "p95 latency"))
    return out
