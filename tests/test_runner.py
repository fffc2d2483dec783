"""The runner and the run folder: traces written as produced, resume, refusal, error capture, the
reading of traces.jsonl (duplicates, damaged lines) and the run folder's lock."""

import dataclasses
import json
import os
import pathlib
import re
import socket
import subprocess
import sys
from typing import Any, ClassVar

import pytest

from flarebench.bench.config import first_difference
from flarebench.bench.runlock import LOCK, LockHeld, RunLock, _started
from flarebench.bench.runner import (
    StrategyRefused,
    TraceError,
    TraceLog,
    check_compatible,
    run_strategy,
    warm_up,
)
from flarebench.bench.session import BenchSession, ConfigError
from flarebench.bench.topk import RecordTopK
from flarebench.strategies.base import Strategy, finish
from flarebench.strategies.lm import Prompt
from flarebench.strategies.records import Step
from tests.scripted import ScriptedLM, ScriptedRetriever, run_cli


@dataclasses.dataclass
class Flaky(Strategy):
    """Answers from a scripted LM; raises on questions containing 'explode' or 'interrupt'."""

    def run(self, question, lm, retriever):
        if "explode" in question:
            raise RuntimeError("boom")
        if "interrupt" in question:
            raise KeyboardInterrupt
        call = lm.generate(dataclasses.replace(_PROMPT, dynamic=question), 8)
        return finish(question, [Step(call.text, [call])])


_PROMPT = Prompt("static ", "")


@dataclasses.dataclass
class P:
    id: str
    question: str


PROBES = [P("p1", "one"), P("p2", "two explode"), P("p3", "three")]


def test_traces_are_appended_as_produced_and_errors_recorded(tmp_path):
    log = TraceLog(tmp_path / "traces.jsonl")
    lm = ScriptedLM([" So the answer is x."])
    traces = list(run_strategy("_test_flaky", Flaky(), PROBES, lm, None, log))
    assert [t.probe_id for t in traces] == ["p1", "p2", "p3"]
    assert traces[1].error.startswith("RuntimeError: boom") and traces[1].stop_reason == "error"
    assert traces[0].answer == "x" and traces[0].error is None
    assert [t.probe_id for t in log.read()] == ["p1", "p2", "p3"]


