"""The adoption table: what a team adopting active retrieval measures before (the reference
strategy, single-shot retrieval by default) and after (each other strategy of the run), on the same
probes, written into every run folder as ``adoption.md`` and shown in report.html's "Adoption"
section.

Every value is a summary column the scorers already compute (faithfulness, incomplete answers, the
triggering columns, p95 latency, and the streaming columns where a run has them); this module only
picks them, formats them and, for the rows that are per-probe quantities, adds the difference's 95%
paired-bootstrap interval, drawn as the delta columns draw theirs
(:func:`flarebench.bench.scorers.deltas.paired`). A value that cannot be computed is shown as "–"
with the reason, never as 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from tabulate import tabulate

from flarebench.bench.bounds import never_retrieved, strategy_rows
from flarebench.bench.markdown import cell, text
from flarebench.bench.metrics import column_docs
from flarebench.bench.scorers.deltas import paired
from flarebench.bench.scorers.facts import fact_flags
from flarebench.bench.scorers.incomplete import incomplete_flags
from flarebench.bench.scorers.registry import Group, Scoring
from flarebench.bench.scorers.triggering import fired
from flarebench.bench.uncertainty import DEFAULT_REFERENCE, RESAMPLES, SEED, Statistic, p95

ADOPTION_MD = "adoption.md"
#: How a missing value is shown (with its reason in brackets).
MISSING = "–"

# Units: how a value and a difference are written.
SHARE = "share"  # 0-1, written as a percentage; differences in percentage points
SECONDS = "seconds"
COUNT = "count"
PROBES = "probes"  # a count of probes, written "2 of 10" (of the row's n)
RELATIVE = "relative"  # already relative to the reference: 0.38 is written +38.0%

#: Per-probe values of one strategy, indexed by probe id: (its group, the faithfulness rows).
PerProbe = Callable[[Group, Mapping[tuple[str, str], Mapping[str, Any]] | None], pd.Series | None]


@dataclass(frozen=True)
class Measure:
    """One row of the table: its label, the summary column it reads, how it is written, its
    definition for the legend, and, for a per-probe quantity, how to get its per-probe values (and
    the statistic compared, the mean when None) for the difference's interval."""

    label: str
    column: str
    unit: str
    doc: str
    #: Why a value is missing (shown beside "–"), or a function of its summary row giving the reason.
    empty: str | Callable[[Mapping[str, Any]], str]
    per_probe: PerProbe | None = None
    statistic: Statistic | None = None
    when_fired: bool = False  # a value over the questions where retrieval fired: "never fired" when none did


@dataclass(frozen=True)
class Row:
    """One row as shown: every cell already written."""

    label: str
    before: str
    after: str
    difference: str


@dataclass(frozen=True)
class Table:
    """One strategy against the reference."""

    strategy: str
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class Adoption:
    """The tables of a run (one per strategy other than the reference), or the one line saying why
    there are none (``absent``); the legend of the rows shown ((label, column, definition)) and the
    notes."""

    reference: str
    tables: tuple[Table, ...] = ()
    absent: str | None = None
    legend: tuple[tuple[str, str, str], ...] = ()
    notes: tuple[str, ...] = ()

    def __deepcopy__(self, memo) -> Adoption:
        # Immutable all the way down, so a copy is itself. A summary carries its tables in
        # ``attrs``, which pandas deep-copies on every operation on the frame.
        return self


def _probe_ids(rows: pd.DataFrame, strategy: str) -> pd.Series:
    return rows.loc[rows["strategy"] == strategy, "probe_id"]


def _group(rows: pd.DataFrame, strategy: str) -> Group:
    return Group(strategy, rows[rows["strategy"] == strategy], Scoring(groups={}))


def _faithfulness(g: Group, faithfulness) -> pd.Series | None:
    """The probes' faithfulness scores (those without one left out), or None without the rows."""
    if not faithfulness:
        return None
    ids = set(g.rows["probe_id"].astype(str))
    scores = {
        p: float(row["faithfulness"])
        for (s, p), row in faithfulness.items()
        if s == g.strategy and p in ids and row.get("faithfulness") is not None
    }
    return pd.Series(scores, dtype=float)


def _incomplete(g: Group, _faithfulness) -> pd.Series:
    return g.by_probe(incomplete_flags(g).astype(float))


def _incomplete_or_wrong(g: Group, _faithfulness) -> pd.Series:
    missing, wrong = fact_flags(g)
    long = Group(g.strategy, g.rows.loc[missing.index], g.scoring)
    return long.by_probe((missing | wrong).astype(float))


