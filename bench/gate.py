"""Regression gates: baseline files, tolerances, and the comparison of a run against a baseline.

A baseline is a JSON file::

    {
      "version": 1,
      "config": {...},            # the configuration fingerprint (see :func:`flarebench.bench.config.fingerprint`)
      "reference": {"spec": "no_retrieval", "latency_p50_s": ..., "latency_p95_s": ...},
      "metrics": {SPEC: {METRIC: value, ...}, ...},
      "tolerances": {METRIC: {KIND: value, ...} | null, ...},
      ...                         # informational keys (created_utc, command, versions) are ignored
    }

``metrics`` holds each spec's summary values under their summary column names
(:func:`flarebench.bench.metrics.summary_columns`), plus ``latency_p50_ratio`` and ``latency_p95_ratio``: the
spec's latency divided by the reference strategy's latency measured in the same run, so a slower
machine does not fail the gate.

Tolerances (:data:`KINDS`): a metric maps to one or more bounds, or to ``null`` (not gated).

* ``max_drop``: the value may fall at most this much below the baseline (absolute).
* ``max_drop_rel``: ... at most this share of the baseline value below it (0.1 = 10%).
* ``max_rise``: the value may rise at most this much above the baseline (absolute).
* ``max_rise_rel``: ... at most this share of the baseline value above it.

Which metrics a tolerance may name, and on which side, comes from the scorers' declarations
(:mod:`flarebench.bench.scorers`): a column declared higher-is-better takes drop bounds, a
lower-is-better one rise bounds (an improvement never fails), and a column declared with no
direction (text, flags, how the run was served) takes none. The default tolerances and
:func:`always_gated` are declared there too; only the latency ratios are the gate's own.

When a metric has both an absolute and a relative bound on the same side, the looser one applies.
Metrics without an entry in the file's ``tolerances`` are not gated, except ``n`` (probes scored:
may not drop) and ``errors`` (probes that raised: may not rise), which are gated by
:func:`always_gated` unless the file switches them off with ``null``. A value is compared with a
slack of 1e-9, so a bound met exactly is met despite float rounding.

A gated metric (one with a bound) that is missing, null or NaN on either side is a breach of its
own (``faithfulness: missing in the new run (baseline 0.8)``): a metric that could not be computed,
e.g. a judge whose every reply failed to parse, must not pass the gate unseen.

Nothing here loads a model; the session (:mod:`flarebench.bench.session`) and the plugin call in.
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flarebench.bench.bounds import strategy_rows
from flarebench.bench.config import command_line, config_difference, meaning
from flarebench.bench.lines import line_of
from flarebench.bench.scorers.latency import FEW
from flarebench.bench.scorers.registry import HIGHER, LOWER, WORSE_KINDS, columns, optional_columns, summary_columns
from flarebench.probes.json_errors import strict_loads

VERSION = 1

#: The file in the run folder holding a gated run's verdicts (report.html shows them).
GATE_JSON = "gate.json"

#: The strategy whose latency every other spec's latency is divided by (run by the gate when not asked for).
DEFAULT_REFERENCE = "no_retrieval"

#: The latency ratios the gate derives from the summary (spec latency / reference latency, same run).
RATIO_METRICS = {"latency_p50_ratio": "latency_p50_s", "latency_p95_ratio": "latency_p95_s"}

# What follows is read from the scorers' declarations at each call, not once at import: a plugin's
# scorer may register after this module was imported (score and report load the plugins a run
# recorded), and its column is gated as a built-in one is.


def directions() -> dict[str, str]:
    """Which way each metric a tolerance may name is better (``higher`` or ``lower``): the summary
    columns their scorers declare with a direction, in summary order, then the latency ratios."""
    return {**{c.name: c.better for c in columns() if c.better is not None}, **dict.fromkeys(RATIO_METRICS, LOWER)}


def metric_names() -> tuple[str, ...]:
    """Every metric a tolerance may name."""
    return tuple(directions())


KINDS = ("max_drop", "max_drop_rel", "max_rise", "max_rise_rel")


def always_gated() -> dict[str, dict[str, float]]:
    """Gated in every baseline whose ``tolerances`` do not name them (``null`` switches one off): the
    columns declared ``always_gated`` (``n`` and ``errors``: fewer probes scored, or more probes that
    raised, than the baseline means its other numbers are not comparable)."""
    return {c.name: dict(c.tolerance) for c in columns() if c.always_gated}


def default_tolerances() -> dict[str, dict[str, float] | None]:
    """Default tolerances, written into every new baseline: those the scorers declare, then the
    latency ratio's. They absorb the small cross-machine drift of docs/design.md (a few flipped
    probes on a probe set of ~50; a short smoke run stores looser ones in its own baseline)."""
    return {
        **{c.name: dict(c.tolerance) for c in columns() if c.tolerance is not None},
        "latency_p95_ratio": {"max_rise_rel": 0.25},
    }


def _shares() -> frozenset[str]:
    """The columns whose values lie within 0 and 1 (rates, shares, scores)."""
    return frozenset(c.name for c in columns() if c.share)


_SLACK = 1e-9


def timed(metric: str) -> bool:
    """Whether ``metric`` is a time (a latency, a ratio of latencies, seconds per question, the
    harness's share of the wall time) that answers served from the --cache would make a lookup's;
    the cold and warm latencies say which probes they cover, so they are not."""
    if metric.endswith(("_cold_s", "_warm_s")):
        return False
    return metric in RATIO_METRICS or metric.endswith(("_s", "_s_per_q")) or metric == "harness_share"


def _cached(rows: dict[str, dict[str, Any]], specs: list[str]) -> dict[str, float]:
    """The specs among ``specs`` whose run served some LM calls or retrievals from the cache, with their share."""
    return {s: share for s in specs if s in rows and (share := _number(rows[s].get("cached_share")))}


def _few_probes(row: dict[str, Any], baseline: Any = None, bound: dict[str, float] | None = None) -> str:
    """Why a p95 latency ratio over this row's probes is noisy, or "" when they are enough. The advice
    to loosen its ``bound`` is left out when the bound lets the ``baseline`` ratio double already."""
    timed = _number(row.get("n"))
    if timed is None or timed - (_number(row.get("errors")) or 0) >= FEW:
        return ""
    ratio = _number(baseline)
    high = bounds_for(ratio, bound)[1] if bound and ratio is not None else None
    loose = high is not None and high[0] >= 2 * ratio
    return (
        f"rests on {int(timed)} probes, so each p95 is about the slowest probe's: one probe slowed by a busy "
        f"runner moves it; gate on {FEW} probes or more"
        + ("" if loose else ", or loosen it (--tolerance latency_p95_ratio=max_rise_rel:1)")
    )


class GateError(ValueError):
    """A bad baseline file, tolerance or gate option: shown as one line, never a traceback.
    ``keys`` is the path to the bad field of a baseline's ``tolerances`` (its line is found by them)."""

    def __init__(self, message: str, keys: tuple[str, ...] = ()):
        super().__init__(message)
        self.keys = keys


# --------------------------------------------------------------------------------------------
# Tolerances
# --------------------------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    """A finite number (an int stays an int), or None for anything else; bools are not numbers here."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    value = float(value)
    return value if math.isfinite(value) else None


def validate_tolerances(obj: Any, where: str = "tolerances") -> dict[str, dict[str, float] | None]:
    """Check a tolerances mapping (as read from a file) and return a clean copy; GateError names the
    first bad field."""
    if not isinstance(obj, dict):
        raise GateError(f"{where}: expected an object of METRIC: {{KIND: value}}, got {type(obj).__name__}")
    out: dict[str, dict[str, float] | None] = {}
    for metric, bounds in obj.items():
        if metric not in metric_names():
            raise GateError(f"{where}.{metric}: {_not_gateable(metric)}", keys=(metric,))
        try:
            out[metric] = _bounds(bounds, f"{where}.{metric}", metric)
        except GateError as e:
            raise GateError(str(e), keys=(metric, *e.keys)) from None
    return out


def _not_gateable(metric: str) -> str:
    """Why a tolerance may not name ``metric``, with the metrics it may name."""
    if metric in summary_columns() or metric in optional_columns():
        why = f"{metric!r} is not gateable (its scorer declares no better direction)"
    else:  # a typo, or a plugin's metric: unknown until the plugin that declares it is loaded
        close = difflib.get_close_matches(metric, metric_names(), n=1, cutoff=0.75)
        hint = f"did you mean {close[0]!r}? " if close else ""
        why = f"unknown metric {metric!r} ({hint}a plugin's metric needs --plugin MODULE|FILE.py)"
    return f"{why}; metrics: {', '.join(metric_names())}"


def with_always_gated(tolerances: dict[str, dict[str, float] | None]) -> dict[str, dict[str, float] | None]:
    """A baseline file's tolerances with :func:`always_gated` added where the file does not name
    the metric (first, as in :func:`default_tolerances`); a metric the file sets to null stays off."""
    missing = {m: dict(b) for m, b in always_gated().items() if m not in tolerances}
    return {**missing, **tolerances}


def _bounds(bounds: Any, where: str, metric: str) -> dict[str, float] | None:
    if bounds is None:
        return None
    if not isinstance(bounds, dict) or not bounds:
        raise GateError(f"{where}: expected {{KIND: value}} or null, got {bounds!r}")
    clean: dict[str, float] = {}
    worse = WORSE_KINDS[directions()[metric]]
    for kind, value in bounds.items():
        if kind not in KINDS:
            raise GateError(f"{where}: unknown kind {kind!r}; kinds: {', '.join(KINDS)}", keys=(kind,))
        if kind not in worse:
            # A bound on the better side would fail an improvement.
            raise GateError(
                f"{where}: {kind} would fail an improvement: a {directions()[metric]} {metric} is better; "
                f"bound it with {' or '.join(worse)}",
                keys=(kind,),
            )
        number = _number(value)
        if number is None or number < 0:
            raise GateError(f"{where}: {kind} must be a number >= 0, got {value!r}", keys=(kind,))
        clean[kind] = number
    return clean


def apply_overrides(
    tolerances: dict[str, dict[str, float] | None], overrides: list[str] | None
) -> dict[str, dict[str, float] | None]:
    """Apply ``--tolerance METRIC=SPEC`` options to a copy of ``tolerances``.

    SPEC is ``KIND:VALUE[,KIND:VALUE]`` (replaces the metric's bounds), a bare ``VALUE`` (sets the
    value of the metric's one current kind), or ``off`` (the metric is not gated).
    """
    out = {m: (dict(b) if b else b) for m, b in tolerances.items()}
    given: set[str] = set()
    for item in overrides or []:
        metric, eq, spec = item.partition("=")
        metric, spec = metric.strip(), spec.strip()
        where = f"--tolerance {item}"
        if not eq or not metric or not spec:
            raise GateError(f"{where}: expected METRIC=KIND:VALUE, METRIC=VALUE or METRIC=off")
        if metric not in metric_names():
            raise GateError(f"{where}: {_not_gateable(metric)}")
        if metric in given:  # the last would silently win
            raise GateError(
                f"{where}: {metric} given twice; give each metric once (KIND:VALUE,KIND:VALUE for two bounds)"
            )
        given.add(metric)
        if spec.lower() in ("off", "none", "null"):
            out[metric] = None
            continue
        if ":" not in spec:
            current = out.get(metric) or {}
            if len(current) != 1:
                raise GateError(
                    f"{where}: {metric} has {'no bound' if not current else 'several bounds'}; "
                    f"name the kind, e.g. {metric}={WORSE_KINDS[directions()[metric]][0]}:{spec} "
                    f"(kinds: {', '.join(WORSE_KINDS[directions()[metric]])})"
                )
            spec = f"{next(iter(current))}:{spec}"
        bounds: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in spec.split(","))):
            kind, colon, raw = part.partition(":")
            try:
                bounds[kind.strip()] = float(raw) if colon else None
            except ValueError:
                bounds[kind.strip()] = raw
        out[metric] = _bounds(bounds, where, metric)
    return out