def test_a_probes_time_leaves_out_the_harness_check_of_its_trace(monkeypatch):
    # The round trip that checks a trace can be written costs milliseconds on a long trace: the
    # harness's, not the pipeline's, so not in latency or harness_s.
    from types import SimpleNamespace

    from flarebench.bench import runner

    now = [0.0]
    monkeypatch.setattr(runner, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    real = runner._unrecordable

    def slow_check(trace):
        now[0] += 100.0
        return real(trace)

    monkeypatch.setattr(runner, "_unrecordable", slow_check)

    @dataclasses.dataclass
    class TakesTwoSeconds(Flaky):
        def run(self, question, lm, retriever):
            now[0] += 2.0
            return super().run(question, lm, retriever)

    trace = runner.run_probe("_test_flaky", TakesTwoSeconds(), P("p1", "one"), ScriptedLM([" x."]), None)
    assert trace.error is None and trace.seconds == 2.0


def test_a_plugins_malformed_result_is_that_probes_error_and_the_folder_stays_readable(tmp_path):
    # Written as it was, a trace the file cannot hold made traces.jsonl unreadable: no resume, no score.
    from flarebench.strategies.records import Trace

    @dataclasses.dataclass
    class Sloppy(Strategy):
        name: ClassVar[str] = "sloppy"

        def run(self, question, lm, retriever):
            if "one" in question:
                return Trace(question=question, output=None, answer=None, stop_reason="stop")
            call = lm.generate(dataclasses.replace(_PROMPT, dynamic=question), 8)
            return finish(question, [Step(call.text, [call])])

    class Miscounting(ScriptedLM):
        def _complete(self, request):
            return dataclasses.replace(super()._complete(request), prompt_tokens=-1)

    class Unready(ScriptedLM):
        def begin_answer(self):
            raise RuntimeError("not ready")

    log = TraceLog(tmp_path / "traces.jsonl")
    lm = Miscounting([" So the answer is x."])
    first, second = run_strategy("_test_sloppy", Sloppy(), PROBES[::2], lm, None, log)
    assert first.error == "sloppy.run returned a Trace that cannot be recorded (output: expected a string, got null)"
    assert second.error.startswith(
        "LMError: LM scripted: _complete returned an LMCall a trace cannot hold (prompt_tokens: expected a whole "
        "number >= 0, got -1)"
    )
    (third,) = run_strategy("_test_unready", Flaky(), PROBES[:1], Unready(["x"]), None, log)
    assert third.error.startswith("RuntimeError: not ready")
    assert [t.error is not None for t in log.read()] == [True, True, True]  # read back, every line


def test_every_probe_begins_a_new_answer_of_the_lm_through_its_wrappers(tmp_path):
    class Marking(ScriptedLM):
        def begin_answer(self):
            self.requests.append("begin")

    lm = Marking([" So the answer is x."])
    traces = list(run_strategy("_test_flaky", Flaky(), PROBES, RecordTopK(lm, 3), None, TraceLog(tmp_path / "t.jsonl")))
    assert [t.error is None for t in traces] == [True, False, True]
    # Each probe's calls come after its own begin_answer, so none continues an earlier probe's state.
    assert [r if r == "begin" else r.prompt.dynamic for r in lm.requests] == ["begin", "one", "begin", "begin", "three"]


def test_interrupted_run_keeps_finished_probes_and_resumes(tmp_path):
    log = TraceLog(tmp_path / "traces.jsonl")
    lm = ScriptedLM([" So the answer is x."])
    probes = [P("p1", "one"), P("p2", "interrupt me"), P("p3", "three")]
    with pytest.raises(KeyboardInterrupt):
        list(run_strategy("_test_flaky", Flaky(), probes, lm, None, log))
    assert [t.probe_id for t in log.read()] == ["p1"]
    # A torn last line (killed mid-write) is dropped, not parsed.
    with open(log.path, "a") as f:
        f.write('{"question": "half')
    probes[1] = P("p2", "two")
    resumed = list(run_strategy("_test_flaky", Flaky(), probes, lm, None, TraceLog(log.path)))
    assert [t.probe_id for t in resumed] == ["p2", "p3"]
    assert [t.probe_id for t in TraceLog(log.path).read()] == ["p1", "p2", "p3"]


def test_logprob_strategies_are_refused_on_backends_without_them():
    @dataclasses.dataclass
    class NeedsLogprobs(Flaky):
        def needs(self):
            return frozenset({"logprobs"})

    check_compatible("x", NeedsLogprobs(), ScriptedLM(["a"]))
    with pytest.raises(
        StrategyRefused, match=r"^x needs per-token logprobs, .* would run on it: no_retrieval, .*flare_instruct"
    ):
        check_compatible("x", NeedsLogprobs(), ScriptedLM(["a"], supports_logprobs=False))


def test_first_difference_names_the_field():
    old = {"lm": {"name": "a", "sha256": "1"}, "strategies": {"s": {"k": 3}}}
    assert first_difference(old, old) is None
    assert (
        first_difference(old, {"lm": {"name": "a", "sha256": "1"}, "strategies": {"s": {"k": 5}}})
        == "strategies.s.k (was 3, now 5)"
    )
    assert first_difference(old, {**old, "extra": 1}) == "extra (was '<absent>', now 1)"
    # A strategy's whole parameter set is cut short: the field named is what the reader needs.
    params = {f"param_{i}": i for i in range(20)}
    assert first_difference(old, {**old, "extra": params}) == (
        "extra (was '<absent>', now {'param_0': 0, 'param_1': 1, 'param_2': 2, 'param_3': 3, 'param_4': 4, 'par ...})"
    )
    # The prompt hash follows from the strategies run together: a sweep's folder reused by a plain
    # run is refused naming the strategies, though the hash comes first in run.json.
    sweep = {"prompt_sha256": "a", **old, "strategies": {"s:k=1": {"k": 1}, "s:k=2": {"k": 2}}}
    plain = {"prompt_sha256": "b", **old, "strategies": {"s:k=1": {"k": 1}}}
    assert first_difference(sweep, plain) == "strategies (was s:k=1, s:k=2; now s:k=1)"
    assert first_difference({**plain, "prompt_sha256": "a"}, plain) == "prompt_sha256 (was 'a', now 'b')"
    assert first_difference(old, {**old, "strategies": {"t": {"k": 3}}}) == "strategies (was s; now t)"


@pytest.mark.model
def test_run_folder_of_another_configuration_is_refused(tmp_path):
    BenchSession(strategy=["no_retrieval"], limit=1, report_dir=str(tmp_path), progress=False).run("no_retrieval")
    refusal = r"different configuration: strategies \(was no_retrieval; now no_retrieval:k=5\)"
    with pytest.raises(ConfigError, match=refusal):
        BenchSession(strategy=["no_retrieval:k=5"], limit=1, report_dir=str(tmp_path), progress=False)
    again = BenchSession(
        strategy=["no_retrieval:k=5"], limit=1, report_dir=str(tmp_path), overwrite=True, progress=False
    )
    assert again.log.read() == []
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="holds no flarebench run"):
        BenchSession(strategy=["no_retrieval"], limit=1, report_dir=str(tmp_path / "other"), progress=False)


