"""Calibration on a dev split (bench/calibrate.py): goals, the split, the knobs, and the search,
with real strategies answering through a scripted LM."""

import json
import math
import re
from dataclasses import asdict

import pandas as pd
import pytest

from flarebench.bench.calibrate import (
    CalibrationError,
    Goal,
    _best,
    budget_plans,
    calibrate,
    calibration_lines,
    calibration_table,
    check_goal_fits,
    flat_lines,
    grid_specs,
    infeasible_lines,
    knob_of,
    missed_lines,
    parse_goal,
    parse_values,
    split,
    unreached_lines,
)
from flarebench.bench.report import summary_frame
from flarebench.probes.load import Probe
from flarebench.strategies.registry import parse_spec
from tests.scripted import ScriptedLM, ScriptedRetriever

# -- goals -----------------------------------------------------------------------------------------


def test_a_target_and_a_budget_are_parsed_with_f1_the_default_objective():
    assert parse_goal("retrieval_rate=0.5", None, "--target") == Goal("retrieval_rate", "=", 0.5)
    budget = parse_goal("retrieval_rate <= 0.3", None, "--budget")
    assert budget == Goal("retrieval_rate", "<=", 0.3, "f1")
    assert parse_goal("lm_calls_per_q>=2", "em", "--budget").objective == "em"
    # A long-answer column (optional: only runs with long probes have it) is a goal like any other,
    # and an objective whose lower values are better is minimised.
    long = parse_goal("retrieval_rate<=0.3", "incomplete_or_wrong_rate", "--budget")
    assert long == Goal("retrieval_rate", "<=", 0.3, "incomplete_or_wrong_rate", lower=True)
    assert long.describe() == "min incomplete_or_wrong_rate with retrieval_rate<=0.3"
    assert parse_goal("fact_recall>=0.5", None, "--budget").lower is False


def test_the_best_point_within_budget_follows_the_objectives_direction():
    seen = {
        0: {"retrieval_rate": 0.1, "f1": 0.2, "incomplete_rate": 0.6},
        1: {"retrieval_rate": 0.2, "f1": 0.4, "incomplete_rate": 0.2},
        2: {"retrieval_rate": 0.9, "f1": 0.9, "incomplete_rate": 0.0},  # over budget
    }
    assert _best(seen, parse_goal("retrieval_rate<=0.5", "f1", "--budget")) == 1
    assert _best(seen, parse_goal("retrieval_rate<=0.5", "incomplete_rate", "--budget")) == 1
    seen[1]["incomplete_rate"] = 0.9  # now point 0 leaves fewer answers incomplete
    assert _best(seen, parse_goal("retrieval_rate<=0.5", "incomplete_rate", "--budget")) == 0


@pytest.mark.parametrize(
    ("text", "objective", "message"),
    [
        ("retrieval_rate", None, "expected METRIC=VALUE"),
        ("retrieval_rate=half", None, "expected METRIC=VALUE"),
        ("retreival_rate=0.5", None, "'retreival_rate' is not a summary column"),
        ("retrieval_rate<=0.5", "f2", "'f2' is not a summary column"),
        ("retrieval_rate=0.5", "f1", "--objective needs a budget"),
        ("tokens_rel_blended<=2", None, "tokens_rel_blended compares with other strategies, which a dev point"),
        ("retrieval_rate<=0.5", "f1_delta", "--objective: f1_delta compares with other strategies"),
        ("retrieval_rate<=0.5", "helped", "--objective: helped compares with other strategies"),
        ("retrieval_rate<=0.5", "faithfulness_method", "--objective: faithfulness_method describes a row, it is no"),
        ("retrieval_rate<=0.5", "tool_calls_parsed_per_q", "--objective: tool_calls_parsed_per_q has no better dir"),
        ("strategy=1", None, "--target: strategy describes a row, it is no figure to aim at or to bound"),
        ("cached_share<=0.5", None, "--target: cached_share describes a row"),
        (
            "latency_p50_warm_s=0.1",
            None,
            "latency_p50_warm_s is measured on answers from the cache, and dev points run",
        ),
        ("retrieval_rate=1.5", None, "--target: retrieval_rate lies within 0 and 1, got 1.5"),
        ("incomplete_or_wrong_rate<=30", None, "incomplete_or_wrong_rate lies within 0 and 1, got 30"),  # 30%
    ],
)
def test_a_bad_goal_is_one_line_naming_the_option(text, objective, message):
    with pytest.raises(CalibrationError, match=message) as e:
        parse_goal(text, objective, "--target")
    assert "\n" not in str(e.value)


def test_a_goal_measures_how_far_a_figure_misses_it():
    assert Goal("retrieval_rate", "=", 0.5).miss(0.62) == pytest.approx(0.12)
    assert Goal("retrieval_rate", "<=", 0.5, "f1").miss(0.4) == 0.0
    assert Goal("retrieval_rate", "<=", 0.5, "f1").miss(0.7) == pytest.approx(0.2)
    assert Goal("f1", ">=", 0.5, "f1").miss(0.3) == pytest.approx(0.2)
    assert math.isnan(Goal("retrieval_rate", "=", 0.5).miss(math.nan))


# -- the split -------------------------------------------------------------------------------------


def test_the_split_is_seeded_disjoint_complete_and_keeps_the_probe_order():
    ids = [f"p{i:02d}" for i in range(50)]
    dev, test = split(ids, 0.3, seed=0)
    assert (len(dev), len(test)) == (15, 35)
    assert sorted(dev + test) == ids and not set(dev) & set(test)
    assert dev == sorted(dev) and test == sorted(test)
    assert split(ids, 0.3, seed=0) == (dev, test)
    assert split(ids, 0.3, seed=1) != (dev, test)


def test_the_split_leaves_one_probe_on_each_side_and_refuses_what_cannot_be_split():
    assert [len(part) for part in split(["a", "b"], 0.9, 0)] == [1, 1]
    with pytest.raises(CalibrationError, match="at least 2 probes"):
        split(["a"], 0.3, 0)
    with pytest.raises(CalibrationError, match="--dev-fraction must be between 0 and 1"):
        split(["a", "b"], 1.0, 0)


# -- knobs -----------------------------------------------------------------------------------------


