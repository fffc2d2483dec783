"""Metrics: every number is computed from a Trace and its Probe alone, by the registered scorers.

Two levels:

* :func:`probe_row` turns one (trace, probe) pair into one flat dict: ``strategy``, ``probe_id``,
  ``error``, then each scorer's per-probe values (scores, counts, tokens, times), then the probe's
  metadata.
* :func:`summarize` turns a DataFrame of those rows into one row per strategy, each scorer giving
  its own columns: those named in :func:`summary_columns` and defined in :func:`column_docs`.

What each column means, how it aggregates and whether the gate may bound it is declared once, in
its scorer (:mod:`flarebench.bench.scorers`); this module only runs them. Nothing is rounded here:
reports round for display. Scores, rates and recall are on a 0-1 scale and times are in seconds
(see the contract in docs/design.md).

Probes are used by duck typing (``id``, ``metadata``, and what each scorer reads: ``question``,
``answers``, ``answer_type``, ``gold_doc_ids``), so this module does not import ``probes``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from flarebench.bench.bounds import oracle_row
from flarebench.bench.scorers.registry import (
    Group,
    ScorerError,
    Scoring,
    column_docs,
    optional_columns,
    scorers,
    summary_columns,
)
from flarebench.bench.uncertainty import DEFAULT_REFERENCE
from flarebench.strategies.records import Trace

__all__ = ["column_docs", "optional_columns", "probe_row", "summarize", "summary_columns"]
# summary_columns(), optional_columns() and column_docs() (the registry's) are asked at each use, never
# kept: a plugin's scorer may register after this module was imported.


def probe_row(trace: Trace, probe: Any) -> dict[str, Any]:
    """One flat row for one (strategy, probe): ``strategy``, ``probe_id``, ``error`` (None when the
    probe did not raise), every scorer's per-probe values in scorer order, then ``probe.metadata``
    with the prefix ``meta_``.

    The built-in scorers add ``em``/``f1`` (stated answers only), ``em_lenient``/``f1_lenient``,
    ``answer``, ``answer_rule`` and ``echo`` (:mod:`~flarebench.bench.scorers.answer`); ``recall``
    (:mod:`~flarebench.bench.scorers.recall`); ``stop_reason`` and ``incomplete``
    (:mod:`~flarebench.bench.scorers.incomplete`); ``steps``, ``triggered_steps`` and ``retrievals``;
    ``lm_calls`` and the token counts; ``latency_s``; ``ttfs_s`` and ``stall_s``
    (:mod:`~flarebench.bench.scorers.streaming`); ``cache_hits`` and ``cacheable``; ``lm_s``,
    ``retrieval_s`` and ``harness_s``; ``gate_score``, ``gate_fired`` and ``gate_threshold``.
    """
    if trace.probe_id and trace.probe_id != probe.id:
        raise ValueError(f"trace is for probe {trace.probe_id!r}, not {probe.id!r}")
    row: dict[str, Any] = {"strategy": trace.strategy, "probe_id": probe.id, "error": trace.error or None}
    setters = dict.fromkeys(row, "the harness")
    for s in scorers():
        if s.per_probe is not None:
            values = s.row_values(trace, probe, row)
            if taken := [f"{k} ({setters[k]})" for k in values if k in setters]:
                # Replaced, a built-in's em would change every summary's em without a word.
                raise ScorerError(f"{s.where}: per_probe sets row value(s) already set: {', '.join(taken)}")
            row.update(values)
            setters.update(dict.fromkeys(values, s.name))
    for key, value in (getattr(probe, "metadata", None) or {}).items():
        row[f"meta_{key}"] = value
    return row


def summarize(
    rows: pd.DataFrame,
    order: Sequence[str] | None = None,
    *,
    price: Any = None,
    reference: str | None = None,
    faithfulness: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
    oracle: bool = False,
) -> pd.DataFrame:
    """One row per strategy, with the columns of :func:`summary_columns` and, in their places, those
    of :func:`optional_columns` that some strategy has a value for (see :func:`column_docs`).

    ``rows`` holds :func:`probe_row` dicts; rows lacking a column some scorer needs are refused
    (KeyError naming it). Strategies come in ``order`` when given (names in ``order`` without rows
    are skipped; strategies with rows but not in ``order`` follow, in first-appearance order, so no
    row is ever dropped), else in first-appearance order. ``price`` (a
    :class:`flarebench.bench.prices.Price`) prices ``cost_per_q`` (NaN without one). ``reference`` is
    the strategy the delta columns compare with (default
    :data:`flarebench.bench.uncertainty.DEFAULT_REFERENCE`; the delta columns are empty when it has
    no rows). ``faithfulness`` holds :func:`flarebench.bench.faithfulness.faithfulness_rows` (the
    faithfulness columns are empty without it). ``oracle`` (a comparison's summary) adds the oracle
    row after the strategies' (:func:`flarebench.bench.bounds.oracle_row`: per probe the best em and
    f1 among them; its other columns empty, its ``bound`` "oracle"); the notes and the scorers'
    findings are made before it, from the strategies alone. Nothing is rounded. ``attrs["notes"]``
    holds one line per thing a reader must know: what the columns were scored with (how cost was priced, the
    delta reference), then what the scorers found (a warm run, undefined or low gate AUROCs), which
    summary.md prints; ``attrs["pending"]`` the specs of ``order`` without rows (not run yet).
    """
    ordered = scorers()
    needed = dict.fromkeys(["strategy", "error", *(c for s in ordered for c in s.needs)])
    missing = [c for c in needed if c not in rows.columns]
    if missing:
        raise KeyError(f"rows lack column(s): {', '.join(missing)}")
    seen = list(dict.fromkeys(rows["strategy"]))
    if order is not None:
        present = set(seen)
        listed = [s for s in dict.fromkeys(order) if s in present]
        seen = listed + [s for s in seen if s not in set(listed)]
    scoring = Scoring(
        groups={s: rows[rows["strategy"] == s] for s in seen},
        price=price,
        reference=DEFAULT_REFERENCE if reference is None else reference,
        faithfulness=faithfulness,
        pending=frozenset(order or ()) - set(seen),
    )
    out = []
    for strategy, group_rows in scoring.groups.items():
        group = Group(strategy, group_rows, scoring)
        out.append({column: value for s in ordered for column, value in s(group).items()})
    frame = pd.DataFrame(out, columns=[c.name for s in ordered for c in s.columns])
    for column in frame.columns:
        values = [row.get(column) for row in out]
        if None in values and all(v is None or isinstance(v, str) for v in values):
            # Text with gaps (the bound column off the bound rows) keeps None, which tables write
            # empty; pandas would make the gaps NaN, written "nan".
            frame[column] = pd.Series(values, index=frame.index, dtype=object)
    # An optional column no strategy has a value for is one this run cannot compute: left out.
    frame = frame.drop(columns=[c for c in optional_columns() if frame[c].isna().all()])
    frame.attrs["pending"] = [s for s in dict.fromkeys(order or ()) if s in scoring.pending]  # in run order
    frame.attrs["notes"] = [note for s in ordered if (note := s.setting(scoring))] + [
        line for s in ordered for line in s.found(frame, scoring)
    ]
    best = oracle_row(scoring) if oracle else None
    if best is not None:
        frame = _with_row(frame, best)
    return frame


def _with_row(frame: pd.DataFrame, row: Mapping[str, Any]) -> pd.DataFrame:
    """``frame`` with ``row`` appended (its missing columns empty). A column of integers stays one
    of integers (an object column, the new row's gap None), so that tables do not write 20 as 20.000,
    and a column of objects stays one (its gaps None, written empty)."""
    values = [row.get(c) for c in frame.columns]
    out = pd.DataFrame(
        {
            c: pd.Series(
                [*frame[c].tolist(), v],
                dtype=object
                if frame[c].dtype == object or (pd.api.types.is_integer_dtype(frame[c]) and v is None)
                else None,
            )
            for c, v in zip(frame.columns, values)
        },
        columns=frame.columns,
    )
    out.attrs = dict(frame.attrs)
    return out