@pytest.mark.parametrize("stage", ["warm_up", "run_strategy"])
def test_a_run_stopped_by_an_error_is_marked_interrupted_not_running(tmp_path, scripted_lm, monkeypatch, stage):
    # An error that is no user's mistake (a bug, a backend failing oddly) stops the run: run.json
    # must say it stopped, not that it is still running, and the same command resumes it.
    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(f"flarebench.bench.session.{stage}", boom)
    run_dir = tmp_path / "run"
    with pytest.raises(RuntimeError, match="boom"):
        run_cli("run", "--strategy", "no_retrieval", "--limit", "1", "--report-dir", str(run_dir))
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    assert not (run_dir / "run.lock").exists()
    monkeypatch.undo()
    monkeypatch.setattr("flarebench.bench.recipe.make_lm", lambda *args, **kwargs: scripted_lm)
    code, out, err = run_cli("run", "--strategy", "no_retrieval", "--limit", "1", "--report-dir", str(run_dir))
    assert code == 0 and json.loads((run_dir / "run.json").read_text())["status"] == "complete", err


def test_a_full_disk_stops_the_run_in_one_line_and_the_same_command_resumes(tmp_path, scripted_lm, monkeypatch):
    # The third trace meets a full disk (/dev/full refuses every write with ENOSPC): every probe
    # left would fail the same way, so the run stops, resumable, instead of a traceback.
    real, appended = TraceLog.append, []

    def fills(self, trace):
        if len(appended) == 2:
            path, self.path = self.path, pathlib.Path("/dev/full")
            try:
                return real(self, trace)
            finally:
                self.path = path
        appended.append(trace)
        return real(self, trace)

    monkeypatch.setattr(TraceLog, "append", fills)
    run = ("run", "--strategy", "no_retrieval", "--limit", "4", "--report-dir", str(tmp_path / "r"))
    code, out, err = run_cli(*run)
    assert code == 3, err
    assert err.strip().splitlines()[-1] == (
        "flarebench: cannot write /dev/full (No space left on device); "
        "finished probes are kept; run the same command to resume"
    )
    assert len(TraceLog(tmp_path / "r" / "traces.jsonl").read()) == 2
    assert json.loads((tmp_path / "r" / "run.json").read_text())["status"] == "interrupted"
    monkeypatch.setattr(TraceLog, "append", real)
    code, out, err = run_cli(*run)
    assert code == 0 and len(TraceLog(tmp_path / "r" / "traces.jsonl").read()) == 4, err


