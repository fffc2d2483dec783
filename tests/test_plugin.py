"""`pytest bench ...` and `flarebench`/`python -m flarebench` as a user runs them, in subprocesses."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def sh(*args, env_cache=None):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.model
def test_pytest_bench_runs_resumes_and_refuses(tmp_path):
    run_dir = tmp_path / "run"
    args = [
        "-m",
        "pytest",
        "bench",
        "-p",
        "no:cacheprovider",
        "--strategy",
        "no_retrieval",
        "--strategy",
        "single_time:k=2",
        "--limit",
        "1",
        "--report-dir",
        str(run_dir),
    ]
    first = sh(*args)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "2 passed" in first.stdout
    assert "| single_time:k=2 |" in first.stdout and f"run folder: {run_dir}" in first.stdout
    assert "[1/2] no_retrieval: 100%" in first.stderr + first.stdout  # progress bar shown live
    assert f"report: {run_dir / 'report.html'}" in first.stdout and (run_dir / "report.html").is_file()
    traces = (run_dir / "traces.jsonl").read_text().splitlines()
    assert len(traces) == 2
    assert json.loads((run_dir / "run.json").read_text())["status"] == "complete"

    again = sh(*args, "--benchmark-disable")  # same configuration: resumed, nothing run twice
    assert again.returncode == 0, again.stdout + again.stderr
    assert (run_dir / "traces.jsonl").read_text().splitlines() == traces

    other = sh(*args[:-4], "--limit", "1", "--report-dir", str(run_dir), "--strategy", "single_time:k=4")
    assert other.returncode != 0
    assert "different configuration: strategies" in other.stdout + other.stderr
    assert "Traceback" not in other.stdout + other.stderr

    score = sh("-m", "flarebench", "score", str(run_dir))
    assert score.returncode == 0, score.stderr
    assert "single_time:k=2" in score.stdout


@pytest.mark.slow
def test_unknown_strategy_is_a_usage_error():
    out = sh("-m", "pytest", "bench", "-p", "no:cacheprovider", "--strategy", "flair", "--limit", "1")
    assert out.returncode == 4
    known = "no_retrieval, single_time, fixed_interval, ircot, self_ask, flare_direct, flare_instruct"
    assert f"unknown strategy 'flair'; known: {known}" in out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr


@pytest.mark.slow
def test_options_are_the_same_in_pytest_and_the_console_script():
    from flarebench.bench.cli import build_parser
    from flarebench.bench.options import RUN_OPTIONS

    helptext = sh("-m", "pytest", "--help").stdout
    commands = build_parser()._subparsers._group_actions[0].choices
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("### Options (identical in", 1)[1].split("\n\n", 2)[1]
    for opt in RUN_OPTIONS:
        assert opt.flag in helptext
        for name in ("run", "compare", "sweep"):
            assert opt.flag in commands[name].format_help(), (name, opt.flag)
        assert f"| `{opt.flag}" in table, f"README's options table lacks {opt.flag}"


@pytest.mark.slow
def test_score_of_a_missing_run_is_one_line(tmp_path):
    out = sh("-m", "flarebench", "score", str(tmp_path / "none"))
    assert out.returncode == 2
    assert (
        out.stderr.strip() == f"flarebench: {tmp_path / 'none' / 'run.json'}: not found; RUN_DIR must be a run folder"
    )
