"""Regression gates (bench/gate.py): tolerances and the comparison as pure functions, baseline files,
the gate through the console script and through `pytest bench` with a scripted LM (fast), and end to
end with the real model in subprocesses (marked `model`)."""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
import pytest_benchmark.plugin

from flarebench.bench import cli
from flarebench.bench.config import config_difference
from flarebench.bench.gate import (
    GateError,
    Gating,
    always_gated,
    apply_overrides,
    compare,
    default_tolerances,
    load_baseline,
    validate_tolerances,
    with_ratios,
)
from flarebench.strategies.prompts import CLOSED_BOOK
from flarebench.strategies.registry import names
from tests.scripted import ScriptedLM

pytest_plugins = ["pytester"]

# Register the built-in strategies now: in-process pytest runs (pytester) drop the modules they
# import afterwards, and a strategy imported again would be registered twice.
names()

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------------------------
# The comparison, as pure functions
# --------------------------------------------------------------------------------------------


#: A summary row holding every metric default_tolerances() gates.
BASE = {
    "n": 50,
    "errors": 0,
    "em": 0.5,
    "f1": 0.6,
    "retrievals_per_q": 1.0,
    "lm_calls_per_q": 2.0,
    "prompt_tokens_per_q": 300.0,
    "completion_tokens_per_q": 20.0,
    "latency_p95_ratio": 2.0,
}


def test_a_run_that_meets_the_baseline_passes_and_a_worse_one_breaks_it():
    base = dict(BASE)
    assert compare(base, dict(base), default_tolerances()) == []
    assert (
        compare(base, {**base, "em": 0.46, "lm_calls_per_q": 2.2, "latency_p95_ratio": 2.5}, default_tolerances()) == []
    )
    worse = {**base, "em": 0.4, "f1": 0.6, "lm_calls_per_q": 2.5, "latency_p95_ratio": 2.6}
    assert [b.line() for b in compare(base, worse, default_tolerances())] == [
        "em: baseline 0.5, new 0.4, allowed >= 0.45 (max_drop 0.05)",
        "lm_calls_per_q: baseline 2, new 2.5, allowed <= 2.2 (max_rise_rel 0.1)",
        "latency_p95_ratio: baseline 2, new 2.6, allowed <= 2.5 (max_rise_rel 0.25)",
    ]
    # Improvements never break a gate.
    better = {**base, "em": 1.0, "f1": 1.0, "lm_calls_per_q": 1.0, "latency_p95_ratio": 1.0, "n": 60}
    assert compare(base, better, default_tolerances()) == []


def test_fewer_probes_scored_or_more_errors_break_the_default_gate():
    assert [b.line() for b in compare(BASE, {**BASE, "n": 49, "errors": 1}, default_tolerances())] == [
        "n: baseline 50, new 49, allowed >= 50 (max_drop 0)",
        "errors: baseline 0, new 1, allowed <= 0 (max_rise 0)",
    ]


def test_a_gated_metric_missing_on_either_side_is_a_breach():
    # e.g. a judge whose every reply failed to parse: faithfulness is NaN, which must not pass.
    gated = {"faithfulness": {"max_drop": 0.05}, "recall": None}
    lines = [b.line() for b in compare({"faithfulness": 0.8}, {"faithfulness": float("nan")}, gated)]
    assert lines == ["faithfulness: missing in the new run (baseline 0.8)"]
    assert [b.line() for b in compare({"faithfulness": None}, {"faithfulness": 0.7}, gated)] == [
        "faithfulness: missing in the baseline (new 0.7)"
    ]
    assert [b.line() for b in compare({}, {}, gated)] == ["faithfulness: missing in the baseline and in the new run"]
    # A metric that is not gated may be missing.
    assert compare({"faithfulness": 0.8, "recall": None}, {"faithfulness": 0.8}, gated) == []


def test_bounds_edge_cases():
    # A bound met exactly is met despite float rounding (0.4 - 0.05 = 0.35000000000000003).
    assert compare({"em": 0.4}, {"em": 0.35}, {"em": {"max_drop": 0.05}}) == []
    # A relative rise from 0 allows nothing: a strategy that never retrieved now retrieves.
    rise = {"retrievals_per_q": default_tolerances()["retrievals_per_q"]}
    (breach,) = compare({"retrievals_per_q": 0.0}, {"retrievals_per_q": 1.0}, rise)
    assert breach.line() == "retrievals_per_q: baseline 0, new 1, allowed <= 0 (max_rise_rel 0.1)"
    # Two bounds on one side: the looser applies.
    both = {"prompt_tokens_per_q": {"max_rise_rel": 0.1, "max_rise": 50}}
    assert compare({"prompt_tokens_per_q": 100.0}, {"prompt_tokens_per_q": 140.0}, both) == []
    assert compare({"prompt_tokens_per_q": 1000.0}, {"prompt_tokens_per_q": 1090.0}, both) == []
    assert compare({"prompt_tokens_per_q": 1000.0}, {"prompt_tokens_per_q": 1110.0}, both)[0].bound == 1100
    # Relative drop; null (not gated).
    assert compare({"f1": 0.5}, {"f1": 0.44}, {"f1": {"max_drop_rel": 0.1}})[0].bound == 0.45
    assert compare({"em": 1.0}, {"em": 0.0}, {"em": None}) == []


def test_latency_ratio_is_against_the_reference_of_the_same_run():
    row = {"strategy": "single_time", "em": 0.5, "recall": float("nan"), "latency_p50_s": 3.0, "latency_p95_s": 6.0}
    ref = {"strategy": "no_retrieval", "latency_p50_s": 1.5, "latency_p95_s": 2.0}
    metrics = with_ratios(row, ref)
    assert metrics["latency_p95_ratio"] == 3.0 and metrics["latency_p50_ratio"] == 2.0
    assert metrics["em"] == 0.5 and metrics["recall"] is None and metrics["latency_p95_s"] == 6.0
    assert with_ratios(row, None)["latency_p95_ratio"] is None
    assert with_ratios(row, {**ref, "latency_p95_s": 0.0})["latency_p95_ratio"] is None


def test_tolerance_overrides_from_the_command_line():
    out = apply_overrides(
        default_tolerances(),
        [
            "em=0.2",
            "f1=max_drop_rel:0.3",
            "latency_p95_ratio=off",
            "recall=max_drop:0.1",
            "lm_calls_per_q=max_rise:1,max_rise_rel:0.2",
        ],
    )
    assert out["em"] == {"max_drop": 0.2} and out["f1"] == {"max_drop_rel": 0.3}
    assert out["latency_p95_ratio"] is None and out["recall"] == {"max_drop": 0.1}
    assert out["lm_calls_per_q"] == {"max_rise": 1.0, "max_rise_rel": 0.2}
    assert default_tolerances()["em"] == {"max_drop": 0.05}  # the defaults are not touched
    for bad, message in [
        ("emm=0.1", "--tolerance emm=0.1: unknown metric 'emm' (did you mean 'em'"),
        ("em", "expected METRIC=KIND:VALUE"),
        ("recall=0.1", "recall has no bound; name the kind, e.g. recall=max_drop:0.1"),
        ("em=max_dorp:0.1", "--tolerance em=max_dorp:0.1: unknown kind 'max_dorp'"),
        ("em=max_drop:x", "--tolerance em=max_drop:x: max_drop must be a number >= 0, got 'x'"),
        ("em=max_drop:-1", "must be a number >= 0"),
    ]:
        with pytest.raises(GateError, match=message.replace(".", r"\.").replace("(", r"\(")):
            apply_overrides(default_tolerances(), [bad])
    # The same metric twice: the last would silently win.
    with pytest.raises(GateError, match=r"^--tolerance em=max_drop:0: em given twice; give each metric once"):
        apply_overrides(default_tolerances(), ["em=max_drop:0.5", "em=max_drop:0"])


