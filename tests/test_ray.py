"""``--executor ray`` (bench/ray_executor.py) without the model: every worker answers with the
scripted LM of tests/fixtures/ray_lm.py. A run on a local Ray instance gives the sequential run's
traces; on a cluster of two Ray nodes on 127.0.0.1 (started and stopped here) a worker killed
mid-run loses and duplicates nothing (and the driver's API key reaches every worker without
reaching a file of Ray's), and Ctrl-C on the driver keeps what finished and resumes.
The options are refused in one line when wrong. The same answers with the real model:
tests/test_ray_model.py."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flarebench.bench.cli import main
from flarebench.bench.session import BenchSession, ConfigError
from flarebench.strategies import plugins
from tests.console import files_holding
from tests.servers import free_port, ray_cluster

pytest.importorskip("ray")

REPO = Path(__file__).resolve().parents[1]
PLUGIN = str(REPO / "tests" / "fixtures" / "ray_lm.py")
SPECS = ["--strategy", "single_time", "--strategy", "flare_direct"]
#: The API key of a driver: the workers must see it, and no file of Ray's may hold it.
KEY = "sk-flarebench-ray-test-4f1c9e"


def _env(**extra: str) -> dict[str, str]:
    """The environment of the drivers and the Ray nodes: the plugin's `tests` importable in every
    worker, no usage reporting, no token (the cluster listens on 127.0.0.1 only)."""
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled",
            "HF_HUB_OFFLINE": "1", **extra}  # fmt: skip


def _command(run_dir: Path, *extra: str, delay: str = "0", limit: str = "3") -> list[str]:
    return [sys.executable, "-m", "flarebench", "run", "--plugin", PLUGIN, "--lm", f"probeaware:{delay}", *SPECS,
            "--limit", limit, "--report-dir", str(run_dir), *extra]  # fmt: skip


def _lines(run_dir: Path) -> list[dict]:
    """Every line of traces.jsonl, as written (TraceLog.read would hide a duplicate)."""
    return [json.loads(line) for line in (run_dir / "traces.jsonl").read_text().splitlines()]


def _untimed(value):
    """A trace without its timings (which differ from run to run)."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in ("seconds", "prefill_seconds")}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _answers(run_dir: Path) -> dict:
    lines = _lines(run_dir)
    by_pair = {(t["strategy"], t["probe_id"]): _untimed(t) for t in lines}
    assert len(by_pair) == len(lines), "a probe was written twice"
    return by_pair


def _status(run_dir: Path) -> str:
    return json.loads((run_dir / "run.json").read_text())["status"]


def _wait_for_a_trace(run_dir: Path, proc: subprocess.Popen, within: float = 90.0) -> None:
    deadline = time.time() + within
    while not (run_dir / "traces.jsonl").exists() or not (run_dir / "traces.jsonl").read_text().strip():
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.time() < deadline, "no trace written"
        time.sleep(0.1)