def _triggered(g: Group, _faithfulness) -> pd.Series:
    # A service's answers are left out: whether its retrieval fired during generation is unknown.
    known = g.rows["triggered_steps"].notna()
    return g.by_probe(fired(g).astype(float).where(known)).dropna()


def _per_probe(column: str) -> PerProbe:
    """The probes' values of a per-probe row column, those without one (NaN) and those that raised
    left out, as the summary's column leaves them out (an errored probe's wall time is no answer's)."""

    def values(g: Group, _faithfulness) -> pd.Series:
        g = g.finished
        return g.by_probe(g.rows[column].astype(float)).dropna()

    return values


def _unfaithful_reason(row: Mapping[str, Any]) -> str:
    """Why faithfulness is empty: the method's "n/a: ..." reason, or not scored at all."""
    method = row.get("faithfulness_method")
    if isinstance(method, str) and method.startswith("n/a:"):
        return method.removeprefix("n/a:").strip()
    return "not scored"


_RELATIVE_DOC = (
    "the after value is this strategy's sum over the reference's on the same probes, minus 1 (+38% is 38% "
    "more); there is no before value (the reference against itself); the difference is that ratio (no interval)"
)

FAITHFULNESS = Measure(
    "answer faithfulness",
    "faithfulness",
    SHARE,
    "mean share of an answer's claims (its sentences and its stated answer) supported by the passages its "
    "strategy retrieved (the method is faithfulness_method); interval over the probes both have a score for",
    _unfaithful_reason,
    _faithfulness,
)
INCOMPLETE_OR_WRONG = Measure(
    "incomplete or wrong-version answers",
    "incomplete_or_wrong_rate",
    SHARE,
    "long answers: share of the long probes whose output misses a required fact or states a wrong value "
    "of one (an older release, the staging value); an errored probe counts among them but never as "
    "incomplete (see the errors row); a run's short probes "
    "are not in this row (see incomplete_rate)",
    "no long probe",
    _incomplete_or_wrong,
)
INCOMPLETE = Measure(
    "incomplete answers",
    "incomplete_rate",
    SHARE,
    "short answers (this run has no long probes, so there is no wrong-version check): share of the "
    "probes whose answer never reached a final-answer statement (cut by a cap, stopped without one, "
    "abstained, empty); an errored probe counts among them but never as incomplete (see the errors row)",
    "no probe",
    _incomplete,
)
TRIGGERED = Measure(
    "share of queries where active retrieval fired",
    "triggered_share",
    SHARE,
    "share of the questions on which at least one generation step retrieved (the first-hop retrieval "
    "with the question not counted)",
    "no probe",
    _triggered,
)
RETRIEVALS = Measure(
    "mean mid-answer retrievals when it fired",
    "retrievals_when_triggered",
    COUNT,
    "mean number of generation steps that retrieved, over the questions where retrieval fired; no "
    "interval (before and after are means over different questions)",
    "never fired",
    when_fired=True,
)
LATENCY = Measure(
    "p95 end-to-end latency",
    "latency_p95_s",
    SECONDS,
    "95th percentile of the wall time per question; the difference is of the two p95s over the probes "
    "both answered, its interval from the same paired resamples",
    "no probe",
    _per_probe("latency_s"),
    statistic=p95,
)
ERRORS = Measure(
    "probes that raised an error",
    "errors",
    PROBES,
    "probes whose run raised (in the strategy or a backend), of the probes run: such a probe has no answer, "
    "and no rate above counts it as incomplete or wrong (its rate's denominator holds it), so a strategy's "
    "share of probes without a complete answer is its incomplete rate plus its errors over n",
    "no probe",
)
#: The streaming columns: what a reader of the streamed answer waits.
STREAMING = (
    Measure(
        "p95 time to first sentence",
        "ttfs_p95_s",
        SECONDS,
        "95th percentile of the time to the first sentence shown, over the answers with a sentence; the "
        "difference is of the two p95s over the probes both showed a sentence on, its interval from the "
        "same paired resamples",
        "no answer showed a sentence",
        _per_probe("ttfs_s"),
        statistic=p95,
    ),
    Measure(
        "p95 mid-answer stall",
        "stall_p95_s",
        SECONDS,
        "95th percentile of the longest wait between two consecutive shown sentences, over the answers "
        "with two sentences or more; the difference is of the two p95s over the probes where both answers "
        "have two, its interval from the same paired resamples",
        "no answer has two sentences",
        _per_probe("stall_s"),
        statistic=p95,
    ),
)
TOKENS_TRIGGERED = Measure(
    "tokens on queries where it fired",
    "tokens_rel_triggered",
    RELATIVE,
    "prompt tokens sent (retrieved passages included) plus generated tokens, summed over the questions "
    "where this strategy's retrieval fired; " + _RELATIVE_DOC,
    "never fired",
    when_fired=True,
)
TOKENS_BLENDED = Measure(
    "tokens, blended over all queries",
    "tokens_rel_blended",
    RELATIVE,
    "prompt tokens sent plus generated tokens, summed over all probes; " + _RELATIVE_DOC,
    "the reference used no tokens",
)
COST_TRIGGERED = Measure(
    "cost on queries where it fired",
    "cost_rel_triggered",
    RELATIVE,
    "USD at the price table's prices (cost_per_q's: tokens sent and generated, retrievals), summed over "
    "the questions where this strategy's retrieval fired; " + _RELATIVE_DOC,
    "never fired",
    when_fired=True,
)
COST_BLENDED = Measure(
    "cost, blended over all queries",
    "cost_rel_blended",
    RELATIVE,
    "USD at the price table's prices, summed over all probes; " + _RELATIVE_DOC,
    "the reference costs 0",
)