def test_every_strategy_with_a_budget_declares_its_knob_and_its_direction():
    theta = knob_of("flare_direct")
    assert (theta.param, theta.rate_rises, theta.grid[0], theta.grid[-1]) == ("theta", True, 0.0, 1.0)
    entropy = knob_of("flare_direct:trigger=entropy")
    assert (entropy.param, entropy.rate_rises) == ("threshold", False)  # entropy fires high
    assert knob_of("adaptive:trigger=margin").param == "threshold"
    assert (knob_of("fixed_interval").param, knob_of("fixed_interval").rate_rises) == ("interval", False)
    assert knob_of("flare_instruct").param == "search_bias"
    for fixed in ("single_time", "no_retrieval", "fixed_interval:mode=sentence", "flare_direct:trigger=self_check"):
        assert knob_of(fixed) is None, fixed


def test_a_spec_that_sets_its_knob_runs_as_given():
    assert knob_of("flare_direct:theta=1") is None
    assert knob_of("flare_direct:threshold=0.3") is None  # min_prob's threshold is theta
    assert knob_of("adaptive:threshold=0.2") is None


def test_a_budget_comparison_calibrates_the_knobs_and_runs_reference_and_bounds_as_given():
    plans = budget_plans(["flare_direct:trigger=entropy", "adaptive", "fixed_interval"], "single_time")
    assert list(plans) == [
        "no_retrieval",
        "flare_direct:trigger=entropy",
        "adaptive",
        "fixed_interval",
        "single_time",
        "flare_direct:theta=1",
    ]
    as_given = [spec for spec, knob in plans.items() if knob is None]
    assert as_given == ["no_retrieval", "single_time", "flare_direct:theta=1"]


def test_another_parameter_needs_its_values_and_is_searched_as_a_grid():
    with pytest.raises(CalibrationError, match="its budget knob is theta; give --values"):
        knob_of("flare_direct", "beta")
    knob = knob_of("flare_direct", "beta", [0.2, 0.4])
    assert (knob.param, knob.grid, knob.rate_rises) == ("beta", (0.2, 0.4), None)


# -- the search, with synthetic dev figures ---------------------------------------------------------


def counting(rate, f1=lambda v: 0.0):
    """A measure from the grid value (read back from the spec) to figures, counting its calls."""
    calls = []

    def measure(spec):
        value = float(spec.rpartition("=")[2])
        calls.append(value)
        return {"retrieval_rate": rate(value), "f1": f1(value)}

    return measure, calls


@pytest.mark.parametrize("target", [0.0, 0.13, 0.5, 0.77, 0.99, 1.0])
def test_bisection_lands_within_one_grid_step_of_a_monotone_target(target):
    measure, calls = counting(lambda v: v**2)  # rises with theta, not linearly
    cal = calibrate("flare_direct", knob_of("flare_direct"), Goal("retrieval_rate", "=", target), measure)
    exact = math.sqrt(target)
    assert cal.method == "bisection"
    assert abs(cal.value - exact) <= 0.1 + 1e-9
    # The closer of the two neighbours: no grid value is nearer the target.
    assert all(
        abs(cal.dev["retrieval_rate"] - target) <= abs(v**2 - target) + 1e-12 for v in knob_of("flare_direct").grid
    )
    assert len(calls) <= 6 < 11  # about log2(11) + 2 points, not the whole grid
    assert len(set(calls)) == len(calls)  # no point run twice


@pytest.mark.parametrize(
    ("rate", "feasible"), [(lambda v: 0.1 + v / 5, False), (lambda v: 0.6 + v / 5, False), (lambda v: v, True)]
)
def test_a_target_beyond_every_figure_run_on_dev_is_infeasible(rate, feasible):
    measure, _ = counting(rate)
    cal = calibrate("flare_direct", knob_of("flare_direct"), Goal("retrieval_rate", "=", 0.5), measure)
    assert cal.feasible is feasible  # run.json's `feasible` says whether the target was within reach


def test_bisection_follows_a_falling_rate():
    measure, _ = counting(lambda h: max(0.0, 1.0 - h / 4))  # entropy: a higher threshold fires less
    cal = calibrate(
        "flare_direct:trigger=entropy",
        knob_of("flare_direct:trigger=entropy"),
        Goal("retrieval_rate", "=", 0.5),
        measure,
    )
    assert (cal.method, cal.value, cal.chosen) == ("bisection", 2.0, "flare_direct:trigger=entropy,threshold=2")


def test_a_non_monotone_dev_rate_falls_back_to_the_whole_grid():
    measure, calls = counting(lambda v: {0.0: 0.0, 0.5: 0.9}.get(round(v, 1), 0.45 if v < 0.5 else 0.6))
    cal = calibrate("flare_direct", knob_of("flare_direct"), Goal("retrieval_rate", "=", 0.5), measure)
    assert cal.method == "grid" and len(calls) == 11
    assert cal.dev["retrieval_rate"] in (0.45, 0.6) and abs(cal.dev["retrieval_rate"] - 0.5) == pytest.approx(0.05)


def test_an_objective_under_a_budget_takes_the_best_value_within_it():
    measure, calls = counting(lambda v: v, f1=lambda v: {0.3: 0.6, 0.8: 0.9}.get(round(v, 1), 0.2))
    cal = calibrate("flare_direct", knob_of("flare_direct"), Goal("retrieval_rate", "<=", 0.5, "f1"), measure)
    assert (cal.method, cal.value, cal.feasible, len(calls)) == ("grid", 0.3, True, 11)


def test_no_value_within_the_budget_is_said_and_the_closest_chosen():
    measure, _ = counting(lambda v: 0.6 + v / 10)
    cal = calibrate("flare_direct", knob_of("flare_direct"), Goal("retrieval_rate", "<=", 0.5, "f1"), measure)
    assert (cal.value, cal.feasible) == (0.0, False)


def test_a_metric_missing_everywhere_cannot_be_calibrated():
    measure, _ = counting(lambda v: math.nan)
    with pytest.raises(CalibrationError, match="missing at every theta"):
        calibrate("flare_direct", knob_of("flare_direct"), Goal("retrieval_rate", "=", 0.5), measure)


# -- the search, with flare_direct answering through a scripted LM ----------------------------------

# Ten probes; probe i drafts one sentence whose least likely token has p = 0.05 + 0.1 i, so at
# theta the gate fires on the probes with p <= theta: the dev retrieval rate rises with theta.
LOWEST = [0.05 + 0.1 * i for i in range(10)]
PROBES = [Probe(id=f"p{i}", question=f"Who is {i}?", answers=["Bea Tull"], gold_doc_ids=["d1"]) for i in range(10)]