@pytest.mark.slow
def test_a_ray_run_on_a_local_instance_gives_the_sequential_traces(tmp_path, isolated_registry, monkeypatch, capsys):
    # Ray's token authentication as a user gets it (its default, which the cluster tests turn off),
    # its token kept in a home folder of this test's.
    env = {k: v for k, v in _env(HOME=str(tmp_path / "home")).items() if k != "RAY_AUTH_MODE"}
    monkeypatch.setattr(plugins, "_loaded", set())  # the plugin's LM, registered here, is gone after the test
    # The sequential run and the scoring in this process (its imports are warm); the Ray run's driver
    # in a process of its own, as a user starts it.
    assert main(_command(tmp_path / "seq", limit="6")[3:]) == 0
    ray = subprocess.run(
        _command(tmp_path / "ray", "--executor", "ray", "--workers", "2", limit="6"),
        env=env,
        capture_output=True,
        text=True,
    )
    assert ray.returncode == 0, ray.stderr[-3000:]
    assert _answers(tmp_path / "ray") == _answers(tmp_path / "seq") and len(_answers(tmp_path / "seq")) == 12
    info = json.loads((tmp_path / "ray" / "run.json").read_text())
    assert info["status"] == "complete"
    assert info["executor"] == {"kind": "ray", "address": "local", "workers": 2, "threads_per_worker": None}
    # The executor is no part of the configuration: the runs are comparable, and resumable either way.
    assert info["config"] == json.loads((tmp_path / "seq" / "run.json").read_text())["config"]
    assert all(t["seconds"] > 0 for t in _lines(tmp_path / "ray"))  # timed per probe, in the worker
    # One bar for the run. How many workers were up when it ended is Ray's timing: with an LM this
    # fast, one worker may answer every probe before the second has started.
    assert re.search(r"workers up [12]/2; single_time 6/6, flare_direct 6/6", ray.stderr)
    # Nothing on stderr but the run's bar: no line of Ray's logging, no traceback.
    assert [line for line in re.split(r"[\r\n]", ray.stderr) if line.strip() and not line.startswith("ray (")] == []
    capsys.readouterr()
    assert main(["score", str(tmp_path / "ray")]) == 0
    assert "scored 6 probes per strategy" in capsys.readouterr().out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two Ray nodes on 127.0.0.1 (one CPU each, so the two workers sit on different nodes), started
    without an API key and with a Ray folder of their own (``$RAY_TMPDIR``: sessions, logs); the
    workers write their process ids into the ``pids`` folder."""
    root = tmp_path_factory.mktemp("ray-cluster")
    pids = root / "pids"
    pids.mkdir()
    ray_tmp = tempfile.mkdtemp(prefix="ray-")  # not under root: Ray's socket paths must stay short
    env = _env(FLAREBENCH_TEST_PIDS=str(pids), RAY_TMPDIR=ray_tmp)
    env.pop("OPENAI_API_KEY", None)
    try:
        with ray_cluster(root, env) as address:
            yield address, pids, env
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


@contextlib.contextmanager
def _held(cluster) -> Iterator[Path]:
    """While inside, the workers answer the first probe of each strategy and hold every other call
    (tests/fixtures/ray_lm.py), so that a test acts mid-run however late it is scheduled; yields
    the file whose removal lets them go on."""
    hold = cluster[1] / "hold"
    hold.touch()
    try:
        yield hold
    finally:
        hold.unlink(missing_ok=True)


def _start_on_the_cluster(cluster, run_dir: Path, **driver_env: str) -> tuple[subprocess.Popen, list[str]]:
    """A run on the cluster's two workers, once its first trace is written: (driver, command). The
    driver's environment is the nodes' with ``driver_env``."""
    address, _, env = cluster
    cmd = _command(run_dir, "--executor", "ray", "--ray-address", address, "--workers", "2")
    proc = subprocess.Popen(cmd, env={**env, **driver_env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for_a_trace(run_dir, proc)
    return proc, cmd


def _pids(folder: Path) -> set[int]:
    """The process ids the scripted LMs wrote (the folder also holds the tests' marker files)."""
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()}


@pytest.mark.slow
def test_a_killed_worker_loses_nothing_and_duplicates_nothing(cluster, tmp_path):
    _, pids, env = cluster
    run_dir = tmp_path / "run"

    def written_since(moment: float) -> set[int]:
        # By when each process wrote its file, not by new ids: Ray may give an actor an idle worker
        # process of an earlier test, which writes its file again.
        return {pid for pid in _pids(pids) - {proc.pid} if (pids / str(pid)).stat().st_mtime >= moment}

    started = time.time()
    with _held(cluster) as hold:
        proc, _ = _start_on_the_cluster(cluster, run_dir, OPENAI_API_KEY=KEY)
        workers = _pids(pids) - {proc.pid}
        victim = max(workers, key=lambda pid: (pids / str(pid)).stat().st_mtime)  # one of this run's workers
        killed = time.time()
        os.kill(victim, signal.SIGKILL)  # while it holds a probe
        hold.unlink()
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    answers = _answers(run_dir)  # each probe once
    assert len(answers) == 6 and _status(run_dir) == "complete"
    assert all(t["error"] is None for t in _lines(run_dir))
    # Ray started the killed worker again (a process built its LM after the kill) and it took its probes back.
    assert written_since(killed) - {victim}
    # The driver's key reached this run's workers, the one started again too, on nodes started
    # without it; and no file of Ray's (the session's logs of both nodes) holds it.
    run_workers = written_since(started)
    assert len(run_workers) >= 3 and {(pids / str(pid)).read_text() for pid in run_workers} == {KEY}
    ray_tmp = Path(env["RAY_TMPDIR"])
    assert any((ray_tmp / "ray").glob("session_*/logs/*")), "the cluster's Ray folder is not $RAY_TMPDIR"
    assert files_holding(ray_tmp, KEY) == []


