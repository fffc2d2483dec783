"""The scorer registry: one declaration per metric, from which every list of columns is derived.

A scorer is one function, registered with the :func:`scorer` decorator, that turns the per-probe
rows of one strategy (a :class:`Group`) into that strategy's values of the summary columns it
declares. Each :class:`Column` carries its definition (printed in summary.md and report.html and
generated into the README's column table) and whether the regression gate may bound it: which way
is better, and the default tolerance written into new baselines. A scorer may also add values to
each probe's row (``per_probe``: a function of the trace, the probe and the row so far, so it may
read the values of scorers ordered before it) and lines to the summary's notes::

    @scorer(Column("answer_chars", "Mean characters of the scored answer.", better=None), order=25)
    def answer_chars(g: Group) -> dict[str, float]:
        return {"answer_chars": float(g.rows["answer"].fillna("").str.len().mean())}

The scorers are the modules of this package, found and imported by :func:`load` (every module but
this one and those whose names start with ``_``), so adding a metric is adding one module. They are
ordered by their ``order``, which fixes the order of the summary columns, the row values and the
notes. A scorer module imports neither :mod:`flarebench.bench.metrics`, :mod:`flarebench.bench.gate`
nor :mod:`flarebench.bench.report`: those load the registry when they are imported.
"""

from __future__ import annotations

import importlib
import inspect
import math
import numbers
import pkgutil
import traceback
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from flarebench.bench.scorers import ScorerError
from flarebench.strategies.records import Trace

__all__ = [
    "HIGHER",
    "LOWER",
    "WORSE_KINDS",
    "Column",
    "Group",
    "Scorer",
    "ScorerError",
    "Scoring",
    "column_docs",
    "column_table",
    "columns",
    "load",
    "optional_columns",
    "probes_without",
    "ratio",
    "scorer",
    "scorers",
    "summary_columns",
    "unreported",
]

#: ``Column.better``: a higher value is better (the gate bounds how far it may drop).
HIGHER = "higher"
#: ``Column.better``: a lower value is better (the gate bounds how far it may rise).
LOWER = "lower"
#: The tolerance kinds (see :data:`flarebench.bench.gate.KINDS`) that bound a metric on the side where
#: it gets worse; the other side is an improvement, which never fails the gate.
WORSE_KINDS: dict[str, tuple[str, ...]] = {HIGHER: ("max_drop", "max_drop_rel"), LOWER: ("max_rise", "max_rise_rel")}


@dataclass(frozen=True)
class Column:
    """One summary column: its name, its definition, and what the regression gate may do with it.

    ``better`` is :data:`HIGHER` or :data:`LOWER` for a column the gate may bound, and None for one
    it may not (text, flags, and what describes how a run was served rather than how a strategy
    did). ``tolerance`` is the default bound written into every new baseline (``{kind: value}``,
    kinds from :data:`WORSE_KINDS`); ``always_gated`` also applies it to baseline files whose
    tolerances do not name the column (see :func:`flarebench.bench.gate.always_gated`).

    ``optional`` marks a column that only some runs can compute (the long-answer columns need long
    probes): it is left out of a summary where no strategy has a value for it, so that the
    summaries of other runs keep exactly the columns they had before it existed. It is not one of
    :func:`summary_columns` (the columns every summary has) but one of :func:`optional_columns`.
    """

    name: str
    doc: str
    better: str | None = None
    tolerance: Mapping[str, float] | None = None
    always_gated: bool = False
    optional: bool = False

    @property
    def share(self) -> bool:
        """Whether the column's values lie within 0 and 1 (a rate, a share, a score): its definition
        says "0-1"."""
        return "0-1" in self.doc

    def __post_init__(self) -> None:
        if not self.doc:
            raise ScorerError(f"column {self.name}: no definition")
        if self.better not in (HIGHER, LOWER, None):
            raise ScorerError(f"column {self.name}: better must be HIGHER, LOWER or None, got {self.better!r}")
        if self.tolerance is not None:
            if self.better is None:
                raise ScorerError(f"column {self.name}: a default tolerance needs better=HIGHER or LOWER")
            wrong = [k for k in self.tolerance if k not in WORSE_KINDS[self.better]]
            if not self.tolerance or wrong:
                raise ScorerError(
                    f"column {self.name}: a {self.better}-is-better column is bounded by "
                    f"{' or '.join(WORSE_KINDS[self.better])}, got {dict(self.tolerance)!r}"
                )
        if self.always_gated and self.tolerance is None:
            raise ScorerError(f"column {self.name}: always_gated needs a default tolerance")
        if self.always_gated and self.optional:
            raise ScorerError(f"column {self.name}: an optional column cannot be always gated")