def scripted_measure(spec):
    strategy = parse_spec(spec)
    traces = []
    for probe, low in zip(PROBES, LOWEST):
        script = [([" So", " the answer is", " Bea Tull", "."], [0.99, 0.99, low, 0.99], "stop")]
        trace = strategy.run(probe.question, ScriptedLM(script), ScriptedRetriever([["d1", "d2", "d3"]]))
        trace.probe_id, trace.strategy = probe.id, spec
        traces.append(trace)
    summary = summary_frame(traces, {p.id: p for p in PROBES})
    return summary.iloc[0].to_dict()


@pytest.mark.parametrize("target", [0.2, 0.43, 0.5, 0.9])
def test_flare_direct_through_a_scripted_lm_is_calibrated_to_the_target_rate(target):
    cal = calibrate("flare_direct", knob_of("flare_direct"), Goal("retrieval_rate", "=", target), scripted_measure)
    crossing = min(v for v in knob_of("flare_direct").grid if sum(p <= v for p in LOWEST) / 10 >= target)
    assert cal.method == "bisection"
    assert abs(cal.value - crossing) <= 0.1 + 1e-9
    assert abs(cal.dev["retrieval_rate"] - target) <= 0.1 + 1e-9
    assert cal.dev["retrieval_rate"] == sum(p <= cal.value for p in LOWEST) / 10


# -- the table -------------------------------------------------------------------------------------


def _calibrated_to_half(**study):
    """flare_direct calibrated on the scripted dev figures to retrieval_rate=0.5, and its study record."""
    cal = calibrate("flare_direct", knob_of("flare_direct"), Goal("retrieval_rate", "=", 0.5), scripted_measure)
    goal = {"metric": "retrieval_rate", "op": "=", "value": 0.5}
    return cal, {"goal": goal, "tolerance": 0.1, "calibration": [cal.record()], **study}


def test_the_table_shows_dev_and_test_figures_and_flags_a_miss_beyond_the_tolerance():
    cal, study = _calibrated_to_half()
    test = scripted_measure(cal.chosen)
    summary = pd.DataFrame(
        [{**test, "strategy": cal.chosen, "retrieval_rate": 0.75}, {**test, "strategy": "single_time"}]
    )
    table = calibration_table(summary, study)
    first = table.iloc[0]
    assert (first["strategy"], first["calibrated"]) == ("flare_direct", f"theta={cal.value:g}")
    assert first["dev_retrieval_rate"] == cal.dev["retrieval_rate"] and first["test_retrieval_rate"] == 0.75
    assert first["off_by"] == pytest.approx(0.25) and first["missed"] == True  # noqa: E712
    assert pd.isna(table.iloc[1]["calibrated"]) and pd.isna(table.iloc[1]["missed"])
    assert pd.isna(table.iloc[1]["off_by"])  # single_time had no goal: its figure is test_retrieval_rate
    [line] = missed_lines(table, study)
    assert line.startswith("flare_direct (theta=0.5) missed retrieval_rate=0.5 on test: retrieval_rate 0.75")
    assert "missed on dev already" not in line  # dev was near the goal: the test part moved
    # A choice already off the goal on dev (the grid jumped past it) is not blamed on the test part.
    study["calibration"] = [{**cal.record(), "dev": {**cal.dev, "retrieval_rate": 0.97}}]
    [line] = missed_lines(calibration_table(summary, study), study)
    assert line.endswith(
        "against 0.97 on dev (tolerance 0.1); it missed on dev already, where no value of the grid came nearer: "
        "calibrate again with finer --values around it to come nearer"
    )


def test_a_strategy_that_ran_part_of_the_test_probes_gets_no_verdict_yet():
    # A run stopped among the test runs: its figures over 2 of 8 probes say nothing of the goal yet.
    from flarebench.bench.calibrate import calibration_lines

    cal, study = _calibrated_to_half(test_probe_ids=[f"p{i}" for i in range(8)])
    summary = pd.DataFrame([{**scripted_measure(cal.chosen), "strategy": cal.chosen, "retrieval_rate": 0.0, "n": 2}])
    table = calibration_table(summary, study)
    assert table.iloc[0]["missed"] is None and pd.isna(table.iloc[0]["off_by"])
    assert calibration_lines(table, study) == [
        "flare_direct: 2 of 8 test probes run so far, so its test figures are partial and whether it met the goal "
        "is not known yet; run the same command to finish it"
    ]
    finished = calibration_table(summary.assign(n=8), study)
    assert finished.iloc[0]["missed"] is True and not finished.attrs["unfinished"]


def test_the_tolerance_is_absolute_on_a_share_and_relative_on_any_other_column():
    assert Goal("retrieval_rate", "=", 0.5).allowed(0.1) == pytest.approx(0.1)
    assert Goal("prompt_tokens_per_q", "<=", 1000.0, "f1").allowed(0.1) == pytest.approx(100.0)  # 10% of it
    cal = {"base": "flare_direct", "param": "theta", "value": 0.4, "chosen": "flare_direct:theta=0.4",
           "dev": {"prompt_tokens_per_q": 950.0}, "points": []}  # fmt: skip
    study = {"goal": asdict(Goal("prompt_tokens_per_q", "<=", 1000.0, "f1")), "calibration": [cal], "tolerance": 0.1}
    for test, missed in ((1050.0, False), (1150.0, True)):  # 50 tokens over: within 100; 150 over: not
        summary = pd.DataFrame([{"strategy": cal["chosen"], "prompt_tokens_per_q": test, "f1": 0.1}])
        assert calibration_table(summary, study).iloc[0]["missed"] is missed


def test_a_budget_no_value_met_on_dev_is_called_infeasible_in_the_findings():
    points = [{"value": v, "spec": f"flare_direct:theta={v}", "prompt_tokens_per_q": t, "f1": 0.1}
              for v, t in ((0.0, 900.0), (0.4, 1200.0))]  # fmt: skip
    cal = {"base": "flare_direct", "param": "theta", "value": 0.0, "chosen": "flare_direct:theta=0",
           "dev": {"prompt_tokens_per_q": 900.0}, "points": points, "feasible": False}  # fmt: skip
    study = {"goal": asdict(Goal("prompt_tokens_per_q", "<=", 100.0, "f1")), "calibration": [cal]}
    summary = pd.DataFrame([{"strategy": "flare_direct:theta=0", "prompt_tokens_per_q": 950.0, "f1": 0.1}])
    assert calibration_lines(calibration_table(summary, study), study)[0] == (
        "flare_direct: no theta met max f1 with prompt_tokens_per_q<=100 on dev (infeasible): theta=0, the "
        "closest, was chosen (prompt_tokens_per_q 900.00 on dev)"
    )
    assert infeasible_lines({**study, "calibration": [{**cal, "feasible": True}]}) == []