@pytest.mark.slow
def test_an_lm_unreachable_from_a_worker_stops_the_run_in_one_line_and_it_resumes(cluster, tmp_path):
    address, pids, env = cluster
    run_dir = tmp_path / "run"
    cmd = _command(run_dir, "--executor", "ray", "--ray-address", address, "--workers", "2")
    marker = pids / "unreachable"
    marker.write_text("2")  # the LM server is gone when pw-0003 is asked
    try:
        stopped = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    finally:
        marker.unlink()
    assert stopped.returncode == 3, stopped.stderr[-3000:]
    assert stopped.stderr.strip().splitlines()[-1] == (
        "flarebench: the test LM server is unreachable; finished probes are kept; run the same command to resume"
    )
    assert "Traceback" not in stopped.stderr and _status(run_dir) == "interrupted"
    kept = _answers(run_dir)
    assert all(probe != "pw-0003" for _, probe in kept)  # no error trace stands for the unreachable probe
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)  # the server is back
    assert again.returncode == 0, again.stderr[-3000:]
    answers = _answers(run_dir)  # each probe once: what finished was not run again
    assert len(answers) == 6 and _status(run_dir) == "complete"
    assert all(answers[pair] == trace for pair, trace in kept.items())


@pytest.mark.slow
def test_every_worker_lost_stops_the_run_in_one_line(cluster, tmp_path):
    address, _, env = cluster
    run_dir = tmp_path / "run"
    cmd = _command(run_dir, "--executor", "ray", "--ray-address", address, "--workers", "2", delay="0/worker_fails")
    stopped = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert stopped.returncode == 3, stopped.stderr[-3000:]
    assert stopped.stderr.strip().splitlines()[-1] == (
        "flarebench: every Ray worker was lost (first: its backends could not be built: --lm "
        "probeaware:0/worker_fails: SlowProbeAwareLM: RuntimeError: this worker cannot build its LM); finished "
        "probes are kept; run the same command to resume"
    )
    # Nothing of Ray's on either stream: its "(raylet) Task ... failed" lines, each with the
    # worker's traceback, once per retry, went to stdout.
    assert "Traceback" not in stopped.stderr + stopped.stdout and "(raylet)" not in stopped.stdout
    assert _status(run_dir) == "interrupted"
    assert not (run_dir / "traces.jsonl").exists() or not _lines(run_dir)


@pytest.mark.slow
def test_ctrl_c_keeps_what_finished_and_the_same_command_resumes(cluster, tmp_path):
    env = cluster[2]
    run_dir = tmp_path / "run"
    with _held(cluster):
        proc, cmd = _start_on_the_cluster(cluster, run_dir)
        # While the workers are stuck in calls that do not return: Ctrl-C must not wait for them (a
        # KeyboardInterrupt raised inside ray.wait could be lost there, and the driver then waited for ever).
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-3000:]
    assert "interrupted; finished probes are kept" in err and "Traceback" not in err
    kept = _answers(run_dir)
    assert 1 <= len(kept) < 6 and _status(run_dir) == "interrupted"
    again = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-3000:]
    answers = _answers(run_dir)  # each probe once: nothing finished was run again
    assert len(answers) == 6 and _status(run_dir) == "complete"
    assert all(answers[pair] == trace for pair, trace in kept.items())


