"""Writing a run folder's derived files: summary.csv, summary.md, and the terminal table."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pandas as pd
from tabulate import tabulate

from bench.metrics import COLUMN_DOCS, probe_row, summarize
from strategies.records import Trace

SUMMARY_CSV = "summary.csv"
SUMMARY_MD = "summary.md"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file, so a reader never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def summary_frame(traces: list[Trace], probes: dict, order: list[str] | None = None) -> pd.DataFrame:
    """One row per strategy spec, from the traces and the probes they answer."""
    rows = pd.DataFrame([probe_row(t, probes[t.probe_id]) for t in traces if t.probe_id in probes])
    return summarize(rows, order=order)


def format_table(summary: pd.DataFrame, fmt: str = "github") -> str:
    """The summary as a text table, numbers rounded for reading."""
    return tabulate(summary, headers="keys", tablefmt=fmt, showindex=False, floatfmt=".3f")


def write_summary(run_dir: Path, summary: pd.DataFrame, config: dict) -> None:
    """Write summary.csv (plain decimals) and summary.md (the table, its column definitions and
    the configuration it came from)."""
    run_dir = Path(run_dir)
    write_atomic(run_dir / SUMMARY_CSV, summary.to_csv(index=False, float_format="%.6g"))
    defs = "\n".join(f"- `{c}`: {COLUMN_DOCS[c]}" for c in summary.columns if c in COLUMN_DOCS)
    md = (
        f"# flarebench run {run_dir.name}\n\n"
        f"Probe set `{config['probes']['name']}`, LM `{config['lm']['name']}`, "
        f"retriever `{config['retriever']['name']}`.\n\n"
        f"{format_table(summary)}\n\n## Columns\n\n{defs}\n\n"
        f"## Configuration\n\n```json\n{json.dumps(config, indent=2)}\n```\n"
    )
    write_atomic(run_dir / SUMMARY_MD, md)
