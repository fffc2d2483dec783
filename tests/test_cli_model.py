"""The `flarebench` console script end to end with the real embedded model, as a user runs it: a
sweep writes one row per value and its report; Ctrl-C (SIGINT) stops a run cleanly, keeps every
finished probe, and the same command resumes and finishes it with the answers of an uninterrupted run."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.console import FLAREBENCH, env

pytestmark = pytest.mark.model


def test_sweep_over_theta_end_to_end(tmp_path):
    run_dir = tmp_path / "sweep"
    cmd = [FLAREBENCH, "sweep", "--strategy", "flare_direct", "--param", "theta=0,1", "--limit", "1"]
    done = subprocess.run([*cmd, "--report-dir", str(run_dir)], capture_output=True, text=True, env=env(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    summary = pd.read_csv(run_dir / "summary.csv")
    assert list(summary["strategy"]) == ["flare_direct:theta=0", "flare_direct:theta=1"]
    # theta 0 never retrieves mid-generation, theta 1 retrieves for every sentence (FLARE Figure 5).
    assert list(summary["retrieval_rate"]) == [0.0, 1.0]
    page = (run_dir / "report.html").read_text()
    assert '<figure id="plot-sweep" class="wide">' in page and '<figure id="plot-gate" class="wide">' in page
    assert f"report: {run_dir / 'report.html'}" in done.stdout
    assert "[2/2] flare_direct:theta=1" in done.stderr and "Traceback" not in done.stderr


def test_ctrl_c_keeps_finished_probes_and_the_same_command_resumes(tmp_path):
    run_dir = tmp_path / "run"
    cmd = [FLAREBENCH, "run", "--strategy", "single_time", "--limit", "2", "--report-dir", str(run_dir)]
    # A shell's background job starts with SIGINT ignored and passes that on: let Ctrl-C through.
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(tmp_path),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    traces = run_dir / "traces.jsonl"
    deadline = time.monotonic() + 300
    while not (traces.exists() and traces.read_text().count("\n") >= 1):
        assert proc.poll() is None and time.monotonic() < deadline, "the run ended before the first probe finished"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted; finished probes are kept; run the same command to resume" in err
    assert "Traceback" not in err
    kept = traces.read_text().splitlines()
    assert len(kept) == 1
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"

    done = subprocess.run(cmd, capture_output=True, text=True, env=env(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    lines = traces.read_text().splitlines()
    assert lines[: len(kept)] == kept  # what finished before Ctrl-C is kept as it was, not redone
    assert sorted(json.loads(line)["probe_id"] for line in lines) == ["pw-0001", "pw-0002"]
    assert json.loads((run_dir / "run.json").read_text())["status"] == "complete"
    assert (run_dir / "report.html").exists()
    # The interrupted-and-resumed run gives what an uninterrupted one gives.
    whole = tmp_path / "whole"
    done = subprocess.run([*cmd[:-1], str(whole)], capture_output=True, text=True, env=env(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]

    def outputs(folder: Path) -> dict[str, tuple]:
        """Per probe: the output, every call's logprobs and every retrieval's documents."""
        lines = (folder / "traces.jsonl").read_text().splitlines()
        return {
            t["probe_id"]: (
                t["output"],
                [c["logprobs"] for s in t["steps"] for c in s["lm_calls"]],
                [r["doc_ids"] for s in t["steps"] for r in s["retrievals"]],
            )
            for t in map(json.loads, lines)
        }

    assert outputs(run_dir) == outputs(whole)
    info = json.loads((run_dir / "run.json").read_text())
    assert info["config"]["strategies"] == {"single_time": {"k": 3, "max_tokens": 128, "answer_form": "short"}}


def test_calibrate_chooses_on_dev_reports_test_and_rebuilds_the_same(tmp_path):
    run_dir = tmp_path / "calibrated"
    cmd = [FLAREBENCH, "calibrate", "--strategy", "flare_direct", "--target", "retrieval_rate=0.5"]
    cmd += ["--values", "0,0.5,1", "--limit", "4", "--report-dir", str(run_dir)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    info = json.loads((run_dir / "run.json").read_text())
    study = info["study"]
    [cal] = study["calibration"]
    # One dev probe, three test probes; bisection ran both ends and then stopped or halved once.
    assert (len(study["dev_probe_ids"]), len(study["test_probe_ids"])) == (1, 3)
    assert info["probe_ids"] == study["test_probe_ids"] and info["status"] == "complete"
    assert cal["method"] == "bisection" and {0.0, 1.0} <= {p["value"] for p in cal["points"]}
    assert [p["retrieval_rate"] for p in cal["points"] if p["value"] in (0.0, 1.0)] == [0.0, 1.0]
    summary = pd.read_csv(run_dir / "summary.csv")
    assert list(summary["strategy"]) == [cal["chosen"]] and summary["n"].iloc[0] == 3
    table = pd.read_csv(run_dir / "calibration.csv")
    assert table["calibrated"].iloc[0] == f"theta={cal['value']:g}"
    assert f"chosen: --strategy {cal['chosen']}" in done.stdout
    assert '<figure id="plot-calibration" class="wide">' in (run_dir / "report.html").read_text()
    # The dev runs went through the run's own cache; the test runs did not.
    traces = [json.loads(line) for line in (run_dir / "traces.jsonl").read_text().splitlines()]
    test_calls = [
        c for t in traces if t["probe_id"] in study["test_probe_ids"] for s in t["steps"] for c in s["lm_calls"]
    ]
    assert test_calls and not any(c["cached"] for c in test_calls)
    before = (run_dir / "summary.csv").read_bytes(), (run_dir / "calibration.csv").read_bytes()
    again = subprocess.run([FLAREBENCH, "report", str(run_dir)], capture_output=True, text=True, env=env(tmp_path))
    assert again.returncode == 0, again.stderr[-2000:]
    assert ((run_dir / "summary.csv").read_bytes(), (run_dir / "calibration.csv").read_bytes()) == before
