"""Results broken down by a probe metadata field (difficulty, hops, question type, ...), so a
report can show where multi-hop retrieval pays off."""

from __future__ import annotations

import pandas as pd

from flarebench.bench.metrics import summarize

#: The summary columns a breakdown shows, in order, when the run has them (the long-answer columns
#: only on a set with long probes). Each is computed by its scorer exactly as in the summary.
COLUMNS = (
    "n",
    "errors",
    "em",
    "f1",
    "recall",
    "incomplete_rate",
    "fact_recall",
    "incomplete_facts_rate",
    "wrong_version_rate",
    "incomplete_or_wrong_rate",
    "retrieval_rate",
    "lm_calls_per_q",
    "latency_p95_s",
)


class BreakdownError(ValueError):
    """The field is not a metadata field of the probes, or cannot name its file."""


def csv_name(field: str) -> str:
    """The file a breakdown by ``field`` is written to, in the run folder: ``breakdown_<field>.csv``.
    A field that cannot be part of a file name there (a path separator, which could also reach
    outside the folder; a name too long) raises BreakdownError."""
    name = f"breakdown_{field}.csv"
    for bad in ("/", "\\", "\0"):
        if bad in field:
            raise BreakdownError(f"--by {field!r}: holds {bad!r}, so it cannot name the file {name!r}")
    if len(name.encode()) > 255:  # the longest file name Linux, macOS and Windows file systems take
        raise BreakdownError(f"--by {field[:40]!r}...: too long to name the file breakdown_FIELD.csv")
    return name


def metadata_fields(rows: pd.DataFrame) -> list[str]:
    """The probe metadata fields present in per-probe rows (columns ``meta_<field>``)."""
    return [c[len("meta_") :] for c in rows.columns if c.startswith("meta_")]


def breakdown(rows: pd.DataFrame, field: str, order: list[str] | None = None) -> pd.DataFrame:
    """One row per (strategy, value of ``field``) with the :data:`COLUMNS` the summary has, each
    scored by the summary's own scorers on that value's probes: a probe that raised counts in ``n``
    and ``errors`` and as a wrong answer, and is left out of what it used, and a value that cannot
    be computed is empty, as in the summary. ``rows`` are :func:`flarebench.bench.metrics.probe_row`
    dicts. The values are in the column named ``field``, or ``meta_<field>`` when ``field`` names one
    of the breakdown's own columns (``strategy``, :data:`COLUMNS`), which it would otherwise hide.
    Values that are lists or dicts are shown as text; probes without the field are grouped under
    ``<none>``; values that read the same (``1`` and ``"1"``, ``2`` and ``2.0``) are one row, shown
    as the number; values come in numeric order, then text."""
    col = f"meta_{field}"
    if col not in rows.columns:
        known = ", ".join(metadata_fields(rows)) or "none"
        raise BreakdownError(f"no probe metadata field {field!r}; fields: {known}")
    labels = rows[col].map(_label)
    # Grouped by the text a row shows: two rows reading alike could not be told apart.
    keys = labels.map(str)
    shown: dict[str, object] = {}
    for key, label in zip(keys, labels):
        if key not in shown or _is_number(label):  # shown as a number, sorted as one
            shown[key] = label
    column = f"meta_{field}" if field in ("strategy", *COLUMNS) else field
    strategies = list(dict.fromkeys([*(order or ()), *rows["strategy"]]))  # as summarize orders them
    parts = []
    for key in sorted(shown, key=lambda k: _sort_key(shown[k])):
        # No delta reference: the deltas and their bootstrap are not shown.
        summary = summarize(rows[keys == key], strategies, reference="")
        part = summary[["strategy", *(c for c in COLUMNS if c in summary.columns)]].copy()
        part.insert(1, column, [shown[key]] * len(part))
        parts.append(part)
    table = pd.concat(parts, ignore_index=True)
    # By strategy, values in order within each (a stable sort); ranked apart from the table, whose
    # column names are partly the user's.
    rank = table["strategy"].map({s: i for i, s in enumerate(strategies)})
    table = table.iloc[rank.argsort(kind="stable")]
    return table[["strategy", column, *(c for c in COLUMNS if c in table.columns)]].reset_index(drop=True)


def _label(value):
    # A whole float is shown as an int: pandas reads a field's ints as floats when a probe lacks it.
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "<none>"
    if isinstance(value, (list, dict)):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _sort_key(value):
    # Numbers in numeric order before text, so difficulty 10 follows 9.
    return (0, float(value), "") if _is_number(value) else (1, 0.0, str(value))