def test_tolerances_in_a_file_are_validated():
    assert validate_tolerances({"em": {"max_drop": 1}, "f1": None}) == {"em": {"max_drop": 1.0}, "f1": None}
    # A metric of a plugin not loaded is unknown too: the line says what loads it.
    with pytest.raises(
        GateError, match=r"tolerances\.speed: unknown metric 'speed' \(a plugin's metric needs --plugin"
    ):
        validate_tolerances({"speed": {"max_drop": 1}})
    with pytest.raises(GateError, match=r"tolerances\.em: expected \{KIND: value\} or null"):
        validate_tolerances({"em": 0.05})
    with pytest.raises(GateError, match=r"tolerances\.em: max_drop must be a number >= 0, got True"):
        validate_tolerances({"em": {"max_drop": True}})


def test_a_bound_must_hold_the_side_where_a_metric_gets_worse():
    # The directions come from the scorers' declarations: an improvement never fails.
    for bad, message in [
        ("em=max_rise:0.1", "max_rise would fail an improvement: a higher em is better; bound it with max_drop"),
        ("lm_calls_per_q=max_drop_rel:0.1", "a lower lm_calls_per_q is better; bound it with max_rise or max_rise_rel"),
        ("cached_share=max_rise:1", "'cached_share' is not gateable"),
        ("latency_p50_s=0.2", "e.g. latency_p50_s=max_rise:0.2 (kinds: max_rise, max_rise_rel)"),
    ]:
        with pytest.raises(GateError, match=message.replace(".", r"\.").replace("(", r"\(").replace(")", r"\)")):
            apply_overrides(default_tolerances(), [bad])
    with pytest.raises(GateError, match=r"tolerances\.delta_reference: 'delta_reference' is not gateable"):
        validate_tolerances({"delta_reference": None})
    with pytest.raises(GateError, match=r"tolerances\.latency_p95_ratio: max_drop would fail an improvement"):
        validate_tolerances({"latency_p95_ratio": {"max_drop": 1}})


def test_the_default_tolerances_declared_by_the_scorers():
    assert list(default_tolerances().items()) == [
        ("n", {"max_drop": 0}),
        ("errors", {"max_rise": 0}),
        ("em", {"max_drop": 0.05}),
        ("f1", {"max_drop": 0.05}),
        ("retrievals_per_q", {"max_rise_rel": 0.10}),
        ("lm_calls_per_q", {"max_rise_rel": 0.10}),
        ("prompt_tokens_per_q", {"max_rise_rel": 0.10}),
        ("completion_tokens_per_q", {"max_rise_rel": 0.10}),
        ("latency_p95_ratio", {"max_rise_rel": 0.25}),
    ]
    assert always_gated() == {"n": {"max_drop": 0}, "errors": {"max_rise": 0}}


def test_the_smoke_baselines_command_remakes_its_tolerances():
    # The README tells a maintainer to remake bench/baselines/smoke.json with the command the file
    # records: its --tolerance options must give the tolerances the file holds (a hand-loosened
    # bound that the command still sets tighter would come back on the next remake).
    doc = json.loads((ROOT / "bench" / "baselines" / "smoke.json").read_text())
    words = shlex.split(doc["command"])
    overrides = [words[i + 1] for i, word in enumerate(words) if word == "--tolerance"]
    assert overrides and apply_overrides(default_tolerances(), overrides) == doc["tolerances"]


def _fingerprint(k=3, source="phantomwiki", limit=3):
    return {
        "probes": {"name": "phantomwiki", "hash": "h", "limit": limit},
        "lm": {"name": "llamacpp:smollm2", "sha256": "s"},
        "retriever": {"name": "bm25s"},
        "strategies": {"no_retrieval": {"k": 3, "max_tokens": 128}, "single_time": {"k": k, "max_tokens": 128}},
        "prompts_sha256": {"no_retrieval": "a", "single_time": "b"},
    }


def test_config_difference_names_the_first_differing_field_of_the_gated_specs():
    specs = ["no_retrieval", "single_time"]
    assert config_difference(_fingerprint(), _fingerprint(), specs) is None
    assert config_difference(_fingerprint(), _fingerprint(limit=5), specs) == "probes.limit (was 3, now 5)"
    assert config_difference(_fingerprint(), _fingerprint(k=5), specs) == "strategies.single_time.k (was 3, now 5)"
    # Specs of the baseline that this run does not gate are not compared.
    assert config_difference(_fingerprint(), _fingerprint(k=5), ["no_retrieval"]) is None
    other = _fingerprint()
    other["prompts_sha256"]["no_retrieval"] = "changed"
    assert config_difference(_fingerprint(), other, specs) == "prompts_sha256.no_retrieval (was 'a', now 'changed')"


# --------------------------------------------------------------------------------------------
# Baseline files
# --------------------------------------------------------------------------------------------


def _baseline_doc():
    return {
        "version": 1,
        "config": _fingerprint(),
        "reference": {"spec": "no_retrieval", "latency_p50_s": 1.0, "latency_p95_s": 1.0},
        "metrics": {"single_time": {"em": 0.5, "f1": 0.5, "recall": None}},
        "tolerances": dict(default_tolerances()),
    }


@pytest.mark.parametrize(
    "content, problem",
    [
        (None, "baseline not found"),
        ('{"version": 1, "metrics": {', "not a flarebench baseline: not valid JSON (Expecting"),
        (
            '{"name": "flarebench", "dependencies": []}',
            'not a flarebench baseline (expected a JSON object with "version"',
        ),
        ("[1, 2]", "not a flarebench baseline"),
        (lambda d: {**d, "version": 2}, "baseline version 2 is not supported (this flarebench reads the number 1)"),
        (lambda d: {**d, "version": "1"}, "baseline version '1' (a str) is not supported (this flarebench reads the "),
        (lambda d: {**d, "metrics": {"single_time": {"em": "high"}}}, "metrics.single_time.em: not a number: 'high'"),
        (
            lambda d: {**d, "metrics": {"single_time": {"em": -5}}},
            "metrics.single_time.em: expected a share from 0 to 1",
        ),
        (
            lambda d: {**d, "metrics": {"single_time": {"n": -5}}},
            "metrics.single_time.n: expected a count (a whole number >= 0), got -5",
        ),
        (
            lambda d: {**d, "metrics": {"single_time": {"errors": 0.5}}},
            "metrics.single_time.errors: expected a count (a whole number >= 0), got 0.5",
        ),
        (lambda d: {**d, "metrics": {}}, "metrics: holds no strategy"),
        (lambda d: {**d, "tolerances": {"em": {"drop": 1}}}, "tolerances.em: unknown kind 'drop'"),
        (lambda d: {k: v for k, v in d.items() if k != "config"}, "config: missing"),
        (lambda d: {**d, "config": {"probes": {}}}, "config.lm: missing or not an object"),
        (lambda d: {**d, "reference": "no_retrieval"}, 'reference: expected {"spec": SPEC, ...}'),
        (lambda d: {**d, "reference": {"spec": "nosuch:x=1"}}, "reference.spec: unknown strategy 'nosuch'"),
        (
            lambda d: {**d, "reference": {"spec": "no_retrieval", "latency_p95_s": "x"}},
            "reference.latency_p95_s: not a number: 'x'",
        ),
        (
            lambda d: {**d, "metrics": {"flare_direct:theta=abc": {"em": 0.5}}},
            "metrics.flare_direct:theta=abc: flare_direct:theta=abc: theta must be",
        ),
        (  # edited by hand: the last em would loosen the gate unseen
            lambda d: json.dumps(d).replace('"tolerances": {', '"tolerances": {"em": {"max_drop": 0.9}, ', 1),
            "not valid JSON (key 'em' given twice in one object)",
        ),
    ],
)
def test_a_bad_baseline_file_is_one_clear_line(tmp_path, content, problem):
    path = tmp_path / "baseline.json"
    if callable(content):
        doc = content(_baseline_doc())
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    elif content is not None:
        path.write_text(content)
    with pytest.raises(GateError) as err:
        load_baseline(path)
    message = str(err.value)
    assert re.match(rf"{re.escape(str(path))}(:1)?: ", message) and problem in message and "\n" not in message


