"""The adoption table (bench/adoption.py): before (the reference) and after (each other strategy)
from the summary columns, a missing value shown as "–" with its reason and never as 0, the paired
intervals of the per-probe rows, and adoption.md written by every entry point (`run`/`compare`,
`pytest bench`, `score`) and shown in report.html."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flarebench.bench.adoption import ADOPTION_MD, MISSING, adoption, markdown, measures
from flarebench.bench.metrics import probe_row, summarize
from flarebench.bench.scorers.deltas import paired
from flarebench.bench.uncertainty import p95, paired_bootstrap
from tests.scripted import run_cli
from tests.test_triggering import _runs

EXAMPLES = Path(__file__).resolve().parents[1] / "reports" / "examples"

#: The adoption study of the issue, as a hand-made summary: single-shot retrieval before, FLARE after.
STUDY = {
    "strategy": ["single_time", "flare_direct"],
    "faithfulness": [0.58, 0.84],
    "faithfulness_method": ["lexical-slots", "lexical-slots"],
    "incomplete_rate": [0.37, 0.11],
    "triggered_share": [0.0, 0.42],
    "retrievals_when_triggered": [np.nan, 1.6],
    "latency_p95_s": [2.4, 4.1],
    "tokens_rel_triggered": [np.nan, 0.94],
    "tokens_rel_blended": [0.0, 0.38],
    "cost_per_q": [0.0, 0.0],
    "cost_rel_triggered": [np.nan, np.nan],
    "cost_rel_blended": [np.nan, np.nan],
    "delta_reference": ["single_time", "single_time"],
}
STREAMING_LABELS = ("p95 time to first sentence", "p95 mid-answer stall")
SHORT_LABELS = [
    "answer faithfulness",
    "incomplete answers",
    "share of queries where active retrieval fired",
    "mean mid-answer retrievals when it fired",
    "p95 end-to-end latency",
    "p95 time to first sentence",
    "p95 mid-answer stall",
    "tokens on queries where it fired",
    "tokens, blended over all queries",
]


def _cells(a, strategy: str) -> dict[str, tuple[str, str, str]]:
    table = next(t for t in a.tables if t.strategy == strategy)
    return {r.label: (r.before, r.after, r.difference) for r in table.rows}


def test_the_rows_of_a_hand_made_summary():
    a = adoption(pd.DataFrame(STUDY))
    assert a.reference == "single_time" and a.absent is None
    assert [t.strategy for t in a.tables] == ["flare_direct"]
    cells = _cells(a, "flare_direct")
    # a row whose column the summary lacks (here the streaming ones) is left out
    assert list(cells) == [label for label in SHORT_LABELS if label not in STREAMING_LABELS]
    assert cells["answer faithfulness"] == ("58.0%", "84.0%", "+26.0 pts")
    assert cells["incomplete answers"] == ("37.0%", "11.0%", "-26.0 pts")
    assert cells["share of queries where active retrieval fired"] == ("0.0%", "42.0%", "+42.0 pts")
    assert cells["mean mid-answer retrievals when it fired"] == (
        f"{MISSING} (never fired)",
        "1.60",
        f"{MISSING} (reference: never fired)",
    )
    assert cells["p95 end-to-end latency"] == ("2.40 s", "4.10 s", "+1.70 s")
    assert cells["tokens on queries where it fired"] == (f"{MISSING} (the reference)", "+94.0%", "+94.0%")
    assert cells["tokens, blended over all queries"] == ("– (the reference)", "+38.0%", "+38.0%")
    # Made from the summary alone: no interval, and the notes say so; a local model has no cost rows.
    assert any("no intervals" in n for n in a.notes)
    assert any("priced at 0" in n for n in a.notes)

    md = markdown(a, "study")
    assert md.startswith("# Adoption table: run study\n")
    assert "| measured " in md and "| before (single_time) " in md and "| after (flare_direct) " in md
    for label in list(cells):
        assert re.search(rf"^\| {re.escape(label)} +\|", md, re.MULTILINE), label
        assert f"- **{label}** (`" in md  # each row defined in the legend, with its column
    assert "[summary.md](summary.md#columns)" in md and "docs/metrics.md" in md


def test_a_pipe_in_a_strategy_name_does_not_shift_the_cells_of_a_markdown_table():
    from flarebench.bench.report import format_table

    study = pd.DataFrame(STUDY).replace({"flare_direct": "team|rag", "single_time": "base|line"})
    for md in (markdown(adoption(study, reference="base|line"), "run"), format_table(study)):
        rows = [line for line in md.splitlines() if line.startswith("|")]
        # Every row of a table has as many cells as its header (split on the unescaped pipes).
        widths = {len(re.split(r"(?<!\\)\|", line)) for line in rows}
        assert rows and len(widths) == 1 and "team\\|rag" in md, md


def test_a_strategy_that_never_fired_shows_a_dash_never_0():
    study = pd.DataFrame(STUDY)
    never = study.iloc[[1]].assign(
        strategy="no_retrieval",
        faithfulness=np.nan,
        faithfulness_method="n/a: no context",
        triggered_share=0.0,
        retrievals_when_triggered=np.nan,
        tokens_rel_triggered=np.nan,
    )
    cells = _cells(adoption(pd.concat([study, never], ignore_index=True)), "no_retrieval")
    assert cells["mean mid-answer retrievals when it fired"] == (f"{MISSING} (never fired)",) * 3
    assert cells["tokens on queries where it fired"][1:] == (f"{MISSING} (never fired)",) * 2
    assert cells["answer faithfulness"][1:] == (f"{MISSING} (no context)",) * 2
    # a share of 0 is a measured 0: shown as such
    assert cells["share of queries where active retrieval fired"][1] == "0.0%"
    for label in ("mean mid-answer retrievals when it fired", "tokens on queries where it fired"):
        assert not any(re.match(r"[+-]?0(\.0+)?\b", cell) for cell in cells[label]), label


def test_a_missing_reference_is_one_line_instead_of_a_table():
    summary = pd.DataFrame(STUDY).iloc[[1]].assign(delta_reference=None)
    a = adoption(summary, reference="single_time")
    assert a.tables == () and "`single_time`" in a.absent and "--strategy single_time" in a.absent
    # the advice says where adding the strategy works, and what to do after a sweep or a calibration
    assert "After `run`, `compare` or `pytest bench`" in a.absent and "flarebench compare --budget" in a.absent
    md = markdown(a, "run")
    assert "|" not in md and md.count("\n") == 3  # the title, a blank line, the one line
    # the default reference, when the summary names none
    assert adoption(summary).reference == "single_time"
    alone = adoption(pd.DataFrame(STUDY).iloc[[0]])
    assert alone.tables == () and "only the reference strategy `single_time`" in alone.absent
    assert "no probe has finished" in adoption(pd.DataFrame(columns=list(STUDY))).absent


def test_the_incomplete_row_says_which_definition_it_uses():
    short = adoption(pd.DataFrame(STUDY))
    long = adoption(pd.DataFrame({**STUDY, "incomplete_or_wrong_rate": [0.37, 0.11]}))
    assert ("incomplete answers", "incomplete_rate") in [(label, col) for label, col, _ in short.legend]
    assert ("incomplete or wrong-version answers", "incomplete_or_wrong_rate") in [
        (label, col) for label, col, _ in long.legend
    ]
    assert "incomplete or wrong-version answers" not in _cells(short, "flare_direct")
    assert _cells(long, "flare_direct")["incomplete or wrong-version answers"][:2] == ("37.0%", "11.0%")
    docs = {col: doc for _, col, doc in short.legend + long.legend}
    assert docs["incomplete_rate"].startswith("short answers") and docs["incomplete_or_wrong_rate"].startswith("long")


def test_the_long_definition_pairs_the_long_probes_only():
    from flarebench.probes import Probe
    from tests.test_facts import ALL, ONE_MISSING, SHORT, UPGRADE, WRONG_ONLY, long_trace

    probes = [UPGRADE] + [Probe(**{**UPGRADE.__dict__, "id": f"up{i}"}) for i in range(1, 3)]
    before = [ONE_MISSING, WRONG_ONLY, ALL]  # two of three long answers incomplete or wrong
    after = [ALL, ALL, ALL]
    pairs = [(long_trace(o, p.id, "single_time"), p) for o, p in zip(before, probes, strict=True)]
    pairs += [(long_trace(o, p.id, "flare_direct"), p) for o, p in zip(after, probes, strict=True)]
    # a short probe neither answers with a statement: incomplete_rate counts it, this row does not
    pairs += [(long_trace("no idea", "s1", s), SHORT) for s in ("single_time", "flare_direct")]
    rows = pd.DataFrame([probe_row(t, p) for t, p in pairs])
    a = adoption(summarize(rows, reference="single_time"), rows)
    label = "incomplete or wrong-version answers"
    expected = paired(pd.Series({"up": 0.0, "up1": 0.0, "up2": 0.0}), pd.Series({"up": 1.0, "up1": 1.0, "up2": 0.0}))
    assert _cells(a, "flare_direct")[label] == (
        "66.7%",
        "0.0%",
        f"{100 * expected.delta:+.1f} pts [{100 * expected.lo:+.1f}, {100 * expected.hi:+.1f}]",
    )
    assert "incomplete answers" not in _cells(a, "flare_direct")


def test_streaming_and_cost_rows_where_the_summary_has_them():
    summary = pd.DataFrame(
        {
            **STUDY,
            "ttfs_p95_s": [np.nan, 0.8],
            "stall_p95_s": [0.0, 1.2],
            "cost_per_q": [0.001, 0.0014],
            "cost_rel_triggered": [np.nan, 0.9],
            "cost_rel_blended": [0.0, 0.4],
        }
    )
    a = adoption(summary)
    cells = _cells(a, "flare_direct")
    labels = list(cells)
    assert labels.index("p95 time to first sentence") == labels.index("p95 end-to-end latency") + 1
    assert cells["p95 time to first sentence"] == (
        f"{MISSING} (no answer showed a sentence)",
        "0.80 s",
        f"{MISSING} (reference: no answer showed a sentence)",
    )
    assert cells["p95 mid-answer stall"] == ("0.00 s", "1.20 s", "+1.20 s")
    assert cells["cost on queries where it fired"] == (f"{MISSING} (the reference)", "+90.0%", "+90.0%")
    assert cells["cost, blended over all queries"] == ("– (the reference)", "+40.0%", "+40.0%")
    assert not any("cost rows" in n for n in a.notes)
    unpriced = adoption(pd.DataFrame({**STUDY, "cost_per_q": [np.nan, np.nan]}))
    assert any("has no price" in n for n in unpriced.notes)
    assert "cost, blended over all queries" not in _cells(unpriced, "flare_direct")


def test_per_probe_rows_give_the_paired_intervals_of_the_deltas():
    rows = _runs()  # single_time and flare_direct on p1 (fired, 5 s) and p2 (1.5 s)
    method = "lexical-slots"
    faithfulness = {
        ("single_time", "p1"): {"faithfulness": 0.5, "faithfulness_method": method, "judge_parse_failures": 0},
        ("single_time", "p2"): {
            "faithfulness": None,
            "faithfulness_method": "n/a: no claims",
            "judge_parse_failures": 0,
        },
        ("flare_direct", "p1"): {"faithfulness": 1.0, "faithfulness_method": method, "judge_parse_failures": 0},
        ("flare_direct", "p2"): {"faithfulness": 0.25, "faithfulness_method": method, "judge_parse_failures": 0},
    }
    summary = summarize(rows, reference="single_time", faithfulness=faithfulness)
    a = adoption(summary, rows, faithfulness)
    assert not any("no intervals" in n for n in a.notes)
    cells = _cells(a, "flare_direct")
    fired = paired(pd.Series({"p1": 1.0, "p2": 0.0}), pd.Series({"p1": 0.0, "p2": 0.0}))
    assert cells["share of queries where active retrieval fired"][2] == (
        f"{100 * fired.delta:+.1f} pts [{100 * fired.lo:+.1f}, {100 * fired.hi:+.1f}]"
    )
    latency = paired_bootstrap([5.0, 1.5], [1.0, 2.0], statistic=p95)
    assert latency.delta == pytest.approx(np.percentile([5.0, 1.5], 95) - np.percentile([1.0, 2.0], 95))
    assert cells["p95 end-to-end latency"][2].startswith(
        f"{latency.delta:+.2f} s [{latency.lo:+.2f}, {latency.hi:+.2f}]"
    )
    # faithfulness is paired over the probes both have a score for (p1): 1.0 - 0.5, while the
    # summary's means are over each strategy's own scored probes; one pair has no interval, and
    # is never starred (its "interval" would be its own difference)
    assert cells["answer faithfulness"] == ("50.0%", "62.5%", "+50.0 pts (one probe has both: no interval)")
    without = _cells(adoption(summarize(rows, reference="single_time"), rows), "flare_direct")
    assert without["answer faithfulness"] == (f"{MISSING} (not scored)",) * 3


def test_strategies_that_share_no_probe_say_so_not_never_fired():
    # A rescored folder whose strategies ran on different probes: the relative rows have nothing to
    # be taken over, which is not "never fired" nor "the reference used no tokens".
    rows = _runs()
    rows = rows[(rows["strategy"] == "single_time") == (rows["probe_id"] == "p1")]
    cells = _cells(adoption(summarize(rows, reference="single_time"), rows), "flare_direct")
    for label in ("tokens on queries where it fired", "tokens, blended over all queries"):
        assert cells[label][1:] == (f"{MISSING} (no probe has both)",) * 2, label


def test_a_difference_over_fewer_probes_than_a_side_has_says_over_which():
    from flarebench.bench.adoption import FAITHFULNESS, _difference

    # adaptive retrieved (and got a faithfulness score) on 2 probes, single_time on 3: the paired
    # difference is over p1 and p2 only, so it is not the after value minus the before value.
    mine, theirs = pd.Series({"p1": 0.0, "p2": 0.0}), pd.Series({"p1": 0.0, "p2": 0.0, "p3": 1.0})
    cell = _difference(FAITHFULNESS, {"faithfulness": 1 / 3}, {"faithfulness": 0.0}, (mine, theirs))
    assert cell == "+0.0 pts [+0.0, +0.0] (over the 2 probes both have)"
    assert "over the" not in _difference(FAITHFULNESS, {"faithfulness": 0.0}, {"faithfulness": 0.0}, (mine, mine))


def test_the_tables_a_summary_carries_are_not_copied_by_each_operation_on_it():
    # pandas deep-copies a frame's attrs on every operation; the tables are immutable, so
    # copying them would only cost time (a second of a short run's report).
    import copy

    rows = _runs()
    summary = summarize(rows, reference="single_time")
    summary.attrs["adoption"] = a = adoption(summary, rows)
    assert copy.deepcopy(a) is a
    assert summary[["strategy"]].attrs["adoption"] is a


def test_another_statistic_resamples_the_same_draws_and_the_mean_is_unchanged():
    rng = np.random.default_rng(3)
    a, b = rng.random(30), rng.random(30)
    mean = paired_bootstrap(a, b)
    as_statistic = paired_bootstrap(a, b, statistic=lambda x: np.mean(x, axis=-1))
    assert (as_statistic.delta, as_statistic.lo, as_statistic.hi) == pytest.approx((mean.delta, mean.lo, mean.hi))
    one = paired_bootstrap([3.0], [1.0], statistic=p95)
    assert (one.delta, one.lo, one.hi, one.n) == (2.0, 2.0, 2.0, 1)


def _tables(md: str) -> dict[str, list[str]]:
    """Each "## strategy" section's row labels (first cells of its table body)."""
    out: dict[str, list[str]] = {}
    for section in md.split("\n## ")[1:]:
        name, _, body = section.partition("\n")
        lines = [ln for ln in body.splitlines() if ln.startswith("|")]
        if lines:
            out[name] = [ln.split("|")[1].strip() for ln in lines[2:]]
    return out


