"""Writing a run folder's derived files: summary.csv, summary.md, and the terminal table."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pandas as pd
from tabulate import tabulate

from bench.faithfulness import summarize_faithfulness
from bench.metrics import COLUMN_DOCS, SUMMARY_COLUMNS, probe_row, summarize
from strategies.records import Trace

SUMMARY_CSV = "summary.csv"
SUMMARY_MD = "summary.md"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file, so a reader never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def probe_rows(traces: list[Trace], probes: dict) -> pd.DataFrame:
    """One row per (strategy, probe) (see :func:`bench.metrics.probe_row`)."""
    return pd.DataFrame([probe_row(t, probes[t.probe_id]) for t in traces if t.probe_id in probes])


def summary_frame(
    traces: list[Trace],
    probes: dict,
    order: list[str] | None = None,
    price=None,
    reference: str | None = None,
    faithfulness: dict | None = None,
) -> pd.DataFrame:
    """One row per strategy spec, from the traces and the probes they answer; ``price`` (a
    :class:`bench.prices.Price`) prices cost_per_q, ``reference`` is the delta columns' reference,
    ``faithfulness`` holds :func:`bench.faithfulness.faithfulness_rows` for these traces."""
    rows = probe_rows(traces, probes)
    if rows.empty:
        # No trace yet: an empty summary with every column.
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    summary = summarize(rows, order=order, price=price, reference=reference)
    if faithfulness:
        keys = {(t.strategy, t.probe_id) for t in traces if t.probe_id in probes}
        per_strategy = summarize_faithfulness({k: v for k, v in faithfulness.items() if k in keys})
        for column in ("faithfulness", "faithfulness_method", "judge_parse_failures"):
            summary[column] = [per_strategy.get(s, {}).get(column) for s in summary["strategy"]]
    return summary


def format_table(summary: pd.DataFrame, fmt: str = "github") -> str:
    """The summary as a text table, numbers rounded for reading."""
    return tabulate(summary, headers="keys", tablefmt=fmt, showindex=False, floatfmt=".3f")


def write_summary(run_dir: Path, summary: pd.DataFrame, config: dict) -> None:
    """Write summary.csv (plain decimals) and summary.md (the table, its column definitions and
    the configuration it came from)."""
    run_dir = Path(run_dir)
    write_atomic(run_dir / SUMMARY_CSV, summary.to_csv(index=False, float_format="%.6g"))
    defs = "\n".join(f"- `{c}`: {COLUMN_DOCS[c]}" for c in summary.columns if c in COLUMN_DOCS)
    notes = "".join(f"- {note}\n" for note in summary.attrs.get("notes", []))
    md = (
        f"# flarebench run {run_dir.name}\n\n"
        f"Probe set `{config['probes']['name']}`, LM `{config['lm']['name']}`, "
        f"retriever `{config['retriever']['name']}`.\n\n"
        f"{format_table(summary)}\n\n"
        + (f"## Notes\n\n{notes}\n" if notes else "")
        + f"## Columns\n\n{defs}\n\n"
        + f"## Configuration\n\n```json\n{json.dumps(config, indent=2)}\n```\n"
    )
    write_atomic(run_dir / SUMMARY_MD, md)