def test_a_bad_field_of_a_baseline_is_named_by_its_line(tmp_path):
    # Found by its keys, not a dotted path: a spec has dots of its own, and each key is looked for
    # after the one before (em is a key of every strategy and of the tolerances).
    doc = _baseline_doc()
    doc["metrics"] = {"single_time": {"em": 0.5}, "flare_direct:theta=0.5": {"em": 0.4, "f1": "x"}}
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(doc, indent=2))
    lines = path.read_text().splitlines()
    with pytest.raises(GateError) as err:
        load_baseline(path)
    line = next(n for n, text in enumerate(lines, 1) if '"f1": "x"' in text)
    assert str(err.value) == f"{path}:{line}: metrics.flare_direct:theta=0.5.f1: not a number: 'x'"
    doc["metrics"]["flare_direct:theta=0.5"]["f1"] = 0.4
    doc["tolerances"] = {"f1": {"max_drop": 0.1}, "em": {"max_drop": 0.1, "drop": 1}}
    path.write_text(json.dumps(doc, indent=2))
    lines = path.read_text().splitlines()
    with pytest.raises(GateError) as err:
        load_baseline(path)
    line = next(n for n, text in enumerate(lines, 1) if '"drop": 1' in text)
    assert str(err.value).startswith(f"{path}:{line}: tolerances.em: unknown kind 'drop'")


def test_a_baseline_file_that_does_not_name_n_and_errors_still_gates_them(tmp_path):
    path = tmp_path / "baseline.json"
    doc = _baseline_doc()
    doc["metrics"]["single_time"].update(n=3, errors=0)
    doc["tolerances"] = {"em": {"max_drop": 0.34}}  # a baseline written before n and errors were gated
    path.write_text(json.dumps(doc))
    baseline = load_baseline(path)
    assert baseline.tolerances == {"n": {"max_drop": 0}, "errors": {"max_rise": 0}, "em": {"max_drop": 0.34}}
    gating = Gating.from_options(["single_time"], gate=str(path))
    summary = pd.DataFrame([{"strategy": "no_retrieval"}, {"strategy": "single_time", "em": 0.5, "n": 2, "errors": 1}])
    assert gating.check("single_time", summary) == [
        "n: baseline 3, new 2, allowed >= 3 (max_drop 0)",
        "errors: baseline 0, new 1, allowed <= 0 (max_rise 0)",
    ]
    # A file switches them off explicitly with null.
    doc["tolerances"] = {"em": {"max_drop": 0.34}, "n": None, "errors": None}
    path.write_text(json.dumps(doc))
    assert Gating.from_options(["single_time"], gate=str(path)).check("single_time", summary) == []


def test_a_changed_probe_set_is_refused_saying_what_changed(tmp_path):
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(_baseline_doc()))
    fp = _fingerprint()
    fp["probes"] = {**fp["probes"], "hash": "other"}
    with pytest.raises(GateError, match=r"probes\.hash \(was 'h', now 'other'\); the probe set's questions, "):
        Gating.from_options(["single_time"], gate=str(path)).bind(fp)
    with pytest.raises(GateError, match=r"save a new baseline \(--save-baseline\), or use --gate-across-configs"):
        Gating.from_options(["single_time"], gate=str(path)).bind(fp)


def test_a_baseline_says_what_it_cannot_see_when_saved_and_checked(tmp_path):
    path = tmp_path / "baseline.json"
    doc = _baseline_doc()
    doc["metrics"]["single_time"].update(n=3, errors=0, latency_p95_ratio=2.0)
    doc["tolerances"] = {"latency_p95_ratio": {"max_rise_rel": 0.25}, "n": None, "errors": None}
    path.write_text(json.dumps(doc))
    row = {**BASE, "strategy": "single_time", "em": 0.5, "f1": 0.5, "latency_p95_s": 6.0}
    reference = {"strategy": "no_retrieval", "latency_p95_s": 2.0, "errors": 0}
    summary = pd.DataFrame([{**reference, "n": 3}, {**row, "n": 3}])
    (line,) = Gating.from_options(["single_time"], gate=str(path)).check("single_time", summary)
    assert line.startswith(
        "latency_p95_ratio: baseline 2, new 3, allowed <= 2.5 (max_rise_rel 0.25) (rests on 3 probes"
    )
    assert line.endswith("(--tolerance latency_p95_ratio=max_rise_rel:1))")
    # A bound that lets the ratio double already is not advised to be loosened to that.
    doc["tolerances"]["latency_p95_ratio"] = {"max_rise": 2}
    path.write_text(json.dumps(doc))
    slower = pd.DataFrame([{**reference, "n": 3}, {**row, "n": 3, "latency_p95_s": 10.0}])
    (line,) = Gating.from_options(["single_time"], gate=str(path)).check("single_time", slower)
    assert line.startswith("latency_p95_ratio: baseline 2, new 5, allowed <= 4 (max_rise 2) (rests on 3 probes")
    assert line.endswith("gate on 20 probes or more)")
    doc["tolerances"]["latency_p95_ratio"] = {"max_rise_rel": 0.25}
    doc["metrics"]["single_time"]["n"] = 20
    path.write_text(json.dumps(doc))
    many = pd.DataFrame([{**reference, "n": 20}, {**row, "n": 20}])
    assert Gating.from_options(["single_time"], gate=str(path)).check("single_time", many) == [
        "latency_p95_ratio: baseline 2, new 3, allowed <= 2.5 (max_rise_rel 0.25)"
    ]
    # A ratio missing because every probe of the reference failed names the reference.
    failed = pd.DataFrame([{**reference, "n": 20, "errors": 20, "latency_p95_s": None}, {**row, "n": 20}])
    assert Gating.from_options(["single_time"], gate=str(path)).check("single_time", failed) == [
        "latency_p95_ratio: missing in the new run (baseline 2) (the reference no_retrieval has no "
        "latency_p95_s: 20 of its 20 probes failed)"
    ]
    saving = Gating.from_options(["single_time"], save_baseline=str(tmp_path / "new.json"))
    saving.bind(_fingerprint())
    assert saving.save(summary).endswith("; its latency_p95_ratio rests on 3 probes, so each p95 is about the " +
        "slowest probe's: one probe slowed by a busy runner moves it; gate on 20 probes or more, or loosen it " +
        "(--tolerance latency_p95_ratio=max_rise_rel:1)")  # fmt: skip
    assert saving.save(many) == f"baseline saved: {tmp_path / 'new.json'} (single_time)"
    loose = Gating.from_options(
        ["single_time"], save_baseline=str(tmp_path / "loose.json"), tolerance=["latency_p95_ratio=max_rise_rel:1"]
    )
    loose.bind(_fingerprint())
    assert loose.save(summary).endswith("; gate on 20 probes or more")
    # A gate whose quality metrics are all 0 cannot see quality drop: said when it is saved.
    zero = pd.DataFrame([{**reference, "n": 20}, {**row, "n": 20, "em": 0.0, "f1": 0.0}])
    assert saving.save(zero).endswith(
        "; em, f1 are 0 for every spec, so no drop in answer quality can break this gate: bound a metric "
        "that is above 0 too (e.g. --tolerance recall=max_drop:0.05 --tolerance faithfulness=max_drop:0.1)"
    )
    # A bound on a value the run could not compute would break every later gate: said when saved.
    unmeasured = pd.DataFrame([{**reference, "n": 20}, {**row, "n": 20, "f1": None}])
    assert saving.save(unmeasured).endswith(
        "; it holds no value for f1 for single_time, so every gate against it breaks there: drop that bound "
        "(--tolerance METRIC=off) or leave that spec out"
    )


