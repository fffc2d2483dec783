"""``--executor ray`` with the real model: two workers on a local Ray instance, each loading its own
SmolLM2 with one thread, give the traces (answers, tokens, retrievals; not timings) of the
sequential run with the model's fixed two threads."""

from __future__ import annotations

import json

import pytest

from flarebench.bench.cli import main
from tests.test_ray import _answers, _env

pytest.importorskip("ray")

SPECS = ["--strategy", "single_time", "--strategy", "flare_direct", "--limit", "2"]


@pytest.mark.model
def test_ray_workers_with_one_thread_give_the_sequential_traces(tmp_path, monkeypatch, capsys):
    for name, value in _env().items():
        monkeypatch.setenv(name, value)
    assert main(["run", *SPECS, "--report-dir", str(tmp_path / "seq")]) == 0
    ray = ["--executor", "ray", "--workers", "2", "--threads-per-worker", "1"]
    assert main(["run", *SPECS, *ray, "--report-dir", str(tmp_path / "ray")]) == 0, capsys.readouterr().err
    assert _answers(tmp_path / "ray") == _answers(tmp_path / "seq") and len(_answers(tmp_path / "seq")) == 4
    info = json.loads((tmp_path / "ray" / "run.json").read_text())
    assert info["executor"]["threads_per_worker"] == 1 and info["status"] == "complete"