def test_a_budget_choice_that_rests_on_the_tie_break_is_said():
    def study(f1s):
        points = [{"value": v, "spec": f"flare_direct:theta={v}", "retrieval_rate": r, "f1": f}
                  for v, r, f in zip((0.0, 0.2, 0.4), (0.0, 0.2, 0.6), f1s)]  # fmt: skip
        cal = {"base": "flare_direct", "param": "theta", "value": 0.0, "points": points}
        goal = asdict(Goal("retrieval_rate", "<=", 0.3, "f1"))
        return {"goal": goal, "calibration": [cal], "dev_probe_ids": ["p1"]}

    [line] = flat_lines(study([0.0, 0.0, 0.5]))  # within the budget (0.0, 0.2): both 0
    assert line == (
        "flare_direct: every theta within the budget gave the same f1 on dev (0.000, 1 dev probes): "
        "theta=0 was chosen for retrieving least, not for its f1 (a larger dev part, --dev-fraction or --limit, "
        "may tell them apart)"
    )
    assert flat_lines(study([0.0, 0.1, 0.5])) == []  # the objective decided
    tied = study([0.0, 0.0, 0.5])
    for point in tied["calibration"][0]["points"][:2]:
        point["retrieval_rate"] = 0.0  # and they retrieved as much: the knob's direction decided
    assert (
        "theta=0 was chosen as the one the knob makes retrieve least (each retrieved as much on dev)"
        in (flat_lines(tied)[0])
    )


def test_a_tie_in_objective_and_rate_goes_to_the_value_the_knob_makes_retrieve_least():
    # An entropy threshold retrieves less as it rises: among ties, the highest, farthest from
    # firing on every draft (as theta=0 is for min_prob), not the one next to the values that fire.
    goal = Goal("retrieval_rate", "<=", 0.3, "f1")
    rate = lambda h: 1.0 if h < 0.5 else 0.0  # noqa: E731
    measure, _ = counting(rate, f1=lambda h: 0.0)
    cal = calibrate("flare_direct:trigger=entropy", knob_of("flare_direct:trigger=entropy"), goal, measure)
    assert cal.value == max(knob_of("flare_direct:trigger=entropy").grid)
    measure, _ = counting(lambda v: 0.0 if v < 0.5 else 1.0, f1=lambda v: 0.0)
    assert calibrate("flare_direct", knob_of("flare_direct"), goal, measure).value == 0.0


def test_the_calibration_table_leads_with_the_objective_and_shows_the_long_answer_columns():
    row = {"strategy": "flare_direct:theta=0.4", "retrieval_rate": 0.25, "f1": 0.0, "em": 0.0,
           "fact_recall": 0.5, "incomplete_or_wrong_rate": 0.5, "wrong_version_rate": 0.0,
           "incomplete_rate": 0.5, "lm_calls_per_q": 3.0}  # fmt: skip
    cal = {"base": "flare_direct", "param": "theta", "value": 0.4, "chosen": row["strategy"],
           "dev": {"retrieval_rate": 0.3}, "points": []}  # fmt: skip
    goal = parse_goal("retrieval_rate<=0.3", "incomplete_rate", "--budget")
    table = calibration_table(pd.DataFrame([row]), {"goal": asdict(goal), "calibration": [cal]})
    assert list(table.columns) == [
        "strategy", "calibrated", "dev_retrieval_rate", "test_retrieval_rate", "off_by", "missed",
        "incomplete_rate", "f1", "em", "fact_recall", "incomplete_or_wrong_rate", "wrong_version_rate",
        "lm_calls_per_q",
    ]  # fmt: skip
    assert table.iloc[0]["calibrated"] == "theta=0.4" and table.iloc[0]["fact_recall"] == 0.5


# -- the command line refuses what it cannot calibrate, before loading anything --------------------


def test_a_gate_from_the_config_file_is_named_by_its_line_when_a_calibration_refuses_it(capsys, tmp_path, monkeypatch):
    from flarebench.bench.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "flarebench.toml").write_text('limit = 4\ngate = "bench/baseline.json"\n')
    argv = ["calibrate", "--strategy", "flare_direct", "--target", "retrieval_rate=0.5"]
    assert main([*argv, "--report-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"flarebench: {tmp_path / 'flarebench.toml'}:2: gate: --gate gates a plain run; calibrated runs are not gated\n"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["calibrate", "--strategy", "single_time", "--target", "retrieval_rate=0.5"],
            "single_time: nothing to calibrate",
        ),
        (["calibrate", "--strategy", "flare_direct"], "calibrate needs one goal"),
        (
            ["calibrate", "--strategy", "flare_direct", "--target", "retrieval_rate=0.5", "--reference", "ircot"],
            "--reference ircot: not a strategy of this run (flare_direct): add it with --strategy",
        ),
        (
            ["calibrate", "--strategy", "flare_direct", "--target", "retrieval_rate=0.5", "--budget", "f1>=0.2"],
            "calibrate takes one goal, --target retrieval_rate=0.5 or --budget f1>=0.2: give one",
        ),
        # A goal given to the other option would run as the other kind (a target bisected, a cap gridded).
        (
            ["calibrate", "--strategy", "flare_direct", "--budget", "retrieval_rate=0.3"],
            "--budget takes a cap or a floor (METRIC<=VALUE, METRIC>=VALUE); to hit retrieval_rate=0.3, give --target",
        ),
        (
            ["calibrate", "--strategy", "flare_direct", "--target", "retrieval_rate<=0.3"],
            "--target takes METRIC=VALUE, a figure to hit; retrieval_rate<=0.3 is a budget: give --budget",
        ),
        (["calibrate", "--target", "retrieval_rate=0.5"], "calibrate needs --strategy SPEC"),
        (
            ["calibrate", "--strategy", "flare_direct", "--target", "retrieval_rate=0.5", "--values", "a,b"],
            "--values: expected numbers",
        ),
        # A repeated goal was the last one silently: refused as sweep's --param.
        (
            ["calibrate", "--strategy", "flare_direct", "--target", "retrieval_rate=0.5", "--target", "f1=0.4"],
            "--target is given 2 times; a calibration has one goal",
        ),
        (
            ["calibrate", "--strategy", "flare_direct", "--budget", "retrieval_rate<=0.3", "--budget", "em<=0.2"],
            "--budget is given 2 times; a calibration has one goal",
        ),
        (
            ["compare", "--strategy", "all", "--budget", "retrieval_rate=0.5", "--budget", "retrieval_rate=0.3"],
            "--budget is given 2 times; compare calibrates to one budget",
        ),
        (["compare", "--strategy", "all", "--objective", "f1"], "--objective needs --budget"),
        # No price: no dev point's cost is measured (refused once the LM's name is known).
        (
            ["calibrate", "--strategy", "flare_direct", "--budget", "cost_per_q<=0.01"],
            "cost_per_q: the LM scripted has no price, so no cost is measured (give --prices FILE with its price)",
        ),
        # Two spellings of one configuration, named as the user gave them (not as their grid points).
        (
            [
                "calibrate",
                "--strategy",
                "flare_direct",
                "--strategy",
                "flare_direct:trigger=min_prob",
                "--target",
                "retrieval_rate=0.5",
            ],
            "flare_direct:trigger=min_prob is flare_direct again (the same strategy and parameters): give it once",
        ),
        (
            ["compare", "--strategy", "single_time", "--strategy", "single_time:k=3", "--budget", "retrieval_rate=0.5"],
            "single_time:k=3 is single_time again",
        ),
        (["compare", "--strategy", "all", "--budget", "speed=2"], "--budget: 'speed' is not a summary column"),
        (
            ["compare", "--strategy", "all", "--budget", "retrieval_rate=0.5", "--gate", "x.json"],
            "calibrated runs are not gated",
        ),
        (
            ["calibrate", "--strategy", "flare_direct", "--target", "retrieval_rate=0.5", "--save-baseline", "b.json"],
            "calibrated runs are not gated",
        ),
        (
            ["compare", "--strategy", "all", "--budget", "retrieval_rate<=0.5", "--objective", "speed"],
            "--objective: 'speed' is not a summary column",
        ),
        *(
            (
                ["calibrate", "--strategy", "flare_direct", "--target", "retrieval_rate=0.5", *extra],
                message,
            )
            for extra, message in [
                (["--dev-fraction", "2"], "--dev-fraction must be between 0 and 1, got 2.0"),
                (["--dev-fraction", "nan"], "--dev-fraction must be between 0 and 1, got nan"),
                (["--budget-tolerance", "-1"], "--budget-tolerance must be a number >= 0, got -1.0"),
                (["--limit", "1"], "calibration needs at least 2 probes (a dev and a test part), got 1"),
            ]
        ),
    ],
)
def test_the_command_line_refuses_in_one_line(argv, message, capsys, tmp_path, monkeypatch, scripted_lm):
    from flarebench.bench.cli import main

    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--report-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "run").exists()  # refused before the run folder is opened