@pytest.mark.parametrize("example", ["compare", "theta-sweep"])
def test_an_example_has_a_row_per_listed_measure(example):
    # The committed files: test_examples.py checks that rescoring the run gives them byte for byte.
    md = (EXAMPLES / example / ADOPTION_MD).read_text(encoding="utf-8")
    summary = pd.read_csv(EXAMPLES / example / "summary.csv")
    shown, _ = measures(summary)
    assert [m.label for m in shown] == SHORT_LABELS  # a local model, short answers
    tables = _tables(md)
    reference = summary["delta_reference"].iloc[0]
    specs = summary.loc[summary["bound"] != "oracle", "strategy"]  # a comparison's oracle row is no spec
    assert list(tables) == [s for s in specs if s != reference]  # every spec but the reference
    assert all(labels == SHORT_LABELS for labels in tables.values())


def test_the_readmes_sample_is_the_example_runs_table():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    sample = readme.split("### Adoption table", 1)[1].split("\n\n| measured |", 1)[1].split("\n\n", 1)[0]
    shown = [[c.strip() for c in line.split("|")[1:-1]] for line in sample.splitlines()[2:]]
    md = (EXAMPLES / "compare" / ADOPTION_MD).read_text(encoding="utf-8")
    table = md.split("\n## flare_direct\n", 1)[1].split("\n## ", 1)[0]
    committed = [[c.strip() for c in line.split("|")[1:-1]] for line in table.strip().splitlines()[2:]]
    assert shown == committed


