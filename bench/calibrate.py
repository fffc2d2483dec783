"""Calibrating a strategy's retrieval budget on a dev split (``flarebench calibrate`` and
``flarebench compare --budget``).

The run's probes are split once, seeded, into a dev part and a test part. On dev, each strategy's
budget knob (:meth:`flarebench.strategies.base.Strategy.budget_knob`: a trigger's threshold,
fixed_interval's interval, flare_instruct's search_bias) is swept over its grid:

* to hit a **target** (``retrieval_rate=0.5``) by bisection, since the retrieval rate moves one way
  with the knob: the two neighbouring grid values whose rates bracket the target are found in about
  log2(grid) runs, and the closer one is chosen, so the choice is within one grid step of the value
  that would hit the target exactly. Where the rates met on the way are not monotone after all (a
  small dev part is noisy), every grid value is run and the closest is chosen;
* to make an **objective under a budget** best (``--objective f1 --budget retrieval_rate<=0.5``:
  maximised, or minimised for a column whose lower values are better) over the whole grid: the best
  objective among the values within budget (none within: the one closest to it, marked infeasible).

The chosen value then runs on the test part, and the figures a report quotes are the test ones:
a threshold is chosen on data it is not judged on.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from flarebench.bench.bounds import with_bounds
from flarebench.bench.options import DEV_FRACTION, TOLERANCE
from flarebench.strategies.base import Knob
from flarebench.strategies.registry import SpecError, parse_spec, with_param

CALIBRATION_CSV = "calibration.csv"
#: What a dev point records besides the goal's metrics.
DEV_METRICS = ("retrieval_rate", "f1", "em", "lm_calls_per_q", "errors")

# nan and inf are read as numbers here, so that they are refused as not finite rather than as
# misspelt goals.
_GOAL = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|=)\s*([-+0-9.eE]+|[-+]?(?:nan|inf(?:inity)?))\s*$", re.I)
#: How a goal is written, as a refusal says it.
GOAL_FORMS = "METRIC=VALUE, METRIC<=VALUE or METRIC>=VALUE"


def goal_op(text: str | None) -> str | None:
    """The comparison a goal is written with (``=``, ``<=`` or ``>=``), None when it is no goal's form."""
    m = _GOAL.match(text or "")
    return m.group(2) if m else None


class CalibrationError(ValueError):
    """A goal, split or knob that cannot be calibrated: one line for the user."""


@dataclass(frozen=True)
class Goal:
    """What calibration aims at: ``metric = value`` (a target), or ``metric <= value`` /
    ``metric >= value`` (a budget) under which ``objective`` is made best: maximised, or minimised
    where ``lower`` (a column whose lower values are better: ``incomplete_rate``)."""

    metric: str
    op: str
    value: float
    objective: str | None = None
    lower: bool = False

    @property
    def is_target(self) -> bool:
        return self.op == "="

    def allowed(self, tolerance: float) -> float:
        """How far a test figure may miss the goal (``--budget-tolerance``): ``tolerance`` itself on a
        column within 0 and 1, else that share of the goal's value (0.1 of 1000 tokens is 100)."""
        return tolerance if is_share(self.metric) else tolerance * abs(self.value)

    @property
    def timed(self) -> bool:
        """Whether the goal or its objective is a time: dev points are then measured cold, since
        the dev cache would answer them in the time of a lookup."""
        return any(name is not None and is_time(name) for name in (self.metric, self.objective))

    def describe(self) -> str:
        text = f"{self.metric}{self.op}{self.value:g}"
        return text if self.is_target else f"{'min' if self.lower else 'max'} {self.objective} with {text}"

    def miss(self, realised: float) -> float:
        """How far ``realised`` is from the target, or beyond the budget (0 within it); NaN when
        it is missing."""
        if realised is None or math.isnan(realised):
            return math.nan
        if self.is_target:
            return abs(realised - self.value)
        over = realised - self.value if self.op == "<=" else self.value - realised
        return max(0.0, over)

    def within(self, realised: float) -> bool:
        """Whether a budget holds at ``realised`` (a target is never "within")."""
        return not self.is_target and self.miss(realised) == 0.0