@pytest.mark.slow
def test_a_ray_run_is_gated_against_the_baseline_of_a_sequential_run(cluster, tmp_path, isolated_registry, monkeypatch):
    # A team's CI gate on a cluster: the baseline was saved by a sequential run, and the executor is
    # no part of the configuration, so the Ray run is gated against it (latency off: a stand-in LM).
    address, _, env = cluster
    monkeypatch.setattr(plugins, "_loaded", set())
    baseline = tmp_path / "baseline.json"
    assert main([*_command(tmp_path / "seq")[3:], "--save-baseline", str(baseline)]) == 0
    # More workers than the run's 9 (spec, probe) pairs, on a cluster with room for 2: the run
    # starts 9, and ends when its probes are in, without waiting for workers that never get a CPU.
    gated = subprocess.run(
        _command(tmp_path / "ray", "--executor", "ray", "--ray-address", address, "--workers", "12", "--gate",
                 str(baseline), "--tolerance", "latency_p95_ratio=off"),
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert gated.returncode == 0, gated.stderr[-3000:]
    assert "ray (9 workers)" in gated.stderr
    assert f"gate {baseline} (latency reference no_retrieval): 2 passed, 0 broken" in gated.stdout
    assert json.loads((tmp_path / "ray" / "gate.json").read_text())["passed"] == {
        "single_time": True,
        "flare_direct": True,
    }
    # The latency reference ran on the workers with the gated specs, each probe once.
    assert len(_answers(tmp_path / "ray")) == 9 and _status(tmp_path / "ray") == "complete"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"executor": "dask"}, "--executor must be one of local, ray, got 'dask'"),
        ({"workers": 2, "ray_address": "auto"}, "--ray-address, --workers only apply to --executor ray"),
        ({"executor": "ray", "workers": 0}, "--workers must be >= 1, got 0"),
        ({"executor": "ray", "threads_per_worker": 0}, "--threads-per-worker must be >= 1, got 0"),
        ({"executor": "ray", "concurrency": 2, "lm": "openai:m"}, "--concurrency applies to --executor local"),
        *(
            ({"executor": "ray", "ray_address": bad}, f"^--ray-address must be HOST:PORT of a Ray head .*got '{bad}'$")
            for bad in ("nonsense", "http://127.0.0.1:1", "127.0.0.1:99999", "")
        ),
    ],
)
def test_wrong_ray_options_are_refused_in_one_line_before_anything_loads(options, message):
    with pytest.raises(ConfigError, match=message):
        BenchSession(strategy=["no_retrieval"], limit=1, progress=False, **options)


def test_an_address_where_no_cluster_answers_stops_the_run_at_once(tmp_path):
    # Before, ray.init retried such an address for about 14 minutes, printing Ray's log lines.
    from flarebench.bench.ray_executor import RayRunError, RaySettings, run_on_ray

    address = f"127.0.0.1:{free_port()}"
    with pytest.raises(RayRunError, match=f"^--executor ray: no Ray cluster answers at {address} \\(.*refused"):
        next(run_on_ray([("single_time", None)], RaySettings(address=address), None, None, None, progress=False))


def test_without_the_extra_the_executor_names_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if it were not installed
    with pytest.raises(ConfigError, match=r"^--executor ray needs the ray extra: pip install 'flarebench\[ray\]'$"):
        BenchSession(strategy=["no_retrieval"], limit=1, progress=False, executor="ray")


def test_the_workers_get_the_drivers_settings_from_its_environment(monkeypatch):
    # A worker on another machine builds its backends as the driver would: the same cache, the
    # model's threads that run.json records, the key the options name; nothing else of the driver's.
    from flarebench.bench.ray_executor import _worker_env
    from flarebench.bench.recipe import BackendRecipe

    for name, value in {"FLAREBENCH_LM_THREADS": "1", "FLAREBENCH_CACHE": "/c", "MY_KEY": "k", "OTHER": "x"}.items():
        monkeypatch.setenv(name, value)
    env = _worker_env(BackendRecipe(lm="llamacpp:smollm2", retriever="bm25", corpus=(), lm_api_key_env="MY_KEY"))
    assert {"FLAREBENCH_LM_THREADS": "1", "FLAREBENCH_CACHE": "/c", "MY_KEY": "k"}.items() <= env.items()
    assert "OTHER" not in env


def test_a_worker_that_cannot_reach_a_service_is_named_as_a_local_run_names_it():
    from flarebench.bench.ray_executor import _first_line

    class InitFailed(Exception):  # the shape of Ray's RayActorError for a failed __init__
        actor_init_failed = True

    cause = "the search service at http://127.0.0.1:9/search is unreachable (ConnectError; 5 attempts)"
    own = InitFailed(f"The actor died.\nTraceback ...\nflarebench.strategies.http_client.ServiceUnavailable: {cause}")
    assert _first_line(own) == f"its backends could not be built: {cause}"
    other = InitFailed("The actor died.\nRuntimeError: this worker cannot build its LM")
    assert _first_line(other) == "its backends could not be built: RuntimeError: this worker cannot build its LM"