@pytest.mark.slow
def test_run_and_score_write_the_same_adoption_md_and_a_missing_reference_is_said(tmp_path, scripted_lm):
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."scripted"]\nprompt_per_1m = 3.0\ncompletion_per_1m = 15.0\nper_retrieval = 0.001\n')
    run_dir = tmp_path / "run"
    strategies = ["--strategy", "single_time", "--strategy", "flare_direct:theta=0.7"]
    code, out, err = run_cli(
        "compare", *strategies, "--limit", "4", "--report-dir", str(run_dir), "--prices", str(prices)
    )
    assert code == 0, out + err
    md = (run_dir / ADOPTION_MD).read_text(encoding="utf-8")
    labels = _tables(md)["flare_direct:theta=0.7"]
    assert labels == SHORT_LABELS + ["cost on queries where it fired", "cost, blended over all queries"]
    assert re.search(r"\| p95 end-to-end latency +\| [\d.]+ s +\| [\d.]+ s +\| [+-][\d.]+ s \[", md)
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    section = page.split('<section id="adoption">', 1)[1].split("</section>", 1)[0]
    assert 'id="adoption-1"' in section
    assert all(label in section for label in labels) and 'href="#columns"' in section

    code, out, err = run_cli("score", str(run_dir))
    assert code == 0, out + err
    assert (run_dir / ADOPTION_MD).read_text(encoding="utf-8") == md
    # A run without its (default) reference says how to add it (a rescoring cannot run it: refused
    # there; one asked for with --reference is refused before the run).
    other = tmp_path / "other"
    code, out, err = run_cli("run", "--strategy", "no_retrieval", "--limit", "1", "--report-dir", str(other))
    assert code == 0, out + err
    again = (other / ADOPTION_MD).read_text(encoding="utf-8")
    assert "the reference strategy `single_time`" in again and "|" not in again
    assert "`--strategy single_time` added, in another run folder (`--report-dir`) or with `--overwrite`" in again