def tolerance_table() -> str:
    """The Markdown table of every metric a tolerance may name, which way it is better and its
    default bound, then the summary columns no tolerance may name: docs/metrics.md's "Regression
    gate" (written by ``python -m flarebench.bench.scorers --write``)."""

    def default(metric: str) -> str:
        bounds = default_tolerances().get(metric)
        if not bounds:
            return ""
        text = ", ".join(f"`{kind}` {_fmt(value)}" for kind, value in bounds.items())
        return text + (", even where a baseline's tolerances do not name it" if metric in always_gated() else "")

    lines = ["| metric | better | default bound |", "|---|---|---|"]
    gateable = directions()
    lines += [f"| `{metric}` | {better} | {default(metric)} |" for metric, better in gateable.items()]
    ungated = ", ".join(f"`{c}`" for c in summary_columns() if c not in gateable)
    return "\n".join(lines) + f"\n\nNot gateable (text, flags, and how the run was served): {ungated}."


# --------------------------------------------------------------------------------------------
# Comparison (pure functions)
# --------------------------------------------------------------------------------------------


def _fmt(x: float) -> str:
    return f"{x:.6g}"


@dataclass(frozen=True)
class Breach:
    """One broken metric: what it was, what it is, and the bound it had to meet. ``baseline`` or
    ``new`` is None (and ``bound`` None) when the metric is missing on that side."""

    metric: str
    baseline: float | None
    new: float | None
    bound: float | None
    side: str  # ">=" (may not drop below) or "<=" (may not rise above); "" when a value is missing
    rule: str  # the tolerance that set the bound, e.g. "max_drop 0.05"

    def line(self) -> str:
        if self.baseline is None and self.new is None:
            return f"{self.metric}: missing in the baseline and in the new run"
        if self.new is None:
            return f"{self.metric}: missing in the new run (baseline {_fmt(self.baseline)})"
        if self.baseline is None:
            return f"{self.metric}: missing in the baseline (new {_fmt(self.new)})"
        return (
            f"{self.metric}: baseline {_fmt(self.baseline)}, new {_fmt(self.new)}, "
            f"allowed {self.side} {_fmt(self.bound)} ({self.rule})"
        )