def test_saving_over_a_baseline_names_the_specs_it_drops_and_never_overwrites_another_file(tmp_path):
    rows = pd.DataFrame([{**BASE, "strategy": s, "n": 20, "latency_p95_s": 1.0} for s in ("no_retrieval", "ircot")])
    path = tmp_path / "b.json"
    doc = _baseline_doc()
    doc["metrics"]["ircot"] = {"em": 0.1}
    path.write_text(json.dumps(doc))
    saving = Gating.from_options(["ircot"], save_baseline=str(path))
    saving.bind(_fingerprint())
    assert saving.save(rows) == (
        f"baseline saved: {path} (ircot); it replaced a baseline that also held single_time, which this file no "
        "longer gates (run them too, with --strategy, to keep them)"
    )
    assert list(json.loads(path.read_text())["metrics"]) == ["ircot"]
    again = Gating.from_options(["ircot"], save_baseline=str(path))  # the same specs: nothing dropped
    again.bind(_fingerprint())
    assert again.save(rows) == f"baseline saved: {path} (ircot)"
    for text in ("[tool.flarebench]\n", '{"name": "not a baseline"}', ""):
        other = tmp_path / "pyproject.toml"
        other.write_text(text)
        with pytest.raises(GateError, match=r"^--save-baseline .*pyproject\.toml: the file exists and is not a "):
            Gating.from_options(["ircot"], save_baseline=str(other))
        assert other.read_text() == text


def test_a_changed_spec_is_gated_across_configs_against_the_baselines_spec_of_its_strategy(tmp_path):
    path = tmp_path / "b.json"
    path.write_text(json.dumps(_baseline_doc()))  # no_retrieval (reference), single_time with k=3
    with pytest.raises(GateError, match=r"no baseline for single_time:k=5 \(it holds single_time\); .*; "
                       r"--gate-across-configs gates single_time:k=5 against its single_time$"):  # fmt: skip
        Gating.from_options(["single_time:k=5"], gate=str(path))
    gating = Gating.from_options(["single_time:k=5"], gate=str(path), gate_across_configs=True)
    assert gating.against == {"single_time:k=5": "single_time"} and gating.wanted == ["single_time:k=5"]
    run = _fingerprint()
    for part in ("strategies", "prompts_sha256"):
        run[part]["single_time:k=5"] = run[part].pop("single_time")
    run["strategies"]["single_time:k=5"]["k"] = 5
    gating.bind(run)
    assert gating.difference == "strategies.single_time:k=5.k (was 3, now 5)"
    rows = [{"strategy": "no_retrieval", "n": 3, "errors": 0, "latency_p95_s": 1.0}]
    summary = pd.DataFrame([*rows, {"strategy": "single_time:k=5", "n": 3, "errors": 0, "em": 0.2, "f1": 0.5}])
    # Against single_time's row (the test's baseline holds em and f1 only; the rest is missing there).
    assert "em: baseline 0.5, new 0.2, allowed >= 0.45 (max_drop 0.05)" in gating.check("single_time:k=5", summary)
    assert gating.record()["against"] == {"single_time:k=5": "single_time"}
    # Two specs of one strategy in the baseline: which one is meant cannot be told, so none is paired.
    doc = _baseline_doc()
    doc["metrics"]["single_time:k=1"] = {"em": 0.1}
    path.write_text(json.dumps(doc))
    with pytest.raises(GateError, match=r"no baseline for single_time:k=5 \(it holds single_time, single_time:k=1\)"):
        Gating.from_options(["single_time:k=5"], gate=str(path), gate_across_configs=True)


def test_gate_plan_runs_the_reference_first_and_the_baselines_specs_by_default(tmp_path):
    path = tmp_path / "b.json"
    doc = _baseline_doc()
    doc["metrics"]["ircot"] = {"em": 0.1}
    path.write_text(json.dumps(doc))
    gating = Gating.from_options(None, gate=str(path))
    assert gating.specs == ["no_retrieval", "single_time", "ircot"] and gating.wanted == ["single_time", "ircot"]
    gating = Gating.from_options(["ircot"], gate=str(path), tolerance=["em=0.3"])
    assert gating.specs == ["no_retrieval", "ircot"] and gating.tolerances["em"] == {"max_drop": 0.3}
    # The reference is run for its latency, but gating it needs its own baseline row.
    with pytest.raises(GateError, match=r"no baseline for no_retrieval"):
        Gating.from_options(["no_retrieval", "ircot"], gate=str(path))
    with pytest.raises(GateError, match=r"b\.json: no baseline for flare_direct \(it holds single_time, ircot\)"):
        Gating.from_options(["flare_direct"], gate=str(path))
    saving = Gating.from_options(["single_time"], save_baseline=str(tmp_path / "new.json"))
    assert saving.specs == ["no_retrieval", "single_time"] and saving.tolerances == default_tolerances()
    plain = Gating.from_options(["single_time"])
    assert not plain.active and plain.specs == ["single_time"]
    with pytest.raises(GateError, match="--tolerance applies to --gate or --save-baseline"):
        Gating.from_options(["single_time"], tolerance=["em=0.1"])
    with pytest.raises(GateError, match="--gate-across-configs applies to --gate"):
        Gating.from_options(["single_time"], save_baseline="x.json", gate_across_configs=True)


# --------------------------------------------------------------------------------------------
# Whole runs with a scripted LM (fast): the console script and `pytest bench` in-process
# --------------------------------------------------------------------------------------------


class Clock:
    """The runner's clock in these tests: it moves only when the oracle says a call took time, so
    latencies and their ratios are exact (slept delays were stretched on a busy machine, and a 25%
    latency bound then broke on tests that are not about latency)."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class OracleLM(ScriptedLM):
    """Answers the probes in ``right`` correctly and the others wrongly, each call taking ``delay``
    seconds of the runner's clock (``open_book_delay`` more when the prompt is not the closed-book
    one); ``sleep`` seconds of real time too, for timers other than the runner's."""

    def __init__(self):
        super().__init__([""])
        self.right: set[str] = set()
        self.delay = 0.1
        self.open_book_delay = 0.0
        self.sleep = 0.0
        self.clock = Clock()
        from flarebench.probes.load import load_probe_set

        self.probes = load_probe_set("phantomwiki").probes

    def _complete(self, request):
        probe = next((p for p in self.probes if p.question in request.prompt.dynamic), None)
        answer = ", ".join(probe.answers) if probe and probe.id in self.right else "Nobody"
        self.clock.now += self.delay + (self.open_book_delay if request.prompt.static != CLOSED_BOOK.static else 0.0)
        time.sleep(self.sleep)
        self.script = [f" So the answer is {answer}."]
        return super()._complete(request)


@pytest.fixture
def oracle(monkeypatch):
    lm = OracleLM()
    lm.right = {"pw-0001", "pw-0002"}
    monkeypatch.setattr("flarebench.bench.recipe.make_lm", lambda *args, **kwargs: lm)
    monkeypatch.setattr("flarebench.bench.runner.time", lm.clock)
    return lm


def run_cli(*args) -> tuple[int, str, str]:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["run", *args])
    return code, out.getvalue(), err.getvalue()


def _save(tmp_path, *extra, specs=("single_time",), limit="3"):
    baseline = tmp_path / "baseline.json"
    strategies = [a for s in specs for a in ("--strategy", s)]
    code, out, err = run_cli(
        *strategies, "--limit", limit, "--report-dir", str(tmp_path / "base"), "--save-baseline", str(baseline), *extra
    )
    assert code == 0, out + err
    assert f"baseline saved: {baseline} ({', '.join(specs)})" in out
    return baseline