pytest_plugins = ["pytester"]


@pytest.mark.slow
def test_pytest_bench_writes_adoption_md(pytester, tmp_path, scripted_lm):
    # One run in this process first, as tests/test_run_folder.py does before in-process pytest runs.
    assert run_cli("run", "--strategy", "single_time", "--limit", "1", "--report-dir", str(tmp_path / "warm"))[0] == 0
    run_dir = tmp_path / "run"
    bench = Path(__file__).resolve().parents[1] / "bench"
    args = ["--strategy", "single_time", "--strategy", "no_retrieval", "--limit", "2", "--report-dir", str(run_dir)]
    result = pytester.runpytest_inprocess(str(bench), "-p", "no:cacheprovider", *args)
    assert result.ret == 0, result.stdout.str()
    md = (run_dir / ADOPTION_MD).read_text(encoding="utf-8")
    assert list(_tables(md)) == ["no_retrieval"]
    assert '<section id="adoption">' in (run_dir / "report.html").read_text(encoding="utf-8")


def test_a_strategy_that_never_retrieved_is_said_beside_its_savings():
    rows = [("single_time", 1.0), ("tool_search", 0.0), ("no_retrieval", 0.0)]
    summary = pd.DataFrame([{"strategy": s, "retrievals_per_q": r, "cost_per_q": 0.0} for s, r in rows])
    _, notes = measures(summary)
    assert (
        "tool_search never retrieved: closed-book answers, so their tokens and latency are those of "
        "answering without documents"
    ) in notes
    assert not any(n.startswith("no_retrieval") for n in notes)