def bounds_for(
    baseline: float, tolerance: dict[str, float]
) -> tuple[tuple[float, str] | None, tuple[float, str] | None]:
    """The (lowest allowed, rule) and (highest allowed, rule) values for a baseline value; the
    looser bound wins where a side has two."""
    low = high = None
    for kind, value in tolerance.items():
        if kind == "max_drop":
            cand = (baseline - value, f"max_drop {_fmt(value)}")
        elif kind == "max_drop_rel":
            cand = (baseline - abs(baseline) * value, f"max_drop_rel {_fmt(value)}")
        elif kind == "max_rise":
            cand = (baseline + value, f"max_rise {_fmt(value)}")
        else:
            cand = (baseline + abs(baseline) * value, f"max_rise_rel {_fmt(value)}")
        if kind.startswith("max_drop"):
            low = cand if low is None or cand[0] < low[0] else low
        else:
            high = cand if high is None or cand[0] > high[0] else high
    return low, high


def compare(
    baseline: dict[str, float | None], new: dict[str, float | None], tolerances: dict[str, dict[str, float] | None]
) -> list[Breach]:
    """The metrics of ``new`` that break their tolerance against ``baseline``, in tolerance order.
    A gated metric missing (absent, null or NaN) on either side is a breach: what was not measured
    cannot be shown to meet its bound."""
    out = []
    for metric, tolerance in tolerances.items():
        if not tolerance:
            continue
        was, now = _number(baseline.get(metric)), _number(new.get(metric))
        if was is None or now is None:
            out.append(Breach(metric, was, now, None, "", "missing"))
            continue
        low, high = bounds_for(was, tolerance)
        if low is not None and now < low[0] - _SLACK:
            out.append(Breach(metric, was, now, low[0], ">=", low[1]))
        elif high is not None and now > high[0] + _SLACK:
            out.append(Breach(metric, was, now, high[0], "<=", high[1]))
    return out


