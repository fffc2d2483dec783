"""SIGTERM, which a CI system sends to a job it cancels or times out, stops a run as Ctrl-C does:
what finished is kept and summarised, run.json says ``interrupted``, the same command resumes, and
the handler that was there before is put back. The signal is real (sent to this process during the
second probe); the LM is the scripted one."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.scripted import ProbeAwareLM, run_cli

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]


class TerminatedMidRun(ProbeAwareLM):
    """ProbeAwareLM that sends SIGTERM to this process when it is asked about the second probe, once."""

    def __init__(self):
        super().__init__()
        self.sent = False

    def _complete(self, request):
        if not self.sent and self.probes[1].question in request.prompt.dynamic:
            self.sent = True
            os.kill(os.getpid(), signal.SIGTERM)
        return super()._complete(request)


@pytest.fixture
def outer_handler():
    """A SIGTERM handler of this test's own, so that a run that did not take the signal leaves this
    process alive (and the test fails on what it finds); yields the signals it received."""
    received = []

    def handler(signum, frame):
        received.append(signum)

    previous = signal.signal(signal.SIGTERM, handler)
    yield handler, received
    signal.signal(signal.SIGTERM, previous)


@pytest.mark.slow
def test_sigterm_stops_flarebench_run_keeps_what_finished_and_the_same_command_resumes(
    tmp_path, monkeypatch, outer_handler
):
    handler, received = outer_handler
    lm = TerminatedMidRun()
    monkeypatch.setattr("flarebench.bench.recipe.make_lm", lambda *args, **kwargs: lm)
    run_dir = tmp_path / "run"
    args = ("run", "--strategy", "no_retrieval", "--limit", "3", "--report-dir", str(run_dir))
    code, out, err = run_cli(*args)
    assert code == 143, err
    assert err.strip().splitlines()[-1] == (
        f"flarebench: terminated (SIGTERM); finished probes are kept; run the same command to resume (run folder: "
        f"{run_dir})"
    )
    assert "Traceback" not in err and not received
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    assert (run_dir / "summary.csv").read_text().splitlines()[1].startswith("no_retrieval,1,")
    assert "run status <b>interrupted</b>" in (run_dir / "report.html").read_text()  # a CI job's artifact
    assert "**Run status: interrupted.**" in (run_dir / "summary.md").read_text()
    assert not (run_dir / "run.lock").exists()
    assert signal.getsignal(signal.SIGTERM) is handler  # put back when the command ended

    code, out, err = run_cli(*args)  # the same command: the two probes left
    assert code == 0, err
    lines = (run_dir / "traces.jsonl").read_text().splitlines()
    assert [json.loads(line)["probe_id"] for line in lines] == ["pw-0001", "pw-0002", "pw-0003"]
    assert json.loads((run_dir / "run.json").read_text())["status"] == "complete"


@pytest.mark.slow
def test_sigterm_under_pytest_bench_keeps_what_finished_and_marks_the_run_interrupted(
    pytester, tmp_path, monkeypatch, outer_handler
):
    handler, received = outer_handler
    lm = TerminatedMidRun()
    monkeypatch.setattr("flarebench.bench.recipe.make_lm", lambda *args, **kwargs: lm)
    run_dir = tmp_path / "r"
    args = ("--strategy", "single_time", "--limit", "3", "--report-dir", str(run_dir))
    result = pytester.inline_run(str(ROOT / "bench"), "-p", "no:cacheprovider", *args, no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED and not received
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    assert (run_dir / "summary.csv").read_text().splitlines()[1].startswith("single_time,1,")
    assert "run status <b>interrupted</b>" in (run_dir / "report.html").read_text()
    assert not (run_dir / "run.lock").exists()
    assert signal.getsignal(signal.SIGTERM) is handler


def test_starting_ray_leaves_sigterm_to_the_run(monkeypatch, outer_handler):
    # ray.init installs its own SIGTERM handler (sys.exit), which would stop a Ray run's driver
    # without summarising it; the run's handler is put back once Ray is up.
    from flarebench.bench import ray_executor
    from flarebench.bench.interrupt import sigterm_interrupts
    from flarebench.bench.recipe import BackendRecipe

    class RayInit:
        def is_initialized(self):
            return False

        def init(self, **kwargs):
            signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))

        def shutdown(self):
            pass

    monkeypatch.setattr(ray_executor, "import_ray", RayInit)
    monkeypatch.setattr(ray_executor, "_dispatch", lambda *args: iter(()))
    recipe = BackendRecipe(lm="scripted", retriever="bm25", corpus=())
    with sigterm_interrupts():
        run_handler = signal.getsignal(signal.SIGTERM)
        assert list(ray_executor.run_on_ray([], ray_executor.RaySettings(), recipe, None, log=None)) == []
        assert signal.getsignal(signal.SIGTERM) is run_handler


def _swallowing_wait() -> None:
    """A native wait as Ray's can behave: an exception a signal handler raises inside it is lost."""
    try:
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGTERM)
    except BaseException:  # noqa: BLE001 (the point: the wait eats it)
        pass