def measures(summary: pd.DataFrame) -> tuple[list[Measure], list[str]]:
    """The rows this summary can show, in order, and the notes on those it leaves out or how it
    defines them."""
    notes = []
    incomplete = INCOMPLETE_OR_WRONG if INCOMPLETE_OR_WRONG.column in summary.columns else INCOMPLETE
    shown = [FAITHFULNESS, incomplete, TRIGGERED, RETRIEVALS, LATENCY, *STREAMING, TOKENS_TRIGGERED, TOKENS_BLENDED]
    cost = summary["cost_per_q"] if "cost_per_q" in summary.columns else pd.Series(dtype=float)
    priced = "cost_rel_blended" in summary.columns and summary["cost_rel_blended"].notna().any()
    if priced:
        shown += [COST_TRIGGERED, COST_BLENDED]
    elif cost.isna().all():
        notes.append(
            "cost rows left out: the LM has no price (add one to the price table, or rescore with "
            "`flarebench score RUN_DIR --prices FILE`)"
        )
    elif (cost.fillna(0) == 0).all():
        notes.append("cost rows left out: the LM is priced at 0 (a local model); the token rows stand for its cost")
    else:
        notes.append("cost rows left out: the reference costs 0, so no cost is relative to it")
    # A strategy that never retrieved answered closed-book: its savings are not a cheaper retrieval's.
    if closed := never_retrieved(summary):
        notes.append(
            f"{', '.join(closed)} never retrieved: closed-book answers, so their tokens and latency are "
            "those of answering without documents"
        )
    if "errors" in summary.columns and pd.to_numeric(summary["errors"], errors="coerce").fillna(0).gt(0).any():
        shown.insert(0, ERRORS)  # first: every other row of a strategy with errors is read in its light
    return [m for m in shown if m.column in summary.columns], notes


def _value(row: Mapping[str, Any], column: str) -> float | None:
    value = row.get(column)
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def _seconds(v: float, sign: str) -> str:
    """Seconds to two decimals, or to two significant digits below 0.1 s: a difference of a few
    milliseconds, significant or not, never reads as -0.00."""
    digits = 2 if v == 0 or abs(v) >= 0.095 else min(6, 1 - math.floor(math.log10(abs(v))))
    return f"{v:{sign}.{digits}f}"


def _number(m: Measure, v: float, signed: bool = False) -> str:
    sign = "+" if signed else ""
    if m.unit == SHARE:
        return f"{100 * v:{sign}.1f} pts" if signed else f"{100 * v:.1f}%"
    if m.unit == SECONDS:
        return f"{_seconds(v, sign)} s"
    if m.unit == RELATIVE:
        return f"{100 * v:+.1f}%"
    if m.unit == PROBES:
        return f"{v:{sign}.0f}"
    return f"{v:{sign}.2f}"


def _bound(m: Measure, v: float) -> str:
    if m.unit == SECONDS:
        return _seconds(v, "+")
    return f"{100 * v:+.1f}" if m.unit == SHARE else f"{v:+.2f}"


def _missing(reason: str) -> str:
    return f"{MISSING} ({reason})"


#: The reason shown for a value a service under test did not report (a key _service marks its row).
UNREPORTED = "not reported by the service"


