"""The scorer registry (bench/scorers/): declarations are checked when made, the summary, the gate,
the report's definitions and the generated tables all follow them, and a new scorer module is all
it takes to add a metric."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from flarebench.bench import gate, metrics
from flarebench.bench.metrics import probe_row
from flarebench.bench.scorers import registry
from flarebench.bench.scorers.__main__ import spliced, stale
from flarebench.bench.scorers.registry import HIGHER, LOWER, Column, Group, ScorerError, Scoring, scorer
from tests.scripted import run_cli
from tests.test_imports import _cycle, _imports, _modules

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def isolated_scorers(monkeypatch):
    """Scorers a test registers are gone when it ends."""
    registry.load()  # the built-ins are registered first, and stay
    monkeypatch.setattr(registry, "_SCORERS", dict(registry._SCORERS))


def test_the_generated_tables_are_current():
    assert stale() == [], "run: python -m flarebench.bench.scorers --write"


def test_a_generated_block_is_replaced_whole_and_needs_its_markers():
    begin = "<!-- generated: t (python -m flarebench.bench.scorers --write; edit bench/scorers/, not here) -->"
    text = f"intro\n\n{begin}\n\n| old |\n\n<!-- end generated: t -->\n\nafter\n"
    new = spliced(text, "t", "| new |")
    assert new == f"intro\n\n{begin}\n\n| new |\n\n<!-- end generated: t -->\n\nafter\n"
    assert spliced(new, "t", "| new |") == new
    with pytest.raises(ValueError, match="no generated block 'u'"):
        spliced(text, "u", "| new |")


def test_everything_derived_follows_the_declarations():
    declared = registry.columns()
    assert metrics.summary_columns() == [c.name for c in declared if not c.optional]
    assert metrics.optional_columns() == [c.name for c in declared if c.optional]
    assert metrics.column_docs() == {c.name: c.doc for c in declared}
    gateable = [c.name for c in declared if c.better is not None]
    assert list(gate.metric_names()) == gateable + list(gate.RATIO_METRICS)
    assert {c.name: dict(c.tolerance) for c in declared if c.always_gated} == gate.always_gated()
    table = registry.column_table().splitlines()
    assert [line.split("`")[1] for line in table[2:]] == [c.name for c in declared]


def test_declarations_that_contradict_themselves_are_refused():
    with pytest.raises(ScorerError, match="no definition"):
        Column("x", "")
    with pytest.raises(ScorerError, match="better must be HIGHER, LOWER or None"):
        Column("x", "doc", better="up")
    with pytest.raises(ScorerError, match="a default tolerance needs better=HIGHER or LOWER"):
        Column("x", "doc", tolerance={"max_drop": 0.1})
    with pytest.raises(ScorerError, match="a higher-is-better column is bounded by max_drop or max_drop_rel"):
        Column("x", "doc", better=HIGHER, tolerance={"max_rise": 0.1})
    with pytest.raises(ScorerError, match="always_gated needs a default tolerance"):
        Column("x", "doc", better=LOWER, always_gated=True)
    with pytest.raises(ScorerError, match="an optional column cannot be always gated"):
        Column("x", "doc", better=LOWER, tolerance={"max_rise": 0.1}, always_gated=True, optional=True)
    with pytest.raises(ScorerError, match="at least one column"):
        scorer(order=999)


def test_registration_refuses_a_taken_name_order_or_column(isolated_scorers):
    def em_again(g):
        return {}

    with pytest.raises(ScorerError, match=r"column\(s\) declared elsewhere: em \(answer\)"):
        scorer(Column("em", "doc"), order=999)(em_again)
    # Each side named with its module, so that a clash of two files of bench/scorers/ is found.
    with pytest.raises(
        ScorerError,
        match=r"em_again \(tests\.test_scorers\): order 20 is taken by answer \(flarebench\.bench\.scorers\.answer\)",
    ):
        scorer(Column("fresh", "doc"), order=20)(em_again)

    def answer(g):
        return {}

    with pytest.raises(
        ScorerError,
        match=r"scorer answer \(tests\.test_scorers\): the name is taken by flarebench\.bench\.scorers\.answer",
    ):
        scorer(Column("fresh", "doc"), order=999)(answer)


def test_a_scorer_may_not_return_an_undeclared_column(isolated_scorers):
    @scorer(Column("mine", "doc"), order=999)
    def sloppy(g):
        return {"mine": 1.0, "theirs": 2.0}

    rows = pd.DataFrame({"strategy": ["s"], "error": [None]})
    with pytest.raises(
        ScorerError, match=r"^scorer sloppy \(\S+test_scorers.py\): returned undeclared column\(s\): theirs$"
    ):
        sloppy(Group("s", rows, Scoring(groups={"s": rows})))


def test_a_scorer_that_fails_on_the_traces_is_one_line_naming_it_its_file_and_line(isolated_scorers):
    # A plugin's mistakes surfaced as a traceback through pandas, naming neither scorer nor file.
    @scorer(Column("raising", "doc", better=LOWER), order=991)
    def raising(g):
        return {"raising": g.rows["no_such_column"].mean()}

    @scorer(Column("floaty", "doc"), order=992)
    def floaty(g):
        return 3.0

    @scorer(Column("wordy", "doc", better=LOWER), Column("label", "doc"), order=993)
    def wordy(g):
        return {"wordy": "high", "label": "high"}  # text may fill a column no gate bounds

    rows = pd.DataFrame({"strategy": ["s"], "error": [None]})
    group = Group("s", rows, Scoring(groups={"s": rows}))
    line = raising.summarize.__code__.co_firstlineno + 2
    with pytest.raises(ScorerError) as e:
        raising(group)
    assert str(e.value) == (
        f"scorer raising ({__file__}): summarize raised KeyError: 'no_such_column' (test_scorers.py:{line})"
    )
    with pytest.raises(ScorerError, match=r"\): returned float, not a dict of column: value$"):
        floaty(group)
    # A callable without code of its own (a partial) is named by its module, not an AttributeError.
    partial = functools.partial(lambda g, column: {"raising": g.rows[column].mean()}, column="no_such_column")
    with pytest.raises(ScorerError, match=r"^scorer raising \(functools\): summarize raised KeyError"):
        dataclasses.replace(raising, summarize=partial)(group)
    with pytest.raises(
        ScorerError, match=r"column wordy may be gated \(lower is better\), so its value must be a finite number"
    ):
        wordy(group)
    with pytest.raises(ScorerError, match=r"\(NaN when missing\), got inf$"):
        dataclasses.replace(wordy, summarize=lambda g: {"wordy": float("inf")})(group)
    assert math.isnan(dataclasses.replace(wordy, summarize=lambda g: {"wordy": float("nan")})(group)["wordy"])

    # Its notes too: a number for the settings line, a string for the findings' list, or a raise.
    def boom(summary, scoring):
        raise RuntimeError("boom")

    @scorer(Column("noted", "doc"), order=996, settings=lambda scoring: 42, findings=lambda summary, scoring: "abc")
    def noted(g):
        return {"noted": 1.0}

    with pytest.raises(ScorerError, match=r"^scorer noted \(\S+\): settings returned int, not a string$"):
        noted.setting(group.scoring)
    with pytest.raises(ScorerError, match=r"\): findings returned str, not a list of strings$"):
        noted.found(rows, group.scoring)
    with pytest.raises(ScorerError, match=r"\): findings raised RuntimeError: boom \(test_scorers.py:\d+\)$"):
        dataclasses.replace(noted, findings=boom).found(rows, group.scoring)


def test_a_per_probe_value_may_not_replace_another_scorers(isolated_scorers):
    # A plugin's per_probe returning "em" replaced the built-in per-probe em: every summary's em changed.
    @scorer(Column("words", "doc"), order=994, per_probe=lambda trace, probe, row: {"em": 0.0, "n_words": 3})
    def words(g):
        return {"words": 3.0}

    with pytest.raises(
        ScorerError, match=r"^scorer words \(\S+\): per_probe sets row value\(s\) already set: em \(answer\)$"
    ):
        probe_row(_trace(cached=False), _Probe())


def test_a_run_whose_plugin_scorer_fails_stops_in_one_line_and_resumes_once_it_is_fixed(
    isolated_scorers, scripted_lm, tmp_path
):
    @scorer(Column("broken", "doc", better=LOWER), order=995)
    def broken(g):
        return {"broken": g.rows["no_such_column"].mean()}

    run = ("run", "--strategy", "no_retrieval", "--strategy", "single_time", "--limit", "2")
    code, out, err = run_cli(*run, "--report-dir", str(tmp_path / "r"))
    assert code == 2 and "Traceback" not in err, err
    assert err.splitlines()[-1].startswith(f"flarebench: scorer broken ({__file__}): summarize raised KeyError: ")
    assert err.splitlines()[-1].endswith(
        f"; fix the scorer: finished probes are kept; run the same command to resume (run folder: {tmp_path / 'r'})"
    )
    # Stopped at the last strategy's summary, every probe had finished: score writes the summary.
    code, out, err = run_cli("run", "--strategy", "no_retrieval", "--limit", "2", "--report-dir", str(tmp_path / "one"))
    assert code == 2 and err.splitlines()[-1].endswith(
        f"; every probe had finished and is kept: once the scorer is fixed, flarebench score {tmp_path / 'one'} "
        "writes the summary and the report"
    )
    registry._SCORERS["broken"] = dataclasses.replace(broken, summarize=lambda g: {"broken": 1.0})
    code, out, err = run_cli(*run, "--report-dir", str(tmp_path / "r"))
    assert code == 0, err
    assert list(pd.read_csv(tmp_path / "r" / "summary.csv")["broken"]) == [1.0, 1.0]
    assert run_cli("score", str(tmp_path / "one"))[0] == 0 and (tmp_path / "one" / "summary.md").exists()


def test_notes_are_settings_first_then_findings_each_in_scorer_order():
    rows = pd.DataFrame([metrics.probe_row(_trace(cached=True), _Probe())])
    notes = metrics.summarize(rows, reference="nowhere").attrs["notes"]
    assert [n.split(":")[0] for n in notes] == [
        "cost_per_q",
        "delta columns",
        "bound rows",
        "p95 columns rest on 1 probe per strategy",
        "warm run",
    ]


@pytest.mark.slow
def test_no_scorer_module_imports_back_what_loads_the_registry():
    # metrics and gate load the registry when imported, and load() imports every scorer module by
    # name, which the static import graph cannot see: add those edges, so that a scorer importing
    # metrics, gate or anything importing them (a cycle at run time) fails here.
    modules = _modules()
    graph = {name: _imports(path, modules) for name, path in modules.items()}
    package = "flarebench.bench.scorers"
    found = {m for m in modules if m.rpartition(".")[0] == package and not m.rpartition(".")[2].startswith("_")}
    for loader in ("flarebench.bench.metrics", "flarebench.bench.gate"):
        graph[loader] |= found - {f"{package}.registry"}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


# A metric added the way CONTRIBUTING.md says, registered after the harness imported (as a plugin's
# is; a new module of bench/scorers/ registers before): it reaches the summary, the definitions, the
# gate and the generated tables. Its name and order are chosen to collide with no real scorer.
_NEW_METRIC = """
import json, types
from flarebench.bench import gate, metrics
from flarebench.bench.scorers.registry import LOWER, Column, scorer

