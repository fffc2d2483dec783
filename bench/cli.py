"""The ``flarebench`` console script (also ``python -m flarebench``).

``flarebench run [OPTIONS]`` runs strategies exactly as ``pytest bench [OPTIONS]`` does (the same
option names); ``compare`` runs several strategies into one report; ``sweep`` runs one parameter
over values; ``score RUN_DIR`` recomputes a run's metrics from its traces and ``report RUN_DIR``
rebuilds its report.html as well; ``init [DIR]`` sets a repository up to run the bench on its own
probes (see :mod:`flarebench.bench.scaffold`).
"""

from __future__ import annotations

import argparse
import difflib
import gc
import json
import os
import shlex
import sys
from pathlib import Path

from flarebench.bench.interrupt import TERMINATED_EXIT, Terminated, sigterm_interrupts
from flarebench.bench.options import DEFAULTS_NOTE, DEV_FRACTION, PLUGIN, RUN_OPTIONS, TOLERANCE, Parser
from flarebench.bench.paths import WriteError
from flarebench.bench.runner import resume_hint
from flarebench.bench.scorers import ScorerError
from flarebench.strategies.lm import LMUnavailable

#: The gate's options: a calibration refuses them (it is not gated), so its help leaves them out.
GATE_FLAGS = ("--gate", "--save-baseline", "--tolerance", "--gate-across-configs")


class UserError(Exception):
    """A mistake in the command line or the files it names: printed as one line, exit status 2."""


def _session(args: argparse.Namespace, study: dict | None):
    """The bench session of the run options, with what the LM endpoint offers said on stderr."""
    from flarebench.bench.session import BenchSession, ConfigError
    from flarebench.bench.settings import locate

    try:
        session = BenchSession(
            **{o.dest: getattr(args, o.dest) for o in RUN_OPTIONS}, study=study, option_sources=args.option_sources
        )
    except ConfigError as e:  # a value from the config file is named by its file, line and key
        raise UserError(locate(str(e), args.option_sources or {}, e.option)) from None
    if session.lm_capabilities:
        print(f"flarebench: {session.lm_capabilities}", file=sys.stderr)
    return session


def _run(args: argparse.Namespace, study: dict | None = None) -> int:
    from flarebench.bench.runner import StrategyRefused

    session = _session(args, study)
    failed = []
    gating = session.gating
    with session.closing():
        session.warm_up()
        for spec in session.specs:
            try:
                traces = session.run(spec)
            except StrategyRefused as e:
                _say(str(e))
                failed.append(spec)
                continue
            if any(t.error for t in traces):
                failed.append(spec)
            # The reference runs first, so its latency is known when each gated spec is checked.
            lines = gating.check(spec, session.summary())
            if gating.baseline is not None and spec in gating.wanted:
                gating.write_verdicts(session.run_dir)
            if lines:
                print(f"flarebench: {spec} breaks the gate {gating.baseline.path}:", file=sys.stderr)
                for line in lines:
                    print(f"  {line}", file=sys.stderr)
                if spec not in failed:
                    failed.append(spec)
        # Written while the run folder's lock is still held (close() releases it); main() says
        # how to resume an interrupted run.
        session.write_report()
    print("\n".join(session.closing_lines()))
    if gating.save_to is not None:
        note = gating.save(session.summary())
        print(note, file=sys.stderr if note.startswith("baseline not saved") else sys.stdout)
        if note.startswith("baseline not saved") and not failed:
            return 1
    if session.judge_failure:  # a metric asked for is missing
        print(session.judge_line(), file=sys.stderr)
    if failed:
        print(_failed_line(session, failed), file=sys.stderr)
    return 1 if failed or session.judge_failure else 0


def _failed_line(session, failed: list[str]) -> str:
    """The line a run whose specs ``failed`` ends with: those specs and, when probes of theirs raised
    an error (a server's 500 after the retries), how to run just those again."""
    line = f"flarebench: failed: {', '.join(failed)}"
    errors = sum(1 for spec in failed for t in session.results.get(spec, []) if t.error)
    if errors and (hint := session.retry_hint()):
        line += f" ({errors} probe{'s' * (errors != 1)} raised an error, each said in its trace; {hint})"
    return line


def _compare(args: argparse.Namespace) -> int:
    from flarebench.bench.calibrate import CalibrationError, budget_plans, parse_goal
    from flarebench.strategies.registry import SpecError, expand, refuse_twins

    args.budget = _once(args.budget, "--budget", "compare calibrates to one budget")
    specs = expand(args.strategy)
    if len(specs) < 2:
        twice = " (given more than once; a spec runs once)" if len(args.strategy or []) > 1 else ""
        raise UserError(
            "compare needs at least two different strategies (repeat --strategy, or 'all'); "
            f"got {', '.join(specs)}{twice}"
        )
    # Without the bounds (the always row retrieves on every sentence: often the longest spec to run).
    bounds = {"bounds": False} if args.no_bounds else {}
    if not args.budget:
        # The calibration's own options would be ignored without a budget to calibrate to.
        calibrating = {
            "--objective": args.objective is not None,
            "--dev-fraction": args.dev_fraction != DEV_FRACTION,
            "--seed": args.seed != 0,
            "--budget-tolerance": args.budget_tolerance != TOLERANCE,
        }
        if given := [flag for flag, set_ in calibrating.items() if set_]:
            raise UserError(
                f"{given[0]} needs --budget (METRIC<=VALUE, METRIC>=VALUE or METRIC=VALUE): "
                "compare calibrates only to a budget"
            )
        return _run(args, study={"kind": "compare", **bounds})
    try:
        refuse_twins(specs)  # as the user gave them: the plans add bounds and grid points
        goal = parse_goal(args.budget, args.objective, "--budget")
        plans = budget_plans(specs, args.reference, bounds=not args.no_bounds)
    except (CalibrationError, SpecError) as e:
        raise UserError(str(e)) from None
    return _calibrated(args, plans, goal, "compare", bounds)