def with_ratios(row: dict[str, Any], reference: dict[str, Any] | None) -> dict[str, float | None]:
    """A summary row as a baseline stores it: every summary column but the strategy (text, flags
    and NaN as None; gateable or not, a baseline records the whole row; an optional column where the
    row has it) plus the latency ratios to
    ``reference`` (a summary row of the same run; None where it has no latency)."""
    columns = [*summary_columns(), *(col for col in optional_columns() if col in row)]
    out: dict[str, float | None] = {col: _number(row.get(col)) for col in columns if col != "strategy"}
    for col, latency in RATIO_METRICS.items():
        num = _number(row.get(latency))
        den = _number((reference or {}).get(latency))
        out[col] = num / den if num is not None and den else None
    return out


# --------------------------------------------------------------------------------------------
# Baseline files
# --------------------------------------------------------------------------------------------


@dataclass
class Baseline:
    path: Path
    config: dict[str, Any]
    reference: str
    metrics: dict[str, dict[str, float | None]]
    tolerances: dict[str, dict[str, float] | None]


def _same_strategy(specs: list[str], baseline: Baseline) -> dict[str, str]:
    """Each spec the baseline lacks -> the baseline's one spec of the same strategy (a parameter
    changed: ``flare_direct:theta=0.5`` -> ``flare_direct``), where there is exactly one."""
    pairs = {}
    for spec in specs:
        if spec not in baseline.metrics:
            name = spec.partition(":")[0]
            same = [b for b in baseline.metrics if b.partition(":")[0] == name]
            if len(same) == 1:
                pairs[spec] = same[0]
    return pairs