def test_a_baseline_saved_again_keeps_the_tolerances_edited_in_it(tmp_path, oracle):
    baseline = _save(tmp_path)
    doc = json.loads(baseline.read_text())
    doc["tolerances"] = {**doc["tolerances"], "em": {"max_drop": 0.34}, "recall": {"max_drop": 0.05}}
    baseline.write_text(json.dumps(doc))
    options = ("--strategy", "single_time", "--limit", "3", "--save-baseline", str(baseline))
    code, out, err = run_cli(*options, "--report-dir", str(tmp_path / "again"), "--tolerance", "f1=0.2")
    assert code == 0 and "it keeps the tolerances edited in the baseline it replaced" in out, out + err
    kept = json.loads(baseline.read_text())["tolerances"]
    assert kept["em"] == {"max_drop": 0.34} and kept["recall"] == {"max_drop": 0.05}  # the team's edits
    assert kept["f1"] == {"max_drop": 0.2}  # and the command line's, over them
    # Tolerances that no longer read are said before the run, not dropped by the save.
    baseline.write_text(json.dumps({**doc, "tolerances": {"em": {"max_drop": "a lot"}}}))
    code, out, err = run_cli(*options, "--report-dir", str(tmp_path / "bad"))
    assert (
        code == 2 and err.startswith(f"flarebench: --save-baseline {baseline}:1: tolerances.em") and "mend them" in err
    )
    assert not (tmp_path / "bad").exists()


def test_a_baseline_saved_over_another_file_while_gating_keeps_that_files_tolerances(tmp_path, oracle):
    # A nightly baseline remade while the run is gated against the team's main one: the file being
    # replaced keeps its own edited bounds, not the gate's.
    gate = _save(tmp_path)
    nightly = tmp_path / "nightly.json"
    doc = json.loads(gate.read_text())
    nightly.write_text(json.dumps({**doc, "tolerances": {**doc["tolerances"], "em": {"max_drop": 0.5}}}))
    options = ("--strategy", "single_time", "--limit", "3", "--gate", str(gate), "--save-baseline", str(nightly))
    code, out, err = run_cli(*options, "--report-dir", str(tmp_path / "again"))
    assert code == 0 and "it keeps the tolerances edited in the baseline it replaced" in out, out + err
    assert json.loads(nightly.read_text())["tolerances"]["em"] == {"max_drop": 0.5}
    assert json.loads(gate.read_text())["tolerances"]["em"] == default_tolerances()["em"]  # the gate's file untouched


def test_a_baseline_not_saved_names_the_reference_once_when_it_is_gated_too(tmp_path):
    gating = Gating.from_options(["no_retrieval", "single_time"], save_baseline=str(tmp_path / "b.json"))
    assert gating.reference == "no_retrieval" and gating.wanted == ["no_retrieval", "single_time"]
    summary = pd.DataFrame([{"strategy": "no_retrieval", "errors": 2}, {"strategy": "single_time", "errors": 1}])
    assert gating.save(summary) == "baseline not saved: no_retrieval, single_time had probe errors"
    assert gating.save(summary.iloc[1:]) == "baseline not saved: no_retrieval did not run"
    assert not (tmp_path / "b.json").exists()


def test_a_baseline_of_another_flarebench_version_is_refused_saying_what_to_do(tmp_path, oracle, monkeypatch):
    from flarebench.bench import version

    baseline = _save(tmp_path)
    monkeypatch.setattr("flarebench.bench.config.version", lambda: "9.9.9")
    code, out, err = run_cli("--limit", "3", "--report-dir", str(tmp_path / "new"), "--gate", str(baseline))
    assert code == 2 and err.strip().endswith(
        f"(was '{version()}', now '9.9.9'); another flarebench version, whose changes to answers and scores CHANGES.md "
        "lists: save a new baseline (--save-baseline), or use --gate-across-configs to compare anyway"
    ), err


@pytest.mark.slow
def test_console_script_saves_a_baseline_and_gates_against_it(tmp_path, oracle):
    baseline = _save(tmp_path)
    doc = json.loads(baseline.read_text())
    assert doc["version"] == 1 and list(doc["metrics"]) == ["single_time"]  # the reference is not a gated row
    assert doc["reference"]["spec"] == "no_retrieval" and doc["tolerances"] == default_tolerances()
    assert doc["config"]["probes"]["limit"] == 3 and doc["config"]["lm"] == {"name": "scripted"}
    assert set(doc["config"]["strategies"]) == {"no_retrieval", "single_time"}
    st = doc["metrics"]["single_time"]
    assert st["em"] == pytest.approx(2 / 3) and st["lm_calls_per_q"] == 1.0 and st["retrievals_per_q"] == 1.0
    # The latency ratio is single_time's p95 over no_retrieval's p95 in the same run's summary.
    summary = {r.split(",")[0]: r.split(",") for r in (tmp_path / "base" / "summary.csv").read_text().splitlines()}
    col = summary["strategy"].index("latency_p95_s")
    ratio = float(summary["single_time"][col]) / float(summary["no_retrieval"][col])
    assert st["latency_p95_ratio"] == pytest.approx(ratio, rel=1e-4)
    assert doc["reference"]["latency_p95_s"] == pytest.approx(float(summary["no_retrieval"][col]), rel=1e-4)

    # The same run meets its baseline; run.json and gate.json record the gate.
    code, out, err = run_cli("--limit", "3", "--report-dir", str(tmp_path / "gate"), "--gate", str(baseline))
    assert code == 0, out + err
    assert f"gate {baseline} (latency reference no_retrieval): 1 passed, 0 broken" in out
    run = json.loads((tmp_path / "gate" / "run.json").read_text())
    assert run["gate"]["baseline"] == str(baseline) and run["gate"]["gated"] == ["single_time"]
    assert json.loads((tmp_path / "gate" / "gate.json").read_text())["passed"] == {"single_time": True}

    # One probe less right: EM drops by 1/3, beyond the default 0.05.
    oracle.right = {"pw-0001"}
    code, out, err = run_cli("--limit", "3", "--report-dir", str(tmp_path / "worse"), "--gate", str(baseline))
    assert code == 1
    assert f"flarebench: single_time breaks the gate {baseline}:" in err
    assert "  em: baseline 0.666667, new 0.333333, allowed >= 0.616667 (max_drop 0.05)" in err
    assert "  f1: baseline 0.666667, new 0.333333" in err
    assert "Traceback" not in err
    broken = json.loads((tmp_path / "worse" / "gate.json").read_text())["broken"]["single_time"]
    assert broken[0].startswith("em: baseline 0.666667")

    # --tolerance from the command line loosens one metric at a time.
    code, out, err = run_cli(
        "--limit", "3", "--report-dir", str(tmp_path / "loose"), "--gate", str(baseline), "--tolerance", "em=0.34"
    )
    assert code == 1 and "em:" not in err and "f1: baseline" in err
    code, out, err = run_cli(
        *("--limit", "3", "--report-dir", str(tmp_path / "looser"), "--gate", str(baseline)),
        *("--tolerance", "em=0.34", "--tolerance", "f1=off"),
    )
    assert code == 0, out + err


@pytest.mark.slow
def test_a_stricter_baseline_fails_with_one_line_per_broken_metric(tmp_path, oracle):
    baseline = _save(tmp_path)
    doc = json.loads(baseline.read_text())
    st = doc["metrics"]["single_time"]
    tokens = st["prompt_tokens_per_q"]
    st["em"], st["lm_calls_per_q"], st["prompt_tokens_per_q"] = 1.0, 0.5, tokens / 2
    baseline.write_text(json.dumps(doc))
    code, out, err = run_cli("--limit", "3", "--report-dir", str(tmp_path / "gate"), "--gate", str(baseline))
    assert code == 1
    lines = [line.strip() for line in err.splitlines() if line.startswith("  ")]
    assert lines[0] == "em: baseline 1, new 0.666667, allowed >= 0.95 (max_drop 0.05)"
    assert lines[1] == "lm_calls_per_q: baseline 0.5, new 1, allowed <= 0.55 (max_rise_rel 0.1)"
    assert lines[2] == (
        f"prompt_tokens_per_q: baseline {tokens / 2:.6g}, new {tokens:.6g}, "
        f"allowed <= {tokens / 2 * 1.1:.6g} (max_rise_rel 0.1)"
    )
    assert len(lines) == 3
    assert "failed: single_time" in err


