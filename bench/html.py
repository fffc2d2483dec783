"""report.html: one self-contained page per run folder (no network: styles, script and PNG plots
inlined) that a reader who never ran the tool can decide from.

It holds the comparison table, the adoption tables (bench/adoption.py, as adoption.md), the plots
(bench/plots.py), the column definitions, the run configuration and a trace viewer. Every piece of
corpus or model text is escaped: with ``html.escape`` in the markup, and in the embedded JSON the
viewer reads, ``<``, ``>`` and ``&`` are written as ``\\u003c``, ``\\u003e``, ``\\u0026`` so no text
can close the script element. The viewer builds its DOM with ``textContent`` only, never
``innerHTML``.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from flarebench.bench import plots
from flarebench.bench.adoption import Adoption, headers, intro
from flarebench.bench.bounds import strategy_rows
from flarebench.bench.calibrate import calibration_note, calibration_table
from flarebench.bench.findings import findings
from flarebench.bench.gate import GATE_JSON
from flarebench.bench.metrics import column_docs
from flarebench.bench.report import (
    DECIMALS,
    adoption_of,
    compact_frame,
    decimals,
    probe_rows,
    run_status,
    write_atomic,
)
from flarebench.strategies.records import Trace

REPORT_HTML = "report.html"
#: The page's stylesheet and viewer script, inlined into every report.
ASSETS = Path(__file__).with_name("assets")

#: Probability digits kept for the viewer's tokens (enough to compare with theta).
_PROB_DIGITS = 3


def embed_json(data: Any) -> str:
    """JSON safe inside a ``<script>`` element: nothing in it can end the element or open a comment."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for raw in ("<", ">", "&", "\u2028", "\u2029"):
        text = text.replace(raw, f"\\u{ord(raw):04x}")
    return text


def _num(x: Any) -> float | None:
    """A JSON-safe number (None for NaN/None)."""
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def viewer_data(traces: list[Trace], rows: pd.DataFrame, probes: dict, docs_by_id: dict, order: list[str]) -> dict:
    """What the trace viewer shows: per probe its question and gold answers, per (strategy, probe)
    the answer, score and every step (LM calls with per-token probabilities, retrievals with why they
    fired), and the text of every retrieved document."""
    scores = {(r["strategy"], r["probe_id"]): r for r in rows.to_dict("records")} if not rows.empty else {}
    shown = [t for t in traces if t.probe_id in probes and t.strategy in order]
    doc_ids = {d for t in shown for r in t.retrievals for d in r.doc_ids}
    out_traces = []
    for t in shown:
        row = scores.get((t.strategy, t.probe_id), {})
        out_traces.append(
            {
                "strategy": t.strategy,
                "probe": t.probe_id,
                "answer": row["answer"] if isinstance(row.get("answer"), str) else None,  # NaN in the frame
                "em": _num(row.get("em")),
                "f1": _num(row.get("f1")),
                "output": t.output,
                "stop": t.stop_reason,
                "error": t.error,
                "seconds": _num(t.seconds),
                "steps": [
                    {
                        "text": s.text,
                        "calls": [
                            {
                                "purpose": c.purpose,
                                "tokens": c.tokens,
                                "probs": [round(math.exp(lp), _PROB_DIGITS) for lp in c.logprobs]
                                if c.logprobs
                                else None,
                                "prompt": c.prompt_tokens,
                                "evaluated": c.evaluated_tokens,
                                "completion": c.completion_tokens,
                                "seconds": _num(c.seconds),
                                "cached": c.cached,
                            }
                            for c in s.lm_calls
                        ],
                        "retrievals": [
                            {
                                "reason": r.reason,
                                "query": r.query,
                                "docs": r.doc_ids,
                                "seconds": _num(r.seconds),
                                "min_p": _num(r.detail.get("min_p")),
                                "span": r.detail.get("span"),
                            }
                            for r in s.retrievals
                        ],
                    }
                    for s in t.steps
                ],
            }
        )
    used = {t.probe_id for t in shown}
    return {
        "order": order,
        # The probability threshold the viewer highlights tokens by: min_prob's only (an entropy or
        # margin threshold is no probability).
        "thetas": {s: _theta(rows[rows["strategy"] == s]) if not rows.empty else None for s in order},
        "probes": [
            {
                "id": p.id,
                "question": p.question,
                # a long probe shows the first alias of each required fact
                "answers": list(p.answers) or [f.answers[0] for f in getattr(p, "required_facts", None) or []],
                "answer_type": p.answer_type,
                "gold": list(p.gold_doc_ids),
            }
            for pid, p in probes.items()
            if pid in used
        ],
        "traces": out_traces,
        "docs": {d: [docs_by_id[d].title, docs_by_id[d].text] for d in sorted(doc_ids) if d in docs_by_id},
    }