#: The scorers whose columns compare a strategy with other ones (the reference, the bounds): a dev
#: point runs one strategy alone, so they have no value there and cannot be a goal.
_COMPARING = ("deltas", "effect")


def is_share(column: str) -> bool:
    """Whether a summary column lies within 0 and 1 (a rate, a share, a score)."""
    from flarebench.bench.scorers.registry import columns

    return any(c.share for c in columns() if c.name == column)


def is_time(column: str) -> bool:
    """Whether a summary column is a wall-clock measure (seconds, or a share of them)."""
    return column.endswith(("_s", "_s_per_q")) or column == "harness_share"


def parse_goal(text: str, objective: str | None, option: str) -> Goal:
    """``METRIC=V`` (a target) or ``METRIC<=V`` / ``METRIC>=V`` (a budget, ``objective`` default
    f1), its metrics checked against the summary columns the scorers declare (long-answer ones
    included); a CalibrationError naming ``option``. The objective is maximised, or minimised where
    its column declares lower values better.

    Refused besides: a value that is not a finite number, one outside 0 and 1 on a column within
    them, a negative one, and a budget on the objective itself. A budget may bound its column either
    way: a floor on a lower-is-better column (``retrieval_rate>=0.2``: retrieve for at least a fifth
    of the sentences) or a cap on a higher-is-better one is a constraint like any other."""
    from flarebench.bench.scorers.registry import LOWER, columns, scorers

    m = _GOAL.match(text or "")
    if not m:
        raise CalibrationError(f"{option}: expected {GOAL_FORMS}, got {text!r}")
    metric, op, raw = m.groups()
    try:
        value = float(raw)
    except ValueError:
        raise CalibrationError(f"{option}: {raw!r} is not a number") from None
    if not math.isfinite(value):
        raise CalibrationError(f"{option}: {raw!r} is not a finite number")
    better = {c.name: c.better for c in columns()}
    comparing = {c.name for s in scorers() if s.name in _COMPARING for c in s.columns}
    for flag, name in ((option, metric), ("--objective", objective)):
        if name is None:
            continue
        if name not in better:
            raise CalibrationError(f"{flag}: {name!r} is not a summary column (see docs/metrics.md)")
        if name in comparing or "_rel_" in name:
            raise CalibrationError(
                f"{flag}: {name} compares with other strategies, which a dev point does not run; use a "
                "column of the strategy's own (prompt_tokens_per_q, cost_per_q, retrieval_rate, ...)"
            )
        if better[name] is None and not name.endswith("_per_q"):  # text, a flag, how the run was served
            raise CalibrationError(f"{flag}: {name} describes a row, it is no figure to aim at or to bound")
        if name.endswith("_warm_s"):
            raise CalibrationError(
                f"{flag}: {name} is measured on answers from the cache, and dev points run without it: "
                f"use {name.replace('_warm_s', '_s')}"
            )
    if is_share(metric) and not 0.0 <= value <= 1.0:  # 30 for 30%, say
        raise CalibrationError(f"{option}: {metric} lies within 0 and 1, got {value:g}")
    # The columns of a strategy's own count, measure or share something (only those comparing with
    # another strategy, refused above, go below 0): a negative goal could never be met.
    if value < 0:
        raise CalibrationError(f"{option}: {metric} cannot be negative, got {value:g}")
    if op == "=" and objective is not None:
        raise CalibrationError(f"--objective needs a budget ({metric}<={value:g}), not a target ({text})")
    if op == "=":
        return Goal(metric, op, value)
    if metric == (objective or "f1"):
        # Made best and bounded at once, it would be a target (a cap) or no bound at all (a floor).
        given = "" if objective else " (the default objective)"
        raise CalibrationError(
            f"{option}: {metric} is the objective too{given}; bound another column (retrieval_rate, "
            f"prompt_tokens_per_q, ...), or aim at it as a target ({metric}={value:g})"
        )
    objective = objective or "f1"
    if better[objective] is None:
        raise CalibrationError(f"--objective: {objective} has no better direction (it describes, it does not rank)")
    return Goal(metric, op, value, objective, lower=better[objective] == LOWER)


#: The scorers whose columns only probes asking for long answers have (a set does not mix them).
_LONG_ONLY = ("facts",)