def _replaced(path: Path) -> tuple[list[str], dict[str, Any] | None]:
    """The specs and tolerances of the baseline at ``path``, which ``--save-baseline`` will replace
    (``[], None`` when there is no file): a team's edited tolerances are kept in the new one. Any
    other file there is refused before the run (GateError): a mistyped path must not overwrite a
    project's file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return [], None
    except (OSError, UnicodeDecodeError):
        text = ""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict) or "version" not in data or not isinstance(data.get("metrics"), dict):
        raise GateError(
            f"--save-baseline {path}: the file exists and is not a flarebench baseline; it is left as it is: "
            "choose another file, or remove it"
        )
    try:
        tolerances = with_always_gated(validate_tolerances(data.get("tolerances", {})))
    except GateError as e:
        raise GateError(
            f"--save-baseline {path}:{line_of(text, 'tolerances', *e.keys)}: {e}; the new baseline keeps this file's "
            "tolerances: mend them, or remove the file"
        ) from None
    return list(data["metrics"]), tolerances


def load_baseline(path: str | Path) -> Baseline:
    """Read and validate a baseline file; GateError (``FILE: what is wrong``) otherwise."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise GateError(f"{path}: baseline not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise GateError(f"{path}: cannot read the baseline ({e})") from None
    try:
        data = strict_loads(text)
    except ValueError as e:
        raise GateError(f"{path}: not a flarebench baseline: not valid JSON ({e})") from None
    if not isinstance(data, dict) or "version" not in data or "metrics" not in data:
        raise GateError(f'{path}: not a flarebench baseline (expected a JSON object with "version" and "metrics")')
    if data["version"] != VERSION:
        raise GateError(
            f"{path}: baseline version {data['version']!r}"
            + (f" (a {type(data['version']).__name__})" if not isinstance(data["version"], int) else "")
            + f" is not supported (this flarebench reads the number {VERSION})"
        )

    def bad(keys: tuple[str, ...], what: str) -> GateError:
        # By keys, not a dotted path: a spec holds dots of its own (flare_direct:theta=0.5).
        return GateError(f"{path}:{line_of(text, *keys)}: {'.'.join(keys)}: {what}")

    for key in ("config", "metrics", "tolerances"):
        if key not in data:
            raise GateError(f"{path}: {key}: missing")
        if not isinstance(data[key], dict):
            raise bad((key,), f"expected an object, got {type(data[key]).__name__}")
    ref = data.get("reference", {"spec": DEFAULT_REFERENCE})
    if not isinstance(ref, dict) or not isinstance(ref.get("spec"), str) or not ref["spec"]:
        raise bad(("reference",), 'expected {"spec": SPEC, ...}')
    for key in RATIO_METRICS.values():
        if ref.get(key) is not None and _number(ref[key]) is None:
            raise bad(("reference", key), f"not a number: {ref[key]!r}")
    from flarebench.strategies.registry import SpecError, parse_spec

    for keys, spec in [(("reference", "spec"), ref["spec"]), *((("metrics", s), s) for s in data["metrics"])]:
        try:  # a spec that names no strategy (or a plugin's not loaded) is the file's mistake
            parse_spec(spec)
        except SpecError as e:
            raise bad(keys, str(e)) from None
    metrics: dict[str, dict[str, float | None]] = {}
    if not data["metrics"]:
        raise bad(("metrics",), "holds no strategy")
    for spec, values in data["metrics"].items():
        if not isinstance(values, dict):
            raise bad(("metrics", spec), f"expected an object of METRIC: value, got {type(values).__name__}")
        row: dict[str, float | None] = {}
        counts, shares = always_gated(), _shares()
        for metric, value in values.items():
            if value is not None and _number(value) is None:
                raise bad(("metrics", spec, metric), f"not a number: {value!r}")
            # The always-gated columns count probes: a baseline's must be whole numbers >= 0.
            if metric in counts and value is not None and (value < 0 or value != int(value)):
                raise bad(("metrics", spec, metric), f"expected a count (a whole number >= 0), got {value!r}")
            # A rate or a score edited out of its range (em: -5) would pass every gate unseen.
            if metric in shares and value is not None and not 0 <= value <= 1:
                raise bad(("metrics", spec, metric), f"expected a share from 0 to 1, got {value!r}")
            row[metric] = _number(value)
        metrics[spec] = row
    try:
        tolerances = with_always_gated(validate_tolerances(data["tolerances"]))
    except GateError as e:
        raise GateError(f"{path}:{line_of(text, 'tolerances', *e.keys)}: {e}") from None
    for key in ("probes", "lm", "retriever", "strategies"):
        if not isinstance(data["config"].get(key), dict):
            raise bad(("config", key), "missing or not an object")
    return Baseline(path, data["config"], ref["spec"], metrics, tolerances)


# --------------------------------------------------------------------------------------------
# A session's gate: which specs run, what is checked, what is saved
# --------------------------------------------------------------------------------------------