@pytest.mark.slow
def test_a_summary_that_cannot_be_written_mid_run_stops_it_as_a_full_disk_does(tmp_path, scripted_lm, monkeypatch):
    # It was a usage error (exit 2) with no word on resuming.
    import flarebench.bench.report as report
    from flarebench.bench.paths import WriteError

    real = report.write_atomic

    def full(path, text):
        if path.name == "summary.md":
            raise WriteError(f"{path}: cannot be written (No space left on device)")
        return real(path, text)

    monkeypatch.setattr(report, "write_atomic", full)
    run = ("run", "--strategy", "no_retrieval", "--strategy", "single_time", "--limit", "2")
    code, out, err = run_cli(*run, "--report-dir", str(tmp_path / "r"))
    assert code == 3, err
    assert err.splitlines()[-1].startswith(
        f"flarebench: {tmp_path / 'r' / 'summary.md'}: cannot be written (No space left on device); "
        "finished probes are kept; run the same command to resume"
    )
    monkeypatch.setattr(report, "write_atomic", real)
    assert run_cli(*run, "--report-dir", str(tmp_path / "r"))[0] == 0


def test_a_run_folder_that_cannot_be_created_is_one_line(tmp_path, scripted_lm, monkeypatch):
    # --report-dir passed its check before the run, but the place still refuses (/proc as root).
    target = tmp_path / "runs" / "x"
    real = pathlib.Path.mkdir

    def refuse(self, *args, **kwargs):
        if self == target:
            raise PermissionError(13, "Permission denied")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "mkdir", refuse)
    with pytest.raises(ConfigError, match=r"^--report-dir .*runs/x: cannot be created \(Permission denied\)$"):
        BenchSession(strategy=["no_retrieval"], limit=1, report_dir=str(target), progress=False)


def test_bad_options_are_config_errors():
    with pytest.raises(ConfigError, match="--limit must be >= 1"):
        BenchSession(limit=0)
    with pytest.raises(ConfigError, match="no probe set named or at 'nope'"):
        BenchSession(probes="nope")
    with pytest.raises(ConfigError, match="unknown strategy 'bogus'"):
        BenchSession(strategy=["bogus"])
    # A reference the run lacks is said in its summary; one that is no strategy spec is refused.
    with pytest.raises(ConfigError, match="^--reference: unknown strategy 'nosuch'"):
        BenchSession(strategy=["no_retrieval"], reference="nosuch:x=1")
    with pytest.raises(ConfigError, match="^--reference: flare_direct:theta=abc: theta must be"):
        BenchSession(strategy=["no_retrieval"], reference="flare_direct:theta=abc")


def _line(probe_id: str, answer: str, strategy: str = "_test_flaky") -> str:
    trace = {"question": "q", "output": answer, "answer": answer, "stop_reason": "answer"}
    return json.dumps({**trace, "probe_id": probe_id, "strategy": strategy}) + "\n"


def test_duplicate_traces_are_read_once_the_first_wins(tmp_path):
    # Two writers on one folder (before the lock) could append the same (strategy, probe) twice.
    path = tmp_path / "traces.jsonl"
    path.write_text(_line("p1", "a") + _line("p2", "b") + _line("p1", "c") + _line("p1", "d", strategy="other"))
    log = TraceLog(path)
    traces = log.read()
    assert [(t.strategy, t.probe_id, t.answer) for t in traces] == [
        ("_test_flaky", "p1", "a"),
        ("_test_flaky", "p2", "b"),
        ("other", "p1", "d"),
    ]
    assert log.repeated == [3]  # said by score and report
    with open(path, "a") as f:
        f.write(_line("p2", "e"))
    assert len(log.read()) == 3 and log.repeated == [3, 5]  # read again from where it stopped
    assert TraceLog(path).done() == {("_test_flaky", "p1"), ("_test_flaky", "p2"), ("other", "p1")}


@pytest.mark.parametrize(
    "bad, why",
    [
        ('{"question": "half\n', "not a trace (Unterminated string"),
        ("[1, 2]\n", "not a trace (a JSON list, not an object)"),
        ('{"question": "q", "output": "", "answer": null, "stop_reason": "eos"}\n', "not a trace (no strategy)"),
        (_line("p9", "x").replace('"answer"', '"answr"'), "not a trace (answer: missing)"),
        (_line("p9", "x").replace('"answer": ', '"answr": "x", "answer": '), "not a trace (TypeError: "),
        (
            _line("p9", "x").replace('"output"', '"seconds": "1", "output"'),
            "not a trace (seconds: expected a finite number >= 0, got '1')",
        ),
        (b"\xff\xfe\n", "not a trace ('utf-8' codec can't decode"),
    ],
)
def test_a_corrupted_line_names_its_file_and_line(tmp_path, bad, why):
    path = tmp_path / "traces.jsonl"
    with open(path, "wb") as f:
        f.write((_line("p1", "a") + _line("p2", "b")).encode())
        f.write(bad if isinstance(bad, bytes) else bad.encode())
        f.write(_line("p3", "c").encode())
    with pytest.raises(TraceError) as e:
        TraceLog(path).read()
    assert str(e.value).startswith(f"{path}:3: {why}") and "\n" not in str(e.value)


