"""Results broken down by a probe metadata field (difficulty, hops, question type, ...), so a
report can show where multi-hop retrieval pays off."""

from __future__ import annotations

import pandas as pd


class BreakdownError(ValueError):
    """The field is not a metadata field of the probes."""


def metadata_fields(rows: pd.DataFrame) -> list[str]:
    """The probe metadata fields present in per-probe rows (columns ``meta_<field>``)."""
    return [c[len("meta_") :] for c in rows.columns if c.startswith("meta_")]


def breakdown(rows: pd.DataFrame, field: str, order: list[str] | None = None) -> pd.DataFrame:
    """One row per (strategy, value of ``field``): n, em, f1, recall, retrieval_rate (triggered
    steps / steps, as in the summary) and lm_calls_per_q. Values that are lists or dicts are shown
    as text; probes without the field are grouped under ``<none>``. A count a service under test did
    not report is NaN in its rows, and the figure built on it is NaN (missing), as in the summary."""
    col = f"meta_{field}"
    if col not in rows.columns:
        known = ", ".join(metadata_fields(rows)) or "none"
        raise BreakdownError(f"no probe metadata field {field!r}; fields: {known}")
    data = rows.assign(_value=rows[col].map(_label))
    out = []
    for (strategy, value), g in data.groupby(["strategy", "_value"], sort=False):
        steps = g["steps"].astype(float).sum(skipna=False)
        triggered = g["triggered_steps"].astype(float).sum(skipna=False)
        out.append(
            {
                "strategy": strategy,
                field: value,
                "n": len(g),
                "em": g["em"].mean(),
                "f1": g["f1"].mean(),
                "recall": g["recall"].dropna().mean() if g["recall"].notna().any() else float("nan"),
                "retrieval_rate": triggered / steps if steps else 0.0,  # NaN steps: NaN
                "lm_calls_per_q": g["lm_calls"].astype(float).mean(skipna=False),
            }
        )
    table = pd.DataFrame(out)
    strategies = order or list(dict.fromkeys(rows["strategy"]))
    table["_s"] = table["strategy"].map({s: i for i, s in enumerate(strategies)})
    table["_v"] = table[field].map(_sort_key)
    return table.sort_values(["_s", "_v"], kind="stable").drop(columns=["_s", "_v"]).reset_index(drop=True)


def _label(value):
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "<none>"
    if isinstance(value, (list, dict)):
        return str(value)
    return value


def _sort_key(value):
    # Numbers in numeric order before text, so difficulty 10 follows 9.
    return (
        (0, float(value), "")
        if isinstance(value, (int, float)) and not isinstance(value, bool)
        else (1, 0.0, str(value))
    )
