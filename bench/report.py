"""Writing a run folder's derived files: summary.csv, summary.md, adoption.md, and the terminal table."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pandas as pd
from tabulate import tabulate

from flarebench.bench import version
from flarebench.bench.adoption import ADOPTION_MD, adoption, markdown
from flarebench.bench.calibrate import CALIBRATION_CSV, calibration_lines, calibration_note, calibration_table
from flarebench.bench.markdown import cell
from flarebench.bench.markdown import code as markdown_code
from flarebench.bench.markdown import text as markdown_text
from flarebench.bench.metrics import column_docs, probe_row, summarize, summary_columns
from flarebench.bench.paths import WriteError, write_atomic
from flarebench.strategies.records import Trace

SUMMARY_CSV = "summary.csv"
SUMMARY_MD = "summary.md"
#: The files a scoring writes into a run folder (``score`` and ``report``; run.json and report.html
#: are named by their modules), so that each can be checked before any is written.
SUMMARY_FILES = (SUMMARY_CSV, SUMMARY_MD, ADOPTION_MD, CALIBRATION_CSV)


def check_writable(paths: list[Path]) -> None:
    """Refuse (WriteError) any of ``paths`` that cannot be replaced, before a command that writes
    several of them writes the first: a folder (or anything but a file) in its place, or a folder it
    cannot write in. Otherwise the files written before it would disagree with those after it."""
    for path in paths:
        if (path.exists() or path.is_symlink()) and not path.is_file():
            kind = "a folder" if path.is_dir() else "something other than a file"
            raise WriteError(f"{path}: cannot be written ({kind} is in its place); nothing was written")
        if not os.access(path.parent, os.W_OK):
            raise WriteError(f"{path}: cannot be written (its folder is not writable); nothing was written")


def probe_rows(traces: list[Trace], probes: dict, memo: dict | None = None) -> pd.DataFrame:
    """One row per (strategy, probe) (see :func:`flarebench.bench.metrics.probe_row`): strategies in the order
    they first appear, each one's probes in the probe set's order. A concurrent run writes traces as
    they finish; sorting here keeps its summary (the paired bootstrap sees the probes in one order)
    equal to that of a sequential run with the same answers. ``memo`` (a run's own dict, kept between
    calls) holds the rows already made, by (strategy, probe id): a run's traces.jsonl holds one trace
    per pair, so a run scored after every strategy makes each row once."""
    rank = {pid: i for i, pid in enumerate(probes)}
    first = {t.strategy: i for i, t in reversed(list(enumerate(traces)))}
    kept = sorted((t for t in traces if t.probe_id in probes), key=lambda t: (first[t.strategy], rank[t.probe_id]))
    if memo is None:
        return pd.DataFrame([probe_row(t, probes[t.probe_id]) for t in kept])
    for t in kept:
        if (t.strategy, t.probe_id) not in memo:
            memo[t.strategy, t.probe_id] = probe_row(t, probes[t.probe_id])
    return pd.DataFrame([memo[t.strategy, t.probe_id] for t in kept])


def summary_frame(
    traces: list[Trace],
    probes: dict,
    order: list[str] | None = None,
    price=None,
    reference: str | None = None,
    faithfulness: dict | None = None,
    oracle: bool = False,
    memo: dict | None = None,
) -> pd.DataFrame:
    """One row per strategy spec, from the traces and the probes they answer; ``price`` (a
    :class:`flarebench.bench.prices.Price`) prices cost_per_q, ``reference`` is the delta columns' reference,
    ``faithfulness`` holds :func:`flarebench.bench.faithfulness.faithfulness_rows` for these traces;
    ``oracle`` (a comparison: :func:`is_comparison`) adds the oracle row after the strategies';
    ``memo`` is :func:`probe_rows`'.
    ``attrs["adoption"]`` holds the run's adoption tables (:func:`flarebench.bench.adoption.adoption`,
    made here, where the per-probe rows their intervals need are at hand), which adoption.md and
    report.html show."""
    rows = probe_rows(traces, probes, memo)
    if rows.empty:
        # No trace yet: an empty summary with every column.
        summary = pd.DataFrame(columns=summary_columns())
        summary.attrs["adoption"] = adoption(summary, reference=reference)
        return summary
    summary = summarize(rows, order=order, price=price, reference=reference, faithfulness=faithfulness, oracle=oracle)
    summary.attrs["adoption"] = adoption(summary, rows, faithfulness, reference, summary.attrs["pending"])
    return summary


def is_comparison(study: dict | None) -> bool:
    """Whether a run's study record (run.json's ``study``) is a comparison, whose summary gets the
    oracle row (:mod:`flarebench.bench.bounds`)."""
    return isinstance(study, dict) and study.get("kind") == "compare"


def adoption_of(summary: pd.DataFrame):
    """The summary's adoption tables: those :func:`summary_frame` made, else (a summary made
    otherwise) tables from the summary alone, without intervals."""
    return summary.attrs.get("adoption") or adoption(summary)


#: The columns a reader compares first: the terminal table and the report's main table (summary.csv,
#: summary.md and the report's full table keep every column).
COMPACT_COLUMNS = [
    "strategy",
    "bound",
    "n",
    "errors",
    "em",
    "f1",
    "recall",
    "faithfulness",
    "incomplete_rate",
    "retrieval_rate",
    "lm_calls_per_q",
    "prompt_tokens_per_q",
    "evaluated_tokens_per_q",
    "cost_per_q",
    "latency_p50_s",
    "latency_p95_s",
]
#: The same for a run of long probes: what the answers state in place of em/f1, then when active
#: retrieval fired and what a reader of the streamed answer waited.
COMPACT_LONG_COLUMNS = [
    "strategy",
    "bound",
    "n",
    "errors",
    "fact_recall",
    "incomplete_rate",
    "wrong_version_rate",
    "incomplete_or_wrong_rate",
    "recall",
    "faithfulness",
    "retrieval_rate",
    "triggered_share",
    "lm_calls_per_q",
    "prompt_tokens_per_q",
    "evaluated_tokens_per_q",
    "cost_per_q",
    "latency_p95_s",
    "latency_p95_triggered_s",
    "ttfs_p95_s",
    "stall_p95_s",
]


#: Compact columns shown only where some row has a value.
_WHEN_FILLED = ("bound", "headroom_captured", "helped", "harmed")


def interval_text(delta: float, lo: float, hi: float, significant: bool = False) -> str:
    """A delta and its interval as "+0.040 [-0.020, +0.100]", with " *" where it is ``significant``
    (the summary's ``_sig`` column: the interval excludes 0 and rests on two probes or more)."""
    if pd.isna(delta):
        return ""
    return f"{delta:+.3f} [{lo:+.3f}, {hi:+.3f}]" + (" *" if significant else "")


def compact_frame(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary's :data:`COMPACT_COLUMNS` (:data:`COMPACT_LONG_COLUMNS` for a run of long probes;
    and, for a run served from --cache, the cached share
    and cold and warm p50 latency), headroom_captured, helped and harmed (these and ``bound`` only
    where some row has a value), plus one column per delta, written "delta [lo, hi]"
    (a star where the 95% interval excludes 0), headed by the reference strategy."""
    columns = list(COMPACT_LONG_COLUMNS if "fact_recall" in summary else COMPACT_COLUMNS)
    if "cached_share" in summary and (summary["cached_share"].fillna(0) > 0).any():
        # A warm run: its latency means little without the share served from the cache beside it.
        columns += ["cached_share", "latency_p50_cold_s", "latency_p50_warm_s"]
    columns += ["headroom_captured", "helped", "harmed"]
    # The bound and effect columns only where some row has a value (a run without bounds or a
    # reference keeps the table it had).
    columns = [c for c in columns if c not in _WHEN_FILLED or (c in summary and summary[c].notna().any())]
    frame = summary[[c for c in columns if c in summary.columns]].copy()
    if "delta_reference" in summary.columns and summary["delta_reference"].notna().any():
        reference = summary["delta_reference"].dropna().iloc[0]
        for m in ("em", "f1"):
            frame[f"{m} vs {reference}"] = [
                interval_text(*(summary[f"{m}_delta{x}"].iloc[i] for x in ("", "_lo", "_hi")), _flag(summary, m, i))
                for i in range(len(summary))
            ]
    return frame


def _flag(summary: pd.DataFrame, metric: str, i: int) -> bool:
    """Whether row ``i``'s ``metric`` delta is significant (its ``_sig`` cell: a bool, or the text
    "True" as summary.csv reads back)."""
    return f"{metric}_delta_sig" in summary and str(summary[f"{metric}_delta_sig"].iloc[i]) == "True"


#: Decimals a number of a table is shown with.
DECIMALS = 3
#: The most decimals a column of small values gets.
MAX_DECIMALS = 8


def decimals(frame: pd.DataFrame) -> dict[str, int]:
    """Decimals per column: :data:`DECIMALS`, except for a cost column (a hosted model's price per
    question is often below 0.001, which 3 decimals would show as 0.000, free), which gets enough
    for its smallest non-zero value to keep 3 significant digits."""
    out = dict.fromkeys(frame.columns, DECIMALS)
    costs = [c for c in frame.columns if c.endswith("cost_per_q")]
    # A calibration table's off_by is in its goal's unit: a cost's, where the goal is one.
    costs += ["off_by"] if "off_by" in frame.columns and any(c.startswith("test_") for c in costs) else []
    for column in costs:
        values = pd.to_numeric(frame[column], errors="coerce").abs()
        smallest = values[values > 0].min()  # NaN when none is above 0: the default then
        if smallest < 10.0 ** -(DECIMALS - 2):
            out[column] = min(MAX_DECIMALS, 2 - math.floor(math.log10(smallest)))
    return out


def absent_reference(summary: pd.DataFrame, reference: str) -> str:
    """A line for the terminal when ``reference`` (asked for with --reference) is not among the
    summary's strategies, whose delta columns are then empty; "" otherwise."""
    if summary.empty or reference in set(summary["strategy"]):
        return ""
    return f"note: --reference {reference} is not in this run, so the delta columns are empty"


