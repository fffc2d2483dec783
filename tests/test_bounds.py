"""Bound rows and per-probe effect (bench/bounds.py, bench/scorers/effect.py): a comparison's never
and always specs, the oracle row, headroom_captured and helped/harmed/unchanged, on hand-built
traces whose values are worked out by hand; and that no consumer takes the oracle row for a
strategy. No model."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest

from flarebench.bench.adoption import adoption
from flarebench.bench.bounds import ALWAYS_SPEC, NEVER_SPEC, bound_kind, bound_specs, strategy_rows, with_bounds
from flarebench.bench.findings import findings
from flarebench.bench.gate import Gating
from flarebench.bench.metrics import probe_row, summarize
from flarebench.bench.report import compact_frame, format_table, is_comparison
from flarebench.bench.scorers import effect
from flarebench.strategies.flare_direct import FlareDirect
from flarebench.strategies.records import FIRST_HOP, LMCall, Retrieval, Step, Trace
from flarebench.strategies.registry import expand
from tests.scripted import ScriptedLM, ScriptedRetriever, run_cli
from tests.test_metrics import FakeProbe

GOLD = "Bea Tull"
#: The answers of three strategies on four probes, and their f1 against "Bea Tull": "Bea" has
#: precision 1 and recall 1/2, so f1 2/3.
ANSWERS = {
    "no_retrieval": ["x", "x", GOLD, "x"],  # f1 0, 0, 1, 0: mean 1/4
    "single_time": ["Bea", "x", GOLD, "x"],  # 2/3, 0, 1, 0: mean 5/12
    "flare_direct": [GOLD, "Bea", "x", "x"],  # 1, 2/3, 0, 0: mean 5/12
}
PROBES = [FakeProbe(f"p{i}", answers=[GOLD]) for i in range(1, 5)]


def _trace(strategy: str, probe: FakeProbe, answer: str, error: str | None = None) -> Trace:
    call = LMCall("generate", 10, 10, 5, "x", "stop", 0.1)
    return Trace(
        question=probe.question,
        output=f"So the answer is {answer}.",
        answer=answer,
        stop_reason="answer",
        steps=[Step("s", [call], [Retrieval("q", FIRST_HOP, ["d1"], 0.01)])],
        probe_id=probe.id,
        strategy=strategy,
        seconds=0.2,
        error=error,
    )


def _rows(answers: dict[str, list[str]], errors: dict[tuple[str, str], str] | None = None) -> pd.DataFrame:
    errors = errors or {}
    return pd.DataFrame(
        [
            probe_row(_trace(s, p, a, errors.get((s, p.id))), p)
            for s, given in answers.items()
            for p, a in zip(PROBES, given)
        ]
    )


def _by(summary: pd.DataFrame) -> pd.DataFrame:
    return summary.set_index("strategy")


# ---------------------------------------------------------------- helped, harmed, unchanged, headroom


def test_effect_against_the_reference_and_headroom_equal_the_hand_computation():
    s = _by(summarize(_rows(ANSWERS), reference="single_time"))
    # flare_direct against single_time, per probe: 1 > 2/3, 2/3 > 0, 0 < 1, 0 = 0.
    assert s.loc["flare_direct", ["helped", "harmed", "unchanged"]].tolist() == [0.5, 0.25, 0.25]
    # no_retrieval against single_time: 0 < 2/3, then equal three times.
    assert s.loc["no_retrieval", ["helped", "harmed", "unchanged"]].tolist() == [0.0, 0.25, 0.75]
    # The reference against itself: all unchanged (its deltas are 0 too).
    assert s.loc["single_time", ["helped", "harmed", "unchanged"]].tolist() == [0.0, 0.0, 1.0]
    # never 1/4; oracle per probe 1, 2/3, 1, 0: mean 2/3; flare_direct 5/12.
    never, oracle = 1 / 4, 2 / 3
    assert s.loc["flare_direct", "headroom_captured"] == pytest.approx((5 / 12 - never) / (oracle - never))
    assert s.loc["flare_direct", "headroom_captured"] == pytest.approx(0.4)
    assert s.loc["no_retrieval", "headroom_captured"] == 0.0
    assert s.loc["no_retrieval", "bound"] == "never" and s["bound"].isna().sum() == 2


def test_an_errored_probe_counts_0_in_the_effect_and_the_oracle():
    rows = _rows(ANSWERS, errors={("flare_direct", "p1"): "LMError: gone"})
    s = _by(summarize(rows, reference="single_time", oracle=True))
    # flare_direct's p1 now scores 0 (< 2/3): helped only p2, harmed p1 and p3.
    assert s.loc["flare_direct", ["helped", "harmed", "unchanged"]].tolist() == [0.25, 0.5, 0.25]
    # oracle per probe: 2/3 (single_time), 2/3, 1, 0.
    assert s.loc["oracle", "f1"] == pytest.approx((2 / 3 + 2 / 3 + 1) / 4)


def test_effect_is_empty_without_the_reference():
    s = _by(summarize(_rows(ANSWERS), reference="ircot"))
    assert s[["helped", "harmed", "unchanged"]].isna().all().all()


def test_headroom_is_missing_not_0_without_a_never_row_and_the_note_says_why():
    answers = {k: v for k, v in ANSWERS.items() if k != "no_retrieval"}
    summary = summarize(_rows(answers), reference="single_time")
    assert summary["headroom_captured"].isna().all()
    note = next(n for n in summary.attrs["notes"] if n.startswith("bound rows:"))
    assert "never = absent" in note and "headroom_captured empty: no no_retrieval spec" in note


def test_headroom_is_missing_when_no_strategy_beats_never():
    answers = {"no_retrieval": [GOLD, GOLD, "x", "x"], "single_time": [GOLD, "Bea", "x", "x"]}
    summary = summarize(_rows(answers))
    assert summary["headroom_captured"].isna().all()
    assert any("no strategy beats no_retrieval on any probe" in n for n in summary.attrs["notes"])


def test_the_headroom_is_measured_once_per_summary(monkeypatch):
    # The oracle behind it spans every strategy: measured per strategy, a sweep's summary was
    # quadratic in its specs (and its note measured it once more).
    measured = []
    real = effect._measure_headroom
    monkeypatch.setattr(effect, "_measure_headroom", lambda scoring: measured.append(scoring) or real(scoring))
    summary = summarize(_rows(ANSWERS), reference="single_time")
    assert len(measured) == 1 and summary["headroom_captured"].notna().all()
    summarize(_rows(ANSWERS), reference="single_time")  # a new summary measures again
    assert len(measured) == 2 and measured[0] is not measured[1]


def test_the_note_names_the_bounds_and_the_oracle():
    note = next(n for n in summarize(_rows(ANSWERS)).attrs["notes"] if n.startswith("bound rows:"))
    assert note.startswith("bound rows: never = no_retrieval (f1 0.250), always = absent (no spec retrieves")
    assert "oracle = per probe the best of the 3 strategies over the 4 probes all of them answered (f1 0.667)" in note


# ---------------------------------------------------------------- the oracle row


def test_the_oracle_row_is_the_per_probe_maximum():
    rows = _rows(ANSWERS)
    summary = summarize(rows, reference="single_time", oracle=True)
    assert list(summary["strategy"]) == ["no_retrieval", "single_time", "flare_direct", "oracle"]
    oracle = summary.iloc[-1]
    for metric in ("em", "f1"):
        best = rows.pivot(index="probe_id", columns="strategy", values=metric).max(axis=1).mean()
        assert oracle[metric] == pytest.approx(best)
    assert oracle["em"] == 0.5 and oracle["f1"] == pytest.approx(2 / 3)
    assert oracle["bound"] == "oracle" and oracle["n"] == 4
    # Nothing else is made up: every other column is empty, and the integer columns stay integers.
    empty = [oracle[c] is None or (isinstance(oracle[c], float) and math.isnan(oracle[c])) for c in summary.columns]
    filled = {c for c, gap in zip(summary.columns, empty) if not gap}
    assert filled == {"strategy", "bound", "n", "em", "f1"}
    assert summary["errors"].tolist()[:3] == [0, 0, 0] and "0.000" not in format_table(summary[["errors"]])
    # The strategies' rows are those of a summary without the oracle.
    plain = summarize(rows, reference="single_time")
    pd.testing.assert_frame_equal(strategy_rows(summary).reset_index(drop=True), plain, check_dtype=False)


def test_the_oracle_is_over_the_probes_every_strategy_answered():
    rows = _rows(ANSWERS)
    partial = rows[~((rows["strategy"] == "flare_direct") & (rows["probe_id"] == "p1"))]
    oracle = summarize(partial, oracle=True).iloc[-1]
    assert oracle["n"] == 3 and oracle["f1"] == pytest.approx((2 / 3 + 1 + 0) / 3)


def test_no_oracle_row_for_one_strategy_or_outside_a_comparison():
    rows = _rows({"single_time": ANSWERS["single_time"]})
    assert list(summarize(rows, oracle=True)["strategy"]) == ["single_time"]
    assert "oracle" not in list(summarize(_rows(ANSWERS))["strategy"])
    assert is_comparison({"kind": "compare"}) and not is_comparison({"kind": "sweep"}) and not is_comparison(None)


def test_the_oracle_row_reads_in_the_compact_table():
    summary = summarize(_rows(ANSWERS), reference="single_time", oracle=True)
    frame = compact_frame(summary)
    assert list(frame.columns[:3]) == ["strategy", "bound", "n"]
    assert {"headroom_captured", "helped", "harmed"} <= set(frame.columns)
    assert frame["f1 vs single_time"].iloc[-1] == ""
    # A run without bounds or reference keeps the table it had.
    plain = summarize(_rows({"fixed_interval": ANSWERS["single_time"], "ircot": ANSWERS["flare_direct"]}))
    plain = compact_frame(plain)
    assert not {"bound", "headroom_captured", "helped", "harmed"} & set(plain.columns)


# ---------------------------------------------------------------- the oracle is no strategy


def test_the_gate_and_the_baseline_ignore_the_oracle_row(tmp_path):
    summary = summarize(_rows(ANSWERS), reference="single_time", oracle=True)
    gating = Gating(save_to=tmp_path / "b.json", reference="no_retrieval", wanted=["single_time", "flare_direct"])
    assert set(gating.rows(summary)) == {"no_retrieval", "single_time", "flare_direct"}
    assert set(gating.baseline_document(summary)["metrics"]) == {"single_time", "flare_direct"}
    # A baseline wanting every row of the summary is refused nothing by the oracle's empty columns.
    gating = Gating(save_to=tmp_path / "b.json", reference="no_retrieval", wanted=list(summary["strategy"]))
    assert gating.save(summary) == "baseline not saved: oracle did not run"


def test_a_baseline_that_cannot_be_written_is_said_in_one_line(tmp_path):
    # The place passed the check before the run but refuses the file at its end (here a folder
    # took its name): said as "not saved", never a traceback after a whole run.
    summary = summarize(_rows(ANSWERS), reference="single_time")
    (tmp_path / "b.json").mkdir()
    gating = Gating(save_to=tmp_path / "b.json", reference="no_retrieval", wanted=["single_time"])
    note = gating.save(summary)
    assert note.startswith(f"baseline not saved: {tmp_path / 'b.json'}: cannot be written (") and "\n" not in note
    assert [p.name for p in tmp_path.iterdir()] == ["b.json"]  # no temporary file left


def test_adoption_tables_and_findings_leave_the_oracle_out():
    summary = summarize(_rows(ANSWERS), reference="single_time", oracle=True)
    assert [t.strategy for t in adoption(summary).tables] == ["no_retrieval", "flare_direct"]
    lines = findings(summary, {"kind": "compare"})
    assert not any("oracle," in line or "oracle (" in line for line in lines if "Pareto" in line)
    helps = next(line for line in lines if line.startswith("Retrieval helps"))
    assert "2 of 2 strategies" in helps  # single_time and flare_direct, not the oracle


# ---------------------------------------------------------------- findings


def _twenty(harmed: int) -> pd.DataFrame:
    """single_time right on 20 probes; flare_direct wrong on the first ``harmed`` of them."""
    probes = [FakeProbe(f"q{i:02d}", answers=[GOLD]) for i in range(20)]
    rows = [probe_row(_trace("single_time", p, GOLD), p) for p in probes]
    rows += [probe_row(_trace("flare_direct", p, "x" if i < harmed else GOLD), p) for i, p in enumerate(probes)]
    return summarize(pd.DataFrame(rows), reference="single_time")


def test_the_harm_rate_is_a_finding_above_5_percent_only():
    assert _by(_twenty(2)).loc["flare_direct", "harmed"] == 0.1
    lines = findings(_twenty(2), {"kind": "compare"})
    assert (
        "flare_direct harmed 10% of the probes against single_time (a lower F1 than single_time's on them) "
        "and helped 0%." in lines
    )
    assert not any(" harmed " in line for line in findings(_twenty(1), {"kind": "compare"}))  # 5%: not above


def test_the_headroom_finding():
    summary = summarize(_rows(ANSWERS), reference="single_time", oracle=True)
    lines = findings(summary, {"kind": "compare"})
    assert (
        "Of the F1 gap between never (no_retrieval, 0.250) and the per-probe oracle (0.667), single_time closes "
        "the most: headroom_captured 0.400." in lines
    )


# ---------------------------------------------------------------- the bound specs


@pytest.mark.slow
def test_compare_does_not_add_a_bound_the_specs_hold(tmp_path, scripted_lm):
    # Control flow only (which specs run, how their rows are labelled): the scripted LM answers.
    run_dir = tmp_path / "compare"
    code, out, err = run_cli(
        "compare", "--strategy", "no_retrieval", "--strategy", "flare_direct:theta=1.0", "--limit", "1",
        "--report-dir", str(run_dir),
    )  # fmt: skip
    assert code == 0, out + err
    summary = pd.read_csv(run_dir / "summary.csv")
    assert list(summary["strategy"]) == ["no_retrieval", "flare_direct:theta=1.0", "oracle"]
    assert summary["bound"].tolist() == ["never", "always", "oracle"]


@pytest.mark.slow
def test_compare_without_bounds_runs_the_specs_given_and_keeps_the_oracle(tmp_path, scripted_lm):
    from flarebench.bench.calibrate import budget_plans

    run_dir = tmp_path / "compare"
    code, out, err = run_cli(
        "compare", "--strategy", "single_time", "--strategy", "flare_direct", "--limit", "2", "--no-bounds",
        "--report-dir", str(run_dir),
    )  # fmt: skip
    assert code == 0, out + err
    summary = pd.read_csv(run_dir / "summary.csv")
    assert list(summary["strategy"]) == ["single_time", "flare_direct", "oracle"]
    assert summary["headroom_captured"].isna().all()  # no never row: missing, and the notes say why
    assert (
        "headroom_captured empty: no no_retrieval spec (the never bound) in this run"
        in (run_dir / "summary.md").read_text()
    )
    assert list(budget_plans(["flare_direct"], "single_time", bounds=False)) == ["flare_direct", "single_time"]
    bounded = [NEVER_SPEC, "flare_direct", "single_time", ALWAYS_SPEC]
    assert list(budget_plans(["flare_direct"], "single_time")) == bounded


def test_a_comparison_adds_never_first_and_always_last_once():
    assert with_bounds(["single_time", "flare_direct"]) == [NEVER_SPEC, "single_time", "flare_direct", ALWAYS_SPEC]
    everything = expand(["all"])
    assert with_bounds(everything) == [*everything, ALWAYS_SPEC]
    # Already there, however written: nothing added.
    for given in (["flare_direct:theta=1"], ["flare_direct:theta=1.0"], ["flare_direct: theta = 1"],
                  ["flare_direct:threshold=1"], ["flare_direct:trigger=min_prob,theta=1"]):  # fmt: skip
        assert with_bounds(["no_retrieval", *given]) == ["no_retrieval", *given]
    assert with_bounds(["no_retrieval:max_tokens=64", "single_time"])[0] == "no_retrieval:max_tokens=64"
    # What does not retrieve for every sentence is not the always bound.
    for spec in ("flare_direct", "flare_direct:theta=0.99", "flare_direct:theta=1,ignore_known=true",
                 "flare_direct:theta=1,max_retrievals=2", "flare_direct:trigger=entropy,threshold=0"):  # fmt: skip
        assert bound_kind(spec) is None
        assert with_bounds(["no_retrieval", spec])[-1] == ALWAYS_SPEC
    assert with_bounds(["single_time", "single_time"]) == [NEVER_SPEC, "single_time", ALWAYS_SPEC]


def test_the_bound_of_several_specs_of_one_kind_is_the_default_one():
    specs = ["no_retrieval:max_tokens=64", "no_retrieval", "flare_direct:theta=1,k=5", "flare_direct:theta=1.0"]
    assert bound_specs(specs) == {"never": "no_retrieval", "always": "flare_direct:theta=1.0"}
    assert bound_specs(["no_retrieval:k=5", "flare_direct:theta=1,k=5"]) == {
        "never": "no_retrieval:k=5",
        "always": "flare_direct:theta=1,k=5",
    }
    assert bound_specs(["not_a_strategy:x=1", "single_time"]) == {}  # unknown specs are no bound


def test_theta_1_fires_on_every_draft_even_at_probability_1():
    certain = [
        ([" Joe", " Biden", " studied", " law", "."], [1.0] * 5, "sentence"),
        ([" So", " the", " answer", " is", " law", "."], [1.0] * 6, "stop"),
    ]
    lm, retriever = ScriptedLM([certain[0], certain[0], certain[1], certain[1]]), ScriptedRetriever([["d1"]])
    trace = FlareDirect(theta=1.0).run("Where did Joe Biden study?", lm, retriever)
    assert [s.triggered for s in trace.steps] == [True, True]
    assert [s.gate["score"] for s in trace.steps] == [1.0, 1.0]


def test_on_long_probes_the_oracle_row_holds_the_per_probe_best_fact_recall():
    from tests.test_facts import UPGRADE, long_trace

    other = dataclasses.replace(UPGRADE, id="up2")
    outputs = {  # facts stated of ver, nodes, owner
        "no_retrieval": {"up": "Run 4.12.0 first.", "up2": "Nothing here."},  # 1/3, 0
        "single_time": {"up": "Nothing here.", "up2": "Use 12 nodes; Rosa Tull owns it."},  # 0, 2/3
    }
    rows = pd.DataFrame(
        [
            probe_row(long_trace(text, pid, s), {"up": UPGRADE, "up2": other}[pid])
            for s, o in outputs.items()
            for pid, text in o.items()
        ]
    )
    oracle = summarize(rows, oracle=True).iloc[-1]
    assert oracle["strategy"] == "oracle" and oracle["fact_recall"] == pytest.approx((1 / 3 + 2 / 3) / 2)


def test_the_compact_table_of_long_probes_leads_with_what_the_answers_state():
    from tests.test_facts import UPGRADE, long_trace

    rows = pd.DataFrame([probe_row(long_trace("Run 4.12.0 first.", "up", "single_time"), UPGRADE)])
    columns = list(compact_frame(summarize(rows)).columns)
    assert columns[columns.index("errors") + 1 : columns.index("recall")] == [
        "fact_recall", "incomplete_rate", "wrong_version_rate", "incomplete_or_wrong_rate"
    ]  # fmt: skip


def test_when_no_strategy_closes_any_headroom_none_is_said_to_close_the_most():
    even = {"no_retrieval": [GOLD, "x", "x", "x"], "single_time": ["x", GOLD, "x", "x"], "ircot": ["x"] * 4}
    lines = findings(summarize(_rows(even), reference="single_time", oracle=True), {"kind": "compare"})
    assert not any("closes the most" in line for line in lines)
    assert (
        "No strategy closes any of the F1 gap between never (no_retrieval, 0.250) and the per-probe oracle "
        "(0.500): headroom_captured is at most 0.000 for every strategy." in lines
    )


def test_a_strategy_on_the_pareto_front_for_never_retrieving_is_said_to_be():
    from flarebench.bench.findings import _front

    summary = pd.DataFrame(
        {
            "strategy": ["single_time", "tool_search", "flare_direct"],
            "f1": [0.3, 0.3, 0.5],
            "retrievals_per_q": [1.0, 0.0, 3.0],
            "prompt_tokens_per_q": [900.0, 300.0, 4000.0],
            "completion_tokens_per_q": [20.0, 20.0, 60.0],
        }
    )
    assert _front(summary, "tokens_per_q", "tokens") == (
        "Pareto front of F1 against tokens: tool_search (never retrieved), flare_direct."
    )


def test_one_strategy_has_no_pareto_front_finding():
    rows = _rows(ANSWERS)
    alone = summarize(rows[rows["strategy"] == "single_time"], reference="single_time")
    assert not any("Pareto" in line for line in findings(alone, {"kind": "run"}))
    assert any("Pareto" in line for line in findings(summarize(rows, reference="single_time"), {"kind": "compare"}))


def test_findings_of_strategies_run_on_different_probes_compare_no_means():
    # A run stopped part-way: no_retrieval on 10 probes, flare_direct on 3; "retrieval helps" would
    # compare a mean over 3 probes with one over 10.
    rows = _rows(ANSWERS)
    first = rows["probe_id"] == rows["probe_id"].iloc[0]
    partial = summarize(rows[(rows["strategy"] != "flare_direct") | first], reference="single_time")
    lines = findings(partial, {"kind": "compare"})
    assert any(line.startswith("The strategies have run different numbers of probes so far (1 to ") for line in lines)
    assert not any(line.startswith(("Retrieval", "Pareto", "Of the F1 gap")) for line in lines), lines


def test_plots_of_strategies_run_on_different_probes_draw_no_pareto_front(monkeypatch):
    from flarebench.bench import html, plots

    rows = _rows(ANSWERS)
    first = rows["probe_id"] == rows["probe_id"].iloc[0]
    partial = strategy_rows(summarize(rows[(rows["strategy"] != "flare_direct") | first], reference="single_time"))
    fronts = []
    monkeypatch.setattr(plots, "pareto_front", lambda *a: fronts.append(a) or [])
    section = html._plots(partial, rows.iloc[0:0], {"kind": "compare"}, list(partial["strategy"]))
    assert fronts == [] and section.count("No Pareto front yet: the strategies have run different numbers") == 2
    html._plots(strategy_rows(summarize(rows, reference="single_time")), rows.iloc[0:0], {"kind": "compare"}, [])
    assert len(fronts) == 2  # a finished run's two trade-off plots draw theirs


def test_a_strategy_not_started_holds_the_findings_and_the_pareto_front_back():
    # Stopped between strategies: every row has all its probes, but flare_direct has none yet.
    from flarebench.bench import html

    rows = _rows(ANSWERS)
    order = list(dict.fromkeys(rows["strategy"]))
    partial = summarize(rows[rows["strategy"] != "flare_direct"], order=order, reference="single_time")
    lines = findings(partial, {"kind": "compare"})
    assert any("(0 to " in line and "; not started: flare_direct)" in line for line in lines), lines
    later = summarize(rows[rows["strategy"] == order[0]], order=order, reference="single_time")
    assert later.attrs["pending"] == order[1:]  # in the order they run, not by name
    assert not any(line.startswith(("Retrieval", "Pareto", "Of the F1 gap")) for line in lines), lines
    section = html._plots(strategy_rows(partial), rows.iloc[0:0], {"kind": "compare"}, order)
    assert "No Pareto front yet" in section