def _calibrate(args: argparse.Namespace) -> int:
    from flarebench.bench.calibrate import CalibrationError, goal_op, knob_of, parse_goal, parse_values
    from flarebench.strategies.registry import SpecError, expand, refuse_twins

    args.target = _once(args.target, "--target", "a calibration has one goal")
    args.budget = _once(args.budget, "--budget", "a calibration has one goal")
    if not args.strategy:
        raise UserError("calibrate needs --strategy SPEC: the strategy whose budget knob is calibrated")
    if args.target and args.budget:
        raise UserError(f"calibrate takes one goal, --target {args.target} or --budget {args.budget}: give one")
    if not args.target and not args.budget:
        raise UserError(
            "calibrate needs one goal: --target METRIC=VALUE, or --objective METRIC --budget METRIC<=VALUE (or >=)"
        )
    # Each option is one kind of goal: a target given as a budget (or the other way) would run as the other.
    if args.budget and goal_op(args.budget) == "=":
        raise UserError(f"--budget takes a cap or a floor (METRIC<=VALUE, METRIC>=VALUE); to hit {args.budget}, "
                        "give --target")  # fmt: skip
    if args.target and goal_op(args.target) in ("<=", ">="):
        raise UserError(f"--target takes METRIC=VALUE, a figure to hit; {args.target} is a budget: give --budget")
    try:
        values = parse_values(args.values)
        goal = parse_goal(args.target or args.budget, args.objective, "--target" if args.target else "--budget")
        refuse_twins(expand(args.strategy))  # as the user gave them, before their grids
        plans = {spec: knob_of(spec, args.param, values) for spec in expand(args.strategy)}
    except (CalibrationError, SpecError) as e:
        raise UserError(str(e)) from None
    fixed = [spec for spec, knob in plans.items() if knob is None]
    if fixed:
        raise UserError(f"{fixed[0]}: nothing to calibrate (no budget knob, or the spec sets it itself)")
    return _calibrated(args, plans, goal, "calibrate")


def _calibrated_reference(args: argparse.Namespace, plans: dict) -> str:
    """--reference among a calibration's specs as the user gave them (another spelling of one
    included); one asked for that names none is refused before anything runs."""
    from flarebench.bench.session import ConfigError, run_reference
    from flarebench.bench.settings import was_given
    from flarebench.strategies.registry import SpecError, canonical, parse_spec

    spec = canonical(args.reference)
    try:
        reference, strategies = parse_spec(spec), {s: parse_spec(s) for s in plans}
    except SpecError:
        return spec  # the session says what is wrong with it
    try:
        return run_reference(spec, reference, strategies, was_given(args.option_sources, "reference"))
    except ConfigError as e:
        raise UserError(str(e)) from None


def _calibrated(args: argparse.Namespace, plans: dict, goal, kind: str, extra: dict | None = None) -> int:
    """Calibrate every spec of ``plans`` that has a knob on a dev part of the probes, then run the
    chosen points and the specs without a knob on the test part; the run folder's summary and
    report are the test part's (:mod:`flarebench.bench.calibrate`)."""
    from dataclasses import asdict

    from flarebench.bench.calibrate import (
        CalibrationError,
        calibrate,
        calibration_table,
        check_split,
        errored_lines,
        grid_specs,
        split,
        value_text,
    )
    from flarebench.bench.report import format_table

    if args.gate or args.save_baseline:
        from flarebench.bench.settings import locate

        flag = "--gate" if args.gate else "--save-baseline"  # named by its config file's line when set there
        raise UserError(
            locate(f"{flag} gates a plain run; calibrated runs are not gated", args.option_sources or {}, flag)
        )
    if args.executor == "ray":  # its dev runs go through a cache of the run folder, in this process
        raise UserError(f"--executor ray runs run, compare and sweep; {kind} with a goal runs in this process")
    try:
        check_split(args.dev_fraction, args.budget_tolerance, args.limit)  # before the run folder is opened
        grids = {spec: grid_specs(spec, knob) for spec, knob in plans.items() if knob is not None}
    except CalibrationError as e:
        raise UserError(str(e)) from None
    args.strategy = list(dict.fromkeys(s for spec in plans for s in grids.get(spec, [spec])))
    # The reference is one of the user's specs (or bounds), whose grid points the session runs.
    args.reference = _calibrated_reference(args, plans)
    study = {
        "kind": kind,
        **(extra or {}),
        "goal": asdict(goal),
        "dev_fraction": args.dev_fraction,
        "seed": args.seed,
        "tolerance": args.budget_tolerance,
    }
    session = _session(args, study)
    failed, chosen = [], {}
    with session.closing():
        try:
            dev_ids, test_ids = split([p.id for p in session.selected], args.dev_fraction, args.seed)
        except CalibrationError as e:
            raise UserError(str(e)) from None
        study["dev_probe_ids"], study["test_probe_ids"] = dev_ids, test_ids
        session.warm_up()
        dev = [p for p in session.selected if p.id in set(dev_ids)]
        test = [p for p in session.selected if p.id in set(test_ids)]
        session.focus([spec for spec in plans if spec not in grids], test, final=False)
        results = []
        if goal.timed:
            print(f"dev points run without the dev cache: {goal.describe()} is a time, measured cold", file=sys.stderr)
        for spec, knob in plans.items():
            if knob is None:
                continue
            try:
                cal = calibrate(spec, knob, goal, lambda s: session.measure(s, dev, f"dev {s}", cold=goal.timed))
            except CalibrationError as e:
                _say(str(e))
                failed.append(spec)
                continue
            results.append(cal)
            chosen[spec] = cal.chosen
            print(
                f"calibrated {spec}: {cal.param}={value_text(cal.value)} ({cal.method}, {len(cal.points)} of "
                f"{len(knob.grid)} values run on dev; dev {goal.metric} {cal.dev[goal.metric]:.3f}"
                # A budget's choice is made on its objective: that figure too.
                + (f", {goal.objective} {cal.dev[goal.objective]:.3f}" if goal.objective in cal.dev else "")
                + (
                    ""
                    if cal.feasible
                    else "; no value reached the target on dev"
                    if goal.is_target
                    else "; no value met the budget on dev"
                )
                + ")",
                file=sys.stderr,
            )
            for line in errored_lines({"calibration": [cal.record()], "dev_probe_ids": dev_ids}):
                _say(line)
        # A reference with a knob was calibrated as the others: the delta columns compare with its chosen spec.
        session.reference = chosen.get(session.reference, session.reference)
        # A chosen point that is the always bound's spec (retrieval_rate=1) is one row, listed once.
        final = list(dict.fromkeys(chosen.get(spec, spec) for spec in plans if spec in chosen or spec not in grids))
        # Recorded before the test runs: a run stopped among them is summarised with its calibration.
        study["calibration"] = [c.record() for c in results]
        session.focus(final, test, final=False)
        for spec in final:
            traces = session.run(spec, test, f"test {spec}")
            if any(t.error for t in traces):
                failed.append(spec)
        session.focus(final, test)
        session.write_summary()
        session.write_report()
    print("\n".join(session.closing_lines()))
    print(format_table(calibration_table(session.summary(), study)))
    if chosen:
        # Options to paste as they are: one --strategy per chosen spec.
        print("chosen: " + " ".join(f"--strategy {shlex.quote(s)}" for s in chosen.values()))
    if failed:
        print(_failed_line(session, failed), file=sys.stderr)
    return 1 if failed else 0