def format_table(summary: pd.DataFrame, fmt: str = "github", compact: bool = False) -> str:
    """The summary as a text table, numbers rounded for reading (:func:`decimals`); ``compact``
    keeps the columns a reader compares first (see :func:`compact_frame`)."""
    frame = compact_frame(summary) if compact else summary
    floatfmt = [f".{n}f" for n in decimals(frame).values()]
    # A value that cannot be computed is empty, as summary.csv writes it, never "nan".
    if fmt == "github":  # a label's | would end its cell; only a column holding one is touched
        piped = [c for c in frame.columns if any(isinstance(v, str) and "|" in v for v in frame[c])]
        escaped = {c: pd.Series([cell(v) for v in frame[c]], index=frame.index, dtype=object) for c in piped}
        frame = frame.assign(**escaped)
    frame = frame.astype(object).where(frame.notna(), None)
    return tabulate(frame, headers="keys", tablefmt=fmt, showindex=False, floatfmt=floatfmt, missingval="")


_STATUS_LINE = (
    "**Run status: {status}.** Not every strategy has run every probe yet (`n` says how many each has{pending}): "
    "read the rows as they stand, and {finish}.\n\n"
)
#: A calibration stopped on its dev probes has no test figures yet (bench/calibrate.py).
_STATUS_LINE_DEV = (
    "**Run status: {status}.** It stopped while calibrating on the dev probes, before the calibrated "
    "strategies ran the test probes (a strategy run as given has the rows it finished): {finish}.\n\n"
)
_FINISH = "run the same command to finish it"
#: What finishes a run another version of flarebench made (CHANGES.md, "Upgrading").
_RUN_AGAIN = "run it again with another --report-dir"
#: A gated run (--gate, --save-baseline) is never resumed (docs/runs.md).
_FINISH_GATED = "as a gated run is measured in one fresh run, run the same command with --overwrite to measure it"