def _table(frame: pd.DataFrame, table_id: str) -> str:
    # An empty cell of a text or mixed column (the bound column off the bound rows, the oracle row's
    # errors) is None, which to_html would write as "None": shown empty, as NaN is.
    frame = frame.copy()
    for c in frame.columns:
        if frame[c].dtype == object:
            frame[c] = frame[c].map(lambda v: "" if v is None else v).astype(object)
    formatters = {
        c: (lambda x, n=n: "" if pd.isna(x) else f"{x:.{n}f}")
        for c, n in decimals(frame).items()
        if n != DECIMALS and pd.api.types.is_float_dtype(frame[c])
    }
    return frame.to_html(
        index=False,
        escape=True,
        na_rep="",
        float_format=lambda x: f"{x:.{DECIMALS}f}",
        formatters=formatters,
        border=0,
        table_id=table_id,
    )


def _marked(text: str) -> str:
    """Escaped text, its Markdown code marks (`x`) as <code>x</code>."""
    return re.sub(r"`([^`]*)`", r"<code>\1</code>", html.escape(text))


def _adoption(a: Adoption) -> str:
    """The Adoption section: adoption.md's tables, legend and notes (or its one line)."""
    if a.absent is not None:
        return f"<p>{_marked(a.absent)}</p>"
    parts = [f"<p>{_marked(intro(a))}</p>"]
    for i, t in enumerate(a.tables, 1):
        frame = pd.DataFrame(
            [[r.label, r.before, r.after, r.difference] for r in t.rows], columns=headers(a, t.strategy)
        )
        parts.append(f'<h3>{html.escape(t.strategy)}</h3><div class="scroll">{_table(frame, f"adoption-{i}")}</div>')
    legend = "".join(
        f"<li><b>{html.escape(label)}</b> (<code>{html.escape(column)}</code>): {html.escape(doc)}</li>"
        for label, column, doc in a.legend
    )
    parts.append(
        f"<h3>Rows</h3><ul>{legend}</ul><p>Each column is defined under "
        '<a href="#columns">Column definitions</a> and in flarebench\'s <code>docs/metrics.md</code>.</p>'
    )
    if a.notes:
        parts.append("<h3>Notes</h3><ul>" + "".join(f"<li>{_marked(n)}</li>" for n in a.notes) + "</ul>")
    return "\n".join(parts)