def test_calibrate_help_leaves_out_the_gate_options_it_refuses(capsys):
    from flarebench.bench.cli import GATE_FLAGS, main

    with pytest.raises(SystemExit):
        main(["calibrate", "--help"])
    text = capsys.readouterr().out
    shown = [flag for flag in GATE_FLAGS if f"{flag} " in text or f"{flag}]" in text]
    assert "--budget-tolerance" in text and not shown
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = capsys.readouterr().out
    assert all(flag in text for flag in GATE_FLAGS)  # a plain comparison may be gated


# -- the run folder's status ---------------------------------------------------------------------


@pytest.mark.slow
def test_a_grid_point_that_is_the_always_bound_runs_once(tmp_path, scripted_lm):
    # docs/calibration.md's comparison of triggers at a matched budget: flare_direct:trigger=min_prob's
    # grid holds theta=1, which is the always bound's configuration; neither is the user's twin.
    import json

    from tests.scripted import run_cli

    run_dir = tmp_path / "run"
    argv = ["compare", "--strategy", "flare_direct:trigger=min_prob", "--strategy", "single_time"]
    code, out, err = run_cli(*argv, "--budget", "retrieval_rate=0.5", "--limit", "4", "--report-dir", str(run_dir))
    assert code == 0, err
    assert json.loads((run_dir / "run.json").read_text())["status"] == "complete"
    # flare_direct chosen at theta=1, the always bound's spec: one row, listed once.
    argv = ["compare", "--strategy", "flare_direct", "--strategy", "single_time"]
    code, out, err = run_cli(
        *argv, "--budget", "retrieval_rate=1", "--limit", "4", "--report-dir", str(tmp_path / "all")
    )
    assert code == 0, err
    specs = json.loads((tmp_path / "all" / "run.json").read_text())["study"]["specs"]
    assert len(specs) == len(set(specs)) and len(pd.read_csv(tmp_path / "all" / "summary.csv")) == len(specs) + 1


def test_a_choice_made_on_dev_points_whose_probes_raised_errors_is_said(tmp_path, scripted_lm, monkeypatch):
    # A server's 500s on some dev probes leave the value chosen on the others: said as it is chosen,
    # and in summary.md, not only in the test part's closing line.
    import json

    from flarebench.bench.calibrate import DEV_FRACTION, split
    from flarebench.strategies.lm import LMError
    from tests.scripted import run_cli

    dev, _ = split([p.id for p in scripted_lm.probes[:6]], DEV_FRACTION, 0)
    real, failing = scripted_lm._complete, next(p.question for p in scripted_lm.probes if p.id == dev[0])

    def server_error(request):
        if failing in request.prompt.dynamic:
            raise LMError("the LM server answered HTTP 500")
        return real(request)

    monkeypatch.setattr(scripted_lm, "_complete", server_error)
    run_dir = tmp_path / "run"
    argv = ["calibrate", "--strategy", "flare_direct", "--target", "retrieval_rate=0.5", "--limit", "6"]
    code, out, err = run_cli(*argv, "--report-dir", str(run_dir))
    study = json.loads((run_dir / "run.json").read_text())["study"]
    assert study["dev_probe_ids"] == dev
    line = (
        f"flare_direct: up to 1 of the {len(study['dev_probe_ids'])} dev probes raised an error at a theta value run, "
        "so its choice rests on the others (each error is in its trace; the same command with --retry-errors runs "
        "them again)"
    )
    assert f"flarebench: {line}" in err.splitlines() and line in (run_dir / "summary.md").read_text()
    assert all(p["errors"] == 1 for p in study["calibration"][0]["points"])