def _once(values: list[str] | None, flag: str, why: str) -> str | None:
    """The one value of an option parsed with ``action="append"`` (None when absent), so that a
    repeat is refused in one line saying ``why`` instead of the first value silently dropped."""
    if values and len(values) > 1:
        raise UserError(f"{flag} is given {len(values)} times; {why}")
    return values[0] if values else None


def _same_value(text: str) -> float | str:
    """A sweep value as the strategy will read it: a number by its value, else the text."""
    try:
        return float(text)
    except ValueError:
        return text


def _sweep(args: argparse.Namespace) -> int:
    from flarebench.strategies.registry import SpecError, expand, with_param

    args.param = _once(args.param, "--param", "a sweep varies one parameter")
    key, eq, raw = args.param.partition("=")
    values = [v.strip() for v in raw.split(",")]
    if not eq or not key.strip() or not any(values):
        raise UserError(f"--param: expected NAME=V1,V2,..., got {args.param!r}")
    if not all(values):
        raise UserError(f"--param: an empty value in {args.param!r}")
    if len(set(map(_same_value, values))) != len(values):  # 0.2 and 0.20 are one setting, two rows
        raise UserError(f"--param: a value is given twice in {args.param!r}")
    if not args.strategy:
        raise UserError("sweep needs --strategy SPEC: the strategy whose parameter is swept")
    base = expand(args.strategy)
    try:
        args.strategy = [with_param(spec, key.strip(), v) for spec in base for v in values]
    except SpecError as e:
        raise UserError(str(e)) from None
    # Deltas against the first sweep point unless told otherwise (single_time is not in a sweep).
    args.reference = args.reference or args.strategy[0]
    return _run(args, study={"kind": "sweep", "param": key.strip(), "values": values, "strategies": base})


def _rescore(args: argparse.Namespace, memo: dict | None = None):
    """Score RUN_DIR again from its traces: the probes the run selected (run.json) and each
    (strategy, probe) once; returns (run_dir, run.json, traces, probe set, summary, the line saying
    what was scored). The returned run.json's ``scoring`` is the price, reference and judge this
    scoring used (``--prices``, ``--reference``, ``--judge``, else those recorded). It checks
    run.json, traces.jsonl and the options, and writes nothing (it prints only its warnings: a probe
    set changed since the run, a run another version made): the command checks its own options too,
    then calls :func:`_publish`, so that a mistake leaves the folder as it was.
    Only reads traces.jsonl, so it needs no lock and works while a run is writing the folder.
    ``memo`` keeps the per-probe rows made (:func:`flarebench.bench.report.probe_rows`) for the
    command's other uses of them."""
    from flarebench.bench import version
    from flarebench.bench.report import is_comparison, summary_frame
    from flarebench.bench.runner import TRACES, TraceError, TraceLog
    from flarebench.bench.session import RUN_JSON, ConfigError, read_run_json
    from flarebench.probes.load import ProbeError, load_probe_set
    from flarebench.strategies.plugins import recorded

    run_dir = Path(args.run_dir)
    run_json, traces_file = run_dir / RUN_JSON, run_dir / TRACES
    if run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"{run_dir}: is a file, not a folder; RUN_DIR must be a run folder")
    if not run_json.exists():
        raise UserError(f"{run_json}: not found; RUN_DIR must be a run folder")
    try:
        info = read_run_json(run_json)
    except ConfigError as e:
        raise UserError(str(e)) from None
    _check_run_info(info, run_json)
    _check_not_running(args, run_dir)
    _check_still_running(info, run_dir)
    if not args.plugin:
        _recorded_plugins(info.get("plugins") or [], run_json)
    elif left := [ref for ref in info.get("plugins") or [] if ref not in {recorded(r) for r in args.plugin}]:
        # --plugin replaces the recorded ones: a scorer or trigger of those would be missing unsaid.
        print(
            f"flarebench: {run_json}: plugins: {', '.join(left)} not loaded (--plugin given; name it too to "
            "score with it)",
            file=sys.stderr,
        )
    # A run stopped before its first probe finished has no traces.jsonl yet and is scored as none
    # (TraceLog.read); a complete run's was deleted, and its empty summary would replace the run's.
    if not traces_file.exists() and info.get("status") == "complete":
        raise UserError(f"{traces_file}: not found; RUN_DIR must hold run.json and traces.jsonl")
    config = info["config"]
    probes_cfg = config["probes"]
    price, reference = _scoring(args, info, run_json)
    judge = _judge(args, info, run_json)
    try:
        probe_set = load_probe_set(probes_cfg["source"], probes_cfg.get("format", "auto"))
    except ProbeError as e:
        raise UserError(f"{run_json}: probes.source: {str(e).splitlines()[0]}") from None
    changed = probe_set.hash != probes_cfg["hash"]
    if changed:
        print(
            f"flarebench: warning: probe set {probe_set.path} changed since the run; "
            "scoring against its current answers",
            file=sys.stderr,
        )
    log = TraceLog(traces_file, writer=False)
    try:
        traces = log.read()
    except TraceError as e:
        raise UserError(str(e)) from None
    except OSError as e:
        raise UserError(f"{traces_file}: cannot be read ({e.strerror or e})") from None
    _warn_foreign_lines(traces_file, log.repeated, traces, config["strategies"], probe_set)
    probes = _selection(info, probe_set, run_json)
    traces = [t for t in traces if t.probe_id in probes and t.strategy in config["strategies"]]
    if not traces and info.get("status") == "complete":  # emptied, or run.json edited: not a run's scoring
        raise UserError(
            f"{traces_file}: holds no trace of the run's strategies and probes, yet {run_json} says the run "
            "is complete; its summary is kept"
        )
    # A calibration's summary holds the specs it focused on, in its order (its dev points ran first).
    focused = (info.get("study") or {}).get("specs")
    order = focused if isinstance(focused, list) else list(config["strategies"])
    summary = summary_frame(
        traces,
        probes,
        order=order,
        price=price,
        reference=reference,
        faithfulness=_faithfulness(traces, probe_set, judge),
        oracle=is_comparison(info.get("study")),
        memo=memo,
    )
    scoring = {
        "reference": reference,
        "price": price.record() if price else None,
        "judge": judge.describe() if judge else None,
    }
    if (made_by := config.get("flarebench")) not in (None, version()):
        # Scored by this version's scorers: where scoring changed between the two, so do the numbers.
        note = f"made by flarebench {made_by}, scored by {version()}: see CHANGES.md for what changed between them"
        print(f"flarebench: warning: {run_json}: {note}", file=sys.stderr)
        summary.attrs["notes"] = [f"This run was {note}.", *summary.attrs.get("notes", [])]
    if changed:  # the saved files say so too: a reader of them sees no warning on stderr
        note = (
            f"Scored against the probe set as it is now ({probe_set.path}, sha256 {probe_set.hash[:12]}), "
            f"which changed since the run (sha256 {probes_cfg['hash'][:12]}): its answers may differ from the run's."
        )
        summary.attrs["notes"] = [note, *summary.attrs.get("notes", [])]
    line = _scored_line(traces, len(probes), order)
    return run_dir, {**info, "scoring": scoring}, traces, probe_set, summary, line


