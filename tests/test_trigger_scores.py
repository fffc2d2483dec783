"""Post-hoc trigger scoring (bench/trigger_scores.py) on hand-built traces, every value worked out by
hand: the least confident draft per probe, the AUROC, the share of drafts firing at each threshold
of a grid, what cannot be scored and why; and `flarebench score` writing triggers.csv with a
scripted LM."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from flarebench.bench.trigger_scores import CAVEAT, COLUMNS, TRIGGERS_CSV, format_tables, score_triggers
from flarebench.strategies import triggers
from flarebench.strategies.records import LMCall, Step, Trace
from flarebench.strategies.registry import names
from tests.scripted import run_cli

names()


def call(tokens, probs, purpose="draft", top=None, entropies=None, logprobs=True):
    """An LM call; ``top`` per token as [text, probability] pairs."""
    return LMCall(
        purpose,
        10,
        10,
        len(tokens),
        "".join(tokens),
        "stop",
        0.1,
        list(tokens),
        [math.log(p) for p in probs] if logprobs else None,
        top_logprobs=[[[t, math.log(p)] for t, p in alts] for alts in top] if top is not None else None,
        entropies=entropies,
    )


def trace(strategy, probe_id, *drafts, error=None):
    steps = [Step(d.text, lm_calls=[d, call([" re"], [0.9], purpose="regenerate")]) for d in drafts]
    return Trace("q", "", None, "answer", steps=steps, probe_id=probe_id, strategy=strategy, error=error)


def rows(em: dict, strategy="flare_direct", errors=()):
    return pd.DataFrame(
        [
            {"strategy": strategy, "probe_id": pid, "error": "boom" if pid in errors else None, "em": e}
            for pid, e in em.items()
        ]
    )


def sentence(p1, p2):
    return call([" Alpha", " is", " one", "."], [p1, 0.99, p2, 0.99])


# Per draft, the lowest token probability: a1 0.79, a2 0.59, b 0.49, c 0.69 (its second sentence's
# 0.1 is not part of what flare_direct judges), d 0.64; e raised. (No value on a grid point: exp(log p)
# may differ from p in the last bit.)
SENTENCES = {"a": [(0.79, 0.9), (0.59, 0.95)], "b": [(0.49, 0.9)], "d": [(0.9, 0.64)]}
TRACES = [
    trace("flare_direct", "a", *(sentence(*p) for p in SENTENCES["a"])),
    trace("flare_direct", "b", sentence(*SENTENCES["b"][0])),
    trace(
        "flare_direct", "c", call([" Alpha", " is", " one", ".", " Beta", " is"], [0.69, 0.99, 0.99, 0.99, 0.1, 0.9])
    ),
    trace("flare_direct", "d", sentence(*SENTENCES["d"][0])),
    trace("flare_direct", "e", sentence(0.01, 0.01), error="boom"),
]
EM = {"a": 1.0, "b": 0.0, "c": 1.0, "d": 0.0, "e": 0.0}


def _rates(frame, strategy, trigger):
    rows = frame[(frame["strategy"] == strategy) & (frame["trigger"] == trigger)]
    return dict(zip(rows["threshold"], rows["retrieval_rate"]))


def _row(frame, strategy, trigger):
    rows = frame[(frame["strategy"] == strategy) & (frame["trigger"] == trigger)]
    return rows.iloc[0]


def test_min_prob_post_hoc_auroc_and_rates_equal_the_hand_computed_ones():
    scores = score_triggers(TRACES, rows(EM, errors={"e"}))
    assert list(scores.frame.columns) == list(COLUMNS)
    r = _row(scores.frame, "flare_direct", "min_prob")
    # Per probe: a min(0.79, 0.59) = 0.59 (right), b 0.49 (wrong), c 0.69 (right), d 0.64 (wrong); e left
    # out. Right above wrong: (0.59, 0.49) yes, (0.59, 0.64) no, (0.69, 0.49) yes, (0.69, 0.64) yes: 3 of 4.
    assert (r["probes"], r["wrong"], r["drafts"]) == (4, 2, 5)
    assert r["auroc"] == pytest.approx(0.75)
    rates = _rates(scores.frame, "flare_direct", "min_prob")
    assert list(rates) == list(triggers.get("min_prob").grid)
    # Draft scores 0.79, 0.59, 0.49, 0.69, 0.64: fire at score <= threshold.
    assert rates[0.0] == 0.0 and rates[0.4] == 0.0
    assert rates[0.5] == pytest.approx(1 / 5) and rates[0.6] == pytest.approx(2 / 5)
    assert rates[0.7] == pytest.approx(4 / 5) and rates[0.8] == 1.0 and rates[1.0] == 1.0


def test_mean_logprob_is_scored_from_logprobs_alone_and_the_others_are_skipped_with_why():
    scores = score_triggers(TRACES, rows(EM, errors={"e"}))
    assert list(dict.fromkeys(scores.frame["trigger"])) == ["min_prob", "mean_logprob"]

    def mean(p1, p2):
        return sum(map(math.log, [p1, 0.99, p2, 0.99])) / 4

    means = {
        "a": min(mean(*p) for p in SENTENCES["a"]),  # -0.150
        "b": mean(*SENTENCES["b"][0]),  # -0.210
        "c": mean(0.69, 0.99),  # -0.100
        "d": mean(*SENTENCES["d"][0]),  # -0.143
    }
    # Right a, c above wrong b, d? a above b, not above d; c above both: 3 of 4.
    assert means["a"] > means["b"] and means["a"] < means["d"] and means["c"] > means["d"] > means["b"]
    assert _row(scores.frame, "flare_direct", "mean_logprob")["auroc"] == pytest.approx(0.75)
    assert scores.skipped_lines() == [
        "entropy on flare_direct: the drafts carry neither entropies nor per-token alternatives "
        "(run with --record-topk K to record it)",
        "margin on flare_direct: the drafts carry no per-token alternatives (run with --record-topk K to record it)",
    ]
    text = format_tables(scores)
    assert "skipped: margin on flare_direct: the drafts carry no" in text and CAVEAT in text


def test_margin_and_entropy_with_recorded_alternatives():
    def drafted(p, runner_up, h):
        top = [[(" A", 0.99), (" a", 0.005)], [(" b", p), (" c", runner_up), (" d", 0.01)], [(".", 0.99), ("!", 0.001)]]
        return call([" A", " b", "."], [0.99, p, 0.99], top=top, entropies=[0.1, h, 0.05])

    spec = "flare_direct:trigger=margin"
    traces = [
        trace(spec, "r1", drafted(0.9, 0.05, 0.4)),  # right: margin 0.85, entropy 0.4
        trace(spec, "r2", drafted(0.5, 0.32, 1.6), drafted(0.7, 0.2, 0.9)),  # right: margins 0.18, 0.5
        trace(spec, "w1", drafted(0.4, 0.35, 2.2)),  # wrong: margin 0.05, entropy 2.2
    ]
    scores = score_triggers(traces, rows({"r1": 1.0, "r2": 1.0, "w1": 0.0}, strategy=spec))
    assert scores.skipped == [] and scores.notes == []
    margin = _row(scores.frame, spec, "margin")
    # Least confident per probe: r1 0.85, r2 0.18 (min), w1 0.05: both right above the wrong one.
    assert (margin["probes"], margin["wrong"], margin["drafts"], margin["auroc"]) == (3, 1, 4, 1.0)
    rates = _rates(scores.frame, spec, "margin")
    assert rates[0.1] == pytest.approx(1 / 4) and rates[0.2] == pytest.approx(2 / 4) and rates[0.9] == 1.0
    entropy = _row(scores.frame, spec, "entropy")
    # The highest per probe: r1 0.4, r2 1.6 (max), w1 2.2: the wrong one the least confident.
    assert entropy["auroc"] == 1.0
    rates = _rates(scores.frame, spec, "entropy")  # fires at score >= threshold; draft scores 0.4, 1.6, 0.9, 2.2
    assert rates[0.0] == 1.0 and rates[0.5] == pytest.approx(3 / 4) and rates[1.0] == pytest.approx(2 / 4)
    assert rates[2.0] == pytest.approx(1 / 4) and rates[2.5] == 0.0


def test_entropy_without_recorded_entropies_is_bounded_from_the_alternatives_with_a_note():
    top = [[(" A", 0.5), (" a", 0.25)]]
    other = [[(" B", 0.9), (" b", 0.05)]]
    traces = [
        trace("flare_direct", "r", call([" A"], [0.5], top=top)),
        trace("flare_direct", "w", call([" B"], [0.9], top=other)),
    ]
    scores = score_triggers(traces, rows({"r": 1.0, "w": 0.0}))
    # 0.5 and 0.25 with 0.25 left over: H = 1.5 ln 2 >= 1.0 fires; the other draft's bound is lower.
    rates = _rates(scores.frame, "flare_direct", "entropy")
    assert rates[1.0] == pytest.approx(1 / 2) and rates[1.5] == 0.0
    assert scores.notes == [
        "flare_direct: entropy bounded from its drafts' top alternatives (no entropies recorded): a lower bound of "
        "the entropy"
    ]


def test_an_undefined_auroc_is_missing_not_a_number():
    scores = score_triggers(TRACES[:3], rows({"a": 1.0, "b": 1.0, "c": 1.0}))
    assert scores.frame["auroc"].isna().all()
    text = format_tables(scores)
    assert "nan" not in text.lower()


def test_long_answers_are_judged_by_their_share_of_facts():
    # No long answer states every fact (em 0 for all): by em the AUROC would be undefined. By the
    # share of facts, a 0.79 (2 of 3), b 0.49 (0 of 3), c 0.69 (1 of 3): the more confident, the
    # more facts, in every pair.
    long = rows({"a": 0.0, "b": 0.0, "c": 0.0}).assign(f1=[2 / 3, 0.0, 1 / 3], facts_total=3)
    scores = score_triggers([trace("flare_direct", "a", sentence(0.79, 0.9)), *TRACES[1:3]], long)
    r = _row(scores.frame, "flare_direct", "min_prob")
    assert (r["probes"], r["wrong"], r["auroc"]) == (3, 3, 1.0)


def test_adaptive_judges_its_whole_draft_and_drafts_without_logprobs_are_skipped():
    whole = call([" Alpha", " is", " one", ".", " Beta"], [0.9, 0.99, 0.99, 0.99, 0.15])
    traces = [
        trace("adaptive", "a", whole),
        trace("adaptive", "b", call([" X", "."], [0.3, 0.99])),
        trace("flare_direct:trigger=self_check", "a", call([" A", "."], [0.5, 0.5], logprobs=False)),
        trace("no_retrieval", "a", call([" A"], [0.5], purpose="generate")),
    ]
    em = pd.concat(
        [
            rows({"a": 1.0, "b": 0.0}, strategy="adaptive"),
            rows({"a": 1.0}, strategy="flare_direct:trigger=self_check"),
            rows({"a": 1.0}, strategy="no_retrieval"),
        ]
    )
    scores = score_triggers(traces, em)
    # adaptive's score is over its whole output: 0.15, not the first sentence's 0.9
    assert _rates(scores.frame, "adaptive", "min_prob")[0.2] == pytest.approx(1 / 2)
    assert _rates(scores.frame, "adaptive", "min_prob")[0.1] == 0.0
    assert set(scores.frame["strategy"]) == {"adaptive"}  # no drafts: no_retrieval is not mentioned
    assert scores.skipped_lines() == [
        "entropy on adaptive: the drafts carry neither entropies nor per-token alternatives "
        "(run with --record-topk K to record it)",
        "margin on adaptive: the drafts carry no per-token alternatives (run with --record-topk K to record it)",
        "every probability trigger on flare_direct:trigger=self_check: the drafts carry no logprobs "
        "(run with --record-topk K to record it)",
    ]


def test_a_draft_without_logprobs_is_left_out_and_said_not_the_whole_strategy():
    # b's draft lost its logprobs (a run edited, or an endpoint that returned none on one call):
    # min_prob is judged on the other drafts, and b, with no judged draft, is left out.
    b = call([" Alpha", " is", " one", "."], [0.49, 0.9, 0.9, 0.9], logprobs=False)
    traces = [TRACES[0], trace("flare_direct", "b", b), *TRACES[2:4]]
    scores = score_triggers(traces, rows({k: EM[k] for k in "abcd"}))
    r = _row(scores.frame, "flare_direct", "min_prob")
    # a 0.59 (right), c 0.69 (right), d 0.64 (wrong): right above wrong in 1 of 2 pairs.
    assert (r["probes"], r["wrong"], r["drafts"]) == (3, 1, 5)
    assert r["auroc"] == pytest.approx(0.5)
    assert (
        "flare_direct: 1 of its 5 drafts carry no logprobs: they are not judged, and a probe without a "
        "judged draft is left out" in scores.notes
    )
    assert not any(line.startswith("every probability trigger on flare_direct") for line in scores.skipped_lines())


def test_on_the_committed_theta_sweep_min_prob_post_hoc_is_each_runs_own_gate():
    """A real run: at the threshold each sweep point ran with, the post-hoc min_prob rate is its
    retrieval_rate, and its AUROC its gate_auroc (both from the same drafts, no ignore options)."""
    import json
    from pathlib import Path

    from flarebench.bench.report import probe_rows
    from flarebench.probes.load import load_probe_set

    folder = Path(__file__).resolve().parents[1] / "reports" / "examples" / "theta-sweep"
    traces = [Trace.from_dict(json.loads(line)) for line in (folder / "traces.jsonl").read_text().splitlines()]
    probes = {p.id: p for p in load_probe_set("phantomwiki").probes}
    scores = score_triggers(traces, probe_rows(traces, probes))
    summary = pd.read_csv(folder / "summary.csv").set_index("strategy")
    assert set(scores.frame["strategy"]) == set(summary.index) and len(summary) == 6
    for spec, row in summary.iterrows():
        theta = float(spec.partition("=")[2])
        assert _row(scores.frame, spec, "min_prob")["auroc"] == pytest.approx(row["gate_auroc"], abs=1e-6)
        assert _rates(scores.frame, spec, "min_prob")[theta] == pytest.approx(row["retrieval_rate"], abs=1e-6)
    skipped = {(s.trigger, s.strategy) for s in scores.skipped}
    assert skipped == {(t, s) for t in ("entropy", "margin") for s in summary.index}


def test_every_probability_trigger_has_an_ascending_grid_within_its_range():
    for name in triggers.names():
        cls = triggers.get(name)
        if not issubclass(cls, triggers.TokenTrigger):
            continue
        lo, hi = cls.valid_range
        assert cls.grid and list(cls.grid) == sorted(set(cls.grid)), name
        assert all(lo <= t <= hi for t in cls.grid), name
        assert cls.fires_at(cls.grid[0], cls.grid[0])  # at the threshold itself: fires


def test_the_metrics_doc_names_every_column_of_triggers_csv():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "metrics.md").read_text(encoding="utf-8")
    assert TRIGGERS_CSV in doc
    for column in COLUMNS:
        assert f"`{column}`" in doc, column


@pytest.mark.slow
def test_score_writes_triggers_csv_whose_min_prob_auroc_is_the_gate_auroc(tmp_path, scripted_lm):
    run_dir = tmp_path / "run"
    code, out, err = run_cli(
        "run", "--strategy", "flare_direct", "--strategy", "single_time", "--limit", "8",
        "--record-topk", "3", "--report-dir", str(run_dir),
    )  # fmt: skip
    assert code == 0, out + err
    assert not (run_dir / TRIGGERS_CSV).exists()  # written by score and report
    code, out, err = run_cli("score", str(run_dir))
    assert code == 0, out + err
    frame = pd.read_csv(run_dir / TRIGGERS_CSV)
    assert list(frame.columns) == list(COLUMNS)
    assert set(frame["strategy"]) == {"flare_direct"}
    assert list(dict.fromkeys(frame["trigger"])) == ["min_prob", "mean_logprob", "entropy", "margin"]
    summary = pd.read_csv(run_dir / "summary.csv").set_index("strategy")
    assert frame[frame["trigger"] == "min_prob"]["auroc"].iloc[0] == pytest.approx(
        summary.loc["flare_direct", "gate_auroc"]
    )
    # At the threshold the run used (theta 0.8), the post-hoc rate is the run's own.
    at = frame[(frame["trigger"] == "min_prob") & (frame["threshold"] == 0.8)]["retrieval_rate"].iloc[0]
    assert at == pytest.approx(summary.loc["flare_direct", "retrieval_rate"])
    assert "triggers post hoc (triggers.csv)" in out and "margin: share of drafts that would fire" in out
    code, out2, err = run_cli("report", str(run_dir))
    assert code == 0 and "triggers post hoc (triggers.csv)" in out2


@pytest.mark.slow
def test_score_of_a_run_without_top_k_skips_margin_and_entropy(tmp_path, scripted_lm):
    run_dir = tmp_path / "run"
    code, out, err = run_cli("run", "--strategy", "flare_direct", "--limit", "4", "--report-dir", str(run_dir))
    assert code == 0, out + err
    code, out, err = run_cli("score", str(run_dir))
    assert code == 0, out + err
    assert "skipped: margin on flare_direct: the drafts carry no per-token alternatives" in out
    assert set(pd.read_csv(run_dir / TRIGGERS_CSV)["trigger"]) == {"min_prob", "mean_logprob"}
    run_dir = tmp_path / "plain"
    assert run_cli("run", "--strategy", "single_time", "--limit", "2", "--report-dir", str(run_dir))[0] == 0
    code, out, err = run_cli("score", str(run_dir))
    assert "triggers" not in out and not (run_dir / TRIGGERS_CSV).exists()