def test_a_difference_of_milliseconds_is_never_shown_as_zero():
    # "-0.00 s [-0.00, -0.00] *" read as a significant nothing.
    from flarebench.bench.adoption import LATENCY, _bound, _number

    p95 = LATENCY
    assert _number(p95, -0.0021, signed=True) == "-0.0021 s" and _bound(p95, -0.0004) == "-0.00040"
    assert _number(p95, 1.984, signed=True) == "+1.98 s" and _number(p95, 0.0) == "0.00 s"


def test_errors_are_a_row_of_their_own_and_left_out_of_the_per_probe_rows():
    rows = _runs()  # single_time and flare_direct on p1 (flare_direct fired, 5 s) and p2 (1.5 s)
    rows["error"] = None
    rows.loc[(rows["strategy"] == "flare_direct") & (rows["probe_id"] == "p1"), "error"] = "RuntimeError: boom"
    summary = summarize(rows, reference="single_time")
    a = adoption(summary, rows)
    cells = _cells(a, "flare_direct")
    # First, so that every rate below is read knowing a probe gave no answer.
    assert list(cells)[0] == "probes that raised an error"
    assert cells["probes that raised an error"] == ("0 of 2", "1 of 2", "+1")
    # The errored probe's wall time is no answer's: the summary's p95 and the paired one leave it out.
    assert (
        cells["p95 end-to-end latency"][1]
        == f"{summary.set_index('strategy').at['flare_direct', 'latency_p95_s']:.2f} s"
    )
    assert cells["p95 end-to-end latency"][2].endswith("(one probe has both: no interval)")
    assert "(`errors`): probes whose run raised" in markdown(a, "run")
    # Without errors, no such row.
    assert "probes that raised an error" not in _cells(
        adoption(summarize(_runs(), reference="single_time")), "flare_direct"
    )


