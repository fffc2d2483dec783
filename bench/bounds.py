"""The bound rows of a comparison: ``never`` (no retrieval), ``always`` (retrieve for every
sentence) and ``oracle`` (per probe, the best answer among the strategies compared).

``never`` and ``always`` are strategy specs that run like any other: :func:`with_bounds` adds them
to a comparison's specs unless the user's already hold them (``flarebench compare``), and
:func:`bound_specs` finds them among a run's specs by what they are, not by how they are written
(``flare_direct:theta=1.0`` is the always bound as much as ``flare_direct:theta=1`` is).

``oracle`` is no strategy: it is a row a comparison's summary gets after the strategies' rows
(:func:`flarebench.bench.metrics.summarize`), holding only ``n`` and the per-probe maxima of em, f1
and (long probes) fact_recall (:func:`oracle_scores`); its ``bound`` column says ``oracle``. Every
consumer that treats a summary row as a strategy (the gate, the adoption tables, the plots, the
findings, the trace viewer) leaves it out with :func:`strategy_rows`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pandas as pd

from flarebench.bench.scorers.registry import Group, Scoring

#: The bound column's values.
NEVER, ALWAYS, ORACLE = "never", "always", "oracle"
#: The summary column marking the bound rows (declared in :mod:`flarebench.bench.scorers.effect`).
BOUND = "bound"
#: The specs a comparison adds when its specs hold no never or always bound: no retrieval at all,
#: and FLARE direct at theta 1 (a drafted sentence retrieves when some token has p <= 1, that is
#: always: the FLARE paper's "retrieve every sentence" end point, retrieval_rate 1).
NEVER_SPEC = "no_retrieval"
ALWAYS_SPEC = "flare_direct:theta=1"
#: The metrics the oracle row holds: per probe the best value among the strategies, averaged.
ORACLE_METRICS = ("em", "f1", "fact_recall")


def _parsed(spec: str):
    """The configured strategy of ``spec`` (its defaults, no probe set's), or None when it cannot be
    built here (a plugin's strategy not installed when a run is rescored)."""
    from flarebench.strategies.registry import SpecError, parse_spec

    try:
        return parse_spec(spec)
    except (SpecError, ValueError, OSError):
        return None


def bound_kind(spec: str) -> str | None:
    """:data:`NEVER` for a ``no_retrieval`` spec (whatever its parameters: it never retrieves),
    :data:`ALWAYS` for a ``flare_direct`` spec whose trigger fires on every drafted sentence
    (``min_prob`` at threshold 1, nothing ignored, no retrieval cap), else None."""
    s = _parsed(spec)
    if s is None:
        return None
    if s.name == "no_retrieval":
        return NEVER
    if s.name == "flare_direct" and s.trigger == "min_prob":
        threshold = s.theta if s.threshold is None else s.threshold
        if threshold >= 1.0 and not s.ignore_terms and not s.ignore_known and s.max_retrievals is None:
            return ALWAYS
    return None


def bound_specs(specs: Iterable[str]) -> dict[str, str]:
    """``{NEVER: spec, ALWAYS: spec}`` for the bounds among ``specs`` (a kind without one left
    out): of several specs of one kind, the first at the defaults (:data:`NEVER_SPEC`,
    :data:`ALWAYS_SPEC` however written), else the first."""
    specs = list(specs)
    out: dict[str, str] = {}
    for kind, canonical in ((NEVER, NEVER_SPEC), (ALWAYS, ALWAYS_SPEC)):
        found = [s for s in specs if bound_kind(s) == kind]
        if found:
            default = _parsed(canonical)
            out[kind] = next((s for s in found if _parsed(s) == default), found[0])
    return out


def with_bounds(specs: list[str]) -> list[str]:
    """A comparison's specs: ``specs`` with :data:`NEVER_SPEC` first and :data:`ALWAYS_SPEC` last
    where no spec of theirs is that bound already (each spec once)."""
    have = bound_specs(specs)
    out = list(dict.fromkeys(specs))
    if NEVER not in have:
        out.insert(0, NEVER_SPEC)
    if ALWAYS not in have:
        out.append(ALWAYS_SPEC)
    return out


def per_probe(g: Group, metric: str) -> pd.Series | None:
    """One strategy's ``metric`` per probe id, errors counted 0 (as the delta columns count them);
    ``fact_recall`` over the long probes only (facts found / facts required). None when its rows
    lack the metric."""
    if metric == "fact_recall":
        if "facts_total" not in g.rows:
            return None
        long = g.rows["facts_total"].notna()
        rows = Group(g.strategy, g.rows[long], g.scoring)
        share = rows.rows["facts_found"].astype(float) / rows.rows["facts_total"].astype(float)
        return rows.by_probe(share.where(~rows.failed, 0.0))
    if metric not in g.rows:
        return None
    return g.by_probe(g.scores(metric))


def common_probes(scoring: Scoring) -> list[str]:
    """The probes every strategy of the run has a row for, in the first strategy's order."""
    ids = [
        list(Group(s, rows, scoring).by_probe(pd.Series(0.0, index=rows.index)).index)
        for s, rows in scoring.groups.items()
    ]
    if not ids:
        return []
    rest = [set(i) for i in ids[1:]]
    return [p for p in ids[0] if all(p in r for r in rest)]


def oracle_scores(scoring: Scoring, metric: str, probes: list[str] | None = None) -> pd.Series | None:
    """Per probe (of ``probes``, default :func:`common_probes`), the best ``metric`` among every
    strategy of the run, errors counted 0; None when no strategy has the metric. Probes no
    strategy has a value for (a short probe's fact_recall) are left out."""
    probes = common_probes(scoring) if probes is None else probes
    series = [per_probe(Group(s, rows, scoring), metric) for s, rows in scoring.groups.items()]
    series = [v for v in series if v is not None]
    if not series:
        return None
    table = pd.concat([v.reindex(probes) for v in series], axis=1)
    return table.max(axis=1, skipna=True).dropna()


def oracle_row(scoring: Scoring) -> dict[str, object] | None:
    """The oracle row's values: ``strategy`` and ``bound`` "oracle", ``n`` (the probes every
    strategy answered) and the mean over them of each :data:`ORACLE_METRICS` maximum the run can
    compute; None when the run has fewer than two strategies or no probe all of them answered."""
    if len(scoring.groups) < 2 or ORACLE in scoring.groups:
        return None
    probes = common_probes(scoring)
    if not probes:
        return None
    row: dict[str, object] = {"strategy": ORACLE, BOUND: ORACLE, "n": len(probes)}
    for metric in ORACLE_METRICS:
        best = oracle_scores(scoring, metric, probes)
        if best is not None and len(best):
            row[metric] = float(best.mean())
    return row


def is_oracle(row: Mapping[str, object]) -> bool:
    """Whether a summary row (a mapping of its columns) is the oracle row."""
    return row.get(BOUND) == ORACLE


def strategy_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary without its oracle row: the rows that are strategies."""
    if BOUND not in summary.columns or summary.empty:
        return summary
    return summary[summary[BOUND] != ORACLE]


def never_retrieved(summary: pd.DataFrame) -> list[str]:
    """The strategies meant to retrieve that made no retrieval on any probe (tool_search whose model
    never called its tool): their answers are closed-book. no_retrieval and the never bound are not
    meant to; a count a service did not report (NaN) is not 0."""
    if "retrievals_per_q" not in summary.columns:
        return []
    never = summary[BOUND].eq(NEVER) if BOUND in summary.columns else False
    meant = (summary["strategy"] != NEVER_SPEC) & ~never
    return summary.loc[meant & summary["retrievals_per_q"].eq(0), "strategy"].astype(str).tolist()