def run_status(summary: pd.DataFrame, config: dict, study: dict | None, status: str | None, gated: bool) -> str:
    """The Markdown line under the title of a run that is not ``complete`` (summary.md, adoption.md,
    report.html): its rows are partial, and how to finish it (``gated``: measured again, not resumed;
    another version's run: run again elsewhere); "" for a complete run."""
    if status in (None, "complete"):
        return ""
    made_by = config.get("flarebench")
    finish = _FINISH_GATED if gated else _FINISH
    if made_by not in (None, version()):  # another version's run is another configuration: never resumed
        finish = f"it was made by flarebench {made_by}, which this version ({version()}) does not resume: {_RUN_AGAIN}"
    dev = study and "goal" in study and "calibration" not in study
    return (_STATUS_LINE_DEV if dev else _STATUS_LINE).format(
        status=status,
        finish=finish,
        pending=f"; not started yet: {', '.join(summary.attrs['pending'])}" if summary.attrs.get("pending") else "",
    )


def write_summary(
    run_dir: Path,
    summary: pd.DataFrame,
    config: dict,
    study: dict | None = None,
    status: str | None = None,
    gated: bool = False,
) -> None:
    """Write summary.csv (plain decimals), summary.md (the table, its column definitions and
    the configuration it came from; a line under its title when the run's ``status`` is not
    ``complete``, saying how to finish it: ``gated``, a run with --gate or --save-baseline, is
    measured again, not resumed) and adoption.md (the before/after tables against the reference,
    :mod:`flarebench.bench.adoption`); for a calibrated run (``study`` holds its calibration), also
    calibration.csv, and summary.md gains the calibration table (:mod:`flarebench.bench.calibrate`)."""
    run_dir = Path(run_dir)
    calibrated = ""
    if study and "calibration" in study:
        table = calibration_table(summary, study)
        write_atomic(run_dir / CALIBRATION_CSV, table.to_csv(index=False, float_format="%.6g"))
        missed = "".join(f"- {line}\n" for line in calibration_lines(table, study))
        calibrated = f"## Calibration\n\n{calibration_note(study)}\n\n{format_table(table)}\n\n" + (
            f"{missed}\n" if missed else ""
        )
    write_atomic(run_dir / SUMMARY_CSV, summary.to_csv(index=False, float_format="%.6g"))
    docs = column_docs()
    defs = "\n".join(f"- `{c}`: {docs[c]}" for c in summary.columns if c in docs)
    notes = "".join(f"- {note}\n" for note in summary.attrs.get("notes", []))
    # Both files say when the run has not finished: their rows are partial.
    status_line = run_status(summary, config, study, status, gated)
    md = (
        f"# flarebench run {markdown_text(run_dir.name)}\n\n"
        + status_line
        + f"Probe set {markdown_code(config['probes']['name'])}, LM {markdown_code(config['lm']['name'])}, "
        f"retriever {markdown_code(config['retriever']['name'])}.\n\n"
        f"{format_table(summary)}\n\n"
        + calibrated
        + (f"## Notes\n\n{notes}\n" if notes else "")
        + f"## Columns\n\n{defs}\n\n"
        + f"## Configuration\n\n```json\n{json.dumps(config, indent=2)}\n```\n"
    )
    write_atomic(run_dir / SUMMARY_MD, md)
    write_atomic(run_dir / ADOPTION_MD, markdown(adoption_of(summary), run_dir.name, status_line))
