"""`flarebench score RUN_DIR` recomputes every summary column from traces.jsonl and gives the same
summary as the run wrote; prices and the delta reference are recorded in run.json outside
``config`` (so resuming with other ones is not refused). A scripted LM stands in for the model."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from flarebench.bench.metrics import summary_columns
from flarebench.strategies.registry import names
from tests.scripted import run_cli

names()


SPECS = ("no_retrieval", "single_time", "flare_direct:theta=0.7")


@pytest.mark.slow
def test_score_gives_the_summary_the_run_wrote(tmp_path, scripted_lm):
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."scripted"]\nprompt_per_1m = 3.0\ncompletion_per_1m = 15.0\nper_retrieval = 0.001\n')
    run_dir = tmp_path / "run"
    strategies = [a for s in SPECS for a in ("--strategy", s)]
    code, out, err = run_cli("run", *strategies, "--limit", "8", "--report-dir", str(run_dir), "--prices", str(prices))
    assert code == 0, out + err
    csv_run = (run_dir / "summary.csv").read_text()
    md_run = (run_dir / "summary.md").read_text()
    run = json.loads((run_dir / "run.json").read_text())
    assert run["scoring"]["reference"] == "single_time"
    assert run["scoring"]["price"]["prompt_per_1m"] == 3.0 and "prices" not in json.dumps(run["config"])

    s = pd.read_csv(run_dir / "summary.csv").set_index("strategy")
    assert list(s.reset_index().columns) == summary_columns()
    # the scripted answers: probes 0 and 4 right, 1 and 5 wrong, 2 and 6 without a statement (the
    # fallback reads the gold), 3 and 7 cut by the token cap
    st = s.loc["single_time"]
    assert st["em"] == pytest.approx(2 / 8) and st["em_lenient"] == pytest.approx(4 / 8)
    assert st["incomplete_no_answer"] == pytest.approx(2 / 8)
    assert st["incomplete_token_cap"] == pytest.approx(2 / 8)
    assert st["incomplete_rate"] == pytest.approx(4 / 8)
    assert st["recall_at_k"] == st["recall"]
    assert st["cost_per_q"] == pytest.approx(
        (st["prompt_tokens_per_q"] * 3 + st["completion_tokens_per_q"] * 15) / 1e6 + st["retrievals_per_q"] * 0.001,
        rel=1e-5,
    )
    assert st["em_delta"] == 0 and st["delta_reference"] == "single_time"
    assert math.isnan(st["gate_auroc"])
    fd = s.loc["flare_direct:theta=0.7"]
    assert 0.0 <= fd["gate_auroc"] <= 1.0 and fd["gate_fire_wrong"] == 1.0
    assert "cost_per_q: scripted priced at 3 USD per 1M prompt tokens sent" in md_run

    code, out, err = run_cli("score", str(run_dir))
    assert code == 0, out + err
    assert (run_dir / "summary.csv").read_text() == csv_run
    assert (run_dir / "summary.md").read_text() == md_run

    # Rescoring with other options changes only what they govern.
    code, out, err = run_cli("score", str(run_dir), "--reference", "no_retrieval")
    assert code == 0, out + err
    again = pd.read_csv(run_dir / "summary.csv").set_index("strategy")
    assert (again["delta_reference"] == "no_retrieval").all()
    pd.testing.assert_series_equal(again["em"], s["em"])


@pytest.mark.slow
def test_resume_with_other_prices_or_reference_is_allowed(tmp_path, scripted_lm):
    run_dir = tmp_path / "run"
    code, out, err = run_cli("run", "--strategy", "flare_direct", "--limit", "2", "--report-dir", str(run_dir))
    assert code == 0, out + err
    assert "--reference" not in out  # the default reference is not in this run: not asked for, not said
    traces = (run_dir / "traces.jsonl").read_text()
    run = json.loads((run_dir / "run.json").read_text())
    assert run["scoring"]["price"] is None  # the scripted LM has no entry in the shipped table
    assert math.isnan(pd.read_csv(run_dir / "summary.csv")["cost_per_q"].iloc[0])
    prices = tmp_path / "p.toml"
    prices.write_text('[models."scripted"]\nprompt_per_1m = 1.0\ncompletion_per_1m = 1.0\n')
    options = ("run", "--strategy", "flare_direct", "--limit", "2", "--report-dir", str(run_dir))
    options += ("--prices", str(prices))
    # A reference the run lacks is refused before it runs (its deltas would be empty after it all);
    # another spelling of one of its specs is that spec.
    code, out, err = run_cli(*options, "--reference", "no_retrieval")
    assert code == 2 and err == (
        "flarebench: --reference no_retrieval: not a strategy of this run (flare_direct): add it with --strategy, "
        "or name one of them\n"
    )
    code, out, err = run_cli(*options, "--reference", "flare_direct:theta=0.8")
    assert code == 0 and "is not in this run" not in out, out + err
    # A rescoring cannot run it: refused, and nothing recorded.
    code, out, err = run_cli("score", str(run_dir), "--reference", "flare_direct:theta=0.3")
    assert code == 2 and err.strip() == (
        "flarebench: --reference flare_direct:theta=0.3: not a strategy of this run (flare_direct)"
    ), err
    assert (run_dir / "traces.jsonl").read_text() == traces  # resumed, nothing generated again
    assert json.loads((run_dir / "run.json").read_text())["scoring"]["reference"] == "flare_direct"
    assert pd.read_csv(run_dir / "summary.csv")["cost_per_q"].iloc[0] > 0
    # A reference spelled with spaces or a trailing colon is the row of that spec, as a --strategy is.
    code, out, err = run_cli("score", str(run_dir), "--reference", " flare_direct: ")
    assert code == 0 and "is not in this run" not in out, out + err
    assert json.loads((run_dir / "run.json").read_text())["scoring"]["reference"] == "flare_direct"
    assert pd.read_csv(run_dir / "summary.csv")["delta_reference"].iloc[0] == "flare_direct"
    # So is another spelling of it (its default theta written out), as `run` takes it.
    code, out, err = run_cli("score", str(run_dir), "--reference", "flare_direct:theta=0.8")
    assert code == 0 and json.loads((run_dir / "run.json").read_text())["scoring"]["reference"] == "flare_direct"


def test_bad_price_file_is_a_usage_error(tmp_path, scripted_lm):
    bad = tmp_path / "bad.toml"
    bad.write_text("[models")
    code, out, err = run_cli("run", "--strategy", "single_time", "--limit", "1", "--prices", str(bad),
                          "--report-dir", str(tmp_path / "r"))  # fmt: skip
    assert code == 2 and "bad.toml: not a price table" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "command, option, value, message",
    [
        ("score", "--by", "colour", "no probe metadata field 'colour'; fields: difficulty, "),
        ("score", "--by", "../pwn", "--by '../pwn': holds '/', so it cannot name the file 'breakdown_../pwn.csv'"),
        ("score", "--by", "x" * 250, f"--by {'x' * 40!r}...: too long to name the file breakdown_FIELD.csv"),
        ("score", "--prices", "{tmp}/none.toml", "--prices {tmp}/none.toml: not found"),
        ("report", "--prices", "{tmp}/none.toml", "--prices {tmp}/none.toml: not found"),
        ("score", "--judge", "bogus", "faithfulness: unknown judge spec 'bogus'"),
        ("report", "--judge", "bogus", "faithfulness: unknown judge spec 'bogus'"),
        ("score", "--reference", "nosuch:x=1", "--reference: unknown strategy 'nosuch'"),
        (
            "score",
            "--judge-base-url",
            "http://127.0.0.1:9/v1",
            "faithfulness: --judge-base-url only applies to --judge",
        ),
    ],
)
def test_score_and_report_check_every_option_before_printing_or_writing(
    scripted_run, tmp_path, command, option, value, message
):
    def state():  # a file rewritten, even with the same content, gets a new inode
        return {p.name: (p.read_bytes(), p.stat().st_ino) for p in scripted_run.iterdir()}

    before = state()
    code, out, err = run_cli(command, str(scripted_run), option, value.format(tmp=tmp_path))
    assert code == 2 and out == "" and err.count("\n") == 1, out + err
    assert err.startswith(f"flarebench: {message.format(tmp=tmp_path)}"), err
    assert state() == before


def test_a_metadata_field_that_cannot_name_its_file_is_refused_before_scoring(scripted_run, monkeypatch):
    # Any metadata key is valid in a probe set; one holding a path separator went into
    # breakdown_FIELD.csv as it was, after the summary was rewritten, and could write elsewhere.
    from flarebench.bench import report

    field, probe_rows = "x/../../outside", report.probe_rows
    monkeypatch.setattr(report, "probe_rows", lambda *args: probe_rows(*args).assign(**{f"meta_{field}": 1}))
    (scripted_run / "breakdown_x").mkdir()  # so that the path would resolve
    before = {p.name: (p.read_bytes(), p.stat().st_ino) for p in scripted_run.iterdir() if p.is_file()}
    code, out, err = run_cli("score", str(scripted_run), "--by", field)
    assert code == 2 and out == "" and err.count("\n") == 1, out + err
    assert err == f"flarebench: --by {field!r}: holds '/', so it cannot name the file 'breakdown_{field}.csv'\n"
    assert {p.name: (p.read_bytes(), p.stat().st_ino) for p in scripted_run.iterdir() if p.is_file()} == before
    assert not (scripted_run.parent / "outside.csv").exists()


@pytest.mark.slow
def test_score_breaks_results_down_by_a_metadata_field(tmp_path, scripted_lm):
    run_dir = tmp_path / "run"
    code, out, err = run_cli("run", "--strategy", "single_time", "--limit", "8", "--report-dir", str(run_dir))
    assert code == 0, out + err
    code, out, err = run_cli("score", str(run_dir), "--by", "difficulty")
    assert code == 0, out + err
    table = pd.read_csv(run_dir / "breakdown_difficulty.csv")
    assert list(table.columns[:3]) == ["strategy", "difficulty", "n"] and table["n"].sum() == 8
    assert "by difficulty (breakdown_difficulty.csv)" in out
    code, out, err = run_cli("score", str(run_dir), "--by", "colour")
    assert code == 2 and "no probe metadata field 'colour'; fields: difficulty" in err


@pytest.mark.slow
def test_score_scores_exactly_the_probes_the_run_selected(tmp_path, scripted_lm):
    # A folder run with --limit 4, then resumed with --limit 2 (the limit is not part of the
    # configuration): traces.jsonl holds 4 probes per strategy, the run scored 2, and so must `score`.
    run_dir = tmp_path / "run"
    for limit in ("4", "2"):
        code, out, err = run_cli("run", "--strategy", "single_time", "--limit", limit, "--report-dir", str(run_dir))
        assert code == 0, out + err
    assert len((run_dir / "traces.jsonl").read_text().splitlines()) == 4
    run = json.loads((run_dir / "run.json").read_text())
    assert run["probe_ids"] == ["pw-0001", "pw-0002"] and run["limit"] == 2
    csv_run = (run_dir / "summary.csv").read_text()
    assert pd.read_csv(run_dir / "summary.csv")["n"].tolist() == [2]
    code, out, err = run_cli("score", str(run_dir))
    assert code == 0, out + err
    assert out.splitlines()[0] == "scored 2 probes per strategy (selection from run.json)"
    assert (run_dir / "summary.csv").read_text() == csv_run
    code, out, err = run_cli("report", str(run_dir))
    assert code == 0 and out.splitlines()[0] == "scored 2 probes per strategy (selection from run.json)"


def test_score_of_a_run_stopped_before_a_strategy_began_says_it_is_partial_and_names_it(tmp_path, scripted_lm):
    # Stopped after single_time's first probe: flare_direct has no trace, so no summary row to say so.
    run_dir = tmp_path / "run"
    specs = ("--strategy", "single_time", "--strategy", "flare_direct", "--limit", "2")
    assert run_cli("run", *specs, "--report-dir", str(run_dir))[0] == 0
    traces = run_dir / "traces.jsonl"
    traces.write_text(traces.read_text().splitlines(keepends=True)[0])
    code, out, err = run_cli("score", str(run_dir))
    assert code == 0, out + err
    assert out.splitlines()[0] == (
        "scored 0-1 of the 2 selected probes per strategy (selection from run.json; partial run; no probe yet: "
        "flare_direct)"
    )


@pytest.mark.slow
def test_a_run_of_another_version_is_scored_saying_so_and_told_to_be_run_again_not_resumed(scripted_run, scripted_lm):
    from flarebench.bench import version

    run_json = scripted_run / "run.json"
    info = json.loads(run_json.read_text())
    info["config"]["flarebench"], info["status"] = "0.0.1", "interrupted"
    run_json.write_text(json.dumps(info))
    code, out, err = run_cli("score", str(scripted_run))
    note = f"made by flarebench 0.0.1, scored by {version()}: see CHANGES.md for what changed between them"
    assert code == 0 and f"flarebench: warning: {run_json}: {note}" in err, err
    md = (scripted_run / "summary.md").read_text()
    assert f"- This run was {note}." in md  # and report.html's notes, from the same summary
    assert (
        f"it was made by flarebench 0.0.1, which this version ({version()}) does not resume: run it again with "
        "another --report-dir" in md
    )  # not "run the same command to finish it", which is refused:
    code, out, err = run_cli("run", "--strategy", "no_retrieval", "--limit", "3", "--report-dir", str(scripted_run))
    assert code == 2 and "flarebench (was '0.0.1'" in err
    # report.html, the artifact a CI job keeps, says the same under its title.
    assert run_cli("report", str(scripted_run))[0] == 0
    page = (scripted_run / "report.html").read_text()
    assert "<b>Run status: interrupted.</b> Not every strategy has run every probe yet" in page
    assert "which this version" in page and "does not resume: run it again with another --report-dir." in page


def test_score_with_other_prices_records_them_so_report_and_score_keep_them(scripted_run, tmp_path):
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."scripted"]\nprompt_per_1m = 3.0\ncompletion_per_1m = 15.0\n')
    before = json.loads((scripted_run / "run.json").read_text())
    code, out, err = run_cli("score", str(scripted_run), "--prices", str(prices))
    assert code == 0, out + err
    # The summary files are priced now; report.html is not, and the command says how to rebuild it.
    assert f"{scripted_run / 'report.html'} still shows the earlier scoring: flarebench report {scripted_run}" in out
    priced = pd.read_csv(scripted_run / "summary.csv")["cost_per_q"]
    assert (priced > 0).all()
    after = json.loads((scripted_run / "run.json").read_text())
    assert after["scoring"]["price"]["prompt_per_1m"] == 3.0 and after["scoring"]["price"]["source"] == str(prices)
    assert {k: v for k, v in after.items() if k != "scoring"} == {k: v for k, v in before.items() if k != "scoring"}
    # A later report (no --prices) scores as the summary files are, and so does a later score.
    code, out, err = run_cli("report", str(scripted_run))
    assert code == 0, out + err
    pd.testing.assert_series_equal(pd.read_csv(scripted_run / "summary.csv")["cost_per_q"], priced)
    code, out, err = run_cli("score", str(scripted_run))
    assert code == 0 and "still shows the earlier scoring" not in out  # nothing changed this time


def test_commands_that_score_freeze_what_they_imported_and_others_do_not(scripted_run, tmp_path, monkeypatch):
    """score (as run, compare, sweep, calibrate and report) imports the scoring and report modules
    and freezes the garbage collector's objects so far (bench/cli.py, _freeze_imports); init does not."""
    import gc

    frozen = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    assert run_cli("init", str(tmp_path / "repo"))[0] == 0
    assert frozen == []
    assert run_cli("score", str(scripted_run))[0] == 0
    assert frozen == [True]


