"""The run folder as a user meets it through the console script, with a scripted LM (fast): path
options that cannot serve fail in one line before any model is loaded, a damaged traces.jsonl is
named by file and line, duplicate traces count once, and a folder another process writes is refused."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from flarebench.bench.runlock import LOCK
from flarebench.strategies.registry import names
from tests.scripted import ProbeAwareLM, run_cli

names()


@pytest.fixture
def no_model(monkeypatch):
    """Fail the test if the session gets as far as loading a model."""
    monkeypatch.setattr("flarebench.bench.recipe.make_lm", _no_model)


def _no_model(*args, **kwargs):
    raise AssertionError("the model was loaded before the options were checked")


def _run(run_dir: Path, *extra: str, limit: str = "2") -> tuple[int, str, str]:
    return run_cli("run", "--strategy", "single_time", "--limit", limit, "--report-dir", str(run_dir), *extra)


def _one_line(code: int, err: str) -> str:
    assert code == 2, err
    assert "Traceback" not in err and err.count("\n") == 1 and err.startswith("flarebench: "), err
    return err.strip()


# --------------------------------------------------------------------------------------------
# Path options
# --------------------------------------------------------------------------------------------


@pytest.fixture
def paths(tmp_path):
    """A regular file, a folder, and paths that are missing or lie below the file (which no one,
    root included, can create: the cases work whoever runs the tests)."""
    f = tmp_path / "file.txt"
    f.write_text("x")
    d = tmp_path / "folder"
    d.mkdir()
    # /proc refuses a new folder whatever its permission bits say (root's included); /dev/null is
    # no regular file (reading /dev/zero would never end).
    places = {"PROC": Path("/proc/flarebench/sub"), "DEVICE": Path("/dev/null")}
    return {"FILE": f, "DIR": d, "BELOW": f / "sub", "MISSING": tmp_path / "missing", **places}


@pytest.mark.parametrize(
    "option, given, message",
    [
        ("--report-dir", "FILE", "--report-dir {FILE}: is a file, not a folder"),
        ("--report-dir", "BELOW", "--report-dir {BELOW}: cannot be created: {FILE} is a file, not a folder"),
        ("--cache", "FILE", "--cache {FILE}: is a file, not a folder"),
        ("--cache", "BELOW", "--cache {BELOW}: cannot be created: {FILE} is a file, not a folder"),
        ("--prices", "DIR", "--prices {DIR}: is a folder, not a file"),
        ("--prices", "MISSING", "--prices {MISSING}: not found"),
        ("--prices", "BELOW", "--prices {BELOW}: not found ({FILE} is a file, not a folder)"),
        ("--gate", "DIR", "--gate {DIR}: is a folder, not a file"),
        (
            "--gate",
            "MISSING",
            "--gate {MISSING}: not found; make one first: pytest bench --no-gate --save-baseline {MISSING}",
        ),
        ("--save-baseline", "DIR", "--save-baseline {DIR}: is a folder, not a file"),
        ("--save-baseline", "BELOW", "--save-baseline {BELOW}: cannot be created: {FILE} is a file, not a folder"),
        ("--save-baseline", "PROC", "--save-baseline {PROC}: cannot be created: /proc "),
        ("--save-baseline", "DEVICE", "--save-baseline {DEVICE}: not a regular file"),
        ("--cache", "PROC", "--cache {PROC}: cannot be created: /proc "),
        ("--report-dir", "PROC", "--report-dir {PROC}: cannot be created: /proc "),
        ("--gate", "DEVICE", "--gate {DEVICE}: not a regular file"),
        ("--prices", "DEVICE", "--prices {DEVICE}: not a regular file"),
        ("--probes", "MISSING", "no probe set named or at '{MISSING}'; shipped probe sets: "),
        ("--probes", "BELOW", "no probe set named or at '{BELOW}'; shipped probe sets: "),
        (
            "--probes",
            "DIR",
            "{DIR}/corpus.jsonl:0: (file): not found (and 1 more; `python -m flarebench.probes validate {DIR}`",
        ),
    ],
)
def test_a_path_option_that_cannot_serve_is_one_line_before_any_model(
    tmp_path, paths, no_model, option, given, message
):
    args = ["run", "--strategy", "single_time", "--limit", "1", option, str(paths[given])]
    if option != "--report-dir":
        args += ["--report-dir", str(tmp_path / "run")]
    line = _one_line(*run_cli(*args)[::2])
    assert line.startswith("flarebench: " + message.format(**paths)), line
    assert not (tmp_path / "run").exists()


def test_probes_format_flarebench_with_a_file_is_one_line(tmp_path, paths, no_model):
    code, out, err = run_cli("run", "--probes", str(paths["FILE"]), "--probes-format", "flarebench")
    assert "a flarebench probe set is a folder holding corpus.jsonl and probes.jsonl" in _one_line(code, err)


def test_score_and_report_of_a_file_or_with_a_bad_price_path_are_one_line(tmp_path, paths, scripted_lm):
    for command in ("score", "report"):
        line = _one_line(*run_cli(command, str(paths["FILE"]))[::2])
        assert line == f"flarebench: {paths['FILE']}: is a file, not a folder; RUN_DIR must be a run folder"
    run_dir = tmp_path / "run"
    assert _run(run_dir)[0] == 0
    line = _one_line(*run_cli("score", str(run_dir), "--prices", str(paths["DIR"]))[::2])
    assert line == f"flarebench: --prices {paths['DIR']}: is a folder, not a file"


def test_overwrite_replaces_a_run_and_never_removes_other_files(tmp_path, scripted_lm):
    # A repository's root given as the run folder: refused, with --overwrite too, and left as it was.
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "app.py").write_text("x = 1")
    for extra in ((), ("--overwrite",)):
        line = _one_line(*_run(repo, *extra)[::2])
        assert line == (
            f"flarebench: {repo} exists and holds no flarebench run (it holds '.git'); use another --report-dir "
            "(--overwrite replaces a run, never other files)"
        )
    assert sorted(p.name for p in repo.iterdir()) == [".git", "app.py"]
    # A run's folder with a team's notes beside it: --overwrite replaces the run, keeps the notes.
    run_dir = tmp_path / "run"
    assert run_cli("run", "--strategy", "no_retrieval", "--limit", "3", "--report-dir", str(run_dir))[0] == 0
    (run_dir / "notes.md").write_text("why we ran this")
    (run_dir / ".summary.csv.x1y2").write_text("a write cut short")
    code, out, err = _run(run_dir, "--overwrite")
    assert code == 0, err
    assert (run_dir / "notes.md").read_text() == "why we ran this"
    assert not (run_dir / ".summary.csv.x1y2").exists()
    assert {json.loads(x)["strategy"] for x in (run_dir / "traces.jsonl").read_text().splitlines()} == {"single_time"}
    # A run's files without its run.json: --overwrite may replace them.
    (run_dir / "run.json").unlink()
    (run_dir / "notes.md").unlink()
    line = _one_line(*_run(run_dir)[::2])
    assert line.endswith("holds no run.json, only a run's other files; use --overwrite or another --report-dir")
    assert _run(run_dir, "--overwrite")[0] == 0


def test_a_folder_named_like_a_shipped_set_is_said_to_be_hidden(tmp_path, scripted_lm, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "phantomwiki").mkdir()
    code, out, err = run_cli("run", "--probes", "phantomwiki", "--strategy", "no_retrieval", "--limit", "1")
    assert code == 0, err
    note = "--probes phantomwiki is the shipped set, not the folder phantomwiki here (give ./phantomwiki for that)"
    assert f"flarebench: {note}" in err
    code, out, err = run_cli("run", "--probes", "./phantomwiki", "--strategy", "no_retrieval", "--limit", "1")
    assert code == 2 and "shipped set" not in err  # the folder, which holds no probe set


_TOY_PLUGIN = """# a team's plugin: its strategies, LMs and retrievers
from dataclasses import dataclass
from flarebench.strategies import Strategy, register