def test_a_reader_leaves_a_torn_last_line_alone(tmp_path):
    # `bench score` may read while a run is appending: it neither parses nor cuts the line being written.
    path = tmp_path / "traces.jsonl"
    text = _line("p1", "a") + '{"question": "ha'
    path.write_text(text)
    assert [t.probe_id for t in TraceLog(path, writer=False).read()] == ["p1"]
    assert path.read_text() == text
    assert [t.probe_id for t in TraceLog(path).read()] == ["p1"]  # a writer cuts it, to append cleanly
    assert path.read_text() == _line("p1", "a")


def test_a_second_read_parses_only_what_was_appended_and_a_rewritten_file_again(tmp_path, monkeypatch):
    # A run is summarised after every strategy: reading the whole file each time grows with the square of it.
    path = tmp_path / "traces.jsonl"
    path.write_text(_line("p1", "a") + _line("p2", "b"))
    log = TraceLog(path)
    assert [t.probe_id for t in log.read()] == ["p1", "p2"]
    parsed = []
    real = TraceLog._parse
    monkeypatch.setattr(TraceLog, "_parse", lambda log, line, number: parsed.append(number) or real(log, line, number))
    torn = _line("p4", "d")
    with open(path, "a") as f:
        f.write(_line("p1", "again") + "\n" + _line("p3", "c") + torn[:20])  # a duplicate, a blank, a torn tail
    assert [(t.probe_id, t.answer) for t in log.read()] == [("p1", "a"), ("p2", "b"), ("p3", "c")]
    assert parsed == [3, 5]  # the new lines only, numbered as in the file
    with open(path, "a") as f:
        f.write(torn[20:] + "[1]\n")  # the torn line ends: it is read now, and the next line is no trace
    for _ in range(2):  # refused again the second time, not skipped
        with pytest.raises(TraceError, match=f"^{re.escape(str(path))}:7: not a trace"):
            log.read()
    path.write_text(_line("p9", "z"))  # replaced (another run in the folder): read again whole
    assert [t.probe_id for t in log.read()] == ["p9"]


def test_a_run_scores_each_trace_once_though_it_is_summarised_after_every_strategy(tmp_path, scripted_lm, monkeypatch):
    from flarebench.bench import report

    made = []
    real = report.probe_row
    monkeypatch.setattr(report, "probe_row", lambda trace, probe: made.append(trace.strategy) or real(trace, probe))
    specs = ["--strategy", "no_retrieval", "--strategy", "flare_direct"]  # flare_direct: triggers.csv too
    code, out, err = run_cli("run", *specs, "--limit", "2", "--report-dir", str(tmp_path / "run"))
    assert code == 0, out + err
    assert sorted(made) == ["flare_direct", "flare_direct", "no_retrieval", "no_retrieval"]  # summaries, report.html
    written = (tmp_path / "run" / "summary.csv").read_text()
    made.clear()
    assert run_cli("score", str(tmp_path / "run"))[0] == 0
    assert len(made) == 4 and (tmp_path / "run" / "summary.csv").read_text() == written  # scored again: the same