@pytest.mark.slow
def test_a_calibration_is_not_complete_until_its_chosen_points_ran(tmp_path, scripted_lm, monkeypatch):
    # A calibration killed between two dev points (SIGTERM from a CI timeout) must not leave a
    # run.json saying "complete" over an empty summary.
    import json

    from flarebench.bench import calibrate as module
    from tests.scripted import run_cli

    run_dir, seen, real = tmp_path / "run", [], module.calibrate

    def watched(spec, knob, goal, measure):
        def measured(s):
            row = measure(s)
            seen.append(json.loads((run_dir / "run.json").read_text())["status"])
            return row

        return real(spec, knob, goal, measured)

    monkeypatch.setattr(module, "calibrate", watched)
    argv = ["calibrate", "--strategy", "flare_direct", "--target", "retrieval_rate=0.5", "--limit", "4"]
    code, out, err = run_cli(*argv, "--report-dir", str(run_dir))
    assert code == 0, err
    assert seen and set(seen) == {"partial"}
    assert json.loads((run_dir / "run.json").read_text())["status"] == "complete"


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["dev", "test"])
def test_a_calibration_stopped_says_where_it_stopped(tmp_path, scripted_lm, monkeypatch, phase):
    # Stopped among the dev points, the summary says the calibrated strategies have not run the test
    # probes (not that `n` tells how far each got); stopped among the test runs, it keeps the
    # calibration chosen on dev.
    from flarebench.bench.session import BenchSession
    from tests.scripted import run_cli

    run_dir, real, labels = tmp_path / "run", BenchSession.run, []

    def run(self, spec, probes=None, label=None, backends=None):
        labels.append(label)
        if label.startswith(phase) and len([x for x in labels if x.startswith(phase)]) == 2:
            raise KeyboardInterrupt
        return real(self, spec, probes, label, backends)

    monkeypatch.setattr(BenchSession, "run", run)
    argv = ["compare", "--strategy", "flare_direct", "--strategy", "single_time", "--budget", "retrieval_rate<=0.5"]
    code, out, err = run_cli(*argv, "--no-bounds", "--limit", "4", "--report-dir", str(run_dir))
    assert code == 130, err
    md = (run_dir / "summary.md").read_text()
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    stopped_on_dev = "It stopped while calibrating on the dev probes, before the calibrated strategies ran"
    assert (stopped_on_dev in md) == (phase == "dev")
    assert ("## Calibration" in md) == (phase == "test") == (run_dir / "calibration.csv").exists()
    if phase == "test":
        chosen = json.loads((run_dir / "run.json").read_text())["study"]["calibration"][0]["chosen"]
        assert chosen.startswith("flare_direct:theta=")
        assert f"\nflare_direct,,{chosen.partition(':')[2]}," in (run_dir / "calibration.csv").read_text()
    code, out, err = run_cli(*argv, "--no-bounds", "--limit", "4", "--report-dir", str(run_dir))
    assert code == 0 and json.loads((run_dir / "run.json").read_text())["status"] == "complete", err


@pytest.mark.slow
def test_a_time_goal_is_measured_on_dev_without_the_dev_cache(tmp_path, scripted_lm):
    # A cache hit takes the time of a lookup: a latency budget judged on the dev cache would pick
    # whichever points happened to be cached.
    from flarebench.bench.session import DEV_CACHE
    from tests.scripted import run_cli

    assert parse_goal("latency_p95_s<=4", "fact_recall", "--budget").timed
    assert parse_goal("retrieval_rate<=0.5", "ttfs_p95_s", "--budget").timed
    assert not parse_goal("retrieval_rate<=0.5", "f1", "--budget").timed
    calls = []
    real = scripted_lm._complete
    scripted_lm._complete = lambda request: calls.append(request) or real(request)
    argv = ["calibrate", "--strategy", "flare_direct", "--limit", "4"]
    code, out, err = run_cli(*argv, "--budget", "latency_p95_s<=10", "--report-dir", str(tmp_path / "timed"))
    assert code == 0, err
    assert "dev points run without the dev cache: max f1 with latency_p95_s<=10 is a time, measured cold" in err
    assert not (tmp_path / "timed" / DEV_CACHE).exists()
    cold = len(calls)
    calls.clear()
    code, out, err = run_cli(*argv, "--budget", "retrieval_rate<=0.5", "--report-dir", str(tmp_path / "rate"))
    assert code == 0, err
    assert "without the dev cache" not in err and (tmp_path / "rate" / DEV_CACHE).is_dir()
    assert re.search(r"values run on dev; dev retrieval_rate [\d.]+, f1 [\d.]+\)", err), err  # the objective too
    assert len(calls) < cold  # every grid point drafts the same first sentences: the cache answers them


# -- goals refused before anything runs ------------------------------------------------------------

#: The columns within 0 and 1 whose definitions did not say "0-1", so that a goal on them was
#: neither range-checked nor given the absolute tolerance.
SHARES_UNDECLARED = (
    "em_lenient",
    "f1_lenient",
    "recall_first_hop",
    "recall_later_hops",
    "incomplete_token_cap",
    "incomplete_step_cap",
    "incomplete_no_answer",
    "incomplete_abstain",
    "incomplete_empty",
    "gate_auroc",
    "gate_fire_right",
    "gate_fire_wrong",
)


@pytest.mark.parametrize("column", SHARES_UNDECLARED)
def test_a_goal_on_any_column_within_0_and_1_is_refused_outside_it_and_gets_an_absolute_tolerance(column):
    with pytest.raises(CalibrationError, match=f"^--target: {column} lies within 0 and 1, got 30$"):
        parse_goal(f"{column}=30", None, "--target")
    assert Goal(column, "=", 0.5).allowed(0.1) == pytest.approx(0.1)  # not 10% of 0.5


def test_a_budget_is_a_cap_or_a_floor_whichever_way_its_column_is_better():
    # A floor on a lower-is-better column and a cap on a higher-is-better one are constraints like
    # any other (retrieve for at least a fifth of the sentences; the cheapest point with f1 >= 0.3).
    floor = parse_goal("retrieval_rate>=0.2", None, "--budget")
    assert floor == Goal("retrieval_rate", ">=", 0.2, "f1") and floor.within(0.3) and not floor.within(0.1)
    assert parse_goal("f1>=0.3", "retrieval_rate", "--budget") == Goal("f1", ">=", 0.3, "retrieval_rate", lower=True)
    assert parse_goal("em<=0.2", "retrieval_rate", "--budget").op == "<="