def _recorded_plugins(refs: list[str], run_json: Path) -> None:
    """Load the plugins the run was made with, so that their triggers and scorers score it again; one
    that cannot be loaded from here (a path relative to where the run was started) is said, and the
    run is scored without it."""
    from flarebench.strategies import plugins

    for ref in refs:
        try:
            plugins.load(ref)
        except plugins.PluginError as e:
            print(
                f"flarebench: {run_json}: plugins: {e}; scored without it (give --plugin to load it)", file=sys.stderr
            )


def _check_not_running(args: argparse.Namespace, run_dir: Path) -> None:
    """Refuse to record other scoring options (``--prices``, ``--reference``, ``--judge``) in a
    folder a live run is writing: its run.json, rewritten after each spec, would drop them unsaid."""
    from flarebench.bench.runlock import RunLock

    given = [flag for flag in ("--prices", "--reference", "--judge") if getattr(args, flag[2:])]
    if given and (owner := RunLock(run_dir).live_owner()):
        raise UserError(
            f"{run_dir}: a run is writing this folder (pid {owner['pid']}), and would rewrite the scoring "
            f"{', '.join(given)} records; score with them once it has ended (without them, score reads it now)"
        )


def _warn_foreign_lines(traces_file: Path, repeated: list[int], traces: list, specs: dict, probe_set) -> None:
    """Say which lines of ``traces_file`` no run of this folder wrote, left out of the scores: a
    (strategy, probe) repeated (the first line is scored), a strategy the run did not run, a probe
    not in its set: traces merged or edited by hand. (A calibration's dev probes are in the set.)"""
    ids = {p.id for p in probe_set.probes}
    foreign = [f"{t.strategy} {t.probe_id}" for t in traces if t.strategy not in specs or t.probe_id not in ids]
    said = []
    if repeated:
        lines = ", ".join(map(str, repeated[:5])) + (", ..." if len(repeated) > 5 else "")
        said.append(
            f"{len(repeated)} line(s) repeat a strategy and probe of an earlier line, which is scored (line {lines})"
        )
    if foreign:
        said.append(
            f"{len(foreign)} trace(s) of a strategy this run did not run or a probe not in its set, left out "
            f"({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''})"
        )
    if said:
        print(f"flarebench: warning: {traces_file}: {'; '.join(said)}", file=sys.stderr)


def _check_still_running(info: dict, run_dir: Path) -> None:
    """A run.json saying ``running`` whose process is gone (killed: kill -9, out of memory) is
    scored as ``interrupted``, and said so: its summary must not say the run is still going."""
    from flarebench.bench.runlock import RunLock

    if info.get("status") == "running" and RunLock(run_dir).live_owner() is None:
        info["status"] = "interrupted"
        print(
            f"flarebench: {run_dir}: its run stopped without marking run.json (its process was killed); "
            "scored as interrupted: the command that made it resumes it",
            file=sys.stderr,
        )


def _check_run_info(info: dict, run_json: Path) -> None:
    """Refuse, in one line naming the field, a run.json whose fields rescoring reads are not of the
    kinds a run writes (bench/session.py): a file edited by hand or damaged. ``scoring.price`` is
    checked field by field where it is read (:meth:`flarebench.bench.prices.Price.from_record`)."""
    from flarebench.bench.session import STATUSES
    from flarebench.strategies.records import OBJECT, TEXT, TEXTS, Kind, check_fields

    parts = ("probes", "lm", "retriever", "strategies")
    run_fields = {
        "scoring": OBJECT.or_null(),
        "study": OBJECT.or_null(),
        "plugins": TEXTS,
        "status": Kind(f"one of {', '.join(STATUSES)}", lambda v: v in STATUSES),
        "limit": Kind("a whole number >= 1", lambda v: type(v) is int and v >= 1).or_null(),
    }
    try:
        check_fields(info, run_fields)
        config = check_fields(info["config"], dict.fromkeys(parts, OBJECT), "config", required=parts)
        check_fields(config["strategies"], dict.fromkeys(config["strategies"], OBJECT), "config.strategies")
        probe_fields = {"name": TEXT, "source": TEXT, "format": TEXT, "hash": TEXT}
        check_fields(config["probes"], probe_fields, "config.probes", required=("name", "source", "hash"))
        for part in ("lm", "retriever"):
            check_fields(config[part], {"name": TEXT}, f"config.{part}", required=["name"])
        if not config["strategies"]:
            raise ValueError("config.strategies: expected the run's strategy specs, got an empty object")
        scoring_fields = {"reference": TEXT.or_null(), "price": OBJECT.or_null(), "judge": OBJECT.or_null()}
        scoring = check_fields(info.get("scoring") or {}, scoring_fields, "scoring")
        check_fields(scoring.get("judge") or {}, {"spec": TEXT.or_null(), "base_url": TEXT.or_null()}, "scoring.judge")
    except ValueError as e:
        raise UserError(f"{run_json}: {e}") from None


def _publish(run_dir: Path, info: dict, summary, line: str) -> bool:
    """Say what was scored and write the summary files, once every input and option is checked;
    run.json records the scoring when it changed (other prices, reference or judge), so that a later
    `score` or `report` scores as these files are. Returns whether it changed."""
    from flarebench.bench.report import write_atomic, write_summary
    from flarebench.bench.session import RUN_JSON, read_run_json

    print(line)
    write_summary(run_dir, summary, info["config"], info.get("study"), info.get("status"), gated="gate" in info)
    on_disk = read_run_json(run_dir / RUN_JSON)
    if on_disk.get("scoring") == info["scoring"]:
        return False
    write_atomic(run_dir / RUN_JSON, json.dumps({**on_disk, "scoring": info["scoring"]}, indent=2) + "\n")
    return True