def test_a_strategy_whose_every_probe_raised_says_so_in_every_empty_cell():
    rows = _runs()
    rows["error"] = None
    rows.loc[rows["strategy"] == "flare_direct", "error"] = "RuntimeError: boom"
    cells = _cells(adoption(summarize(rows, reference="single_time"), rows), "flare_direct")
    assert cells["probes that raised an error"] == ("0 of 2", "2 of 2", "+2")
    empty = {label: after for label, (_, after, _) in cells.items() if after.startswith(MISSING)}
    assert "p95 end-to-end latency" in empty and "tokens, blended over all queries" in empty
    assert set(empty.values()) == {f"{MISSING} (every probe raised an error)"}, empty


def test_a_run_under_way_says_which_strategy_has_not_run_yet_and_its_status(tmp_path):
    from flarebench.bench.report import write_summary

    alone = pd.DataFrame(STUDY).iloc[[0]]
    a = adoption(alone, pending=["single_time", "flare_direct", "ircot"])
    assert a.absent == "No adoption table yet: `flare_direct`, `ircot` have not run yet."
    assert "add a strategy" in adoption(alone).absent  # nothing pending: the advice stands
    # adoption.md says that the run has not finished, as summary.md does, under its title.
    config = {"probes": {"name": "engdocs"}, "lm": {"name": "m"}, "retriever": {"name": "bm25"}}
    write_summary(tmp_path, pd.DataFrame(STUDY), config, status="interrupted")
    status = (tmp_path / "summary.md").read_text().split("\n\n")[1]
    assert status.startswith("**Run status: interrupted.**")
    assert (
        (tmp_path / ADOPTION_MD).read_text().startswith(f"# Adoption table: run {tmp_path.name}\n\n{status}\n\nBefore:")
    )
    write_summary(tmp_path, pd.DataFrame(STUDY), config, status="complete")
    assert "Run status" not in (tmp_path / ADOPTION_MD).read_text()


def test_a_run_folder_named_with_markup_is_shown_as_written_in_the_markdown_files(tmp_path):
    from flarebench.bench.report import write_summary

    run_dir = tmp_path / "run<u>&3"
    run_dir.mkdir()
    config = {"probes": {"name": "engdocs"}, "lm": {"name": "m"}, "retriever": {"name": "bm25"}}
    write_summary(run_dir, pd.DataFrame(STUDY), config)
    assert (run_dir / "summary.md").read_text().startswith("# flarebench run run&lt;u&gt;&amp;3\n")
    assert (run_dir / ADOPTION_MD).read_text().startswith("# Adoption table: run run&lt;u&gt;&amp;3\n")


def test_the_faithfulness_row_names_the_method_that_scored_the_run():
    judged = pd.DataFrame(STUDY).assign(faithfulness_method=["ragas-faithfulness:openai:j", "n/a: no context"])
    [row] = [r for r in adoption(judged).legend if r[1] == "faithfulness"]
    assert row[2].endswith("; in this run: ragas-faithfulness:openai:j")
    unjudged = pd.DataFrame(STUDY).assign(faithfulness_method="n/a: not judged (the judge failed)")
    [row] = [r for r in adoption(unjudged).legend if r[1] == "faithfulness"]
    assert row[2].endswith("; in this run: n/a: not judged (the judge failed)")