def _exited_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_run_lock_refuses_a_live_owner_and_takes_over_a_dead_one(tmp_path):
    lock = RunLock(tmp_path)
    assert lock.acquire() is None and lock.held
    owner = json.loads((tmp_path / LOCK).read_text())
    assert owner["pid"] == os.getpid() and owner["host"] == socket.gethostname()
    assert owner["started"] == _started(os.getpid()) and owner["started"].isdigit()
    # Another session of this same process (one never closed) takes it over silently ...
    second = RunLock(tmp_path)
    assert second.acquire() is None
    lock.release()  # ... and the first one's release leaves the second one's lock in place.
    assert (tmp_path / LOCK).exists()
    second.release()
    second.release()  # idempotent
    assert not (tmp_path / LOCK).exists()

    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as live:
        try:
            (tmp_path / LOCK).write_text(json.dumps({"pid": live.pid, "host": socket.gethostname(), "token": "x"}))
            with pytest.raises(LockHeld) as e:
                RunLock(tmp_path).acquire()
            assert f"{tmp_path} is in use by another flarebench run (pid {live.pid})" in str(e.value)
            # The same pid started at another time is another process: the run that held it died
            # and its pid was given to another (a container restarts its pids from 1).
            record = {"pid": live.pid, "host": socket.gethostname(), "token": "x"}
            with pytest.raises(LockHeld):  # the live process's own start time: held
                (tmp_path / LOCK).write_text(json.dumps({**record, "started": _started(live.pid)}))
                RunLock(tmp_path).acquire()
            (tmp_path / LOCK).write_text(json.dumps({**record, "started": "1"}))
            reused = RunLock(tmp_path)
            assert reused.acquire() == (
                f"took over {tmp_path / LOCK}: its owner (pid {live.pid}) is no longer running "
                "(that pid is another process's now)"
            )
            reused.release()
        finally:
            live.kill()
    dead = _exited_pid()
    (tmp_path / LOCK).write_text(json.dumps({"pid": dead, "host": socket.gethostname(), "token": "x"}))
    taker = RunLock(tmp_path)
    assert taker.acquire() == f"took over {tmp_path / LOCK}: its owner (pid {dead}) is no longer running"
    assert json.loads((tmp_path / LOCK).read_text())["token"] == taker.token
    taker.release()
    # A lock written on another host cannot be checked there: it counts as held.
    (tmp_path / LOCK).write_text(json.dumps({"pid": dead, "host": "elsewhere.example", "token": "x"}))
    with pytest.raises(LockHeld, match=rf"\(pid {dead} on host elsewhere\.example\)"):
        RunLock(tmp_path).acquire()


@pytest.mark.parametrize(
    "argv, shown",
    [
        (["/work/.venv/bin/flarebench", "compare", "--limit", "20"], "flarebench compare --limit 20"),
        (["/usr/lib/python3/site-packages/pytest/__main__.py", "bench"], "python -m pytest bench"),
        (
            ["/repo/flarebench/__main__.py", "run", "--report-dir", "my runs"],
            "python -m flarebench run --report-dir 'my runs'",
        ),
        (["/home/me/.local/bin/pytest", "bench", "--strategy", "flare_direct"], "pytest bench --strategy flare_direct"),
    ],
)
def test_the_recorded_command_names_the_program_not_the_interpreter(argv, shown):
    from flarebench.bench.config import command_line

    assert command_line(argv) == shown


@pytest.mark.slow
def test_every_run_evaluates_its_prompt_prefixes_before_any_probe_is_timed(tmp_path, monkeypatch):
    # One-time costs (the model paged in, each static prefix evaluated) land in no probe's latency,
    # gated or not: run.json says what the warm-up evaluated.
    from tests.scripted import ProbeAwareLM

    class Logged(ProbeAwareLM):
        def __init__(self):
            super().__init__()
            self.purposes = []

        def _complete(self, request):
            self.purposes.append(request.purpose)
            return super()._complete(request)

    lm = Logged()
    monkeypatch.setattr("flarebench.bench.recipe.make_lm", lambda *args, **kwargs: lm)
    run_dir = tmp_path / "run"
    specs = ["--strategy", "single_time", "--strategy", "flare_direct"]
    code, out, err = run_cli("run", *specs, "--limit", "2", "--report-dir", str(run_dir))
    assert code == 0, err
    warm = json.loads((run_dir / "run.json").read_text())["warm_up"]
    assert warm["prefixes"] >= 2 and warm["seconds"] >= 0  # single_time's prompt and FLARE's own
    assert lm.purposes[: warm["prefixes"]] == ["warm_up"] * warm["prefixes"]
    assert "warm_up" not in lm.purposes[warm["prefixes"] :]