def _selection(info: dict, probe_set, run_json: Path) -> dict:
    """The probes the run selected, by id in probe-set order: run.json's ``probe_ids``, else (a
    run.json of an older flarebench) the first ``limit`` probes, else all of them."""
    by_id = {p.id: p for p in probe_set.probes}
    ids = info.get("probe_ids")
    if ids is None:
        limit = info.get("limit")
        return dict(list(by_id.items())[:limit] if isinstance(limit, int) and limit > 0 else by_id.items())
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise UserError(f"{run_json}: probe_ids: expected a list of probe ids (a run selects one at least)")
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise UserError(
            f"{run_json}: probe_ids: {len(missing)} probe(s) of the run are not in the probe set "
            f"{probe_set.path} (first: {missing[0]})"
        )
    return {i: by_id[i] for i in ids}


def _scored_line(traces: list, selected: int, specs: list[str]) -> str:
    """One line saying how many probes were scored per strategy of the run (``specs``), out of its
    selection; a strategy with none yet is named (the summary has no row for it)."""
    counts = dict.fromkeys(specs, 0)
    for t in traces:
        if t.strategy in counts:
            counts[t.strategy] += 1
    if not any(counts.values()):
        return f"scored no probe (selection from run.json: {selected} probes)"
    low, high = min(counts.values()), max(counts.values())
    if low == high == selected:
        return f"scored {selected} probes per strategy (selection from run.json)"
    n = str(low) if low == high else f"{low}-{high}"
    waiting = [spec for spec, count in counts.items() if not count]
    none_yet = f"; no probe yet: {', '.join(waiting)}" if waiting else ""
    return f"scored {n} of the {selected} selected probes per strategy (selection from run.json; partial run{none_yet})"


def _score(args: argparse.Namespace) -> int:
    from flarebench.bench.breakdown import BreakdownError, breakdown, csv_name
    from flarebench.bench.html import REPORT_HTML
    from flarebench.bench.report import absent_reference, format_table, probe_rows, write_atomic

    try:  # a field that cannot name its file is refused before anything is scored
        files = {field: csv_name(field) for field in args.by or []}
    except BreakdownError as e:
        raise UserError(str(e)) from None
    memo: dict = {}
    run_dir, info, traces, probe_set, summary, line = _rescore(args, memo)
    rows = probe_rows(traces, {p.id: p for p in probe_set.probes}, memo) if args.by else None
    try:  # every --by field is checked before anything is written
        tables = {field: breakdown(rows, field, list(info["config"]["strategies"])) for field in files}
    except BreakdownError as e:
        raise UserError(str(e)) from None
    _check_targets(run_dir, *files.values())
    if _publish(run_dir, info, summary, line) and (run_dir / REPORT_HTML).exists():
        print(f"{run_dir / REPORT_HTML} still shows the earlier scoring: flarebench report {run_dir} rebuilds it")
    print(
        "\n".join(filter(None, [format_table(summary), args.reference and absent_reference(summary, args.reference)]))
    )
    for field, table in tables.items():
        write_atomic(run_dir / files[field], table.to_csv(index=False, float_format="%.6g"))
        print(f"\nby {field} ({files[field]}):\n{format_table(table)}")
    _triggers(run_dir, traces, probe_set, memo)
    return 0


def _check_targets(run_dir: Path, *extra: str) -> None:
    """Before a scoring writes any file, refuse one it could not write (a folder in its place): the
    summary files, run.json and triggers.csv, and ``extra`` (report.html, the --by breakdowns)."""
    from flarebench.bench.report import SUMMARY_FILES, check_writable
    from flarebench.bench.session import RUN_JSON
    from flarebench.bench.trigger_scores import TRIGGERS_CSV

    check_writable([run_dir / name for name in (*SUMMARY_FILES, RUN_JSON, TRIGGERS_CSV, *extra)])


def _triggers(run_dir: Path, traces: list, probe_set, memo: dict) -> None:
    """When the run has drafts: every probability trigger scored again from them
    (:mod:`flarebench.bench.trigger_scores`), written to triggers.csv and printed; ``memo`` holds
    the per-probe rows the scoring made."""
    from flarebench.bench.report import probe_rows, write_atomic
    from flarebench.bench.trigger_scores import TRIGGERS_CSV, csv_text, format_tables, has_drafts, score_triggers

    if not has_drafts(traces):
        return
    scores = score_triggers(traces, probe_rows(traces, {p.id: p for p in probe_set.probes}, memo))
    if not scores.frame.empty:
        write_atomic(run_dir / TRIGGERS_CSV, csv_text(scores))
    print(f"\n{format_tables(scores)}")


def _report(args: argparse.Namespace) -> int:
    from flarebench.bench.html import REPORT_HTML, write_report
    from flarebench.bench.report import format_table

    memo: dict = {}
    run_dir, info, traces, probe_set, summary, line = _rescore(args, memo)
    _check_targets(run_dir, REPORT_HTML)
    report = write_report(run_dir, summary, info, traces, probe_set, memo)
    _publish(run_dir, info, summary, line)
    print(format_table(summary, compact=True))
    _triggers(run_dir, traces, probe_set, memo)
    print(f"report: {report}")
    return 0


def _judge(args: argparse.Namespace, info: dict, run_json: Path):
    """The faithfulness judge to score with: the one given to `score` (``none``: the offline
    method), else the judge the run recorded (its key, and any credentials of its URL, read again
    from the environment), else None (the offline method)."""
    from flarebench.bench.faithfulness import JudgeError, parse_judge
    from flarebench.strategies.http_client import REDACTED

    recorded = (info.get("scoring") or {}).get("judge") or {}
    spec = args.judge if args.judge is not None else recorded.get("spec")
    base_url = args.judge_base_url or (recorded.get("base_url") if args.judge is None else None)
    if base_url and REDACTED in base_url and not args.judge_base_url:
        # Its credentials were not recorded: $JUDGE_BASE_URL (or --judge-base-url) gives them again.
        if not os.environ.get("JUDGE_BASE_URL"):
            raise UserError(
                f"{run_json}: scoring.judge.base_url {base_url} was recorded without its credentials; give the "
                "judge's URL again (--judge-base-url or $JUDGE_BASE_URL), or --judge none for the offline score"
            )
        base_url = None
    # A judge reused from run.json keeps its JSON mode (a small local judge needs json_schema).
    json_mode = recorded.get("json_mode") if args.judge is None else None
    try:
        return parse_judge(spec, base_url, json_mode=json_mode)
    except JudgeError as e:
        recorded_one = " (the judge run.json recorded; --judge none scores offline)" if args.judge is None else ""
        raise UserError(f"faithfulness: {e}{recorded_one}") from None