def test_signals_in_a_wait_that_swallows_them_are_raised_when_polled(outer_handler):
    from flarebench.bench.interrupt import Terminated, interrupts_polled, sigterm_interrupts

    _, received = outer_handler
    before = signal.getsignal(signal.SIGINT)
    with sigterm_interrupts():
        run_handler = signal.getsignal(signal.SIGTERM)
        with pytest.raises(KeyboardInterrupt) as stopped, interrupts_polled() as poll:
            poll()  # nothing has arrived
            _swallowing_wait()
            poll()
        assert not isinstance(stopped.value, Terminated)  # the first signal to arrive wins
        with pytest.raises(Terminated), interrupts_polled() as poll:
            signal.raise_signal(signal.SIGTERM)
            poll()
        assert signal.getsignal(signal.SIGTERM) is run_handler
    assert signal.getsignal(signal.SIGINT) is before and received == []
    # Outside a run (no sigterm_interrupts), SIGTERM is left to the handler already there.
    with interrupts_polled() as poll:
        signal.raise_signal(signal.SIGTERM)
        poll()
    assert received == [signal.SIGTERM]


def _stopped_once_while_writing_the_report(monkeypatch) -> list[int]:
    """report.html's first writing raises KeyboardInterrupt (Ctrl-C as the run writes its files);
    returns the count of writings."""
    from flarebench.bench import html

    real, calls = html.write_report, []

    def write_report(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(html, "write_report", write_report)
    return calls


@pytest.mark.slow
def test_a_run_stopped_as_it_writes_its_report_after_every_probe_is_complete(
    tmp_path, monkeypatch, scripted_lm, pytester
):
    # All its probes had finished: it is not "interrupted" (nothing to resume); its files are written again.
    calls = _stopped_once_while_writing_the_report(monkeypatch)
    run_dir = tmp_path / "run"
    code, out, err = run_cli("run", "--strategy", "no_retrieval", "--limit", "2", "--report-dir", str(run_dir))
    assert code == 130 and len(calls) == 2, err
    assert err.strip().splitlines()[-1] == (
        f"flarebench: interrupted; every probe had finished: {run_dir} holds the complete run, its summary and "
        "its report"
    )
    assert json.loads((run_dir / "run.json").read_text())["status"] == "complete"
    assert "Run status" not in (run_dir / "summary.md").read_text() and (run_dir / "report.html").exists()
    # The same under pytest bench, whose report is written as its session ends.
    calls.clear()
    args = ("--strategy", "no_retrieval", "--limit", "2", "--report-dir", str(tmp_path / "bench"))
    result = pytester.inline_run(str(ROOT / "bench"), "-p", "no:cacheprovider", *args, no_reraise_ctrlc=True)
    assert len(calls) == 2 and (tmp_path / "bench" / "report.html").exists()
    assert json.loads((tmp_path / "bench" / "run.json").read_text())["status"] == "complete"
    assert result.ret == pytest.ExitCode.INTERRUPTED
    # `report`, which runs no probe, has nothing to resume: its files are each whole.
    calls.clear()
    code, out, err = run_cli("report", str(run_dir))
    assert code == 130 and err.strip().splitlines()[-1] == (
        "flarebench: interrupted; each file it writes is replaced whole, never half-written; run the same "
        "command to write them all"
    )