def _reason(m: Measure, row: Mapping[str, Any]) -> str:
    if row.get("_service") and m.column != FAITHFULNESS.column:  # faithfulness says its own reason
        return UNREPORTED
    if (n := _value(row, "n")) and _value(row, "errors") == n:
        return "every probe raised an error"
    if row.get("_disjoint") and m.unit == RELATIVE:
        return "no probe has both"
    if m.when_fired and not _value(row, "triggered_share"):
        return "never fired"
    return m.empty(row) if callable(m.empty) else m.empty


def _cell(m: Measure, row: Mapping[str, Any], reference: bool = False) -> str:
    if reference and m.unit == RELATIVE:
        return _missing("the reference")  # relative to itself: nothing to show
    v = _value(row, m.column)
    if v is not None and m.unit == PROBES:
        return f"{v:.0f} of {_value(row, 'n') or 0:.0f}"
    return _missing(_reason(m, row)) if v is None else _number(m, v)


def _difference(m: Measure, ref: Mapping[str, Any], mine: Mapping[str, Any], pairs) -> str:
    """After minus before (a relative row's after value itself), with the paired interval where
    the row is a per-probe quantity and the per-probe values are at hand (``pairs``)."""
    before, after = _value(ref, m.column), _value(mine, m.column)
    if after is None:
        return _missing(_reason(m, mine))
    if m.unit == RELATIVE:
        return _number(m, after)
    if before is None:
        return _missing(f"reference: {_reason(m, ref)}")
    if pairs is None:
        return _number(m, after - before, signed=True)
    d = paired(pairs[0], pairs[1], m.statistic)
    if d.n == 0:
        return _missing("no probe has both")
    if d.n == 1:  # one probe's own difference: no interval, and nothing said of chance
        return f"{_number(m, d.delta, signed=True)} (one probe has both: no interval)"
    star = " *" if d.significant else ""
    # Over fewer probes than a side's own value (faithfulness: one side retrieved on more probes),
    # the difference need not be after minus before: the row says over which.
    fewer = f" (over the {d.n} probes both have)" if d.n < max(len(pairs[0]), len(pairs[1])) else ""
    return f"{_number(m, d.delta, signed=True)} [{_bound(m, d.lo)}, {_bound(m, d.hi)}]{star}{fewer}"


def _pairs(m: Measure, rows: pd.DataFrame | None, faithfulness, strategy: str, reference: str):
    """(this strategy's, the reference's) per-probe values of ``m``, or None."""
    if rows is None or m.per_probe is None:
        return None
    mine = m.per_probe(_group(rows, strategy), faithfulness)
    theirs = m.per_probe(_group(rows, reference), faithfulness)
    return None if mine is None or theirs is None else (mine, theirs)


def adoption(
    summary: pd.DataFrame,
    rows: pd.DataFrame | None = None,
    faithfulness: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
    reference: str | None = None,
    pending: Iterable[str] = (),
) -> Adoption:
    """The adoption tables of a run: one per strategy of ``summary`` other than ``reference``
    (default: the summary's delta_reference, else :data:`DEFAULT_REFERENCE`). ``rows`` (the
    per-probe rows the summary was made from, :func:`flarebench.bench.report.probe_rows`) and
    ``faithfulness`` (:func:`flarebench.bench.faithfulness.faithfulness_rows`) give the per-probe
    rows their intervals; without them a difference is shown without one. A comparison's oracle row
    is no strategy and gets no table (:func:`flarebench.bench.bounds.strategy_rows`)."""
    summary = strategy_rows(summary)
    if reference is None:
        named = summary["delta_reference"].dropna() if "delta_reference" in summary.columns else []
        reference = str(named.iloc[0]) if len(named) else DEFAULT_REFERENCE
    if summary.empty:
        return Adoption(reference, absent="No adoption table yet: no probe has finished.")
    records = {str(r["strategy"]): r for r in summary.to_dict("records")}
    if rows is not None and "service" in rows.columns:
        # A service under test's row: a value it left missing is "not reported", not "never fired".
        for strategy in set(rows.loc[rows["service"].astype(object).eq(True), "strategy"].astype(str)):
            if strategy in records:
                records[strategy]["_service"] = True
    if reference not in records and reference in pending:
        return Adoption(
            reference,
            absent=f"No adoption table yet: the reference strategy `{reference}` has not run yet.",
        )
    if reference not in records:
        return Adoption(
            reference,
            absent=(
                f"No adoption table: the reference strategy `{reference}` (the before column, --reference) "
                f"is not in this run. After `run`, `compare` or `pytest bench`, run the same command with "
                f"`--strategy {reference}` added, in another run folder (`--report-dir`) or with `--overwrite`; "
                "a sweep or a calibration varies one strategy, so "
                "run `flarebench compare --budget ...` (it calibrates and runs the reference in one folder) "
                "or rescore against a strategy of the run (`flarebench score RUN_DIR --reference SPEC`)."
            ),
        )
    others = [s for s in records if s != reference]
    if not others and (waiting := [s for s in pending if s != reference]):
        return Adoption(
            reference,
            absent=f"No adoption table yet: {', '.join(f'`{s}`' for s in waiting)} {_has(waiting)} not run yet.",
        )
    if not others:
        return Adoption(
            reference,
            absent=(
                f"No adoption table: this run holds only the reference strategy `{reference}`; add a "
                "strategy to compare with it (e.g. `--strategy flare_direct`)."
            ),
        )
    shown, notes = measures(summary)
    if rows is None:
        notes.append("no intervals: the table was made from the summary alone, without its per-probe rows")
    ref = records[reference]
    tables = []
    for strategy in others:
        mine = records[strategy]
        if rows is not None and not set(_probe_ids(rows, strategy)) & set(_probe_ids(rows, reference)):
            mine["_disjoint"] = True  # a value relative to the reference has no probe to be taken over
        cells = [
            Row(
                m.label,
                _cell(m, ref, reference=True),
                _cell(m, mine),
                _difference(m, ref, mine, _pairs(m, rows, faithfulness, strategy, reference)),
            )
            for m in shown
        ]
        tables.append(Table(strategy, tuple(cells)))
    legend = tuple((m.label, m.column, _legend(m, summary)) for m in shown)
    return Adoption(reference, tuple(tables), None, legend, tuple(notes))