def _faithfulness(traces: list, probe_set, judge) -> dict:
    """Faithfulness rows of the traces, judged by ``judge`` (:func:`_judge`)."""
    from flarebench.bench.faithfulness import JudgeError, faithfulness_rows

    try:
        return faithfulness_rows(traces, probe_set.docs_by_id, judge)
    except JudgeError as e:
        raise UserError(f"faithfulness: {e}") from None


def _scoring(args: argparse.Namespace, info: dict, run_json: Path):
    """The price and delta reference to score with: the options given to `score`, else those the
    run recorded in run.json (``scoring``), else the defaults (the shipped price table)."""
    from flarebench.bench.paths import PathError, check_input_file
    from flarebench.bench.prices import Price, PriceError, price_for
    from flarebench.bench.session import ConfigError, run_reference
    from flarebench.bench.uncertainty import DEFAULT_REFERENCE
    from flarebench.strategies.registry import SpecError, canonical, parse_spec

    if args.reference:
        args.reference = canonical(args.reference)  # as the run's rows are labelled
        try:
            reference = parse_spec(args.reference)
        except SpecError as e:
            raise UserError(f"--reference: {e}") from None
        # A rescoring cannot run it: every delta would be empty, and recorded for later rescorings.
        study = info.get("study") or {}
        specs = study.get("specs") or list(info["config"]["strategies"])  # a calibration's: its test rows
        # A calibrated strategy named as given stands for its chosen point, as in `compare --budget`.
        chosen = {c.get("base"): c.get("chosen") for c in study.get("calibration") or []}
        args.reference = chosen.get(args.reference, args.reference)
        try:  # a rescoring cannot run one: no advice to add it
            strategies = {s: parse_spec(s) for s in specs}  # the run's plugins are loaded
            args.reference = run_reference(args.reference, reference, strategies, asked=True, hint="")
        except (ConfigError, SpecError) as e:
            raise UserError(str(e)) from None
    recorded = info.get("scoring")
    reference = args.reference or (recorded or {}).get("reference") or DEFAULT_REFERENCE
    model = info["config"]["lm"]["name"]
    try:
        if args.prices:
            check_input_file("--prices", args.prices)
            return price_for(model, args.prices), reference
        if recorded is not None:
            price = recorded.get("price")
            return (Price.from_record(price, "scoring.price") if price else None), reference
        return price_for(model), reference
    except (PriceError, PathError) as e:
        raise UserError(str(e)) from None
    except ValueError as e:  # a recorded price that is not a price record
        raise UserError(f"{run_json}: {e}") from None


def _agreement(args: argparse.Namespace) -> int:
    """Print a faithfulness method's agreement with the labelled claims (bench/agreement.py)."""
    import pandas as pd
    from tqdm import tqdm

    from flarebench.bench import agreement
    from flarebench.bench.faithfulness import LEXICAL_METHOD, JudgeError, parse_judge
    from flarebench.bench.report import format_table

    if args.limit is not None and args.limit < 1:  # as a run's --limit (bench/session.py)
        raise UserError(f"--limit must be >= 1, got {args.limit}")
    try:
        claims = agreement.load_claims(args.claims or agreement.CLAIMS, args.split)
        judge = parse_judge(args.judge, args.judge_base_url)
    except (agreement.AgreementError, JudgeError) as e:
        raise UserError(str(e)) from None
    if args.limit is not None:
        claims = claims[: args.limit]
    if not claims:
        raise UserError(f"no labelled claim in the {args.split} split of {args.claims or agreement.CLAIMS}")
    if judge is None:
        method, verdicts = LEXICAL_METHOD, agreement.offline_verdicts(claims)
    else:
        method = judge.method
        with tqdm(total=len(claims), desc=f"judging with {judge.model}", unit="claim", file=sys.stderr) as bar:
            try:
                verdicts = agreement.judge_verdicts(judge, claims, progress=bar.update)
            except JudgeError as e:
                raise UserError(str(e)) from None
    result = agreement.measure(method, args.split, claims, verdicts)
    print(result.line())
    if result.undecided:
        print(
            f"no verdict on {result.undecided} of {len(claims)} claims "
            "(the judge's reply did not parse or held no statement)"
        )
    kinds = pd.DataFrame(
        [{"kind": k, "claims": n, "right": right, "share_right": right / n} for k, (right, n) in result.by_kind.items()]
    )
    print(format_table(kinds))
    if args.errors:
        by_id = {c.id: c for c in claims}
        for cid in result.wrong:
            c = by_id[cid]
            print(f"{cid} ({'supported' if c.supported else 'unsupported'}, {c.kind}): {c.claim}")
    return 0


def _init(args: argparse.Namespace) -> int:
    from flarebench.bench.paths import PathError
    from flarebench.bench.scaffold import init
    from flarebench.bench.settings import SettingsError

    target = Path(args.dir)
    try:
        done = init(target)
    except (PathError, SettingsError) as e:
        raise UserError(str(e)) from None
    for path in done.created:
        print(f"created {path}")
    for path in done.kept:
        print(f"kept    {path} (exists; not overwritten)")
    for line in done.todo:
        print(f"to do:  {line}")
    here = target.resolve() == Path.cwd().resolve()
    print(
        f"next: {'' if here else f'cd {shlex.quote(str(target))} && '}pytest bench --limit 1   "
        f"(then edit bench/probes and {done.settings}; bench/README.md says how to gate CI)"
    )
    return 0


def _add_run_options(
    parser: argparse.ArgumentParser, helps: dict[str, str] | None = None, hidden: tuple[str, ...] = ()
) -> None:
    """The run options, with ``helps`` replacing the help text of some (by flag); ``hidden`` ones are
    left out of the help (the command refuses them, in one line naming why)."""
    parser.epilog = DEFAULTS_NOTE
    for opt in RUN_OPTIONS:
        parser.add_argument(opt.negation, **opt.negation_kwargs())
        if opt is PLUGIN:  # added with the command
            continue
        kwargs = opt.argparse_kwargs()
        kwargs["help"] = argparse.SUPPRESS if opt.flag in hidden else (helps or {}).get(opt.flag, kwargs["help"])
        parser.add_argument(opt.flag, **kwargs)