@pytest.mark.slow
def test_latency_is_gated_as_a_ratio_to_the_reference(tmp_path, oracle):
    baseline = _save(tmp_path)
    # A uniformly slower machine: both strategies slow down, the ratio holds.
    oracle.delay = 0.25
    code, out, err = run_cli("--limit", "3", "--report-dir", str(tmp_path / "slow"), "--gate", str(baseline))
    assert code == 0, out + err
    # single_time alone gets slower: its ratio to no_retrieval rises beyond 25%.
    oracle.delay, oracle.open_book_delay = 0.1, 0.1
    code, out, err = run_cli("--limit", "3", "--report-dir", str(tmp_path / "slower"), "--gate", str(baseline))
    assert code == 1
    assert "  latency_p95_ratio: baseline " in err and "(max_rise_rel 0.25)" in err


@pytest.mark.slow
def test_a_different_configuration_is_refused_unless_asked(tmp_path, oracle):
    baseline = _save(tmp_path)
    code, out, err = run_cli("--limit", "2", "--report-dir", str(tmp_path / "g1"), "--gate", str(baseline))
    assert code == 2 and "Traceback" not in err
    assert err.strip() == (
        f"flarebench: {baseline} was made with a different configuration: probes.limit (was 3, now 2); "
        "use --gate-across-configs to compare anyway"
    )
    code, out, err = run_cli(
        "--strategy", "single_time:k=2", "--limit", "3", "--report-dir", str(tmp_path / "g2"), "--gate", str(baseline)
    )
    assert code == 2 and "no baseline for single_time:k=2 (it holds single_time)" in err
    across = ("--limit", "2", "--gate", str(baseline), "--gate-across-configs")
    code, out, err = run_cli(*across, "--report-dir", str(tmp_path / "g3"))
    assert "gate across configurations; first difference: probes.limit (was 3, now 2)" in out
    # Compared, but fewer probes scored than the baseline's is a breach of its own ...
    assert code == 1 and "  n: baseline 3, new 2, allowed >= 3 (max_drop 0)" in err
    # ... unless switched off.
    code, out, err = run_cli(*across, "--report-dir", str(tmp_path / "g4"), "--tolerance", "n=off")
    assert f"gate {baseline} (latency reference no_retrieval): 1 passed" in out, out + err
    assert code == 0
    # A changed parameter: gated against the baseline's spec of the same strategy.
    code, out, err = run_cli(
        "--strategy", "single_time:k=2", "--limit", "3", "--report-dir", str(tmp_path / "g5"),
        "--gate", str(baseline), "--gate-across-configs",
    )  # fmt: skip
    assert code == 0, out + err
    assert "first difference: strategies.single_time:k=2.k (was 3, now 2)" in out
    assert f"gate {baseline} (latency reference no_retrieval): 1 passed, 0 broken; single_time:k=2 against the " \
        "baseline's single_time" in out  # fmt: skip


@pytest.mark.slow
def test_a_gated_run_never_resumes_a_run_folder(tmp_path, oracle):
    baseline = _save(tmp_path)
    args = ["--limit", "3", "--report-dir", str(tmp_path / "base"), "--gate", str(baseline)]
    code, out, err = run_cli(*args)
    assert code == 2 and "already holds a run; --gate and --save-baseline never resume one" in err
    code, out, err = run_cli(*args, "--overwrite")
    assert code == 0, out + err
    traces = (tmp_path / "base" / "traces.jsonl").read_text().splitlines()
    assert len(traces) == 6  # a fresh run of both specs, nothing kept from the first


@pytest.mark.slow
def test_a_baseline_is_not_saved_from_a_failing_gate(tmp_path, oracle):
    baseline = _save(tmp_path)
    oracle.right = set()
    code, out, err = run_cli(
        *("--limit", "3", "--report-dir", str(tmp_path / "g"), "--gate", str(baseline)),
        *("--save-baseline", str(tmp_path / "new.json")),
    )
    assert code == 1 and "baseline not saved: single_time broke the gate" in err
    assert not (tmp_path / "new.json").exists()


@pytest.mark.slow
def test_times_from_the_cache_are_not_gated_and_not_saved(tmp_path, oracle):
    baseline = _save(tmp_path)
    cache = ("--cache", str(tmp_path / "cache"))
    code, out, err = run_cli("--limit", "3", "--report-dir", str(tmp_path / "cold"), "--gate", str(baseline), *cache)
    assert code == 0, out + err  # a cold cache: every time was the model's
    # The same run again: every answer is a lookup, whose time says nothing of the model's.
    code, out, err = run_cli("--limit", "3", "--report-dir", str(tmp_path / "warm"), "--gate", str(baseline), *cache)
    assert code == 1, out + err
    assert (
        "  latency_p95_ratio: measured on answers from the cache (single_time 100% cached, no_retrieval 100% cached): "
        "gate times on a run without --cache"
    ) in err
    assert "em: " not in err  # the other metrics were checked, and passed
    code, out, err = run_cli(
        *("--strategy", "single_time", "--limit", "3", "--report-dir", str(tmp_path / "save")),
        *("--save-baseline", str(tmp_path / "warm.json")),
        *cache,
    )
    assert code == 1, out + err
    assert (
        "baseline not saved: no_retrieval, single_time answered from the cache, so its times are lookups; "
        "save it from a run without --cache"
    ) in out + err
    assert not (tmp_path / "warm.json").exists()
    # Bounding no time now does not make it one to save: a later gate may bound one.
    code, out, err = run_cli(
        *("--strategy", "single_time", "--limit", "3", "--report-dir", str(tmp_path / "save2")),
        *("--save-baseline", str(tmp_path / "warm.json"), "--tolerance", "latency_p95_ratio=off"),
        *cache,
    )
    assert code == 1 and "baseline not saved: no_retrieval, single_time answered from the cache" in out + err
    assert not (tmp_path / "warm.json").exists()
    # A baseline saved from a warm run (by an earlier version, or edited): its times are lookups too.
    doc = json.loads(baseline.read_text())
    doc["metrics"]["single_time"]["cached_share"] = 1.0
    baseline.write_text(json.dumps(doc))
    code, out, err = run_cli("--limit", "3", "--report-dir", str(tmp_path / "cold2"), "--gate", str(baseline))
    assert code == 1, out + err
    assert (
        "  latency_p95_ratio: measured on answers from the cache (the baseline's single_time 100% cached): "
        "gate times on a run without --cache"
    ) in err


def _pytest_bench(pytester, *args):
    return pytester.runpytest_inprocess(str(ROOT / "bench"), "-p", "no:cacheprovider", *args)