@pytest.mark.parametrize(
    ("text", "objective", "message"),
    [
        ("retrieval_rate=>0.2", None, "--budget: expected METRIC=VALUE, METRIC<=VALUE or METRIC>=VALUE, got"),
        ("f1<=nan", "retrieval_rate", "--budget: 'nan' is not a finite number"),
        ("retrieval_rate=inf", None, "--budget: 'inf' is not a finite number"),
        ("prompt_tokens_per_q>=-Infinity", None, "--budget: '-Infinity' is not a finite number"),
        ("prompt_tokens_per_q<=-5", "f1", "--budget: prompt_tokens_per_q cannot be negative, got -5"),
        ("latency_p95_s=-0.5", None, "--budget: latency_p95_s cannot be negative, got -0.5"),
        # The objective bounded by itself: a cap makes the search a target, a floor bounds nothing.
        ("f1<=0.3", "f1", "--budget: f1 is the objective too; bound another column"),
        ("incomplete_rate>=0.1", "incomplete_rate", "--budget: incomplete_rate is the objective too"),
        ("f1>=0.3", None, "--budget: f1 is the objective too (the default objective)"),
        # A comparing column is refused as such, whatever its value.
        ("helped=30", None, "--budget: helped compares with other strategies"),
    ],
)
def test_a_goal_value_that_cannot_be_met_or_bounds_its_objective_is_refused(text, objective, message):
    with pytest.raises(CalibrationError, match="^" + re.escape(message)) as e:
        parse_goal(text, objective, "--budget")
    assert "\n" not in str(e.value)


def test_a_goal_on_a_long_answer_column_needs_long_probes():
    from flarebench.probes.load import load_probe_set

    short, long = load_probe_set("phantomwiki"), load_probe_set("phantomwiki_long")
    for goal, column in [
        (parse_goal("incomplete_or_wrong_rate<=0.3", None, "--budget"), "incomplete_or_wrong_rate"),
        (parse_goal("retrieval_rate<=0.3", "fact_recall", "--budget"), "fact_recall"),
        (parse_goal("wrong_version_rate=0.1", None, "--target"), "wrong_version_rate"),
        (parse_goal("incomplete_facts_rate<=0.5", None, "--budget"), "incomplete_facts_rate"),
    ]:
        with pytest.raises(CalibrationError, match=f"^{column} needs long probes; phantomwiki has none$"):
            check_goal_fits(goal, short)
        check_goal_fits(goal, long)
    check_goal_fits(parse_goal("retrieval_rate<=0.3", "f1", "--budget"), short)


def test_a_budget_comparison_with_nothing_to_calibrate_is_refused():
    for bounds in (True, False):
        with pytest.raises(CalibrationError, match="^--budget: nothing to calibrate: single_time, no_retrieval have"):
            budget_plans(["single_time", "no_retrieval"], "single_time", bounds=bounds)
    # The reference alone may carry the knob: it is calibrated as the others.
    plans = budget_plans(["single_time", "no_retrieval"], "flare_direct", bounds=False)
    assert plans["flare_direct"] is not None


def test_a_spec_setting_the_calibrated_parameter_is_refused_in_calibrations_words():
    with pytest.raises(CalibrationError) as e:
        grid_specs("flare_direct:k=3", knob_of("flare_direct", "k", [2, 4]))
    assert str(e.value) == "flare_direct:k=3: sets k itself, which calibrate chooses; leave it out of the spec"
    with pytest.raises(CalibrationError, match=r"sets threshold \(the same as theta\) itself"):
        grid_specs("flare_direct:threshold=0.3", knob_of("flare_direct", "theta", [0.2, 0.4]))
    assert grid_specs("flare_direct:k=3", knob_of("flare_direct", "beta", [0.2])) == ["flare_direct:k=3,beta=0.2"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "--values: no value given in ''; leave --values out for the knob's own grid"),
        (" , ", "--values: no value given"),
        ("0.2,,0.4", "--values: an empty value in '0.2,,0.4'"),
        ("a,b", "--values: expected numbers separated by commas, got 'a,b'"),
        ("0.2,nan", "--values: expected finite numbers, got '0.2,nan'"),
        ("0.2,0.20", "--values: a value is given twice in '0.2,0.20'"),
    ],
)
def test_a_values_list_that_would_change_the_grid_silently_is_refused(text, message):
    with pytest.raises(CalibrationError, match="^" + re.escape(message)):
        parse_values(text)


def test_a_values_list_is_read_in_order():
    assert parse_values(None) is None
    assert parse_values(" 0.4, 0.2 ,1") == [0.4, 0.2, 1.0]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["calibrate", "--strategy", "flare_direct", "--target", "incomplete_no_answer=30"], "lies within 0 and 1"),
        (
            ["calibrate", "--strategy", "flare_direct", "--budget", "incomplete_or_wrong_rate<=0.3"],
            "incomplete_or_wrong_rate needs long probes; phantomwiki has none",
        ),
        (
            [
                "calibrate",
                "--strategy",
                "flare_direct",
                "--objective",
                "fact_recall",
                "--budget",
                "retrieval_rate<=0.3",
            ],
            "fact_recall needs long probes; phantomwiki has none",
        ),
        (
            ["compare", "--strategy", "flare_direct", "--strategy", "single_time", "--budget", "fact_recall>=0.5"],
            "fact_recall needs long probes; phantomwiki has none",
        ),
        (["calibrate", "--strategy", "flare_direct", "--budget", "f1<=inf"], "'inf' is not a finite number"),
        (
            ["calibrate", "--strategy", "flare_direct", "--objective", "f1", "--budget", "f1<=0.3"],
            "f1 is the objective too",
        ),
        (
            ["calibrate", "--strategy", "flare_direct", "--objective", "f1", "--budget", "prompt_tokens_per_q<=-5"],
            "prompt_tokens_per_q cannot be negative, got -5",
        ),
        (
            ["compare", "--strategy", "single_time", "--strategy", "no_retrieval", "--budget", "retrieval_rate=0.5"],
            "--budget: nothing to calibrate: single_time, no_retrieval have no budget knob",
        ),
        (
            ["calibrate", "--strategy", "flare_direct", "--target", "retrieval_rate=0.5", "--values", ","],
            "--values: no value given",
        ),
        (
            ["calibrate", "--strategy", "flare_direct", "--target", "retrieval_rate=0.5", "--values", "0.2,0.20"],
            "--values: a value is given twice",
        ),
        (
            ["calibrate", "--strategy", "flare_direct:k=3", "--param", "k", "--values", "2,4"]
            + ["--target", "retrieval_rate=0.5"],
            "flare_direct:k=3: sets k itself, which calibrate chooses; leave it out of the spec",
        ),
    ],
)
def test_the_command_line_refuses_a_goal_it_cannot_meet_before_the_run_folder_opens(
    argv, message, capsys, tmp_path, monkeypatch, scripted_lm
):
    from flarebench.bench.cli import main

    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--limit", "8", "--report-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "run").exists()