@dataclass(frozen=True)
class Scoring:
    """What a summary is scored with besides one strategy's rows: every strategy's rows in summary
    order (for columns that compare strategies), the price (a :class:`flarebench.bench.prices.Price`, or
    None), the delta reference strategy, and the per-probe faithfulness rows
    (:func:`flarebench.bench.faithfulness.faithfulness_rows`, or None when not computed), and the
    specs still to run."""

    groups: Mapping[str, pd.DataFrame]
    price: Any = None
    reference: str | None = None
    faithfulness: Mapping[tuple[str, str], Mapping[str, Any]] | None = None
    #: The specs the run asked for that have no rows yet (it stopped, or goes on): a note about one
    #: says it has not run, not that the run lacks it.
    pending: frozenset[str] = frozenset()
    _shared: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def shared(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """``compute()``, once per summary under ``key``: for a value that a scorer derives from every
        strategy's rows alike (the per-probe oracle), which each group would otherwise compute again
        (quadratic in the strategies of a sweep)."""
        if key not in self._shared:
            self._shared[key] = compute()
        return self._shared[key]


@dataclass(frozen=True)
class Group:
    """One strategy's per-probe rows (:func:`flarebench.bench.metrics.probe_row` dicts), what a scorer
    aggregates, with the run's :class:`Scoring`."""

    strategy: str
    rows: pd.DataFrame
    scoring: Scoring

    @cached_property
    def failed(self) -> pd.Series:
        """True on the rows whose probe raised an error (none, for rows without an ``error`` column)."""
        if "error" not in self.rows:
            return pd.Series(False, index=self.rows.index)
        return self.rows["error"].notna() & (self.rows["error"].astype(str) != "")

    @cached_property
    def finished(self) -> Group:
        """This group without the rows whose probe raised: what a scorer that does not score errors
        sees (see :func:`scorer`), as what such a probe used before it raised is unknown."""
        return Group(self.strategy, self.rows[~self.failed], self.scoring)

    def scores(self, column: str) -> pd.Series:
        """``column`` as floats, 0 on failed rows: a probe that raised is a wrong answer, whatever
        score its row carries (rows may be edited or loaded from elsewhere)."""
        return self.rows[column].astype(float).where(~self.failed, 0.0)

    def mean(self, column: str) -> float:
        """The mean of ``column`` over every row, failed ones included."""
        return float(self.rows[column].mean())

    @cached_property
    def service(self) -> pd.Series:
        """True on the rows whose trace came from a service under test (the ``http`` strategy):
        what the service did not report is NaN in such a row (the identity scorer's ``service``)."""
        rows = self.rows
        if "service" not in rows:
            return pd.Series(False, index=rows.index)
        return rows["service"].astype(object).eq(True)

    def mean_of_all(self, column: str) -> float:
        """The mean of ``column`` over every row, failed ones included; NaN (missing) when some row
        has no value: a mean over the probes a service reported would pass for the whole set's."""
        return float(self.rows[column].astype(float).mean(skipna=False)) if len(self.rows) else float("nan")

    def by_probe(self, values: pd.Series) -> pd.Series:
        """``values`` (aligned with :attr:`rows`) as floats indexed by probe id, the last row of a
        probe kept; rows without a ``probe_id`` column are numbered."""
        rows = self.rows
        ids = rows["probe_id"] if "probe_id" in rows else pd.Series(range(len(rows)), index=rows.index)
        series = pd.Series(values.to_numpy(dtype=float), index=ids.astype(str).to_numpy())
        return series.groupby(level=0, sort=False).last()


def unreported(
    summary: pd.DataFrame, scoring: Scoring, columns: Sequence[str], why: Callable[[Group], str | None]
) -> list[str]:
    """Notes for the strategies whose traces came from a service under test and whose ``columns``
    (those of them missing in the summary) are missing because the service did not report them:
    ``COLUMNS: missing for SPEC: WHY``, one line per strategy. ``why(group)`` says what the service
    did not report, or None when that is not why."""
    lines = []
    for _, row in summary.iterrows():
        rows = scoring.groups.get(row["strategy"])
        if rows is None:
            continue
        group = Group(row["strategy"], rows, scoring)
        missing = [c for c in columns if c in row and pd.isna(row[c])]
        if missing and group.service.any() and (reason := why(group)):
            lines.append(f"{', '.join(missing)}: missing for {group.strategy}: {reason}")
    return lines


def probes_without(group: Group, column: str) -> str:
    """`` on N of the M probes it answered`` when only some of the service's answers lack
    ``column``; "" when all of them do (errored probes, which the service did not answer, aside)."""
    answered = int(group.service.sum())
    lacking = int(group.rows.loc[group.service, column].isna().sum()) if column in group.rows else answered
    return "" if lacking == answered else f" on {lacking} of the {answered} probes it answered"


def _file_of(fn: Callable[..., Any]) -> str:
    """The file that defines ``fn``: a function's (through its decorators), else its module's name (a
    callable object, a partial), so that an error naming it never fails itself."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    return code.co_filename if code is not None else str(getattr(fn, "__module__", None) or type(fn).__module__)


def _is_number(value: Any) -> bool:
    """A finite real number, or NaN (a missing value); not infinity, a bool or text."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and not math.isinf(value)


def ratio(num: float, den: float) -> float:
    """``num / den`` as a float; NaN (missing) when ``den`` is 0: nothing to divide (no steps, no
    time, no calls), which is no rate at all rather than a rate of 0."""
    return float(num) / float(den) if den else float("nan")


#: Per-probe values: (trace, probe, the row so far) -> {row column: value}.
PerProbe = Callable[[Trace, Any, Mapping[str, Any]], Mapping[str, Any]]


@dataclass(frozen=True)
class Scorer:
    """A registered scorer (see :func:`scorer`); calling it on a :class:`Group` gives its columns'
    values for that strategy. A column it leaves out is empty (NaN) in the summary."""

    name: str
    order: int
    columns: tuple[Column, ...]
    summarize: Callable[[Group], Mapping[str, Any]]
    per_probe: PerProbe | None = None
    needs: tuple[str, ...] = ()
    settings: Callable[[Scoring], str] | None = None
    findings: Callable[[pd.DataFrame, Scoring], list[str]] | None = None
    scores_errors: bool = False

    @property
    def where(self) -> str:
        """The scorer as its errors name it: by name and the file that declares it (a plugin's)."""
        return f"scorer {self.name} ({_file_of(self.summarize)})"

    def _called(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``; what it raises is a ScorerError naming this scorer, its file and line: a
        plugin's mistake, said in one line rather than as a traceback through the summary."""
        try:
            return fn(*args)
        except ScorerError:
            raise
        except Exception as e:
            frames = traceback.extract_tb(e.__traceback__)
            # The line of the scorer's own code that raised, rather than pandas' deep inside it.
            own = [f for f in frames if f.filename == _file_of(fn)] or frames
            at = f"{Path(own[-1].filename).name}:{own[-1].lineno}"
            raise ScorerError(f"{self.where}: {what} raised {type(e).__name__}: {e} ({at})") from None

    def __call__(self, group: Group) -> dict[str, Any]:
        values = self._called("summarize", self.summarize, group if self.scores_errors else group.finished)
        if not isinstance(values, Mapping):
            raise ScorerError(f"{self.where}: returned {type(values).__name__}, not a dict of column: value")
        declared = {col.name: col for col in self.columns}
        unknown = [c for c in values if c not in declared]
        if unknown:
            raise ScorerError(f"{self.where}: returned undeclared column(s): {', '.join(map(str, unknown))}")
        for name, value in values.items():
            # The gate compares numbers: text in a gateable column would be a metric no gate can hold.
            if declared[name].better is not None and value is not None and not _is_number(value):
                raise ScorerError(
                    f"{self.where}: column {name} may be gated ({declared[name].better} is better), "
                    f"so its value must be a finite number (NaN when missing), got {value!r}"
                )
        return dict(values)

    def setting(self, scoring: Scoring) -> str:
        """The ``settings`` note ("" for none), checked to be text."""
        note = self._called("settings", self.settings, scoring) if self.settings else ""
        if not isinstance(note, str):
            raise ScorerError(f"{self.where}: settings returned {type(note).__name__}, not a string")
        return note

    def found(self, summary: pd.DataFrame, scoring: Scoring) -> list[str]:
        """The ``findings`` lines, checked to be a list of strings (a string alone is no list of lines)."""
        lines = self._called("findings", self.findings, summary, scoring) if self.findings else []
        if not isinstance(lines, list | tuple) or not all(isinstance(line, str) for line in lines):
            raise ScorerError(f"{self.where}: findings returned {type(lines).__name__}, not a list of strings")
        return list(lines)

    def row_values(self, trace: Trace, probe: Any, row: Mapping[str, Any]) -> Mapping[str, Any]:
        """The values ``per_probe`` adds to a probe's row, checked as :meth:`__call__` checks the summary's."""
        values = self._called("per_probe", self.per_probe, trace, probe, row)
        if not isinstance(values, Mapping):
            raise ScorerError(f"{self.where}: per_probe returned {type(values).__name__}, not a dict of column: value")
        return values


_SCORERS: dict[str, Scorer] = {}
_loaded = False


def scorer(
    *declared: Column,
    order: int,
    per_probe: PerProbe | None = None,
    needs: Sequence[str] = (),
    settings: Callable[[Scoring], str] | None = None,
    findings: Callable[[pd.DataFrame, Scoring], list[str]] | None = None,
    scores_errors: bool = False,
) -> Callable[[Callable[[Group], Mapping[str, Any]]], Scorer]:
    """Register the decorated function ``f(group) -> {column: value}`` as the scorer of ``declared``.

    ``order`` places its columns in the summary (and its row values and notes) among the other
    scorers'; no two scorers share one. ``per_probe`` adds values to each probe's row. ``needs``
    names the row columns the function cannot do without (a summary of rows lacking one is refused
    by name). ``settings(scoring)`` gives one note line saying what the columns were scored with (a
    price, a reference; "" for none); ``findings(summary, scoring)`` gives the lines a reader must not miss.
    Settings notes come before findings, each in scorer order. The decorator returns the
    :class:`Scorer`, named after the function.

    A probe that raised left an empty trace: what it used before it raised is unknown. So the
    function sees the probes that finished (:attr:`Group.finished`), and its columns are missing
    when none did; ``scores_errors=True`` gives it every row instead, for a column that has a value
    for a probe that raised (``n`` and ``errors`` count it, ``em`` and ``f1`` score it 0).
    """
    if not declared:
        raise ScorerError("a scorer declares at least one column")

    def register(fn: Callable[[Group], Mapping[str, Any]]) -> Scorer:
        # The built-in scorers first, so that a plugin's clash with one is the plugin's error.
        if not fn.__module__.startswith(f"{__name__.rpartition('.')[0]}."):
            load()
        name = fn.__name__
        # Each side named with its module: a clash between two modules of bench/scorers/ is found by them.
        where = f"scorer {name} ({fn.__module__})"
        if name in _SCORERS:
            raise ScorerError(
                f"{where}: the name is taken by {_SCORERS[name].summarize.__module__} "
                "(a scorer is named after its function)"
            )
        taken = {s.order: f"{s.name} ({s.summarize.__module__})" for s in _SCORERS.values()}
        if order in taken:
            raise ScorerError(f"{where}: order {order} is taken by {taken[order]}")
        owner = {c.name: s.name for s in _SCORERS.values() for c in s.columns}
        names = [c.name for c in declared]
        clash = [f"{c} ({owner[c]})" for c in names if c in owner] + [c for c in names if names.count(c) > 1]
        if clash:
            raise ScorerError(f"{where}: column(s) declared elsewhere: {', '.join(dict.fromkeys(clash))}")
        _SCORERS[name] = Scorer(
            name, order, tuple(declared), fn, per_probe, tuple(needs), settings, findings, scores_errors
        )
        return _SCORERS[name]

    return register


def load() -> None:
    """Import every scorer module of this package once (their decorators register them)."""
    global _loaded
    if _loaded:
        return
    package = __name__.rpartition(".")[0]
    for module in sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)])):
        if module != "registry" and not module.startswith("_"):
            importlib.import_module(f"{package}.{module}")
    _loaded = True