@pytest.mark.slow
def test_pytest_bench_gate_fails_the_breaking_strategys_test(pytester, tmp_path, oracle):
    baseline = _save(tmp_path, specs=("no_retrieval", "single_time"))
    doc = json.loads(baseline.read_text())
    doc["metrics"]["single_time"]["em"] = 1.0
    baseline.write_text(json.dumps(doc))
    result = _pytest_bench(pytester, "-v", "--limit", "3", "--report-dir", str(tmp_path / "g"), "--gate", str(baseline))
    assert result.ret == 1
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    # The reference runs first; only the breaking spec fails, with one line per broken metric.
    assert out.index("test_strategy[no_retrieval] PASSED") < out.index("test_strategy[single_time] FAILED")
    assert f"single_time breaks the gate {baseline}:" in out
    assert "em: baseline 1, new 0.666667, allowed >= 0.95 (max_drop 0.05)" in out
    assert f"gate {baseline} (latency reference no_retrieval): 1 passed, 1 broken (single_time)" in out
    assert "Traceback" not in out
    # The report a CI job keeps says so too, at its top.
    page = (tmp_path / "g" / "report.html").read_text()
    assert page.index('<section id="gate">') < page.index('<section id="comparison">')
    assert "<code>single_time</code>: <b>broke the gate</b><ul><li>em: baseline 1, new 0.666667" in page
    assert "<code>no_retrieval</code>: passed" in page
    # A gated spec deselected (-k) is not checked: the verdict says so rather than "0 broken", and
    # the session fails, as a gate that checked less than asked passed nothing.
    result = _pytest_bench(
        pytester, "--limit", "3", "--report-dir", str(tmp_path / "k"), "--gate", str(baseline), "-k", "no_retrieval"
    )
    assert "1 passed, 0 broken; not checked, as they did not run: single_time" in result.stdout.str()
    assert "gate not passed: single_time did not run (deselected?); gate it with --strategy" in result.stdout.str()
    assert result.ret == 1
    # Only the reference selected, which is not gated: gate.json and the report still say what was not.
    only = _save(tmp_path / "only", specs=("single_time",))
    options = ["--limit", "3", "--report-dir", str(tmp_path / "r"), "--gate", str(only)]
    result = _pytest_bench(pytester, *options, "-k", "no_retrieval")
    assert result.ret == 1 and json.loads((tmp_path / "r" / "gate.json").read_text())["unchecked"] == ["single_time"]
    assert "not checked" in (tmp_path / "r" / "report.html").read_text()
    # Every bench test deselected: nothing was checked, which is said, and the session fails.
    result = _pytest_bench(pytester, "--report-dir", str(tmp_path / "n"), "--gate", str(baseline), "-k", "nothing")
    line = "flarebench: gate not passed: no bench test ran (deselected?), so no_retrieval, single_time went unchecked"
    assert line in result.stdout.str()
    assert result.ret == 1 and not (tmp_path / "n").exists()
    # A spec of the baseline left out of --strategy is not gated either, and the verdict says so.
    result = _pytest_bench(
        pytester,
        "--limit",
        "3",
        "--report-dir",
        str(tmp_path / "s"),
        "--gate",
        str(baseline),
        "--strategy",
        "no_retrieval",
    )
    assert "1 passed, 0 broken; not gated in this run (not asked for): single_time" in result.stdout.str()


@pytest.mark.slow
def test_pytest_bench_saves_a_baseline_and_feeds_pytest_benchmark(pytester, tmp_path, oracle, monkeypatch):
    # Under pytest-xdist (the inner loop's -n 2) pytest-benchmark sees this variable and turns
    # itself off in the inner run too; that run is no xdist worker.
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    # Each run that saves or compares benchmarks asks py-cpuinfo for the machine, in a subprocess
    # of a second each: asked once here, the same answer for the three runs.
    monkeypatch.setattr(pytest_benchmark.plugin, "get_cpu_info", functools.cache(pytest_benchmark.plugin.get_cpu_info))
    oracle.sleep = 0.02  # pytest-benchmark times the probe on the real clock
    baseline = tmp_path / "b.json"
    bench_json = tmp_path / "bench.json"
    result = _pytest_bench(
        pytester,
        *("--strategy", "single_time", "--limit", "2", "--report-dir", str(tmp_path / "r")),
        *("--save-baseline", str(baseline), "--benchmark-json", str(bench_json)),
    )
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=2)  # the latency reference was added as a test of its own
    assert f"baseline saved: {baseline} (single_time)" in result.stdout.str()
    assert list(json.loads(baseline.read_text())["metrics"]) == ["single_time"]
    benchmarks = {b["param"]: b for b in json.loads(bench_json.read_text())["benchmarks"]}
    assert set(benchmarks) == {"no_retrieval", "single_time"}
    st = benchmarks["single_time"]
    assert st["group"] == "flarebench" and st["stats"]["rounds"] == 1 and st["stats"]["min"] >= 0.02
    assert st["extra_info"]["timed_probe"] == "pw-0001" and st["extra_info"]["em"] == 1.0
    assert st["extra_info"]["latency_reference"] == "no_retrieval" and st["extra_info"]["latency_p95_ratio"] > 0
    # The timed probe is not a probe of the run: the traces hold each probe once.
    assert len((tmp_path / "r" / "traces.jsonl").read_text().splitlines()) == 4

    # --benchmark-autosave then --benchmark-compare: the timed probes are compared across runs.
    storage = f"file://{tmp_path / 'benchmarks'}"
    for i, flag in enumerate(["--benchmark-autosave", "--benchmark-compare"]):
        result = _pytest_bench(
            pytester,
            *("--strategy", "single_time", "--limit", "2", "--report-dir", str(tmp_path / f"c{i}")),
            *("--benchmark-storage", storage, flag),
        )
        assert result.ret == 0, result.stdout.str()
    assert "Comparing against benchmarks from: " in result.stdout.str() + result.stderr.str()
    assert "test_strategy[single_time] (0001_" in result.stdout.str()

    # Gating with --benchmark-skip (timing dropped, gate kept) and without pytest-benchmark at all.
    for flags in (["--benchmark-skip"], ["-p", "no:benchmark"], ["--benchmark-only"]):
        result = _pytest_bench(
            pytester, "--limit", "2", "--report-dir", str(tmp_path / flags[-1]), "--gate", str(baseline), *flags
        )
        assert result.ret == 0, result.stdout.str()
        result.assert_outcomes(passed=2)


@pytest.mark.slow
def test_pytest_bench_with_a_corrupted_baseline_is_a_usage_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 1, "metrics": {"single_time": ')
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "bench", "-p", "no:cacheprovider", "--gate", str(bad)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 4
    assert f"ERROR: flarebench: {bad}: not a flarebench baseline: not valid JSON" in out.stderr
    assert "Traceback" not in out.stdout + out.stderr


# --------------------------------------------------------------------------------------------
# End to end with the real model (subprocesses, as a user runs them)
# --------------------------------------------------------------------------------------------


def sh(*args):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=900)


@pytest.mark.model
def test_gate_end_to_end_with_the_model(tmp_path):
    baseline = tmp_path / "baseline.json"
    # pytest-benchmark's timing (one more run of each spec's first probe) is tested with the scripted
    # LM above and with the model in test_plugin.py: here it would only double the model's work.
    common = ["-m", "pytest", "bench", "-p", "no:cacheprovider", "--benchmark-disable", "--limit", "1"]
    saved = sh(
        *common, "--strategy", "single_time", "--report-dir", str(tmp_path / "a"), "--save-baseline", str(baseline)
    )
    assert saved.returncode == 0, saved.stdout + saved.stderr
    assert "2 passed" in saved.stdout and f"baseline saved: {baseline} (single_time)" in saved.stdout
    doc = json.loads(baseline.read_text())
    assert len(doc["config"]["lm"]["sha256"]) == 64 and doc["config"]["probes"]["limit"] == 1

    # The same run on the same build meets its baseline (default tolerances, latency loosened:
    # one probe on a shared machine is too few for a 25% latency bound).
    gated = sh(
        *common, "--report-dir", str(tmp_path / "b"), "--gate", str(baseline), "--tolerance", "latency_p95_ratio=1"
    )
    assert gated.returncode == 0, gated.stdout + gated.stderr
    assert "2 passed" in gated.stdout and "1 passed, 0 broken" in gated.stdout

    # What breaks a gate, the console script's gate and other configurations are tested with a
    # scripted LM above (test_pytest_bench_gate_fails_the_breaking_strategys_test,
    # test_console_script_saves_a_baseline_and_gates_against_it,
    # test_a_different_configuration_is_refused_unless_asked): only the real model's runs are here.