def _legend(m: Measure, summary: pd.DataFrame) -> str:
    """A row's definition; the faithfulness row's names the methods that scored this run (the
    numbers of two methods are not comparable, and adoption.md is read on its own)."""
    doc = m.doc or column_docs().get(m.column, "see summary.md")
    if m is FAITHFULNESS and "faithfulness_method" in summary.columns:
        named = sorted(set(summary["faithfulness_method"].dropna().astype(str)))
        methods = [m for m in named if not m.startswith("n/a")] or named  # why none scored, when none did
        doc += f"; in this run: {', '.join(methods)}" if methods else ""
    return doc


def _has(items: list) -> str:
    return "has" if len(items) == 1 else "have"


def intro(a: Adoption) -> str:
    """The paragraph above the tables (plain text, Markdown code marks aside)."""
    return (
        f"Before: the reference strategy `{a.reference}` (--reference); after: each other strategy of the "
        "run, on the same probes. The difference is after minus before; where a row is a per-probe "
        "quantity, it is taken over the probes both have a value for (the row says so where that leaves a "
        "probe out: it can then differ from after minus before), and [lo, hi] is its 95% paired-bootstrap interval "
        f"({RESAMPLES:,} resamples, seed {SEED}, as the delta columns), * where it excludes 0. "
        f"{MISSING} marks a value that cannot be computed, with the reason; a missing value is never 0."
    )


def headers(a: Adoption, strategy: str) -> list[str]:
    return ["measured", f"before ({a.reference})", f"after ({strategy})", "difference [95% interval]"]


def markdown(a: Adoption, run_name: str, status_line: str = "") -> str:
    """adoption.md: the tables (tabulate's GitHub format, as summary.md), the legend and the notes;
    ``status_line`` (summary.md's, for a run that has not finished) under the title."""
    out = [f"# Adoption table: run {text(run_name)}\n", *([status_line.rstrip("\n") + "\n"] if status_line else [])]
    if a.absent is not None:
        out.append(f"{a.absent}\n")
        return "\n".join(out)
    out.append(f"{intro(a)}\n")
    for table in a.tables:
        body = [[cell(r.label), cell(r.before), cell(r.after), cell(r.difference)] for r in table.rows]
        out.append(f"## {table.strategy}\n")
        shown = [cell(h) for h in headers(a, table.strategy)]
        out.append(tabulate(body, headers=shown, tablefmt="github", disable_numparse=True) + "\n")
    out.append("## Rows\n")
    out.append("".join(f"- **{label}** (`{column}`): {doc}\n" for label, column, doc in a.legend))
    out.append(
        "Each column is defined in [summary.md](summary.md#columns) beside this file and in flarebench's "
        '`docs/metrics.md` (sections "Faithfulness", "Long answers", "Incomplete answers", "Latency" and '
        '"When retrieval fires").\n'
    )
    if a.notes:
        out.append("## Notes\n")
        out.append("".join(f"- {note}\n" for note in a.notes))
    return "\n".join(out)
