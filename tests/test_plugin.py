"""`pytest bench ...` and `flarebench`/`python -m flarebench` as a user runs them, in subprocesses."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest_plugins = ["pytester"]


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
    assert f"ERROR: flarebench: unknown strategy 'flair'; known: {known}" in out.stderr
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


ONE_PROCESS = (
    "ERROR: flarebench: pytest bench runs in one process (it times each probe; its run folder has one writer): "
    "drop -n, or add -n 0 / -p no:xdist"
)
SCRIPTED = ["-p", "no:cacheprovider", "--benchmark-disable", "--plugin", str(ROOT / "tests" / "fixtures" / "ray_lm.py"),
            "--lm", "probeaware:0", "--strategy", "single_time", "--limit", "1"]  # fmt: skip


@pytest.mark.slow
def test_pytest_bench_under_xdist_is_a_usage_error_before_anything_is_written(tmp_path):
    run_dir = tmp_path / "run"
    # Two specs: two workers would each open the run folder (the second one stopped pytest-xdist).
    two = [*SCRIPTED, "--strategy", "flare_direct"]
    out = sh("-m", "pytest", "bench", *two, "-n", "2", "--report-dir", str(run_dir))
    assert (out.returncode, out.stderr.strip()) == (4, ONE_PROCESS), out.stdout + out.stderr
    assert "INTERNALERROR" not in out.stdout and not run_dir.exists()
    # -n 0, as the line says, runs it.
    out = sh("-m", "pytest", "bench", *two, "-n", "0", "--report-dir", str(run_dir))
    assert out.returncode == 0, out.stdout + out.stderr


def test_which_pytest_arguments_collect_a_bench(tmp_path):
    from flarebench.bench.plugin import _bench_arg, _collects_the_bench

    # flarebench's own bench, here (an editable install) or installed (from a folder without bench/).
    for arg in ("bench", "bench/test_bench.py::test_strategy", "bench::test_strategy", "."):
        assert _collects_the_bench(arg, ROOT), arg
    for arg in ("tests", "tests/test_plugin.py", "tests/fixtures"):
        assert not _collects_the_bench(arg, ROOT), arg  # the suite itself runs under xdist
    assert _collects_the_bench(_bench_arg("bench", tmp_path), tmp_path)
    # A repository's bench made by `flarebench init`, and one that is its own benchmarks.
    (tmp_path / "init" / "bench").mkdir(parents=True)
    (tmp_path / "init" / "bench" / "test_flarebench.py").write_text("")
    for arg in ("bench", "bench/test_flarebench.py", ".", str(tmp_path / "init")):
        assert _collects_the_bench(arg, tmp_path / "init"), arg
    (tmp_path / "own" / "bench").mkdir(parents=True)
    (tmp_path / "own" / "bench" / "test_speed.py").write_text("")
    (tmp_path / "own" / "bench" / "test_bench.py").write_text("def test_speed():\n    pass\n")
    for arg in ("bench", ".", "bench/test_speed.py", "bench/test_bench.py"):
        assert not _collects_the_bench(arg, tmp_path / "own"), arg
    # A checkout of flarebench under a non-editable install: its bench is the installed one's copy.
    (tmp_path / "checkout" / "bench").mkdir(parents=True)
    (tmp_path / "checkout" / "bench" / "test_bench.py").write_text((ROOT / "bench" / "test_bench.py").read_text())
    for arg in ("bench", ".", "bench/test_bench.py::test_strategy"):
        assert _collects_the_bench(arg, tmp_path / "checkout"), arg


@pytest.mark.slow
def test_a_bench_module_of_another_name_under_xdist_fails_each_test_and_writes_nothing(tmp_path):
    # The arguments do not show the bench (a module of another name): each worker refuses it.
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "test_mine.py").write_text("from flarebench.bench.test_bench import test_strategy\n")
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run(
        # -rN: no short summary, which repeats the message when the terminal is wide enough.
        [sys.executable, "-m", "pytest", "checks", *SCRIPTED, "--strategy", "flare_direct", "-n", "2", "-rN",
         "--report-dir", str(run_dir)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 1 and "2 errors" in out.stdout, out.stdout + out.stderr
    assert out.stdout.count(ONE_PROCESS.removeprefix("ERROR: ")) == 2 and "INTERNALERROR" not in out.stdout
    assert not run_dir.exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    "option, line",
    [
        (["--limit", "0"], "--limit must be >= 1, got 0"),
        (["--reference", "nosuchstrategy"], "--reference: unknown strategy 'nosuchstrategy'; known: "),
    ],
)
def test_a_usage_error_found_as_the_bench_session_starts_is_one_error_line(tmp_path, option, line):
    run_dir = tmp_path / "run"
    out = sh("-m", "pytest", "bench", *SCRIPTED, *option, "--report-dir", str(run_dir))
    assert out.returncode == 4
    assert out.stderr.startswith(f"ERROR: flarebench: {line}") and out.stderr.strip().count("\n") == 0, out.stderr
    assert "_pytest.outcomes" not in out.stdout + out.stderr and "!!!!" not in out.stdout
    assert not run_dir.exists()


def test_a_teams_own_test_taking_an_argument_called_spec_is_left_alone(pytester):
    # The bench parametrizes its tests by strategy spec; the team's own are not bench tests.
    pytester.makepyfile(
        test_mine="""
import pytest

@pytest.fixture
def spec():
    return "mine"

def test_fixture(spec):
    assert spec == "mine"

@pytest.mark.parametrize("spec", ["a", "b"])
def test_param(spec):
    assert spec in "ab"
"""
    )
    result = pytester.runpytest_inprocess("test_mine.py", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=3)


@pytest.mark.slow
def test_a_teams_own_suite_is_left_no_empty_benchmark_folder(pytester, monkeypatch):
    # flarebench brings pytest-benchmark into the environment, which makes ./.benchmarks in every
    # pytest run; left empty, it is removed, and kept once a benchmark was saved in it.
    pytester.makepyfile(
        test_mine="def test_it():\n    pass\n",
        test_timed="def test_t(benchmark):\n    benchmark.pedantic(len, args=('x',), rounds=1)\n",
    )
    assert pytester.runpytest_inprocess("test_mine.py", "-p", "no:cacheprovider").ret == 0
    assert not (pytester.path / ".benchmarks").exists()
    (pytester.path / ".benchmarks").mkdir()  # the team's own: kept, even empty
    assert pytester.runpytest_inprocess("test_mine.py", "-p", "no:cacheprovider").ret == 0
    assert (pytester.path / ".benchmarks").is_dir()
    (pytester.path / ".benchmarks").rmdir()
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # pytest-benchmark times nothing under xdist
    assert pytester.runpytest_inprocess("test_timed.py", "-p", "no:cacheprovider", "--benchmark-autosave").ret == 0
    assert list((pytester.path / ".benchmarks").rglob("*.json"))