@pytest.mark.slow
def test_ctrl_c_under_pytest_bench_keeps_what_finished_and_marks_the_run_interrupted(pytester, tmp_path, monkeypatch):
    class Interrupting(OracleLM):
        def _complete(self, request):
            if "pw-0002" in {p.id for p in self.probes if p.question in request.prompt.dynamic}:
                raise KeyboardInterrupt  # Ctrl-C during the second probe
            return super()._complete(request)

    lm = Interrupting()
    monkeypatch.setattr("flarebench.bench.recipe.make_lm", lambda *args, **kwargs: lm)
    run_dir = tmp_path / "r"
    args = ("--strategy", "single_time", "--limit", "3", "--report-dir", str(run_dir))
    result = pytester.inline_run(str(ROOT / "bench"), "-p", "no:cacheprovider", *args, no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    assert (run_dir / "summary.csv").read_text().splitlines()[1].startswith("single_time,1,")  # the probe that finished
    assert not (run_dir / "run.lock").exists()


@pytest.mark.slow
def test_ctrl_c_under_a_gated_pytest_bench_says_what_was_not_checked_and_how_to_run_again(
    pytester, tmp_path, monkeypatch, oracle, capsys
):
    baseline = _save(tmp_path)

    class Interrupting(OracleLM):
        asked = 0

        def _complete(self, request):
            if "pw-0002" in {p.id for p in self.probes if p.question in request.prompt.dynamic}:
                self.asked += 1
                if self.asked == 2:  # Ctrl-C on single_time's second probe (the reference asked it first)
                    raise KeyboardInterrupt
            return super()._complete(request)

    monkeypatch.setattr("flarebench.bench.recipe.make_lm", lambda *args, **kwargs: Interrupting())
    args = ("--strategy", "single_time", "--limit", "3", "--report-dir", str(tmp_path / "r"), "--gate", str(baseline))
    capsys.readouterr()
    result = pytester.inline_run(str(ROOT / "bench"), "-p", "no:cacheprovider", *args, no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    out = capsys.readouterr().out
    # single_time ran a probe: it did not finish, which is not "did not run".
    assert "0 passed, 0 broken; not checked, as they did not finish: single_time" in out, out
    assert (
        "flarebench: interrupted; finished probes are kept, but a gated run is measured in one fresh run: "
        "run the same command with --overwrite, or with another --report-dir"
    ) in out
    # gate.json, which a CI step may read instead of the exit status, names it too: no verdict is no pass.
    verdicts = json.loads((tmp_path / "r" / "gate.json").read_text())
    assert verdicts["passed"] == {} and verdicts["unchecked"] == ["single_time"]
    assert "<code>single_time</code>: <b>not checked</b>" in (tmp_path / "r" / "report.html").read_text()


@pytest.mark.slow
def test_ctrl_c_outside_a_strategys_run_marks_the_pytest_bench_run_interrupted(
    pytester, tmp_path, monkeypatch, oracle, capsys
):
    # Stopped between a spec's probes and its check (as while pytest-benchmark times a probe):
    # run.json says interrupted, not partial, and the session says how to run again.
    baseline = _save(tmp_path)

    def stop(self, spec, summary):
        raise KeyboardInterrupt

    monkeypatch.setattr(Gating, "check", stop)
    args = ("--strategy", "single_time", "--limit", "3", "--report-dir", str(tmp_path / "r"), "--gate", str(baseline))
    capsys.readouterr()
    result = pytester.inline_run(str(ROOT / "bench"), "-p", "no:cacheprovider", *args, no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert json.loads((tmp_path / "r" / "run.json").read_text())["status"] == "interrupted"
    out = capsys.readouterr().out
    assert "flarebench: interrupted; finished probes are kept" in out
    assert "not checked, as the run stopped before their check: single_time" in out  # all its probes had run


@pytest.mark.slow
def test_the_latency_reference_runs_first_when_its_test_is_deselected(pytester, tmp_path, oracle):
    baseline = _save(tmp_path, specs=("single_time",))
    args = ("--limit", "3", "--report-dir", str(tmp_path / "r"), "--gate", str(baseline), "-k", "single_time")
    assert _pytest_bench(pytester, *args).ret == 0
    order = [json.loads(line)["strategy"] for line in (tmp_path / "r" / "traces.jsonl").read_text().splitlines()]
    assert order == ["no_retrieval"] * 3 + ["single_time"] * 3  # as in the full plan: no spec pays for going first
    # A reference the baseline gates too, run for single_time's test: gated there, not "did not run".
    both = _save(tmp_path / "both", specs=("no_retrieval", "single_time"))
    args = ("--limit", "3", "--report-dir", str(tmp_path / "b"), "--gate", str(both), "-k", "single_time")
    result = _pytest_bench(pytester, *args)
    assert (
        result.ret == 0 and f"gate {both} (latency reference no_retrieval): 2 passed, 0 broken" in result.stdout.str()
    )
    assert json.loads((tmp_path / "b" / "gate.json").read_text())["unchecked"] == []


def _job_summary_script() -> str:
    """The shell of the GitHub template's "Job summary" step, as the runner gets it (the block
    scalar under ``run: |``, its indentation removed)."""
    lines = (ROOT / "bench" / "templates" / "init" / "bench" / "ci" / "github-actions.yml").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "- name: Job summary")
    run = next(i for i in range(start, len(lines)) if lines[i].strip() == "run: |")
    indent = len(lines[run]) - len(lines[run].lstrip())
    block = []
    for line in lines[run + 1 :]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        block.append(line)
    return textwrap.dedent("\n".join(block)) + "\n"


@pytest.mark.slow
def test_the_ci_templates_job_summary_gives_the_verdict_first_and_a_refusal_when_no_run_began(tmp_path, oracle):
    baseline = _save(tmp_path)
    oracle.right = {"pw-0001"}  # single_time breaks the gate: EM falls by a third
    work = tmp_path / "repo"
    code, _, _ = run_cli("--limit", "3", "--report-dir", str(work / "runs" / "ci"), "--gate", str(baseline))
    assert code == 1

    def summary() -> str:
        out = tmp_path / "summary.md"
        out.write_text("")
        env = {**os.environ, "GITHUB_STEP_SUMMARY": str(out)}
        subprocess.run(["bash", "-eo", "pipefail", "-c", _job_summary_script()], cwd=work, env=env, check=True)
        return out.read_text()

    text = summary()
    assert text.startswith(
        f"## Gate against {baseline}\n- single_time: BROKEN\n  - em: baseline 0.666667, new 0.333333"
    )
    assert "| single_time " in text and "## Columns" not in text  # the table, not its 100 lines of definitions
    # Refused before it began (no baseline yet): no run folder, and the line from the log says why.
    shutil.rmtree(work / "runs" / "ci")
    refusal = "ERROR: flarebench: --gate bench/baseline.json: not found; make one first: pytest bench --no-gate ..."
    (work / "runs" / "bench.log").write_text(f"collecting ...\n{refusal}\n")
    assert summary() == f"\n**flarebench said:**\n\n```\n{refusal}\n```\n"


def test_a_gate_whose_baseline_quality_is_zero_says_so_every_time_it_gates(tmp_path, oracle):
    oracle.right = set()  # every answer wrong: EM and F1 at 0 cannot drop
    baseline = _save(tmp_path)
    code, out, err = run_cli("--limit", "3", "--report-dir", str(tmp_path / "gate"), "--gate", str(baseline))
    note = (
        "em, f1 are 0 in the baseline for every gated spec, so no drop in answer quality can break this gate (it "
        "watches cost and latency)"
    )
    assert code == 0 and f"gate note: {note}" in out, out
    assert json.loads((tmp_path / "gate" / "gate.json").read_text())["notes"] == [note]  # a CI job summary shows it


@pytest.mark.slow
def test_a_teams_own_tests_picked_with_k_from_the_root_are_not_failed_by_its_gate(pytester, tmp_path, oracle):
    # gate set in flarebench.toml: `pytest -k test_ok` from the repository's root deselects the bench
    # on the way, which is no gate asked for; `pytest bench -k nothing` is.
    from flarebench.bench.scaffold import init

    init(pytester.path)
    shutil.copy(_save(tmp_path), pytester.path / "bench" / "baseline.json")
    toml = pytester.path / "flarebench.toml"
    text = re.sub(r"(?m)^strategy = .*$", 'strategy = ["single_time"]', toml.read_text())
    toml.write_text(text + 'gate = "bench/baseline.json"\n')
    pytester.makepyfile(test_ok="def test_ok():\n    assert True\n")
    assert pytester.runpytest_inprocess("-p", "no:cacheprovider", "-k", "test_ok").ret == 0
    result = pytester.runpytest_inprocess("bench", "-p", "no:cacheprovider", "-k", "nothing")
    assert result.ret == 1 and "gate not passed: no bench test ran (deselected?)" in result.stdout.str()
