"""`flarebench compare` with its bound rows, end to end with the real embedded model: it runs the
never and always specs it adds (once), writes the oracle row, and `report` rescores the folder to
the same summary. That a comparison adds no bound its specs already hold: tests/test_bounds.py."""

from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest

from tests.console import FLAREBENCH, env

pytestmark = pytest.mark.model


def test_compare_runs_the_bounds_and_writes_the_oracle_row(tmp_path):
    run_dir = tmp_path / "compare"
    cmd = [FLAREBENCH, "compare", "--strategy", "single_time", "--strategy", "no_retrieval", "--limit", "1"]
    done = subprocess.run([*cmd, "--report-dir", str(run_dir)], capture_output=True, text=True, env=env(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "[3/3] flare_direct:theta=1" in done.stderr and "Traceback" not in done.stderr
    info = json.loads((run_dir / "run.json").read_text())
    assert list(info["config"]["strategies"]) == ["single_time", "no_retrieval", "flare_direct:theta=1"]
    summary = pd.read_csv(run_dir / "summary.csv")
    assert list(summary["strategy"]) == ["single_time", "no_retrieval", "flare_direct:theta=1", "oracle"]
    assert summary["bound"].tolist()[1:] == ["never", "always", "oracle"]
    assert summary.loc[2, "retrieval_rate"] == 1.0  # always: every sentence retrieved
    # The oracle (per probe the best f1 of the three, averaged) is at least each strategy's mean. One
    # probe keeps the always-retrieve spec's cost down; the per-probe maximum over several probes is
    # tested with the scripted LM (tests/test_bounds.py).
    oracle = summary.iloc[3]
    assert oracle["n"] == 1 and oracle["f1"] >= summary.iloc[:3]["f1"].max() - 1e-9
    assert pd.isna(oracle["latency_p95_s"]) and pd.isna(oracle["errors"])
    assert "headroom_captured" in summary.columns and "oracle" in done.stdout
    # Rescoring the folder gives the same files.
    before = {name: (run_dir / name).read_bytes() for name in ("summary.csv", "summary.md", "adoption.md")}
    again = subprocess.run([FLAREBENCH, "report", str(run_dir)], capture_output=True, text=True, env=env(tmp_path))
    assert again.returncode == 0, again.stderr[-2000:]
    assert {name: (run_dir / name).read_bytes() for name in before} == before