def scorers() -> list[Scorer]:
    """Every registered scorer, in order."""
    load()
    return sorted(_SCORERS.values(), key=lambda s: s.order)


def columns() -> list[Column]:
    """Every declared column, in summary order."""
    return [c for s in scorers() for c in s.columns]


def summary_columns() -> list[str]:
    """The names of the columns every summary has, in order (optional columns left out)."""
    return [c.name for c in columns() if not c.optional]


def optional_columns() -> list[str]:
    """The names of the optional columns (see :attr:`Column.optional`), in summary order: a summary
    has those some strategy of its run has a value for."""
    return [c.name for c in columns() if c.optional]


def column_docs() -> dict[str, str]:
    """Each column's definition (optional columns included), in summary order."""
    return {c.name: c.doc for c in columns()}


_GATE_CELL = {HIGHER: "higher is better", LOWER: "lower is better", None: "not gated"}


def column_table() -> str:
    """The Markdown table of every summary column, its definition and its gate direction: the
    README's "What each number means" table (``python -m flarebench.bench.scorers --write``)."""
    lines = ["| column | definition | gate |", "|---|---|---|"]
    lines += [f"| `{c.name}` | {c.doc.replace('|', '&#124;')} | {_GATE_CELL[c.better]} |" for c in columns()]
    return "\n".join(lines)