def check_goal_fits(goal: Goal, probe_set: Any) -> None:
    """Refuse a goal or objective on a column that only long probes have (``fact_recall``,
    ``incomplete_or_wrong_rate``, ...) on a probe set without any: every dev point would miss it,
    and the grid would run for nothing. ``probe_set``: a
    :class:`flarebench.probes.model.ProbeSet` (its ``name`` and ``answer_form``)."""
    from flarebench.bench.scorers.registry import scorers

    if probe_set.answer_form == "long":
        return
    long_only = {c.name for s in scorers() if s.name in _LONG_ONLY for c in s.columns}
    for name in (goal.metric, goal.objective):
        if name in long_only:
            raise CalibrationError(f"{name} needs long probes; {probe_set.name} has none")


def check_split(dev_fraction: float, tolerance: float = 0.0, n_probes: int | None = None) -> None:
    """Refuse a dev share outside (0, 1), a negative or non-finite ``--budget-tolerance`` and fewer
    than 2 probes (``None``: not known yet), before anything is loaded or written."""
    if not 0.0 < dev_fraction < 1.0:
        raise CalibrationError(f"--dev-fraction must be between 0 and 1, got {dev_fraction}")
    if not 0.0 <= tolerance < math.inf:
        raise CalibrationError(f"--budget-tolerance must be a number >= 0, got {tolerance}")
    if n_probes is not None and n_probes < 2:
        raise CalibrationError(f"calibration needs at least 2 probes (a dev and a test part), got {n_probes}")