# -- what a calibration says about its choice ------------------------------------------------------


def test_a_target_beyond_every_dev_figure_is_said():
    target = Goal("retrieval_rate", "=", 0.5)

    def study(rates, chosen, goal=target):
        points = [{"value": v, "spec": f"flare_instruct:search_bias={v:g}", "retrieval_rate": r}
                  for v, r in zip((0.0, 5.0, 10.0), rates)]  # fmt: skip
        cal = {"base": "flare_instruct", "param": "search_bias", "value": chosen, "points": points,
               "dev": {"retrieval_rate": rates[-1]}}  # fmt: skip
        return {"goal": asdict(goal), "calibration": [cal]}

    assert unreached_lines(study([0.0, 0.0, 0.0], 10.0)) == [
        "flare_instruct: retrieval_rate=0.5 is out of reach on dev, where the knob changed nothing: every search_bias "
        "run gave retrieval_rate 0.000 (search_bias 0 to 10, 3 values run); search_bias=10 was chosen, but every "
        "value run did the same there"
    ]
    assert unreached_lines(study([0.1, 0.2, 0.3], 10.0)) == [
        "flare_instruct: retrieval_rate=0.5 lies beyond both ends of the grid on dev (retrieval_rate 0.100 to 0.300 "
        "over search_bias 0 to 10, 3 values run): search_bias=10, the nearest, was chosen (retrieval_rate 0.300 on dev)"
    ]
    assert unreached_lines(study([0.1, 0.4, 0.6], 5.0)) == []  # the target lies between two values
    assert unreached_lines(study([0.5, 0.5, 0.5], 0.0)) == []  # met, flat as the knob is
    assert unreached_lines(study([0.0, 0.0, 0.0], 0.0, Goal("retrieval_rate", "<=", 0.5, "f1"))) == []
    table = pd.DataFrame({"missed": []})
    assert calibration_lines(table, study([0.1, 0.2, 0.3], 10.0)) == unreached_lines(study([0.1, 0.2, 0.3], 10.0))


@pytest.mark.slow
def test_a_knob_that_changes_nothing_on_dev_is_said_in_the_notes(tmp_path, scripted_lm):
    # The scripted LM never searches, whatever flare_instruct's search_bias: no value reaches the target.
    from tests.scripted import run_cli

    argv = ["calibrate", "--strategy", "flare_instruct", "--target", "retrieval_rate=0.5", "--limit", "8"]
    code, out, err = run_cli(*argv, "--report-dir", str(tmp_path / "run"))
    assert code == 0, err
    notes = (tmp_path / "run" / "summary.md").read_text()
    assert "flare_instruct: retrieval_rate=0.5 is out of reach on dev, where the knob changed nothing" in notes


@pytest.mark.slow
def test_a_calibrated_reference_is_compared_with_at_its_chosen_point(tmp_path, scripted_lm):
    # The reference ran as flare_direct:theta=..., never as flare_direct: the delta columns were empty.
    import json

    from tests.scripted import run_cli

    run_dir = tmp_path / "run"
    argv = ["compare", "--budget", "retrieval_rate=0.5", "--strategy", "flare_direct", "--strategy", "single_time"]
    code, out, err = run_cli(
        *argv, "--reference", "flare_direct", "--no-bounds", "--limit", "8", "--report-dir", str(run_dir)
    )
    assert code == 0, err
    [cal] = json.loads((run_dir / "run.json").read_text())["study"]["calibration"]
    summary = pd.read_csv(run_dir / "summary.csv")
    strategies = summary[summary["bound"].fillna("") != "oracle"]  # the oracle row is no strategy
    assert list(strategies["strategy"]) == [cal["chosen"], "single_time"]
    assert set(strategies["delta_reference"]) == {cal["chosen"]}
    assert strategies["f1_delta"].notna().all()
    assert json.loads((run_dir / "run.json").read_text())["scoring"]["reference"] == cal["chosen"]
    assert "not in this run" not in out


@pytest.mark.slow
def test_a_calibrated_comparison_rescores_to_the_summary_it_wrote(tmp_path, scripted_lm):
    # Its dev points ran first (the always bound among them): the summary's rows keep the run's order.
    from tests.scripted import run_cli

    run_dir = tmp_path / "run"
    argv = ["compare", "--strategy", "flare_direct", "--strategy", "single_time", "--budget", "retrieval_rate=0.5"]
    code, out, err = run_cli(*argv, "--limit", "6", "--report-dir", str(run_dir))
    assert code == 0, err
    written = {name: (run_dir / name).read_text() for name in ("summary.csv", "summary.md", "calibration.csv")}
    assert run_cli("score", str(run_dir))[0] == 0
    assert {name: (run_dir / name).read_text() for name in written} == written
    # Rescored against the calibrated strategy as given: its chosen point, the test rows' spec.
    import json

    info = json.loads((run_dir / "run.json").read_text())
    [cal] = info["study"]["calibration"]
    assert run_cli("score", str(run_dir), "--reference", "flare_direct")[0] == 0
    assert json.loads((run_dir / "run.json").read_text())["scoring"]["reference"] == cal["chosen"]
    # A dev point that is no row of the summary is refused, naming the rows (not every dev point).
    dev_only = next(p["spec"] for p in cal["points"] if p["spec"] not in info["study"]["specs"])
    code, out, err = run_cli("score", str(run_dir), "--reference", dev_only)
    assert code == 2 and f"not a strategy of this run ({', '.join(info['study']['specs'])})" in err


def test_the_calibration_plot_draws_the_objective_against_the_goals_metric():
    from flarebench.bench.plots import calibration_axes

    assert calibration_axes({"goal": {"metric": "retrieval_rate", "op": "=", "value": 0.5}}) == ("retrieval_rate", "f1")
    budget = {"metric": "lm_calls_per_q", "op": "<=", "value": 3, "objective": "em"}
    assert calibration_axes({"goal": budget}) == ("lm_calls_per_q", "em")
    # A budget on F1 with the retrieval rate as the objective; a target on F1: never F1 against F1.
    floor = {"metric": "f1", "op": ">=", "value": 0.3, "objective": "retrieval_rate", "lower": True}
    assert calibration_axes({"goal": floor}) == ("f1", "retrieval_rate")
    assert calibration_axes({"goal": {"metric": "f1", "op": "=", "value": 0.3}}) == ("f1", "retrieval_rate")