def _add_calibration_options(parser: argparse.ArgumentParser, budget_help: str, budget_form: str) -> None:
    parser.add_argument(
        "--budget",
        action="append",  # given twice is refused (_once), not the first silently dropped
        metavar=budget_form,
        help=budget_help,
    )
    parser.add_argument(
        "--objective",
        metavar="METRIC",
        help="with a METRIC<=VALUE or METRIC>=VALUE budget: the figure to make best: maximised, or minimised where "
        "lower is better (incomplete_rate, latency_p95_s) (default: f1)",
    )
    parser.add_argument(
        "--dev-fraction",
        type=float,
        default=DEV_FRACTION,
        metavar="F",
        help=f"share of the probes in the dev part (default: {DEV_FRACTION})",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the dev/test split (default: 0)")
    parser.add_argument(
        "--budget-tolerance",
        type=float,
        default=TOLERANCE,
        metavar="X",
        help="how far off the goal a test figure may be before the strategy is said to miss it: X on a 0-1 column "
        f"(a rate, a score), X times the goal's value on any other (tokens, seconds) (default: {TOLERANCE})",
    )


def _add_judge_options(parser: argparse.ArgumentParser) -> None:
    for opt in RUN_OPTIONS:
        if opt.flag in ("--judge", "--judge-base-url"):
            parser.add_argument(opt.flag, **opt.argparse_kwargs())


def _add_scoring_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (holding run.json and traces.jsonl)")
    _add_judge_options(parser)
    parser.add_argument(
        "--prices",
        metavar="FILE",
        help="price cost_per_q with this price table (default: the prices the run recorded in run.json)",
    )
    parser.add_argument(
        "--reference",
        metavar="SPEC",
        help="the delta columns' reference strategy (default: the run's, else single_time)",
    )


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(
        prog="flarebench",
        description="Benchmark retrieval strategies for RAG: run, compare, calibrate and sweep them; score runs.",
    )
    sub = ap.add_subparsers(dest="command", required=True)

    ap.commands = {}  # each command's parser: an unknown option is said with that command's usage

    def command(name: str, func, help: str, description: str) -> argparse.ArgumentParser:
        parser = ap.commands[name] = sub.add_parser(name, help=help, description=description)
        parser.set_defaults(func=func)
        parser.add_argument(PLUGIN.flag, **PLUGIN.argparse_kwargs())  # every command takes --plugin
        return parser

    run = command(
        "run",
        _run,
        "run strategies on a probe set and write a run folder with its report",
        "Run strategies on a probe set; the options are those of `pytest bench`. Writes summary.csv, "
        "summary.md, adoption.md, run.json, traces.jsonl and report.html into the run folder. Ctrl-C "
        "stops cleanly, keeping every finished probe; the same command resumes.",
    )
    _add_run_options(run)
    compare = command(
        "compare",
        _compare,
        "run several strategies on one probe set into one comparison report",
        "Run two or more strategies (repeat --strategy; default: every built-in strategy) on one probe set "
        "and write one report: one table with paired-bootstrap deltas against --reference, before/after "
        "adoption tables against it (adoption.md), plots of quality against cost and p95 latency with the "
        "Pareto front, latency distributions and a trace viewer. The options are those of `run`. "
        "It also runs the bounds never (no_retrieval) and always (flare_direct:theta=1, retrieval on every "
        "sentence) unless --strategy holds them or --no-bounds is given, and adds an oracle row (per probe the "
        "best answer of the strategies): headroom_captured, helped and harmed say what each strategy gains.",
    )
    _add_run_options(compare)
    compare.add_argument(
        "--no-bounds",
        action="store_true",
        help="leave out the bound rows never and always that --strategy does not hold (always retrieves on "
        "every sentence, often the longest to run); headroom_captured then needs no_retrieval in --strategy",
    )
    _add_calibration_options(
        compare,
        budget_help=(
            "compare at a matched budget: calibrate every strategy's budget knob (a trigger's threshold, "
            "fixed_interval's interval, flare_instruct's search_bias) on a dev part to METRIC=VALUE (e.g. "
            "retrieval_rate=0.5; or METRIC<=VALUE or METRIC>=VALUE with --objective), then compare all on the test "
            "part; a spec that sets its knob runs as given"
        ),
        budget_form="METRIC=VALUE",
    )
    calibrate = command(
        "calibrate",
        _calibrate,
        "choose a strategy's budget knob on a dev part of the probes, checked on the rest",
        "Split the probes (seeded) into a dev and a test part, sweep --param of --strategy on dev (bisection to a "
        "--target, a grid for --objective under a --budget), run the chosen value on test and report its realised "
        "figures there, with the chosen spec to paste. The other options are those of `run`.",
    )
    calibrate.add_argument(
        "--param",
        metavar="NAME",
        help="the parameter to calibrate (default: the strategy's budget knob: theta or threshold of a trigger, "
        "interval of fixed_interval, search_bias of flare_instruct)",
    )
    calibrate.add_argument(
        "--values", metavar="V1,V2,...", help="the values to try, in order (default: the knob's own grid)"
    )
    calibrate.add_argument(
        "--target",
        action="append",  # given twice is refused (_once), not the first silently dropped
        metavar="METRIC=VALUE",
        help="hit this figure on dev, e.g. retrieval_rate=0.5 (a cap or a floor is --budget)",
    )
    _add_run_options(
        calibrate,
        {
            "--strategy": "the strategy spec to calibrate (NAME or NAME:key=value,... without the calibrated "
            "parameter); repeat to calibrate several; required",
        },
        hidden=GATE_FLAGS,
    )
    _add_calibration_options(
        calibrate,
        budget_help=(
            "with --objective: the budget the chosen value must keep on dev, a cap or a floor, e.g. "
            "retrieval_rate<=0.5 or f1>=0.3 (a figure to hit is --target)"
        ),
        budget_form="METRIC<=VALUE|METRIC>=VALUE",
    )
    sweep = command(
        "sweep",
        _sweep,
        "run one strategy parameter over several values",
        "Run each --strategy once per value of --param (e.g. --strategy flare_direct --param "
        "theta=0,0.2,0.4,0.6,0.8,1); the rows are the specs NAME:PARAM=VALUE. The report adds retrieval "
        "rate and quality against the swept value. Deltas are against the first value unless --reference "
        "says otherwise. The other options are those of `run`.",
    )
    sweep.add_argument(
        "--param",
        required=True,
        action="append",  # given twice is refused (_once), not the first silently dropped
        metavar="NAME=V1,V2,...",
        help="the strategy parameter to sweep and its values (comma-separated)",
    )
    _add_run_options(
        sweep,
        {
            "--strategy": "the strategy spec to sweep (NAME or NAME:key=value,... without the swept parameter); "
            "repeat to sweep several; required",
            "--reference": "the strategy spec the delta columns compare with (default: the first sweep point)",
        },
    )
    score = command(
        "score",
        _score,
        "recompute a run's metrics from its traces.jsonl",
        "Recompute summary.csv, summary.md and adoption.md of RUN_DIR from traces.jsonl, without generating. "
        "A run whose strategies drafted (flare_direct, adaptive) also gets triggers.csv: every probability "
        "trigger scored again on the recorded drafts, its AUROC and the share of drafts it would fire on at "
        "each threshold of a grid (margin and entropy need a run with --record-topk K).",
    )
    _add_scoring_options(score)
    score.add_argument(
        "--by",
        action="append",
        metavar="FIELD",
        help="also break the results down by a probe metadata field (e.g. difficulty, hops); "
        "writes breakdown_FIELD.csv; repeatable",
    )
    _add_scoring_options(
        command(
            "report",
            _report,
            "rebuild a run's summary and report.html from its traces.jsonl",
            "Score RUN_DIR again from traces.jsonl (as `score`) and write report.html: one self-contained "
            "page (no network) with the table, the adoption tables, column definitions, configuration, plots "
            "and a trace viewer. Works on a partial run too.",
        )
    )
    agree = command(
        "agreement",
        _agreement,
        "measure a faithfulness method's agreement with hand-labelled claims",
        "Judge every claim of a split of the labelled claims (probes/faithfulness/claims.jsonl: supported "
        "paraphrases and hard negatives over shipped corpora and a corpus of its own) with the offline method, or "
        "with a judge endpoint (--judge openai:MODEL, scored with ragas's faithfulness metric: supported when every "
        "statement it draws is), and print accuracy, the recall of unsupported claims and of supported paraphrases, "
        "and the share right per kind of claim. The test split is the one reports quote.",
    )
    agree.add_argument(
        "--split", choices=("test", "dev", "all"), default="test", help="which claims to judge (default: test)"
    )
    _add_judge_options(agree)
    agree.add_argument(
        "--claims",
        metavar="FILE",
        help="a labelled-claims file of your own, in the same format (default: the shipped one)",
    )
    agree.add_argument("--limit", type=int, metavar="N", help="judge only the first N claims of the split")
    agree.add_argument("--errors", action="store_true", help="also list the claims the method got wrong")
    init = command(
        "init",
        _init,
        "set a repository up to run the bench on its own probes",
        "Write into DIR (default: the current folder), keeping any file that exists: bench/ with a test "
        "module that hands collection to flarebench (so `pytest bench` runs here), an example probe set "
        "with a README, CI jobs to copy (GitHub Actions, GitLab CI), and flarebench.toml holding the run "
        "options' defaults.",
    )
    init.add_argument("dir", nargs="?", default=".", metavar="DIR", help="the repository's root (default: .)")
    return ap


def _with_settings(args: argparse.Namespace) -> None:
    """Fill the run options not given on the command line from the config file, then the defaults
    (sweep's own: no --reference means its first point), and note where each value came from."""
    from flarebench.bench import settings

    own = {"reference": None} if args.func is _sweep else None
    try:
        values, args.option_sources = settings.resolve(vars(args), settings.load(), own)
    except settings.SettingsError as e:
        raise UserError(str(e)) from None
    for dest, value in values.items():
        setattr(args, dest, value)


def _load_plugins(refs: list[str] | None, sources: dict[str, str] | None) -> None:
    from flarebench.bench.settings import locate
    from flarebench.strategies import plugins

    try:
        plugins.load_all(refs)
    except plugins.PluginError as e:
        raise UserError(locate(str(e), sources or {}, "--plugin")) from None


def _freeze_imports() -> None:
    """Import what scoring and the report use, then move every object made so far into the garbage
    collector's permanent generation. The imported modules' objects live as long as the process;
    without this, every full collection walks them again (about 15% of a short scripted run's CPU)."""
    import flarebench.bench.html  # noqa: F401 (pandas and the scorers with it; matplotlib loads when a plot is drawn)
    import flarebench.bench.session  # noqa: F401

    gc.freeze()


def _parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line parsed; an option the command does not take is refused with that command's
    usage (not the top level's) and the option it was probably meant to be."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command = parser.commands[args.command]
        flags = [flag for action in command._actions for flag in action.option_strings]
        close = [
            m for u in unknown if u.startswith("-") for m in difflib.get_close_matches(u.split("=")[0], flags, n=1)
        ]
        hint = f" (did you mean {close[0]}?)" if close else ""
        for flag in (u.split("=")[0] for u in unknown if u.startswith("--")):
            # Another command's option (sweep --budget): which commands take it, not a near miss.
            if owners := [
                name
                for name, other in parser.commands.items()
                if name != args.command and any(flag in a.option_strings for a in other._actions)
            ]:
                hint = f" ({flag} is an option of {', '.join(sorted(owners))})"
                break
        if args.command == "sweep" and any(u.split("=")[0] == "--values" for u in unknown):
            hint = " (sweep takes its values in --param NAME=V1,V2,...; --param NAME --values V1,V2 is calibrate's)"
        command.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
    return args


def _say(message: str) -> None:
    """The one line a command ends with, on stderr; a key an endpoint's error quoted is redacted."""
    from flarebench.strategies.http_client import redact_secrets

    print(f"flarebench: {redact_secrets(message)}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    gated = bool(getattr(args, "gate", None) or getattr(args, "save_baseline", None))
    hint = resume_hint(gated)
    if args.func in (_score, _report):  # it runs no probe: nothing to resume
        hint = "each file it writes is replaced whole, never half-written; run the same command to write them all"
    try:
        with sigterm_interrupts():  # a cancelled CI job stops the run as Ctrl-C does
            if args.func in (_run, _compare, _sweep, _calibrate):
                _with_settings(args)
            _load_plugins(args.plugin, getattr(args, "option_sources", None))
            if args.func in (_run, _compare, _sweep, _calibrate, _score, _report):
                _freeze_imports()  # after the settings and plugins: a mistake there fails before the imports
            code = args.func(args)
            sys.stdout.flush()  # inside the try: a reader gone away (`| head`) surfaces here, not at exit
        return code
    except (UserError, WriteError) as e:  # a result that cannot be written is left as it was
        _say(str(e))
        return 2
    except ScorerError as e:  # a plugin's scorer failed on the traces: the run stops; fixed, it resumes
        _say(f"{e}; {getattr(e, 'stop_note', f'fix the scorer: {hint}')}")
        return 2
    except Terminated as e:
        _say(f"{e}; {getattr(e, 'stop_note', hint)}")
        return TERMINATED_EXIT
    except KeyboardInterrupt as e:
        _say(f"interrupted; {getattr(e, 'stop_note', hint)}")
        return 130
    except LMUnavailable as e:  # the LM server went away: the run stopped, resumable
        _say(f"{e}; {resume_hint(gated, e)}")
        return 3
    except BrokenPipeError:  # the reader went away (`| head`): not the user's mistake, no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