def split(ids: Sequence[str], dev_fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """The probe ids shuffled with ``seed`` and cut into a dev part of ``dev_fraction`` (at least one
    probe, leaving at least one for test) and the test part, each in the given order."""
    check_split(dev_fraction, n_probes=len(ids))
    shuffled = list(ids)
    random.Random(seed).shuffle(shuffled)
    n_dev = min(len(ids) - 1, max(1, round(len(ids) * dev_fraction)))
    dev = set(shuffled[:n_dev])
    return [i for i in ids if i in dev], [i for i in ids if i not in dev]


def value_text(value: float) -> str:
    """A grid value as a spec writes it (``0.5``, ``16``)."""
    return f"{value:g}"


def sets_param(spec: str, names: Sequence[str]) -> bool:
    """Whether ``spec`` sets one of the parameters ``names`` itself."""
    _, _, rest = spec.partition(":")
    return any(p.partition("=")[0].strip() in names for p in rest.split(",") if p.strip())


#: Parameters that set the same thing as a knob's (flare_direct's theta is min_prob's threshold).
_ALIASES = {"theta": ("theta", "threshold"), "threshold": ("theta", "threshold")}


def knob_of(spec: str, param: str | None = None, values: Sequence[float] | None = None) -> Knob | None:
    """The knob to calibrate ``spec`` by: its budget knob, or ``param`` over ``values`` (whose
    effect on the retrieval rate is not declared, so they are searched as a grid). None when the
    spec has no budget knob or sets it itself (it then runs as given: a bound row, a fixed point)."""
    try:
        strategy = parse_spec(spec)
    except SpecError as e:
        raise CalibrationError(str(e)) from None
    knob = strategy.budget_knob()
    if values:
        name = param or (knob.param if knob else None)
        if name is None:
            raise CalibrationError(f"{spec}: has no budget knob; name the parameter with --param")
        return Knob(name, tuple(values), knob.rate_rises if knob and knob.param == name else None)
    if knob is None:
        if param:
            raise CalibrationError(f"{spec}: has no budget knob; give --values to calibrate {param}")
        return None
    if param and param != knob.param:
        raise CalibrationError(
            f"{spec}: its budget knob is {knob.param}; give --values to calibrate {param} over your own grid"
        )
    if sets_param(spec, _ALIASES.get(knob.param, (knob.param,))):
        return None
    return knob


def budget_plans(specs: Sequence[str], reference: str, bounds: bool = True) -> dict[str, Knob | None]:
    """``compare --budget``'s specs, each with the knob it is calibrated by (None: run as given):
    the user's specs, the delta reference (the delta, helped and harmed columns need it on the test
    part too; a reference with a knob is calibrated as the others, and the deltas then compare with
    its chosen spec) and, unless not ``bounds``, the bound rows never and always (as in every
    comparison). Refused when no spec has a knob: the budget would bound nothing, and every row
    would silently run on the test part alone."""
    given = list(dict.fromkeys([*specs, reference]))
    plans = {spec: knob_of(spec) for spec in (with_bounds(given) if bounds else given)}
    if not any(plans.values()):
        raise CalibrationError(
            f"--budget: nothing to calibrate: {', '.join(given)} have no budget knob, or set it themselves; "
            "compare them without --budget"
        )
    return plans


def grid_specs(spec: str, knob: Knob) -> list[str]:
    """The spec of every grid point, in grid order; refused when ``spec`` sets the knob (or a
    parameter that is the same, theta for threshold) itself: calibration chooses it."""
    if given := [name for name in _ALIASES.get(knob.param, (knob.param,)) if sets_param(spec, (name,))]:
        same = "" if given[0] == knob.param else f" (the same as {knob.param})"
        raise CalibrationError(
            f"{spec}: sets {given[0]}{same} itself, which calibrate chooses; leave it out of the spec"
        )
    return [with_param(spec, knob.param, value_text(v)) for v in knob.grid]


def parse_values(text: str | None) -> list[float] | None:
    """``--values V1,V2,...``: the grid to calibrate over, in order; None without the option (the
    knob's own grid). An empty list or item, a value that is no finite number and one given twice
    (``0.2,0.20``) are refused: each would silently change the grid searched."""
    if text is None:
        return None
    items = [v.strip() for v in text.split(",")]
    if not any(items):
        raise CalibrationError(f"--values: no value given in {text!r}; leave --values out for the knob's own grid")
    if not all(items):
        raise CalibrationError(f"--values: an empty value in {text!r}")
    try:
        values = [float(v) for v in items]
    except ValueError:
        raise CalibrationError(f"--values: expected numbers separated by commas, got {text!r}") from None
    if not all(math.isfinite(v) for v in values):
        raise CalibrationError(f"--values: expected finite numbers, got {text!r}")
    if len(set(values)) != len(values):
        raise CalibrationError(f"--values: a value is given twice in {text!r}")
    return values


@dataclass
class Calibration:
    """One strategy's calibration on dev: the grid points run (value, spec and dev figures), how
    they were searched, and the chosen one."""

    base: str
    param: str
    method: str
    points: list[dict[str, Any]]
    chosen: str
    value: float
    feasible: bool = True
    dev: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The JSON record kept in run.json (``study.calibration``)."""
        return asdict(self)


Measure = Callable[[str], Mapping[str, float]]


def calibrate(spec: str, knob: Knob, goal: Goal, measure: Measure) -> Calibration:
    """Choose ``knob``'s value for ``spec`` on dev; ``measure(point_spec)`` runs a grid point on
    the dev part and returns its summary figures (it is called once per point, at most)."""
    specs = grid_specs(spec, knob)
    kept = [k for k in dict.fromkeys([goal.metric, goal.objective, *DEV_METRICS]) if k]
    seen: dict[int, dict[str, float]] = {}

    def at(i: int) -> float:
        if i not in seen:
            figures = measure(specs[i])
            seen[i] = {k: _number(figures.get(k)) for k in kept}
        return seen[i][goal.metric]

    method, chosen = "grid", None
    if goal.is_target and knob.rate_rises is not None and goal.metric == "retrieval_rate":
        method, chosen = "bisection", _bisect(at, seen, len(specs), goal.value, knob.rate_rises)
        if chosen is None:  # the rates met were not monotone (or missing): search the grid
            method = "grid"
    if chosen is None:
        for i in range(len(specs)):
            at(i)
        chosen = _best(seen, goal, knob.rate_rises)
    if chosen is None:
        raise CalibrationError(f"{spec}: {goal.metric} is missing at every {knob.param} on dev")
    if goal.is_target:  # within reach: some values gave figures on either side of it (or on it)
        figures = [m[goal.metric] for m in seen.values() if not math.isnan(m[goal.metric])]
        feasible = min(figures) <= goal.value <= max(figures)
    else:
        feasible = goal.within(seen[chosen][goal.metric])
    points = [{"value": knob.grid[i], "spec": specs[i], **seen[i]} for i in sorted(seen)]
    return Calibration(spec, knob.param, method, points, specs[chosen], knob.grid[chosen], feasible, seen[chosen])


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _bisect(at: Callable[[int], float], seen: Mapping[int, Any], n: int, target: float, rises: bool) -> int | None:
    """The grid index whose value is closest to ``target`` among the two that bracket it (or the
    end that is nearest when the target lies beyond both ends); None when a value met is missing or
    the values met (``seen``: the indexes ``at`` has measured) do not move monotonically in the
    declared direction."""
    sign = 1.0 if rises else -1.0
    lo, hi = 0, n - 1
    if any(math.isnan(at(i)) for i in (lo, hi)):
        return None
    if sign * at(lo) >= sign * target:
        candidates = [lo]
    elif sign * at(hi) <= sign * target:
        candidates = [hi]
    else:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if math.isnan(at(mid)):
                return None
            if sign * at(mid) < sign * target:
                lo = mid
            else:
                hi = mid
        candidates = [lo, hi]
    met = [at(i) for i in sorted(seen)]
    if any(sign * b < sign * a for a, b in zip(met, met[1:])):
        return None
    # The closer; on a tie the one that retrieves less.
    return min(candidates, key=lambda i: (abs(at(i) - target), at(i), i))


def _best(seen: Mapping[int, Mapping[str, float]], goal: Goal, rises: bool | None = None) -> int | None:
    """Among the measured points: the closest to a target; for a budget, the best objective among
    those within it, else the one closest to it. Ties go to the one that retrieves less, and where
    they retrieved as much on dev, to the one the knob says retrieves less (``rises``: whether the
    retrieval rate rises with the grid's values; the lower value when it is not known)."""
    usable = [i for i, m in seen.items() if not math.isnan(m[goal.metric])]
    if not usable:
        return None
    rate = {i: seen[i].get("retrieval_rate", math.nan) for i in usable}

    def cheap(i: int) -> tuple[float, int]:
        return (rate[i] if not math.isnan(rate[i]) else math.inf, -i if rises is False else i)

    if goal.is_target:
        return min(usable, key=lambda i: (goal.miss(seen[i][goal.metric]), *cheap(i)))
    within = [i for i in usable if goal.within(seen[i][goal.metric])]
    if within:
        sign = 1.0 if goal.lower else -1.0  # min of sign x objective: the best
        score = {i: seen[i].get(goal.objective, math.nan) for i in within}
        return min(within, key=lambda i: (sign * score[i] if not math.isnan(score[i]) else math.inf, *cheap(i)))
    return min(usable, key=lambda i: (goal.miss(seen[i][goal.metric]), *cheap(i)))


# -- the calibration table -------------------------------------------------------------------------

#: Summary columns the calibration table shows for each strategy on the test part, where present
#: (the long-answer ones in a run with long probes), after the goal's objective.
TABLE_COLUMNS = (
    "f1",
    "em",
    "fact_recall",
    "incomplete_or_wrong_rate",
    "wrong_version_rate",
    "lm_calls_per_q",
    "headroom_captured",
    "helped",
    "harmed",
)


def calibration_table(summary: pd.DataFrame, study: Mapping[str, Any]) -> pd.DataFrame:
    """One row per strategy of the test summary (its bound rows marked, as in the summary): the
    calibrated parameter and value (empty for a strategy run as given), its dev and test figures of
    the goal's metric, how far the test figure missed the goal and whether that is beyond the
    tolerance, then the test quality columns."""
    goal = Goal(**study["goal"])
    tolerance = float(study.get("tolerance", TOLERANCE))
    by_spec = {c["chosen"]: c for c in study.get("calibration", [])}
    n_test = len(study.get("test_probe_ids") or [])
    rows, unfinished = [], {}
    for _, row in summary.iterrows():
        cal = by_spec.get(row["strategy"])
        test = _number(row.get(goal.metric))
        # On part of the test probes (a run stopped among them), no verdict on the goal yet.
        if cal and n_test and _number(row.get("n")) < n_test:
            unfinished[cal["base"]] = int(_number(row.get("n")))
        miss = math.nan if cal and cal["base"] in unfinished else goal.miss(test)
        out: dict[str, Any] = {
            "strategy": cal["base"] if cal else row["strategy"],
            **({"bound": row["bound"]} if "bound" in summary.columns else {}),
            "calibrated": f"{cal['param']}={value_text(cal['value'])}" if cal else None,
            f"dev_{goal.metric}": cal["dev"][goal.metric] if cal else None,
            f"test_{goal.metric}": test,
            # Only a calibrated strategy had the goal: the others' test figures are in the column before.
            "off_by": (test - goal.value) if cal and not math.isnan(miss) else None,
            "missed": (bool(miss > goal.allowed(tolerance)) if not math.isnan(miss) else None) if cal else None,
        }
        shown = dict.fromkeys([goal.objective, *TABLE_COLUMNS]) if goal.objective else TABLE_COLUMNS
        out.update({c: row[c] for c in shown if c in summary.columns})
        rows.append(out)
    table = pd.DataFrame(rows)
    table.attrs["unfinished"] = unfinished  # strategy -> test probes run so far (unfinished_lines)
    # Text and flag cells without a value stay blank (None), never "nan".
    for column in ("bound", "calibrated", "missed"):
        if column in table:
            table[column] = table[column].astype(object).where(table[column].notna(), None)
    return table


def calibration_note(study: Mapping[str, Any]) -> str:
    """One line: the goal, the split, and which figures are whose."""
    goal = Goal(**study["goal"])
    n_dev, n_test = len(study.get("dev_probe_ids", [])), len(study.get("test_probe_ids", []))
    return (
        f"Goal {goal.describe()}: each budget knob chosen on a dev part of {n_dev} probe{'s' * (n_dev != 1)} "
        f"(--dev-fraction {study.get('dev_fraction', DEV_FRACTION):g}, --seed {study.get('seed', 0)}); every "
        f"figure below but dev_{goal.metric} is measured on the other {n_test} (test). A strategy without "
        f"calibrated value ran as given. missed: off the goal by more than "
        f"{goal.allowed(float(study.get('tolerance', TOLERANCE))):g} on test."
    )


def missed_lines(table: pd.DataFrame, study: Mapping[str, Any]) -> list[str]:
    """A line per calibrated strategy that missed the goal on test by more than the tolerance."""
    goal = Goal(**study["goal"])
    tolerance = float(study.get("tolerance", TOLERANCE))
    lines = []
    for _, row in table.iterrows():
        if row["missed"] is True or row["missed"] == 1:
            dev = _number(row[f"dev_{goal.metric}"])
            line = (
                f"{row['strategy']} ({row['calibrated']}) missed {goal.describe()} on test: "
                f"{goal.metric} {row[f'test_{goal.metric}']:.2f} on test against {dev:.2f} "
                f"on dev (tolerance {goal.allowed(tolerance):g})"
            )
            if goal.miss(dev) > goal.allowed(tolerance):
                # Not the test part's doing: no value of the grid came nearer on dev either.
                line += (
                    "; it missed on dev already, where no value of the grid came nearer: calibrate again with "
                    "finer --values around it to come nearer"
                )
            lines.append(line)
    return lines


def calibration_lines(table: pd.DataFrame, study: Mapping[str, Any]) -> list[str]:
    """What a reader of a calibrated run must not miss: the strategies no value of whose knob met
    the budget on dev or could reach the target there, those that missed the goal on test, and the
    choices a tie decided."""
    return (
        infeasible_lines(study)
        + errored_lines(study)
        + unreached_lines(study)
        + unfinished_lines(table, study)
        + missed_lines(table, study)
        + flat_lines(study)
    )


def errored_lines(study: Mapping[str, Any]) -> list[str]:
    """A line per strategy some of whose dev probes raised an error at a value run (a server's 500
    after the retries): its figures there, and the value chosen on them, rest on the other probes."""
    n_dev = len(study.get("dev_probe_ids") or [])
    lines = []
    for cal in study.get("calibration", []):
        counts = [n for p in cal["points"] if not math.isnan(n := _number(p.get("errors")))]
        if counts and max(counts) > 0:
            lines.append(
                f"{cal['base']}: up to {int(max(counts))} of the {n_dev} dev probes raised an error at a "
                f"{cal['param']} value run, so its choice rests on the others (each error is in its trace; the same "
                "command with --retry-errors runs them again)"
            )
    return lines


def unfinished_lines(table: pd.DataFrame, study: Mapping[str, Any]) -> list[str]:
    """A line per calibrated strategy that has run part of the test probes (a run stopped among
    them): its test figures are partial, and whether it met the goal is not known yet."""
    n_test = len(study.get("test_probe_ids") or [])
    return [
        f"{strategy}: {n} of {n_test} test probes run so far, so its test figures are partial and whether it met "
        "the goal is not known yet; run the same command to finish it"
        for strategy, n in table.attrs.get("unfinished", {}).items()
    ]


def infeasible_lines(study: Mapping[str, Any]) -> list[str]:
    """A line per strategy for which no grid value met the budget on dev: the closest was chosen."""
    goal = Goal(**study["goal"])
    if goal.is_target:  # a target out of reach is said by unreached_lines, with the figures run
        return []
    lines = []
    for cal in study.get("calibration", []):
        if not cal.get("feasible", True):
            dev = _number(cal["dev"].get(goal.metric))
            lines.append(
                f"{cal['base']}: no {cal['param']} met {goal.describe()} on dev (infeasible): {cal['param']}="
                f"{value_text(cal['value'])}, the closest, was chosen ({goal.metric} {dev:.2f} on dev)"
            )
    return lines


def unreached_lines(study: Mapping[str, Any]) -> list[str]:
    """A line per strategy calibrated to a target beyond every figure its knob's values gave on dev
    (all above it, or all below): the nearest was chosen, which may be far from the target; or,
    when every value run gave the same figure, the knob changed nothing there at all."""
    goal = Goal(**study["goal"])
    if not goal.is_target:
        return []
    lines = []
    for cal in study.get("calibration", []):
        measured = [(p["value"], _number(p.get(goal.metric))) for p in cal["points"]]
        measured = [(value, figure) for value, figure in measured if not math.isnan(figure)]
        if not measured:
            continue
        figures = [figure for _, figure in measured]
        low, high = min(figures), max(figures)
        if low <= goal.value <= high:
            continue
        param, chosen = cal["param"], f"{cal['param']}={value_text(cal['value'])}"
        values = sorted(value for value, _ in measured)
        run = f"{param} {value_text(values[0])} to {value_text(values[-1])}, {len(values)} value"
        run += "s run" if len(values) > 1 else " run"
        if low == high and len(measured) > 1:
            lines.append(
                f"{cal['base']}: {goal.describe()} is out of reach on dev, where the knob changed nothing: every "
                f"{param} run gave {goal.metric} {low:.3f} ({run}); {chosen} was chosen, but every value run did "
                "the same there"
            )
        else:
            lines.append(
                f"{cal['base']}: {goal.describe()} lies beyond both ends of the grid on dev ({goal.metric} "
                f"{low:.3f} to {high:.3f} over {run}): {chosen}, the nearest, was chosen "
                f"({goal.metric} {_number(cal['dev'].get(goal.metric)):.3f} on dev)"
            )
    return lines


def flat_lines(study: Mapping[str, Any]) -> list[str]:
    """A line per strategy calibrated to a budget whose values within it all gave the same
    objective on dev: the choice then rests on the tie-break (retrieve least), not on the objective."""
    goal = Goal(**study["goal"])
    if goal.is_target:
        return []
    lines = []
    for cal in study.get("calibration", []):
        within = [p for p in cal["points"] if goal.within(_number(p.get(goal.metric)))]
        scores = {_number(p.get(goal.objective)) for p in within}
        if len(within) > 1 and len(scores) == 1:
            [score] = scores
            rates = {_number(p.get("retrieval_rate")) for p in within}
            why = (
                "as the one the knob makes retrieve least (each retrieved as much on dev)"
                if len(rates) == 1
                else "for retrieving least"
            )
            lines.append(
                f"{cal['base']}: every {cal['param']} within the budget gave the same {goal.objective} on dev "
                f"({score:.3f}, {len(study.get('dev_probe_ids', []))} dev probes): {cal['param']}="
                f"{value_text(cal['value'])} was chosen {why}, not for its {goal.objective} "
                "(a larger dev part, --dev-fraction or --limit, may tell them apart)"
            )
    return lines