@register("_edited_toy")
@dataclass
class Toy(Strategy):
    def run(self, q, lm, r): ...
"""


def test_a_run_is_not_resumed_by_edited_plugin_code(tmp_path, scripted_lm, isolated_registry):
    plugin = tmp_path / "mine.py"
    plugin.write_text(_TOY_PLUGIN)
    code, out, err = _run(tmp_path / "run", "--plugin", str(plugin))
    assert code == 0, err
    recorded = json.loads((tmp_path / "run" / "run.json").read_text())["config"]["plugins"]
    assert list(recorded) == [str(plugin)] and len(recorded[str(plugin)]) == 64
    plugin.write_text(_TOY_PLUGIN + "# the same plugin, edited\n")
    line = _one_line(*_run(tmp_path / "run", "--plugin", str(plugin), limit="3")[::2])
    assert f"holds a run of a different configuration: plugins.{plugin} (was '" in line


@pytest.mark.slow
def test_a_calibration_is_not_resumed_with_another_split_or_goal(tmp_path, scripted_lm):
    command = ("calibrate", "--strategy", "flare_direct", "--limit", "6", "--report-dir", str(tmp_path / "cal"))
    code, out, err = run_cli(*command, "--target", "retrieval_rate=0.5", "--seed", "0")
    assert code == 0, err
    # Another seed puts other probes in the test part, where dev points' cached traces would be taken.
    for goal, seed, field in (
        ("retrieval_rate=0.5", "3", "study.seed (was 0, now 3)"),
        ("retrieval_rate=0.3", "0", "study.goal"),
    ):
        line = _one_line(*run_cli(*command, "--target", goal, "--seed", seed)[::2])
        assert f"holds a run of another calibration: {field}" in line, line
    # Another --budget-tolerance changes no answer, only the judgement of the test figures: the same
    # run is judged again, nothing run anew.
    before = (tmp_path / "cal" / "traces.jsonl").read_text()
    code, out, err = run_cli(*command, "--target", "retrieval_rate=0.5", "--seed", "0", "--budget-tolerance", "0.9")
    assert code == 0, err
    assert (tmp_path / "cal" / "traces.jsonl").read_text() == before
    assert "missed: off the goal by more than 0.9 on test" in (tmp_path / "cal" / "summary.md").read_text()
    # More probes split again: probes of the dev part would move into the test part.
    more = [a if a != "6" else "8" for a in command]
    line = _one_line(*run_cli(*more, "--target", "retrieval_rate=0.5", "--seed", "0")[::2])
    assert "holds a run of another calibration: study.limit (was 6, now 8)" in line, line
    # Nor by a plain run of its specs, which would run every grid point on every probe.
    specs = json.loads((tmp_path / "cal" / "run.json").read_text())["config"]["strategies"]
    line = _one_line(*run_cli("run", *(a for s in specs for a in ("--strategy", s)), *command[3:])[::2])
    assert "holds a run of another calibration: study.goal (was {" in line


# --------------------------------------------------------------------------------------------
# traces.jsonl: damaged lines and duplicates
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_damaged_trace_line_stops_score_report_and_resume_until_fixed(tmp_path, scripted_lm):
    run_dir = tmp_path / "run"
    code, out, err = _run(run_dir, limit="3")
    assert code == 0, out + err
    traces = run_dir / "traces.jsonl"
    lines = traces.read_text().splitlines(keepends=True)
    lines[1] = lines[1][: len(lines[1]) // 2] + "\n"  # a line cut in the middle of the file
    traces.write_text("".join(lines))
    for command in ("score", "report"):
        line = _one_line(*run_cli(command, str(run_dir))[::2])
        assert line.startswith(f"flarebench: {traces}:2: not a trace (")
    line = _one_line(*_run(run_dir, limit="3")[::2])
    assert line.startswith(f"flarebench: {traces}:2: not a trace (")
    assert line.endswith("; fix or delete that line, or use --overwrite to start the run again")
    assert traces.read_text() == "".join(lines)  # nothing resumed around the damaged line
    assert not (run_dir / LOCK).exists()  # the refusal released the folder
    code, out, err = _run(run_dir, "--overwrite", limit="3")
    assert code == 0, out + err
    assert [json.loads(x)["probe_id"] for x in traces.read_text().splitlines()] == ["pw-0001", "pw-0002", "pw-0003"]


def test_duplicate_traces_are_scored_once(tmp_path, scripted_lm):
    run_dir = tmp_path / "run"
    code, out, err = _run(run_dir)
    assert code == 0, out + err
    csv_run = (run_dir / "summary.csv").read_text()
    traces = run_dir / "traces.jsonl"
    first = traces.read_text()
    # A second writer appended the same probes again, with other answers: the first lines count.
    again = [{**json.loads(x), "answer": "Nobody", "output": "So the answer is Nobody."} for x in first.splitlines()]
    traces.write_text(first + "".join(json.dumps(t) + "\n" for t in again))
    code, out, err = run_cli("score", str(run_dir))
    assert code == 0, out + err
    assert "scored 2 probes per strategy" in out
    assert (run_dir / "summary.csv").read_text() == csv_run
    assert pd.read_csv(run_dir / "summary.csv")["n"].tolist() == [2]


def _state(folder: Path) -> dict:
    """Each entry of a folder: a file's content and inode (a file rewritten, even with the same
    content, gets a new one), or "folder"; a temporary file left behind adds an entry."""
    return {p.name: (p.read_bytes(), p.stat().st_ino) if p.is_file() else "folder" for p in folder.iterdir()}


def _resume(run_dir: Path, *extra: str) -> tuple[int, str, str]:
    """Run again the run of the ``scripted_run`` fixture, into its folder."""
    return run_cli("run", "--strategy", "no_retrieval", "--limit", "3", "--report-dir", str(run_dir), *extra)


def _set(d: dict, path: tuple, value) -> None:
    for key in path[:-1]:
        d = d[key]
    d[path[-1]] = value


@pytest.mark.parametrize(
    "path, value, why",
    [
        (
            ("steps", 0, "lm_calls", 0, "prompt_tokens"),
            "x",
            "steps[0].lm_calls[0].prompt_tokens: expected a whole number >= 0, got 'x'",
        ),
        (("seconds",), "x", "seconds: expected a finite number >= 0, got 'x'"),
        (
            ("seconds",),
            None,
            "seconds: expected a finite number >= 0, got null",
        ),  # an errored trace has its seconds too
        (
            ("steps", 0, "lm_calls", 0, "seconds"),
            "x",
            "steps[0].lm_calls[0].seconds: expected a finite number >= 0, got 'x'",
        ),
        # A time or a count no run writes would score to inf, NaN (an empty p95, unsaid) or a share below 0.
        (("seconds",), float("inf"), "seconds: expected a finite number >= 0, got inf"),
        (("seconds",), float("nan"), "seconds: expected a finite number >= 0, got nan"),
        (("seconds",), -5, "seconds: expected a finite number >= 0, got -5"),
        (
            ("steps", 0, "lm_calls", 0, "prompt_tokens"),
            1.5,
            "steps[0].lm_calls[0].prompt_tokens: expected a whole number >= 0, got 1.5",
        ),
        (
            ("steps", 0, "lm_calls", 0, "completion_tokens"),
            -100,
            "steps[0].lm_calls[0].completion_tokens: expected a whole number >= 0, got -100",
        ),
        (("output",), [1], "output: expected a string, got a list"),
        (("steps", 0, "gate"), "x", "steps[0].gate: expected an object or null, got 'x'"),
        (("steps", 0, "gate"), {"score": "x"}, "steps[0].gate.score: expected a number or null, got 'x'"),
        (
            ("steps", 0, "lm_calls", 0, "logprobs"),
            "x",
            "steps[0].lm_calls[0].logprobs: expected a list of numbers or null, got 'x'",
        ),
    ],
)
def test_a_trace_field_of_the_wrong_kind_is_named_by_score_report_and_resume(
    scripted_run, scripted_lm, path, value, why
):
    traces = scripted_run / "traces.jsonl"
    lines = traces.read_text().splitlines(keepends=True)
    trace = json.loads(lines[1])
    _set(trace, path, value)
    lines[1] = json.dumps(trace) + "\n"
    traces.write_text("".join(lines))
    before = _state(scripted_run)
    for command in ("score", "report"):
        assert _one_line(*run_cli(command, str(scripted_run))[::2]) == f"flarebench: {traces}:2: not a trace ({why})"
    line = _one_line(*_resume(scripted_run)[::2])
    assert line.startswith(f"flarebench: {traces}:2: not a trace ({why}); fix or delete that line")
    assert _state(scripted_run) == before


# --------------------------------------------------------------------------------------------
# run.json, and the files score and report write
# --------------------------------------------------------------------------------------------

_DELETED = object()
_PRICE = {"model": "scripted", "prompt_per_1m": "x", "completion_per_1m": 1.0}


@pytest.mark.parametrize(
    "field, value, why",
    [
        ("scoring.price", _PRICE, "scoring.price.prompt_per_1m: expected a number, got 'x'"),
        ("scoring.price", "x", "scoring.price: expected an object or null, got 'x'"),
        ("scoring.judge", "garbage", "scoring.judge: expected an object or null, got 'garbage'"),
        ("config.probes", "x", "config.probes: expected an object, got 'x'"),
        ("config.lm", "x", "config.lm: expected an object, got 'x'"),
        ("config.retriever", {}, "config.retriever.name: missing"),
        ("config.strategies", "x", "config.strategies: expected an object, got 'x'"),  # was scored as no probe
        ("config.strategies.no_retrieval", "x", "config.strategies.no_retrieval: expected an object, got 'x'"),
        ("status", 7, "status: expected one of running, partial, interrupted, complete, got 7"),
        ("limit", "abc", "limit: expected a whole number >= 1 or null, got 'abc'"),
        ("config", "x", "config: expected an object, got 'x'"),
        ("config", _DELETED, "config: missing"),
        ("", [], "expected an object, got a list"),  # the whole file
    ],
)
def test_a_run_json_field_of_the_wrong_kind_is_named_and_nothing_written(scripted_run, field, value, why):
    run_json = scripted_run / "run.json"
    info = json.loads(run_json.read_text())
    if not field:
        info = value
    elif value is _DELETED:
        del info[field]
    else:
        _set(info, tuple(field.split(".")), value)
    run_json.write_text(json.dumps(info))
    before = _state(scripted_run)
    for command in ("score", "report"):
        assert _one_line(*run_cli(command, str(scripted_run))[::2]) == f"flarebench: {run_json}: {why}"
    assert _state(scripted_run) == before


def test_score_and_report_of_a_folder_without_traces_keep_its_summary(scripted_run):
    traces = scripted_run / "traces.jsonl"
    traces.unlink()
    before = _state(scripted_run)
    for command in ("score", "report"):
        line = _one_line(*run_cli(command, str(scripted_run))[::2])
        assert line == f"flarebench: {traces}: not found; RUN_DIR must hold run.json and traces.jsonl"
    assert _state(scripted_run) == before


def test_score_and_report_of_a_run_stopped_before_its_first_trace_score_no_probe(scripted_run):
    # A run interrupted before any probe finished wrote run.json and a report, but no traces.jsonl:
    # scored as an empty traces.jsonl would be.
    run_json, traces = scripted_run / "run.json", scripted_run / "traces.jsonl"
    run_json.write_text(json.dumps({**json.loads(run_json.read_text()), "status": "interrupted"}))
    traces.unlink()
    outputs = {}
    for present in (False, True):
        if present:
            traces.write_text("")
        for command in ("score", "report"):
            code, out, err = run_cli(command, str(scripted_run))
            assert code == 0 and err == "", out + err
            outputs[present, command] = (out, (scripted_run / "summary.csv").read_text())
        assert traces.exists() == present  # only read, never created
    assert "scored no probe (selection from run.json: 3 probes)" in outputs[False, "score"][0]
    assert all(outputs[False, command] == outputs[True, command] for command in ("score", "report"))


@pytest.mark.parametrize(
    "command, name",
    [
        ("report", "report.html"),
        ("score", "summary.csv"),
        # Written last: without a check of every file first, the ones before it would be rewritten
        # (with --reference, to another reference than run.json records).
        ("score", "adoption.md"),
        ("report", "summary.md"),
        ("score", "triggers.csv"),
        ("score", "breakdown_hops.csv"),
    ],
)
def test_a_file_score_or_report_cannot_write_is_one_line_and_the_folder_is_left_as_it_was(scripted_run, command, name):
    path = scripted_run / name
    path.unlink(missing_ok=True)
    path.mkdir()
    before = _state(scripted_run)
    by = ("--by", "hops") if command == "score" else ()
    code, out, err = run_cli(command, str(scripted_run), "--reference", "no_retrieval", *by)
    assert (
        _one_line(code, err) == f"flarebench: {path}: cannot be written (a folder is in its place); nothing was written"
    )
    assert _state(scripted_run) == before  # no temporary file left, no summary file rewritten


@pytest.mark.parametrize("edit", ["emptied", "no probe selected"])
def test_a_complete_run_whose_traces_or_selection_were_emptied_keeps_its_summary(scripted_run, edit):
    traces, run_json = scripted_run / "traces.jsonl", scripted_run / "run.json"
    if edit == "emptied":
        traces.write_text("")
        why = f"{traces}: holds no trace of the run's strategies and probes, yet {run_json} says the run is complete"
    else:
        run_json.write_text(json.dumps({**json.loads(run_json.read_text()), "probe_ids": []}))
        why = f"{run_json}: probe_ids: expected a list of probe ids (a run selects one at least)"
    before = _state(scripted_run)
    for command in ("score", "report"):
        assert _one_line(*run_cli(command, str(scripted_run))[::2]).startswith(f"flarebench: {why}")
    assert _state(scripted_run) == before


@pytest.mark.parametrize(
    "name, problem",
    [
        ("run.json", "cannot be read (Is a directory); use --overwrite to replace it"),
        (
            "traces.jsonl",
            "cannot be read (Is a directory); fix or delete it, or use --overwrite to start the run again",
        ),
        (LOCK, "could not take the lock (Is a directory)"),
    ],
)
def test_resuming_a_folder_with_a_folder_in_place_of_a_file_is_one_line(scripted_run, monkeypatch, name, problem):
    path = scripted_run / name
    path.unlink(missing_ok=True)
    path.mkdir()
    before = _state(scripted_run)
    monkeypatch.setattr("flarebench.bench.recipe.make_lm", _no_model)  # refused before the model loads
    assert _one_line(*_resume(scripted_run)[::2]) == f"flarebench: {path}: {problem}"
    assert _state(scripted_run) == before
    if name != LOCK:  # as the line says, --overwrite starts the run again
        monkeypatch.setattr("flarebench.bench.recipe.make_lm", lambda *args, **kwargs: ProbeAwareLM())
        code, out, err = _resume(scripted_run, "--overwrite")
        assert code == 0, out + err
        assert len((scripted_run / "traces.jsonl").read_text().splitlines()) == 3


# --------------------------------------------------------------------------------------------
# The run folder's lock
# --------------------------------------------------------------------------------------------


def _lock_of(pid: int) -> str:
    return json.dumps({"pid": pid, "host": socket.gethostname(), "token": "other"})


@pytest.mark.slow
def test_a_folder_another_live_process_writes_is_refused_and_a_dead_ones_lock_taken_over(
    tmp_path, scripted_lm, monkeypatch
):
    run_dir = tmp_path / "run"
    code, out, err = _run(run_dir)
    assert code == 0, out + err
    assert not (run_dir / LOCK).exists()  # released at the end of the run
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as other:
        try:
            (run_dir / LOCK).write_text(_lock_of(other.pid))
            calls = len(scripted_lm.requests)
            line = _one_line(*_run(run_dir)[::2])
            assert line.startswith(f"flarebench: {run_dir} is in use by another flarebench run (pid {other.pid})")
            assert len(scripted_lm.requests) == calls
            # Readers need no lock: the folder can be scored while its run goes on.
            code, out, err = run_cli("score", str(run_dir))
            assert code == 0, out + err
        finally:
            other.kill()
    code, out, err = _run(run_dir)
    assert code == 0, out + err
    assert f"flarebench: took over {run_dir / LOCK}: its owner (pid {other.pid}) is no longer running" in err
    assert not (run_dir / LOCK).exists()


def test_a_killed_run_its_parent_has_not_reaped_holds_no_lock():
    # Killed (SIGKILL), a run is a zombie until its parent reaps it, which in a container whose PID 1
    # reaps no orphans is never: os.kill(pid, 0) still succeeds on it.
    from flarebench.bench.runlock import _alive

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert _alive(proc.pid)
        proc.kill()  # not waited for: a zombie, this test's child
        stat = Path(f"/proc/{proc.pid}/stat")
        deadline = time.time() + 10
        while stat.read_text().rpartition(")")[2].split()[0] != "Z":
            assert time.time() < deadline, "the killed process never became a zombie"
            time.sleep(0.01)
        assert not _alive(proc.pid)
    finally:
        proc.wait()


@pytest.mark.slow
def test_the_lock_is_released_on_refusal_and_on_ctrl_c(tmp_path, scripted_lm, monkeypatch):
    run_dir = tmp_path / "run"
    assert _run(run_dir)[0] == 0
    code, out, err = run_cli("run", "--strategy", "single_time:k=2", "--limit", "2", "--report-dir", str(run_dir))
    assert "holds a run of a different configuration" in _one_line(code, err)
    assert not (run_dir / LOCK).exists()

    seen = []

    def interrupt(request):
        seen.append(os.path.exists(run_dir / LOCK))
        raise KeyboardInterrupt

    monkeypatch.setattr(scripted_lm, "_complete", interrupt)
    code, out, err = _run(run_dir, limit="3")
    assert code == 130 and "interrupted" in err
    assert seen == [True] and not (run_dir / LOCK).exists()
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"


def _pytest_bench(pytester, *args):
    root = Path(__file__).resolve().parents[1]
    # no_reraise_ctrlc: a KeyboardInterrupt inside the inner run ends that run, not this test session.
    return pytester.runpytest_inprocess(str(root / "bench"), "-p", "no:cacheprovider", *args, no_reraise_ctrlc=True)


pytest_plugins = ["pytester"]


@pytest.mark.slow
def test_pytest_bench_releases_the_lock_at_the_end_and_on_ctrl_c(pytester, tmp_path, scripted_lm, monkeypatch):
    run_dir = tmp_path / "run"
    result = _pytest_bench(pytester, "--strategy", "single_time", "--limit", "2", "--report-dir", str(run_dir))
    assert result.ret == 0, result.stdout.str()
    assert not (run_dir / LOCK).exists()

    def interrupt(request):
        assert (run_dir / LOCK).exists()
        raise KeyboardInterrupt

    monkeypatch.setattr(scripted_lm, "_complete", interrupt)
    result = _pytest_bench(pytester, "--strategy", "single_time", "--limit", "3", "--report-dir", str(run_dir))
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    assert not (run_dir / LOCK).exists()
    # A live owner: `pytest bench` stops with the one line, a usage error (status 4).
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as other:
        try:
            (run_dir / LOCK).write_text(_lock_of(other.pid))
            result = _pytest_bench(pytester, "--strategy", "single_time", "--limit", "2", "--report-dir", str(run_dir))
            assert result.ret == pytest.ExitCode.USAGE_ERROR
            assert f"is in use by another flarebench run (pid {other.pid})" in result.stdout.str() + result.stderr.str()
        finally:
            other.kill()


@pytest.mark.slow
def test_the_same_command_on_a_finished_run_says_so_and_warms_nothing(tmp_path, scripted_lm, monkeypatch):
    from flarebench.bench import session

    warmed = []
    real = session.warm_up
    monkeypatch.setattr(session, "warm_up", lambda *args: warmed.append(args) or real(*args))
    command = ("run", "--strategy", "no_retrieval", "--strategy", "single_time", "--limit", "2")
    command += ("--report-dir", str(tmp_path / "r"))
    code, out, err = run_cli(*command)
    assert code == 0 and len(warmed) == 1 and "nothing to run" not in err
    summary = (tmp_path / "r" / "summary.csv").read_text()
    code, out, err = run_cli(*command)
    assert code == 0, err
    assert f"flarebench: {tmp_path / 'r'} holds all 4 traces already: nothing to run" in err
    assert len(warmed) == 1  # the prompt prefixes were not evaluated again for nothing
    assert (tmp_path / "r" / "summary.csv").read_text() == summary


def test_a_second_ctrl_c_while_the_run_is_marked_stopped_is_dropped(tmp_path, scripted_lm, monkeypatch):
    from flarebench.bench.session import BenchSession

    real_complete, real_summary = scripted_lm._complete, BenchSession.write_summary
    asked = []

    def interrupted_at_the_second(request):
        asked.append(request)
        if len(asked) == 2:
            raise KeyboardInterrupt
        return real_complete(request)

    def summary_and_a_second_ctrl_c(self, status=None):
        if status == "interrupted":  # the user presses Ctrl-C again while the first is handled
            os.kill(os.getpid(), signal.SIGINT)
        return real_summary(self, status)

    monkeypatch.setattr(scripted_lm, "_complete", interrupted_at_the_second)
    monkeypatch.setattr(BenchSession, "write_summary", summary_and_a_second_ctrl_c)
    code, out, err = _run(tmp_path / "run", limit="3")
    assert code == 130 and "run the same command to resume" in err
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "interrupted"
    assert (tmp_path / "run" / "summary.csv").exists() and (tmp_path / "run" / "report.html").exists()


def test_a_stopped_gated_run_says_to_measure_it_again_not_to_resume(tmp_path, scripted_lm, monkeypatch):
    real, asked = scripted_lm._complete, []

    def interrupted_at_the_third(request):
        asked.append(request)
        if len(asked) == 3:  # the latency reference's first probe, then the gated spec's
            raise KeyboardInterrupt
        return real(request)

    monkeypatch.setattr(scripted_lm, "_complete", interrupted_at_the_third)
    command = ("--save-baseline", str(tmp_path / "baseline.json"))
    code, out, err = _run(tmp_path / "run", *command, limit="3")
    assert code == 130 and "run the same command to resume" not in err
    assert err.strip().endswith(
        "interrupted; finished probes are kept, but a gated run is measured in one fresh run: "
        f"run the same command with --overwrite, or with another --report-dir (run folder: {tmp_path / 'run'})"
    )
    assert "run the same command with --overwrite to measure it" in (tmp_path / "run" / "summary.md").read_text()
    monkeypatch.setattr(scripted_lm, "_complete", real)
    assert _one_line(*_run(tmp_path / "run", *command, limit="3")[::2]).endswith(
        "use another --report-dir, or --overwrite to replace it"
    )
    assert _run(tmp_path / "run", *command, "--overwrite", limit="3")[0] == 0


def test_a_run_folder_whose_name_is_not_utf8_is_written_and_reported(tmp_path, scripted_lm):
    # A name in bytes that are not UTF-8 reaches Python as surrogates, which the summary quotes.
    run_dir = os.fsdecode(os.fsencode(tmp_path) + b"/bad\xffbyte")
    assert _run(Path(run_dir))[0] == 0
    assert run_cli("report", run_dir)[0] == 0
    written = sorted(p.name for p in Path(run_dir).iterdir())
    assert written == ["adoption.md", "report.html", "run.json", "summary.csv", "summary.md", "traces.jsonl"]
    assert b"bad\xffbyte" in (Path(run_dir) / "summary.md").read_bytes()


def test_runs_started_in_the_same_second_each_get_a_default_folder(tmp_path, scripted_lm, monkeypatch):
    # Two CI jobs (or a double launch) started together: the second was refused the first's folder.
    import datetime as dt

    import flarebench.bench.session as session

    frozen = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    monkeypatch.setattr(
        session.dt, "datetime", type("Frozen", (dt.datetime,), {"now": staticmethod(lambda tz: frozen)})
    )
    monkeypatch.chdir(tmp_path)
    for _ in range(3):
        code, out, err = run_cli("run", "--strategy", "no_retrieval", "--limit", "1")
        assert code == 0, err
    folders = sorted(p.name.rsplit("-", 1)[0] for p in (tmp_path / "reports").iterdir())
    assert folders == ["20260102T030405Z", "20260102T030405Z.2", "20260102T030405Z.3"]
    assert len({p.name.rsplit("-", 1)[1] for p in (tmp_path / "reports").iterdir()}) == 1  # one configuration


@pytest.mark.slow
def test_without_report_dir_the_same_command_resumes_the_run_that_did_not_finish(tmp_path, scripted_lm, monkeypatch):
    monkeypatch.chdir(tmp_path)
    command = ("run", "--strategy", "no_retrieval", "--limit", "3")
    real, asked = scripted_lm._complete, []

    def interrupted_at_the_second(request):
        asked.append(request)
        if len(asked) == 2:
            raise KeyboardInterrupt
        return real(request)

    monkeypatch.setattr(scripted_lm, "_complete", interrupted_at_the_second)
    code, out, err = run_cli(*command)
    assert code == 130 and "run the same command to resume" in err
    # Said at once: with thousands of traces the summary and the report take seconds to write.
    assert err.splitlines()[-2] == (
        "flarebench: stopping: summarising the finished probes and writing the report (a second Ctrl-C waits for them)"
    )
    (folder,) = (tmp_path / "reports").iterdir()
    monkeypatch.setattr(scripted_lm, "_complete", real)
    code, out, err = run_cli(*command)  # the same command: the same folder, the two probes left
    assert code == 0, err
    resumed = Path("reports") / folder.name
    assert f"flarebench: resuming {resumed}, this configuration's last run, which did not finish" in err
    assert [p.name for p in (tmp_path / "reports").iterdir()] == [folder.name]
    assert len((folder / "traces.jsonl").read_text().splitlines()) == 3
    assert json.loads((folder / "run.json").read_text())["status"] == "complete"
    time.sleep(1.1)  # a new folder's name holds the second
    code, out, err = run_cli(*command)  # finished: a new run, in a new folder
    assert code == 0 and "resuming" not in err and len(list((tmp_path / "reports").iterdir())) == 2


@pytest.mark.slow
def test_retry_errors_runs_the_failed_probes_again_in_the_newest_folder_finished_or_not(
    tmp_path, scripted_lm, monkeypatch
):
    # A hosted model's 500s after the retries leave errored traces in a finished run; the same command
    # with --retry-errors runs only those again, in that folder, and the summary counts them answered.
    from flarebench.strategies.lm import LMError

    monkeypatch.chdir(tmp_path)
    command = ("run", "--strategy", "no_retrieval", "--strategy", "single_time", "--limit", "2")
    real = scripted_lm._complete
    failing = {scripted_lm.probes[1].question}

    def server_error_on_the_second_probe(request):
        if any(q in request.prompt.dynamic for q in failing):
            raise LMError("the LM server answered HTTP 500")
        return real(request)

    monkeypatch.setattr(scripted_lm, "_complete", server_error_on_the_second_probe)
    code, out, err = run_cli(*command)
    assert code == 1 and err.splitlines()[-1] == (
        "flarebench: failed: no_retrieval, single_time (2 probes raised an error, each said in its trace; the same "
        "command with --retry-errors runs them again)"
    )
    (folder,) = (tmp_path / "reports").iterdir()
    lines = (folder / "traces.jsonl").read_text().splitlines()
    errored = [json.loads(line)["probe_id"] for line in lines if json.loads(line)["error"]]
    assert errored == [scripted_lm.probes[1].id] * 2
    assert list(pd.read_csv(folder / "summary.csv")["errors"]) == [1, 1]
    code, out, err = run_cli(*command, "--retry-errors")  # the server still fails: kept as errors
    assert code == 1 and "--retry-errors: running again 2 probes whose trace held an error (no_retrieval 1, " in err
    assert err.splitlines()[-1].endswith("; the same command runs them again, as --retry-errors is on)")
    failing.clear()  # the server is fixed
    code, out, err = run_cli(*command, "--retry-errors")
    assert code == 0, err
    resumed = f"flarebench: resuming {Path('reports') / folder.name}, this configuration's last run, for --retry-errors"
    assert resumed in err and len(os.listdir("reports")) == 1
    traces = [json.loads(line) for line in (folder / "traces.jsonl").read_text().splitlines()]
    assert len(traces) == 4 and not any(t["error"] for t in traces)
    answered = [line for line in lines if not json.loads(line)["error"]]
    assert (folder / "traces.jsonl").read_text().splitlines()[:2] == answered  # kept as they were
    assert list(pd.read_csv(folder / "summary.csv")["errors"]) == [0, 0]
    assert json.loads((folder / "run.json").read_text())["status"] == "complete"
    code, out, err = run_cli(*command, "--retry-errors", "--report-dir", str(folder))
    assert code == 0 and "flarebench: --retry-errors: no trace holds an error" in err
    for other, why in (("--overwrite", "--overwrite starts the run again"), ("--save-baseline=b.json", "gated")):
        code, out, err = run_cli(*command, "--retry-errors", other)
        assert code == 2 and why in err and err.count("\n") == 1, err
    code, out, err = run_cli(*command, "--retry-errors", "--report-dir", "new")  # a new run: nothing to say
    assert code == 0 and "--retry-errors" not in err


@pytest.mark.slow
def test_retry_errors_from_the_config_file_is_left_off_for_a_gated_run_and_a_clean_finished_run_is_not_resumed(
    tmp_path, scripted_lm, monkeypatch
):
    # A team's own default for its local runs must not break its CI's gated runs, nor turn every
    # repeated command into "nothing to run".
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flarebench.toml").write_text("retry-errors = true\n")
    command = ("run", "--strategy", "no_retrieval", "--limit", "1")
    code, out, err = run_cli(*command, "--save-baseline", "b.json", "--report-dir", "gated")
    assert code == 0, err
    assert f"flarebench: retry-errors from {tmp_path / 'flarebench.toml'} is left off: a gated run is measured" in err
    code, out, err = run_cli(*command, "--gate", "b.json", "--report-dir", "gated", "--overwrite")
    assert code == 0 and "--overwrite starts the run again" in err, err
    code, out, err = run_cli(*command)
    assert code == 0 and len(os.listdir("reports")) == 1
    time.sleep(1.1)  # a new folder's name holds the second
    code, out, err = run_cli(*command)  # finished without an error: a new run, not "nothing to run"
    assert code == 0 and "resuming" not in err and len(os.listdir("reports")) == 2


@pytest.mark.slow
def test_pytest_bench_says_how_to_run_failed_probes_again(pytester, tmp_path, scripted_lm, monkeypatch):
    from flarebench.strategies.lm import LMError

    def server_error(request):
        raise LMError("the LM server answered HTTP 500")

    monkeypatch.setattr(scripted_lm, "_complete", server_error)
    result = _pytest_bench(pytester, "--strategy", "no_retrieval", "--limit", "1", "--report-dir", str(tmp_path / "r"))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "no_retrieval: 1 of 1 probes failed; first: pw-0001: LMError: the LM server answered HTTP 500 (" in (
        result.stdout.str()
    )
    assert "; the same command with --retry-errors runs them again" in result.stdout.str()


# --------------------------------------------------------------------------------------------
# $FLAREBENCH_CACHE
# --------------------------------------------------------------------------------------------


def test_the_cache_folder_is_checked_and_created_as_a_run_would(paths, monkeypatch):
    from flarebench.bench.paths import PathError, check_cache_root

    monkeypatch.setenv("FLAREBENCH_CACHE", str(paths["MISSING"] / "cache"))
    check_cache_root()
    assert (paths["MISSING"] / "cache").is_dir()
    monkeypatch.setenv("FLAREBENCH_CACHE", str(paths["FILE"]))
    with pytest.raises(PathError, match=f"^\\$FLAREBENCH_CACHE {paths['FILE']}: is a file, not a folder$"):
        check_cache_root()
    if Path("/proc").is_dir():  # refused whatever its permissions say, to root too
        monkeypatch.setenv("FLAREBENCH_CACHE", "/proc/flarebench")
        with pytest.raises(PathError, match=r"^\$FLAREBENCH_CACHE /proc/flarebench: cannot be created"):
            check_cache_root()
    # Unset, the default folder under the home folder is named as such.
    monkeypatch.delenv("FLAREBENCH_CACHE")
    monkeypatch.setenv("HOME", str(paths["FILE"]))
    default = paths["FILE"] / ".cache" / "flarebench"
    with pytest.raises(PathError) as e:
        check_cache_root()
    why = f"cannot be created: {paths['FILE']} is a file, not a folder"
    assert str(e.value) == f"the cache folder ($FLAREBENCH_CACHE unset) {default}: {why}"


@pytest.mark.parametrize(
    "given, message",
    [
        ("FILE", "$FLAREBENCH_CACHE {FILE}: is a file, not a folder"),
        ("BELOW", "$FLAREBENCH_CACHE {BELOW}: cannot be created: {FILE} is a file, not a folder"),
    ],
)
def test_a_flarebench_cache_that_cannot_serve_is_one_line_before_any_model(
    tmp_path, paths, no_model, monkeypatch, given, message
):
    # Without --cache too: every run keeps its BM25 index there.
    monkeypatch.setenv("FLAREBENCH_CACHE", str(paths[given]))
    assert _one_line(*_run(tmp_path / "run")[::2]) == "flarebench: " + message.format(**paths)
    assert not (tmp_path / "run").exists()


def test_pytest_bench_with_a_bad_flarebench_cache_is_a_usage_error(pytester, tmp_path, paths, no_model, monkeypatch):
    monkeypatch.setenv("FLAREBENCH_CACHE", str(paths["FILE"]))
    result = _pytest_bench(pytester, "--strategy", "single_time", "--limit", "1", "--report-dir", str(tmp_path / "run"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    line = f"ERROR: flarebench: $FLAREBENCH_CACHE {paths['FILE']}: is a file, not a folder"
    assert result.stderr.str().strip() == line
    assert not (tmp_path / "run").exists()