@dataclass
class Gating:
    """The gate options of one run, resolved: the baseline (``--gate``), where to save one
    (``--save-baseline``), the effective tolerances, the reference spec and the specs to run."""

    baseline: Baseline | None = None
    save_to: Path | None = None
    tolerances: dict[str, dict[str, float] | None] = field(default_factory=dict)
    across_configs: bool = False
    reference: str = DEFAULT_REFERENCE
    wanted: list[str] = field(default_factory=list)  # the specs gated / saved (the user's)
    specs: list[str] = field(default_factory=list)  # the specs to run, the reference first
    difference: str | None = None  # the config difference accepted with --gate-across-configs
    fp: dict[str, Any] | None = None  # this run's fingerprint (set by :meth:`bind`)
    replaces: list[str] = field(default_factory=list)  # the specs of the baseline --save-baseline overwrites
    kept_tolerances: bool = False  # its tolerances, edited away from the defaults, are kept in the new one
    # The tolerances the saved baseline holds, when they are not those gated by (a --gate baseline's,
    # while --save-baseline replaces another file, keeps that file's).
    saved_tolerances: dict[str, dict[str, float] | None] | None = None
    # A changed spec gated across configurations -> the baseline's spec of the same strategy.
    against: dict[str, str] = field(default_factory=dict)
    verdicts: dict[str, list[str]] = field(default_factory=dict)

    @property
    def measured(self) -> list[str]:
        """The reference and the gated specs, each once (the reference may be gated too)."""
        return list(dict.fromkeys([self.reference, *self.wanted]))

    @property
    def active(self) -> bool:
        return self.baseline is not None or self.save_to is not None

    @classmethod
    def from_options(
        cls,
        strategy: list[str] | None,
        gate: str | None = None,
        save_baseline: str | None = None,
        tolerance: list[str] | None = None,
        gate_across_configs: bool = False,
    ) -> Gating:
        """Resolve the options; load and validate the baseline. Raises GateError."""
        from flarebench.strategies.registry import expand

        if not gate and not save_baseline:
            if tolerance:
                raise GateError("--tolerance applies to --gate or --save-baseline; neither was given")
            if gate_across_configs:
                raise GateError("--gate-across-configs applies to --gate, which was not given")
            return cls(specs=expand(strategy))
        from flarebench.bench.paths import PathError, check_input_file, check_output_file

        try:
            # Before the run, not after it: a baseline that cannot be written would lose the run.
            if save_baseline:
                check_output_file("--save-baseline", save_baseline)
            if gate:
                check_input_file("--gate", gate)
        except PathError as e:
            # A team's first CI run: there is no baseline yet, and the line says how to make one.
            first = bool(gate) and not Path(gate).exists() and Path(gate).parent.is_dir() and not save_baseline
            hint = f"; make one first: pytest bench --no-gate --save-baseline {gate}" if first else ""
            raise GateError(f"{e}{hint}") from None
        replaces, kept = _replaced(Path(save_baseline)) if save_baseline else ([], None)
        baseline = load_baseline(gate) if gate else None
        if gate_across_configs and baseline is None:
            raise GateError("--gate-across-configs applies to --gate, which was not given")
        if baseline is not None:
            wanted = expand(strategy) if strategy else list(baseline.metrics)
            pairs = _same_strategy(wanted, baseline)
            against = pairs if gate_across_configs else {}
            missing = [s for s in wanted if s not in baseline.metrics and s not in against]
            if missing:
                paired = [f"{s} against its {pairs[s]}" for s in missing if s in pairs]
                raise GateError(
                    f"{baseline.path}: no baseline for {', '.join(missing)} "
                    f"(it holds {', '.join(baseline.metrics)}); drop it from --strategy or save a new baseline"
                    + (f"; --gate-across-configs gates {', '.join(paired)}" if paired else "")
                )
            base_tolerances, reference = baseline.tolerances, baseline.reference
        else:
            wanted = expand(strategy)
            base_tolerances, reference = kept or dict(default_tolerances()), DEFAULT_REFERENCE
            against = {}
        return cls(
            baseline=baseline,
            save_to=Path(save_baseline) if save_baseline else None,
            tolerances=apply_overrides(base_tolerances, tolerance),
            across_configs=gate_across_configs,
            reference=reference,
            wanted=wanted,
            specs=[reference] + [s for s in wanted if s != reference],
            replaces=replaces,
            kept_tolerances=kept is not None and kept != with_always_gated(default_tolerances()),
            saved_tolerances=apply_overrides(kept, tolerance) if baseline is not None and kept is not None else None,
            against=against,
        )

    # -- at session start ------------------------------------------------------------------

    def bind(self, fp: dict[str, Any]) -> None:
        """Take the run's fingerprint (see :func:`flarebench.bench.config.fingerprint`); refuse a run whose fingerprint
        differs from the baseline's, unless comparing across configurations."""
        self.fp = fp
        if self.baseline is None:
            return
        diff = config_difference(self.baseline.config, fp, self.measured, self.against)
        if diff and not self.across_configs:
            probes = "the probe set's questions, answers or documents changed since the baseline was saved"
            changed = probes if diff.startswith("probes.hash") else meaning(diff)
            raise GateError(
                f"{self.baseline.path} was made with a different configuration: {diff}; "
                + (f"{changed}: save a new baseline (--save-baseline), or " if changed else "")
                + "use --gate-across-configs to compare anyway"
            )
        self.difference = diff

    def record(self) -> dict[str, Any]:
        """What run.json records about the gate."""
        return {
            "baseline": str(self.baseline.path) if self.baseline else None,
            "save_baseline": str(self.save_to) if self.save_to else None,
            "reference": self.reference,
            "gated": self.wanted,
            "tolerances": self.tolerances,
            "across_configs": self.across_configs,
            "config_difference": self.difference,
            "against": self.against,
        }

    # -- after each spec ran -----------------------------------------------------------------

    @staticmethod
    def rows(summary) -> dict[str, dict[str, Any]]:
        """The summary's strategy rows by spec: a comparison's oracle row is no strategy, never gated
        or saved (:func:`flarebench.bench.bounds.strategy_rows`)."""
        return {row["strategy"]: row for row in strategy_rows(summary).to_dict("records")}

    @property
    def unchecked(self) -> list[str]:
        """The gated specs the gate has no verdict on (they did not run, or did not finish)."""
        return [spec for spec in self.wanted if spec not in self.verdicts]

    def _no_reference(self, breach: Breach, rows: dict[str, dict[str, Any]]) -> str:
        """Why a latency ratio is missing in the new run when its reference has no latency, or ""."""
        latency = RATIO_METRICS.get(breach.metric)
        reference = rows.get(self.reference, {})
        if latency is None or breach.new is not None or _number(reference.get(latency)):
            return ""
        failed = int(_number(reference.get("errors")) or 0)
        why = f": {failed} of its {int(_number(reference.get('n')) or 0)} probes failed" if failed else ""
        return f" (the reference {self.reference} has no {latency}{why})"

    def check(self, spec: str, summary) -> list[str]:
        """The broken-metric lines of ``spec`` against the baseline (empty when it passes or is
        not gated). ``summary`` is the run's summary frame, the reference's row included."""
        if self.baseline is None or spec not in self.wanted:
            return []
        rows = self.rows(summary)
        if spec not in rows:
            lines = [f"{spec}: no probe was scored"]
        elif self.reference not in rows and any(m in RATIO_METRICS and t for m, t in self.tolerances.items()):
            lines = [f"latency ratios: the reference {self.reference} did not run"]
        else:
            new = with_ratios(rows[spec], rows.get(self.reference))
            old = self.baseline.metrics[self.against.get(spec, spec)]
            few = _few_probes(rows[spec], old.get("latency_p95_ratio"), self.tolerances.get("latency_p95_ratio"))
            # A time measured on answers from the cache is a lookup's: no bound can be checked on it,
            # in this run or in the baseline's (one saved before warm runs were refused).
            was_warm = {f"the baseline's {spec}": share} if (share := _number(old.get("cached_share"))) else {}
            warm = {
                m: cached
                for m, t in self.tolerances.items()
                if t
                and timed(m)
                and (cached := _cached(rows, [spec, *([self.reference] if m in RATIO_METRICS else [])]) | was_warm)
            }
            checked = {m: t for m, t in self.tolerances.items() if m not in warm}
            lines = [
                b.line()
                + (f" ({few})" if few and b.metric == "latency_p95_ratio" else "")
                + self._no_reference(b, rows)
                for b in compare(old, new, checked)
            ] + [
                f"{m}: measured on answers from the cache ("
                + ", ".join(f"{s} {share:.0%} cached" for s, share in cached.items())
                + "): gate times on a run without --cache"
                for m, cached in warm.items()
            ]
        self.verdicts[spec] = lines
        return lines

    def write_verdicts(self, run_dir: Path) -> None:
        """``gate.json`` in the run folder: the baseline, each gated spec's broken metrics, and the
        gated specs without a verdict yet (not run, or not finished: a stopped run's)."""
        from flarebench.bench.report import write_atomic

        info = {
            "baseline": str(self.baseline.path) if self.baseline else None,
            "config_difference": self.difference,
            "passed": {spec: not lines for spec, lines in self.verdicts.items()},
            "broken": {spec: lines for spec, lines in self.verdicts.items() if lines},
            "unchecked": self.unchecked,
            "against": self.against,  # a spec gated across configurations -> the baseline's spec it met
            "notes": self.notes(),
        }
        write_atomic(Path(run_dir) / GATE_JSON, json.dumps(info, indent=2) + "\n")

    # -- at the end ------------------------------------------------------------------------

    def baseline_document(self, summary) -> dict[str, Any]:
        """The baseline JSON for the wanted specs of this run."""
        rows = self.rows(summary)
        ref = rows.get(self.reference, {})
        return {
            "version": VERSION,
            "config": self.fp,
            "reference": {
                "spec": self.reference,
                "latency_p50_s": _number(ref.get("latency_p50_s")),
                "latency_p95_s": _number(ref.get("latency_p95_s")),
            },
            "metrics": {spec: with_ratios(rows[spec], ref) for spec in self.wanted if spec in rows},
            "tolerances": self.tolerances if self.saved_tolerances is None else self.saved_tolerances,
            "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "command": command_line(),
        }

    def save(self, summary) -> str:
        """Write the baseline when every wanted spec and the reference ran with no probe error
        (and, under --gate, passed it); returns a one-line account of what was done."""
        if self.save_to is None:
            return ""
        rows = self.rows(summary)
        missing = [s for s in self.measured if s not in rows]
        if missing:
            return f"baseline not saved: {', '.join(missing)} did not run"
        bad = [s for s in self.measured if rows[s].get("errors")]
        if bad:
            return f"baseline not saved: {', '.join(bad)} had probe errors"
        broken = [s for s, lines in self.verdicts.items() if lines]
        if broken:
            return f"baseline not saved: {', '.join(broken)} broke the gate"
        # Even with no timed bound now: a later gate may bound a time, against a lookup's.
        if cached := _cached(rows, self.measured):
            return (
                f"baseline not saved: {', '.join(cached)} answered from the cache, so its times are lookups; "
                "save it from a run without --cache"
            )
        doc = self.baseline_document(summary)
        from flarebench.bench.report import write_atomic

        try:  # checked before the run, but a place can still refuse (a full disk, /proc as root)
            self.save_to.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.save_to, json.dumps(doc, indent=2) + "\n")
        except OSError as e:  # write_atomic's WriteError names the file and why already
            return (
                f"baseline not saved: {e}"
                if e.strerror is None
                else f"baseline not saved: {self.save_to} cannot be written ({e.strerror})"
            )
        notes = [f"baseline saved: {self.save_to} ({', '.join(self.wanted)})"]
        if self.kept_tolerances:
            notes.append("it keeps the tolerances edited in the baseline it replaced")
        dropped = [s for s in self.replaces if s not in self.wanted]
        if dropped:
            # A baseline holds one run's specs: the ones this run left out are no longer gated.
            notes.append(
                f"it replaced a baseline that also held {', '.join(dropped)}, which this file no longer gates "
                "(run them too, with --strategy, to keep them)"
            )
        unmeasured = [
            f"{m} for {s}"
            for s, row in doc["metrics"].items()
            for m, bound in self.tolerances.items()
            if bound and row.get(m) is None
        ]
        if unmeasured:
            # A bound on a value the run could not compute breaks every later gate.
            notes.append(
                f"it holds no value for {', '.join(unmeasured)}, so every gate against it breaks there: "
                "drop that bound (--tolerance METRIC=off) or leave that spec out"
            )
        bound = self.tolerances.get("latency_p95_ratio")
        few = [f for s in self.wanted if (f := _few_probes(rows[s], doc["metrics"][s].get("latency_p95_ratio"), bound))]
        if few and self.tolerances.get("latency_p95_ratio"):
            notes.append(f"its latency_p95_ratio {few[0]}")
        if quality := self.quality_at_zero({s: rows[s] for s in self.wanted}):
            notes.append(
                f"{', '.join(quality)} {'is' if len(quality) == 1 else 'are'} 0 for every spec, so no drop in "
                "answer quality can break this gate: bound a metric that is above 0 too (e.g. --tolerance "
                "recall=max_drop:0.05 --tolerance faithfulness=max_drop:0.1)"
            )
        return "; ".join(notes)

    def notes(self) -> list[str]:
        """What a reader of the gate's verdict must know besides it (said with it, and in gate.json):
        a baseline whose answer quality is 0 for every gated spec cannot see quality drop."""
        base = {s: self.baseline.metrics[self.against.get(s, s)] for s in self.wanted} if self.baseline else {}
        if quality := self.quality_at_zero(base):
            return [
                f"{', '.join(quality)} {'is' if len(quality) == 1 else 'are'} 0 in the baseline for every gated spec, "
                "so no drop in answer quality can break this gate (it watches cost and latency)"
            ]
        return []

    def quality_at_zero(self, rows: dict[str, dict[str, Any]]) -> list[str]:
        """The bounded quality metrics (higher is better) that are 0 or missing in every row of
        ``rows`` (spec -> its values), when all are: a metric at 0 cannot drop, so such a gate
        watches cost and latency only. [] otherwise."""
        quality = [m for m, bound in self.tolerances.items() if bound and directions().get(m) == HIGHER and m != "n"]
        if quality and all(_number(row.get(m)) in (0, None) for row in rows.values() for m in quality):
            return quality
        return []