@scorer(Column("test_chars", "Mean characters of the scored answer.", better=LOWER,
               tolerance={"max_rise_rel": 0.5}), order=10**9)
def test_chars(g):
    return {"test_chars": float(g.rows["answer"].fillna("").str.len().mean())}

import pandas as pd
from flarebench.bench.scorers.registry import column_table
from flarebench.strategies.records import Trace

probe = types.SimpleNamespace(id="p1", question="Capital of France?", answers=["Paris"])
trace = Trace(question=probe.question, output="So the answer is Paris.", answer="Paris", stop_reason="answer",
              probe_id="p1", strategy="s")
rows = pd.DataFrame([metrics.probe_row(trace, probe)])
cols = metrics.summary_columns()
print(json.dumps({
    "last": cols[-1],
    "doc": metrics.column_docs()["test_chars"],
    "value": float(metrics.summarize(rows).iloc[0]["test_chars"]),
    "direction": gate.directions()["test_chars"],
    "default": gate.default_tolerances()["test_chars"],
    "readme": [line for line in column_table().splitlines() if "test_chars" in line],
    "gate_table": [line for line in gate.tolerance_table().splitlines() if "test_chars" in line],
}))
"""


@pytest.mark.slow
def test_a_new_scorer_reaches_the_summary_the_gate_and_the_tables():
    done = subprocess.run([sys.executable, "-c", _NEW_METRIC], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["last"] == "test_chars" and out["doc"] == "Mean characters of the scored answer."
    assert out["value"] == 5.0
    assert out["direction"] == "lower" and out["default"] == {"max_rise_rel": 0.5}
    assert out["readme"] == ["| `test_chars` | Mean characters of the scored answer. | lower is better |"]
    assert out["gate_table"] == ["| `test_chars` | lower | `max_rise_rel` 0.5 |"]


class _Probe:
    id = "p1"
    question = "Capital of France?"
    answers = ("Paris",)
    answer_type = "single"
    gold_doc_ids = ()
    metadata: dict = {}


def _trace(cached: bool):
    from flarebench.strategies.records import LMCall, Step, Trace

    call = LMCall("generate", 10, 4, 2, "x", "stop", 0.1, cached=cached)
    return Trace(
        question=_Probe.question,
        output="So the answer is Paris.",
        answer="Paris",
        stop_reason="answer",
        steps=[Step("s", lm_calls=[call])],
        probe_id="p1",
        strategy="s",
        seconds=0.2,
    )


def test_every_column_within_0_and_1_says_so_and_is_a_share():
    # Column.share (its definition says "0-1") gives a calibration goal on the column its range
    # check (retrieval_rate=30 for 30% is refused) and its absolute --budget-tolerance; a column
    # within 0 and 1 whose definition did not say so was taken for a count.
    shares = {c.name for c in registry.columns() if c.share}
    assert shares == {
        *("em", "f1", "em_lenient", "f1_lenient"),
        *("recall", "recall_at_k", "recall_first_hop", "recall_later_hops", "faithfulness"),
        *("fact_recall", "incomplete_facts_rate", "wrong_version_rate", "incomplete_or_wrong_rate"),
        *("incomplete_rate", "incomplete_token_cap", "incomplete_step_cap", "incomplete_no_answer"),
        *("incomplete_abstain", "incomplete_empty", "retrieval_rate", "triggered_share"),
        *("cached_share", "harness_share", "gate_auroc", "gate_fire_right", "gate_fire_wrong"),
        *("helped", "harmed", "unchanged"),
    }
    # Differences and ratios range wider: below 0 (worse than never, less than the reference) or above 1.
    assert not shares & {"headroom_captured", "em_delta", "f1_delta", "tokens_rel_blended", "cost_rel_blended"}


@pytest.mark.slow
def test_a_plugin_scorer_that_clashes_with_a_built_in_is_the_plugins_one_line_error(tmp_path):
    # In a process of its own: the plugin is imported before the built-in scorers would be.
    import subprocess
    import sys

    plugin = tmp_path / "clash.py"
    plugin.write_text(
        "from flarebench.bench.scorers.registry import LOWER, Column, scorer\n\n\n"
        '@scorer(Column("em", "mine", better=LOWER), order=127)\n'
        "def em2(g):\n"
        '    return {"em": 0.0}\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "flarebench", "run", "--plugin", str(plugin), "--limit", "1"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"flarebench: --plugin {plugin}: ")
    assert "): column(s) declared elsewhere: em (answer)" in done.stderr and "scorer em2 (" in done.stderr