@dataclasses.dataclass
class Returns(Strategy):
    """Returns ``value`` for every question, whatever it is (a plugin's mistake)."""

    name: ClassVar[str] = "_test_returns"
    value: Any = None

    def run(self, question, lm, retriever):
        return self.value


@pytest.mark.parametrize(("value", "kind"), [("an answer", "str"), (None, "NoneType")])
def test_a_strategy_run_returning_no_trace_is_that_probes_error(tmp_path, value, kind):
    log = TraceLog(tmp_path / "traces.jsonl")
    traces = list(run_strategy("_test_returns", Returns(value=value), PROBES, ScriptedLM(["x"]), None, log))
    error = f"_test_returns.run returned {kind}, not a Trace"
    assert [(t.stop_reason, t.error) for t in traces] == [("error", error)] * 3
    assert [t.probe_id for t in log.read()] == ["p1", "p2", "p3"]


def test_an_lm_failing_with_its_own_exception_at_warm_up_is_one_line_and_each_probes_error(tmp_path, monkeypatch):
    # As in a probe, where such an exception is that probe's error: the run goes on, said once at warm-up.
    class Raising(ScriptedLM):
        def _complete(self, request):
            raise RuntimeError("boom")

    lm = Raising(["x"])
    monkeypatch.setattr("flarebench.bench.recipe.make_lm", lambda *args, **kwargs: lm)
    run_dir = tmp_path / "run"
    specs = ("--strategy", "no_retrieval", "--strategy", "single_time")
    code, _, err = run_cli("run", *specs, "--limit", "1", "--report-dir", str(run_dir))
    said = [line for line in err.splitlines() if line.startswith("flarebench: ")]  # not the progress bars
    assert code == 1 and "Traceback" not in err
    where, goes_on = r"\(test_runner\.py:\d+\)", "the run goes on, its probes record their errors"
    note = rf"flarebench: warm-up: LM scripted: RuntimeError: boom {where}; {goes_on}"
    assert re.fullmatch(note, said[0])
    assert said[1:] == [
        "flarebench: failed: no_retrieval, single_time (2 probes raised an error, each said in its trace; the same "
        "command with --retry-errors runs them again)"
    ]
    traces = TraceLog(run_dir / "traces.jsonl").read()
    assert [t.error.split(" (")[0] for t in traces] == ["RuntimeError: boom"] * 2


def test_a_strategy_warm_up_returning_no_lm_call_is_said_and_the_warm_up_goes_on(capsys):
    @dataclasses.dataclass
    class WarmsWrong(Returns):
        def warm_up(self, lm):
            return "warm"

    warmed = warm_up({"_test_returns": WarmsWrong()}, ScriptedLM(["x"]), ScriptedRetriever([["d1"]]))
    assert warmed["prefixes"] == 1  # the LM's own prefix, evaluated
    said = capsys.readouterr().err
    assert said.startswith("flarebench: warm-up: _test_returns.warm_up: TypeError: returned str, not an LMCall or None")


def test_an_lm_whose_close_raises_is_said_in_one_line_after_the_run(capsys):
    from flarebench.bench.recipe import Backends

    class Sticky(ScriptedLM):
        def close(self):
            raise RuntimeError("still busy")

    Backends(Sticky(["x"]), ScriptedRetriever([["d"]])).close()
    assert capsys.readouterr().err == "flarebench: warning: LM scripted: close() raised RuntimeError: still busy\n"


def test_a_key_quoted_in_an_error_is_never_recorded(tmp_path, monkeypatch):
    # A backend or a plugin whose error quotes the key it was given: traces.jsonl, the summary and
    # the report show the error.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-DO-NOT-LEAK-123456")

    @dataclasses.dataclass
    class Leaky(Strategy):
        def run(self, question, lm, retriever):
            raise RuntimeError(f"auth failed with {os.environ['OPENAI_API_KEY']}")

    log = TraceLog(tmp_path / "traces.jsonl")
    (trace,) = run_strategy("_test_leaky", Leaky(), PROBES[:1], ScriptedLM(["x"]), None, log)
    assert trace.error.startswith("RuntimeError: auth failed with ***")
    assert "DO-NOT-LEAK" not in (tmp_path / "traces.jsonl").read_text()