#: A plugin whose scorer adds a column (CONTRIBUTING's example, under another name).
CHARS = """
from flarebench.bench.scorers.registry import LOWER, Column, Group, scorer


@scorer(Column("plugin_chars", "Mean characters of the answer.", better=LOWER), order=25)
def plugin_chars(g: Group) -> dict[str, float]:
    return {"plugin_chars": float(g.rows["answer"].fillna("").str.len().mean())}
"""


@pytest.mark.slow
def test_score_loads_the_plugins_the_run_was_made_with(tmp_path):
    # In processes of their own: a scorer registered here would add its column to every later test's summary.
    plugin = tmp_path / "chars.py"
    plugin.write_text(CHARS)
    lm = Path(__file__).parent / "fixtures" / "ray_lm.py"
    run = [
        sys.executable,
        "-m",
        "flarebench",
        "run",
        "--plugin",
        str(lm),
        "--plugin",
        "chars.py",  # relative to where the run is made; score runs from another folder
        "--lm",
        "probeaware:0",
    ]
    run += ["--strategy", "no_retrieval", "--limit", "2", "--report-dir", str(tmp_path / "run")]
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    made = subprocess.run(run, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert made.returncode == 0, made.stderr
    score = [sys.executable, "-m", "flarebench", "score", str(tmp_path / "run")]
    scored = subprocess.run(score, capture_output=True, text=True)
    assert "scored without it" not in scored.stderr, scored.stderr
    assert scored.returncode == 0 and "plugin_chars" in pd.read_csv(tmp_path / "run" / "summary.csv").columns
    # Its definition too, though the plugin registered after the summary's modules were imported.
    assert "- `plugin_chars`: " in (tmp_path / "run" / "summary.md").read_text()
    reported = subprocess.run(
        [sys.executable, "-m", "flarebench", "report", str(tmp_path / "run")], capture_output=True
    )
    assert reported.returncode == 0 and "<dt>plugin_chars</dt>" in (tmp_path / "run" / "report.html").read_text()
    # Another --plugin replaces the recorded ones: said, as their columns would go unsaid.
    other = tmp_path / "other.py"
    other.write_text("x = 1\n")
    given = subprocess.run([*score, "--plugin", str(other)], capture_output=True, text=True)
    assert given.returncode == 0 and f"{plugin} not loaded (--plugin given;" in given.stderr, given.stderr
    # A plugin that cannot be loaded from here any more is said, and the run is scored without it.
    plugin.unlink()
    scored = subprocess.run(score, capture_output=True, text=True)
    assert scored.returncode == 0, scored.stderr
    assert f"plugins: --plugin {plugin}: no such file; scored without it (give --plugin to load it)" in scored.stderr
    assert "plugin_chars" not in pd.read_csv(tmp_path / "run" / "summary.csv").columns


def test_a_recorded_judge_is_reused_unless_dropped_and_its_url_credentials_are_given_again(monkeypatch, tmp_path):
    import argparse

    from flarebench.bench.cli import UserError, _judge

    monkeypatch.setenv("JUDGE_API_KEY", "k")
    monkeypatch.delenv("JUDGE_BASE_URL", raising=False)
    info = {"scoring": {"judge": {"spec": "openai:m", "base_url": "http://127.0.0.1:9/v1"}}}
    run_json = tmp_path / "run.json"
    judge = _judge(argparse.Namespace(judge=None, judge_base_url=None), info, run_json)
    assert (judge.model, judge.base_url) == ("m", "http://127.0.0.1:9/v1")
    # none drops it (an endpoint gone would otherwise block every later rescoring); empty is refused.
    assert _judge(argparse.Namespace(judge="none", judge_base_url=None), info, run_json) is None
    with pytest.raises(UserError, match="--judge is empty: give openai:MODEL, or none"):
        _judge(argparse.Namespace(judge="", judge_base_url=None), info, run_json)
    # A URL recorded without its credentials is not called as it stands: the environment gives it again.
    info["scoring"]["judge"]["base_url"] = "http://***@127.0.0.1:9/v1"
    recorded = rf"^{run_json}: scoring.judge.base_url http://\*\*\*@127.0.0.1:9/v1 was recorded without its credentials"
    with pytest.raises(UserError, match=recorded):
        _judge(argparse.Namespace(judge=None, judge_base_url=None), info, run_json)
    monkeypatch.setenv("JUDGE_BASE_URL", "http://user:pw@127.0.0.1:9/v1")
    assert (
        _judge(argparse.Namespace(judge=None, judge_base_url=None), info, run_json).base_url
        == "http://user:pw@127.0.0.1:9/v1"
    )
    # A recorded judge that cannot be set up now (its key gone) is said to be the recorded one.
    monkeypatch.delenv("JUDGE_API_KEY")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("JUDGE_BASE_URL")
    info["scoring"]["judge"]["base_url"] = None
    with pytest.raises(UserError, match=r"no API key.*\(the judge run.json recorded; --judge none scores offline\)$"):
        _judge(argparse.Namespace(judge=None, judge_base_url=None), info, run_json)


def test_other_scoring_options_are_refused_while_a_run_writes_the_folder(scripted_run):
    # The run rewrites run.json after each spec, and would drop the recorded prices unsaid.
    import socket

    before = (scripted_run / "run.json").read_text()
    writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock = {"pid": writer.pid, "host": socket.gethostname(), "token": "t"}
        (scripted_run / "run.lock").write_text(json.dumps(lock))
        code, out, err = run_cli("score", str(scripted_run), "--reference", "no_retrieval")
        assert code == 2 and err.startswith(f"flarebench: {scripted_run}: a run is writing this folder (pid "), err
        assert "--reference" in err and (scripted_run / "run.json").read_text() == before
        code, out, err = run_cli("score", str(scripted_run))  # reading it as it is needs no lock
        assert code == 0 and "scored as interrupted" not in err
    finally:
        writer.kill()
        writer.wait()


def test_a_probe_set_changed_since_the_run_is_said_in_the_files_scored_against_it(scripted_run):
    # Only stderr said so: the saved summary and report showed new numbers under the run's hash.
    info = json.loads((scripted_run / "run.json").read_text())
    info["config"]["probes"]["hash"] = "0" * 64  # as if the set's answers were edited since the run
    (scripted_run / "run.json").write_text(json.dumps(info))
    code, out, err = run_cli("report", str(scripted_run))
    assert code == 0 and "changed since the run; scoring against its current answers" in err
    note = "changed since the run (sha256 000000000000): its answers may differ from the run's."
    assert note in (scripted_run / "summary.md").read_text()
    assert note.replace("'", "&#x27;") in (scripted_run / "report.html").read_text()


def test_lines_no_run_of_the_folder_wrote_are_said_and_left_out(scripted_run):
    # traces.jsonl files merged or edited by hand: a repeated pair with another answer, a strategy
    # the run did not run, a probe not in its set. Scored as before, but no longer unsaid.
    before = (scripted_run / "summary.csv").read_text()
    lines = (scripted_run / "traces.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    extra = [{**first, "answer": "WRONG"}, {**first, "strategy": "bogus"}, {**first, "probe_id": "nope-9"}]
    with open(scripted_run / "traces.jsonl", "a") as f:
        f.writelines(json.dumps(d) + "\n" for d in extra)
    code, out, err = run_cli("score", str(scripted_run))
    assert code == 0 and (scripted_run / "summary.csv").read_text() == before
    assert err == (
        f"flarebench: warning: {scripted_run / 'traces.jsonl'}: 1 line(s) repeat a strategy and probe of an earlier "
        f"line, which is scored (line {len(lines) + 1}); 2 trace(s) of a strategy this run did not run or a probe "
        f"not in its set, left out (bogus {first['probe_id']}, no_retrieval nope-9)\n"
    )
    (scripted_run / "traces.jsonl").write_text("\n".join(lines) + "\n")
    assert run_cli("score", str(scripted_run))[2] == ""


def test_a_killed_runs_folder_is_reported_interrupted_not_running(scripted_run):
    # kill -9 leaves run.json saying "running" and a lock whose process is gone.
    import socket

    info = json.loads((scripted_run / "run.json").read_text())
    (scripted_run / "run.json").write_text(json.dumps({**info, "status": "running"}))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    lock = {"pid": int(gone.stdout), "host": socket.gethostname(), "token": "t"}
    (scripted_run / "run.lock").write_text(json.dumps(lock))
    code, out, err = run_cli("report", str(scripted_run))
    assert code == 0 and err == (
        f"flarebench: {scripted_run}: its run stopped without marking run.json (its process was killed); "
        "scored as interrupted: the command that made it resumes it\n"
    )
    assert "**Run status: interrupted.**" in (scripted_run / "summary.md").read_text()
    assert "run status <b>interrupted</b>" in (scripted_run / "report.html").read_text()


def test_a_sweeps_reference_is_one_of_its_points(tmp_path, scripted_lm):
    code, out, err = run_cli(
        "sweep", "--strategy", "flare_direct", "--param", "theta=0.2,0.5", "--reference", "no_retrieval",
        "--limit", "2", "--report-dir", str(tmp_path / "sweep"),
    )  # fmt: skip
    assert code == 2 and err.endswith(": name one of its points\n") and not (tmp_path / "sweep").exists()