def _figure(png: bytes | None, fig_id: str, alt: str, caption: str, wide: bool = False) -> str:
    """A PNG inlined as a figure with its caption; ``wide`` figures span the whole plot grid."""
    if png is None:
        return ""
    data = base64.b64encode(png).decode("ascii")
    css = ' class="wide"' if wide else ""
    return (
        f'<figure id="{fig_id}"{css}>'
        f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def _plots(summary: pd.DataFrame, rows: pd.DataFrame, study: dict, order: list[str]) -> str:
    if summary.empty:
        return "<p>No probe has finished yet: nothing to plot.</p>"
    cost_col, cost_label, cost_note = plots.cost_axis(summary)
    if plots.probe_counts_differ(summary):
        joins = with_front = ""
        front = (
            " No Pareto front yet: the strategies have run different numbers of probes so far, so their means "
            "are over different probes."
        )
    else:
        joins, with_front, front = (
            "; the Pareto front joins the strategies no other one beats on both",
            ", with the Pareto front",
            "",
        )
    parts = [
        _figure(
            plots.tradeoff(summary, cost_col, cost_label),
            "plot-cost",
            "F1 against cost per question",
            f"Answer quality (F1 of the stated answer) against cost per question{joins} (up and to the left is "
            "better)." + cost_note + front,
        ),
        _figure(
            plots.tradeoff(summary, "latency_p95_s", "p95 latency per question (s)"),
            "plot-latency",
            "F1 against p95 latency",
            f"Answer quality against the 95th percentile of wall time per question{with_front}." + front,
        ),
    ]
    if not any(parts):
        parts.append(
            '<p class="muted">No trade-off plots: F1 against cost and against p95 latency need two or more '
            "strategies with those values (<code>flarebench compare</code> runs several into one report).</p>"
        )
    if study.get("kind") == "sweep":
        parts.append(
            _figure(
                plots.sweep(summary, study),
                "plot-sweep",
                f"retrieval rate and quality against {study.get('param')}",
                f"Retrieval rate (share of generation steps that retrieved, first hop not counted) and EM/F1 "
                f"against the swept {study.get('param')} (cf. FLARE, Jiang et al. 2023, Figure 5).",
                wide=True,
            )
        )
    if study.get("calibration"):
        x, y = plots.calibration_axes(study)
        parts.append(
            _figure(
                plots.calibration(summary, study),
                "plot-calibration",
                f"{y} against {x}: dev sweeps and chosen points",
                f"Each calibrated strategy's grid points run on the dev part ({y} against the goal's metric, {x}), "
                "the chosen one ringed, and the same value on the test part as a cross; the dashed line is the goal.",
                wide=True,
            )
        )
    if not rows.empty:
        parts.append(
            _figure(
                plots.latency(rows, order),
                "plot-latency-dist",
                "latency distributions",
                "Wall time per question for each strategy: box = quartiles, line = median, whiskers = 1.5 IQR, "
                "bar = p95.",
            )
        )
        parts.append(_gate_figure(rows, order))
    return '<div class="plots">' + "\n".join(p for p in parts if p) + "</div>"


def _calibration(summary: pd.DataFrame, study: dict) -> str:
    """A calibrated run's calibration table and its note (nothing for other runs)."""
    if "calibration" not in study:
        return ""
    note = html.escape(calibration_note(study))
    table = _table(calibration_table(summary, study), "calibration")
    return f'<h3>Calibration</h3><p class="muted">{note}</p><div class="scroll">{table}</div>'


def _gate_figure(rows: pd.DataFrame, order: list[str]) -> str:
    """The gate plot, its caption worded for FLARE's own trigger (min_prob) or for any trigger."""
    triggers = set(rows["gate_trigger"].dropna()) if "gate_trigger" in rows else set()
    if triggers <= {"min_prob"}:
        alt = "minimum draft probability, right against wrong answers"
        caption = (
            "Is the confidence gate informative for this model? The lowest token probability over each "
            "answer's drafted sentences (as each step recorded it), for answers that turned out right (EM 1) "
            "and wrong; the dashed line is the threshold the steps recorded, theta (a draft at or below it "
            "retrieves). A useful gate puts the wrong answers left of theta and the right ones right of it."
        )
    else:
        alt = "least confident gate score, right against wrong answers"
        caption = (
            "Is the confidence gate informative for this model? Per strategy, each answer's least confident "
            "score of its trigger over the drafted sentences (as each step recorded it: the lowest for triggers "
            "that fire at or below their threshold, the highest for entropy), for answers that turned out right "
            "(EM 1) and wrong; the dashed line is the threshold the steps recorded. A useful gate puts the wrong "
            "answers on the side of the threshold where it fires and the right ones on the other."
        )
    return _figure(plots.gate(rows, order), "plot-gate", alt, caption, wide=True)


def _theta(rows: pd.DataFrame) -> float | None:
    """The threshold the gate records of these rows used, when their trigger is ``min_prob`` (or
    unnamed, as in runs from before triggers were named); None otherwise."""
    triggers = set(rows["gate_trigger"].dropna()) if "gate_trigger" in rows else set()
    return plots.threshold_of(rows) if triggers <= {"min_prob"} else None


def _gate(verdicts: dict | None) -> str:
    """The regression gate's verdict (the run folder's gate.json), or "" for a run not gated."""
    if not verdicts:
        return ""
    e = html.escape
    items = []
    for spec, passed in (verdicts.get("passed") or {}).items():
        if passed:
            items.append(f"<li><code>{e(str(spec))}</code>: passed</li>")
        else:
            broken = "".join(f"<li>{e(str(line))}</li>" for line in (verdicts.get("broken") or {}).get(spec, []))
            items.append(f"<li><code>{e(str(spec))}</code>: <b>broke the gate</b><ul>{broken}</ul></li>")
    for spec in verdicts.get("unchecked") or []:  # a stopped run's: no verdict is no pass
        items.append(f"<li><code>{e(str(spec))}</code>: <b>not checked</b> (it did not run or did not finish)</li>")
    across = verdicts.get("config_difference")
    note = f" (across configurations; first difference: {e(str(across))})" if across else ""
    return (
        f'<section id="gate"><h2>Regression gate</h2><p>Against the baseline '
        f"<code>{e(str(verdicts.get('baseline')))}</code>{note} (gate.json):</p><ul>{''.join(items)}</ul></section>"
    )


def render(
    summary: pd.DataFrame,
    info: dict,
    traces: list[Trace],
    probe_set,
    gate: dict | None = None,
    memo: dict | None = None,
) -> str:
    """The whole page as a string; ``gate`` is the run's gate.json, for a gated run; ``memo`` the
    per-probe rows already made (:func:`flarebench.bench.report.probe_rows`)."""
    config = info.get("config", {})
    study = info.get("study") or {}
    strategies = strategy_rows(summary)  # the oracle row of a comparison is no strategy: not plotted or viewed
    order = list(strategies["strategy"]) if not summary.empty else list(config.get("strategies", {}))
    probes = {p.id: p for p in probe_set.probes}
    rows = probe_rows([t for t in traces if t.strategy in order], probes, memo)
    e = html.escape
    kind = study.get("kind", "run")
    title = f"flarebench {kind}: {config.get('probes', {}).get('name', '?')}"
    if kind == "sweep":
        title += f", {', '.join(study.get('strategies', []))} over {study.get('param')}"
    head = (
        f"Probe set <code>{e(str(config.get('probes', {}).get('name')))}</code> "
        f"({e(str(info.get('probes_run', '?')))} probes run), "
        f"LM <code>{e(str(config.get('lm', {}).get('name')))}</code>, "
        f"retriever <code>{e(str(config.get('retriever', {}).get('name')))}</code>; run status "
        f"<b>{e(str(info.get('status', '?')))}</b>, started {e(str(info.get('created_utc', '?')))}; "
        f"command <code>{e(str(info.get('command', '')))}</code>."
    )
    if status := run_status(summary, config, study, info.get("status"), "gate" in info):
        # How to finish it, as summary.md says: report.html is the artifact a CI job keeps.
        head += " " + re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", _marked(status.strip()))
    if "cached_share" in summary and (summary["cached_share"].fillna(0) > 0).any():
        head += (
            f' <b class="warm">Warm run</b>: part of it was served from the cache ({e(str(info.get("cache")))}); '
            "see cached_share and the cold and warm latency columns."
        )
    notes = "".join(f"<li>{e(n)}</li>" for n in summary.attrs.get("notes", []))
    shows = "".join(f"<li>{e(f)}</li>" for f in findings(summary, study))
    docs = column_docs()
    columns = [c for c in summary.columns if c in docs]
    compact = compact_frame(summary) if not summary.empty else summary
    delta_doc = (
        "<dt>em vs REF, f1 vs REF</dt><dd>Mean paired difference from the reference strategy with its 95% "
        "paired-bootstrap interval (10,000 resamples); * where the interval excludes 0 (never on one probe).</dd>"
    )
    defs = delta_doc + "".join(f"<dt>{e(c)}</dt><dd>{e(docs[c])}</dd>" for c in columns)
    data = viewer_data(traces, rows, probes, probe_set.docs_by_id, order)
    return _PAGE.format(
        title=e(title),
        head=head,
        findings=f'<section id="findings"><h2>What this run shows</h2><ul>{shows}</ul></section>' if shows else "",
        gate=_gate(gate),
        notes=f"<h3>Notes</h3><ul>{notes}</ul>" if notes else "",
        table=_table(compact, "summary"),
        calibration=_calibration(summary, study),
        adoption=_adoption(adoption_of(summary)),
        full_table=_table(summary, "summary-full"),
        plots=_plots(strategies, rows, study, order),
        defs=defs,
        config=e(json.dumps(config, indent=2, ensure_ascii=False)),
        data=embed_json(data),
        style=_asset("report.css"),
        script=_asset("report.js"),
    )


def _asset(name: str) -> str:
    return (ASSETS / name).read_text(encoding="utf-8")


def write_report(
    run_dir: Path, summary: pd.DataFrame, info: dict, traces: list[Trace], probe_set, memo: dict | None = None
) -> Path:
    """Write ``RUN_DIR/report.html`` (atomically) and return its path. A gated run's verdict
    (``gate.json``, when the folder holds one) is shown at the top; ``memo`` is :func:`render`'s."""
    path = Path(run_dir) / REPORT_HTML
    write_atomic(path, render(summary, info, traces, probe_set, _read_gate(Path(run_dir) / GATE_JSON), memo))
    return path


def _read_gate(path: Path) -> dict | None:
    """gate.json's verdicts, or None when the run was not gated (or the file is not one flarebench wrote)."""
    try:
        verdicts = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return verdicts if isinstance(verdicts, dict) else None


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
<h1>{title}</h1>
<p>{head}</p>
<nav><a href="#comparison">Comparison</a><a href="#adoption">Adoption</a><a href="#plots">Plots</a>
<a href="#viewer">Trace viewer</a><a href="#columns">Column definitions</a>
<a href="#configuration">Configuration</a></nav>
{gate}{findings}
<section id="comparison">
<h2>Comparison</h2>
{calibration}<div class="scroll">{table}</div>
{notes}
<details><summary>Every column (as in summary.csv)</summary><div class="scroll">{full_table}</div></details>
</section>
<section id="adoption">
<h2>Adoption</h2>
{adoption}
</section>
<section id="plots">
<h2>Plots</h2>
{plots}
</section>
<section id="viewer">
<h2>Trace viewer</h2>
<p class="muted">Pick a probe (and a strategy): the answer, each step, why retrieval fired, the query, the
documents retrieved (gold ones marked), and every LM call's tokens, those at or below theta highlighted
with their probabilities.</p>
<label>Probe <select id="probe-select"></select></label>
<label>Strategy <select id="strategy-select"></select></label>
<div id="trace-view"></div>
</section>
<section id="columns">
<h2>Column definitions</h2>
<dl>{defs}</dl>
</section>
<section id="configuration">
<h2>Run configuration</h2>
<pre>{config}</pre>
</section>
<script id="trace-data" type="application/json">{data}</script>
<script>{script}</script>
</body>
</html>
"""
