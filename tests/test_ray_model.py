"""``--executor ray`` with the real model: two workers on a local Ray instance, each loading its own
SmolLM2 with one thread, give the traces (answers, tokens, retrievals; not timings) of the
sequential run with the model's fixed two threads; only the evaluated-token count of a call may be
higher, where a worker evaluated a static prompt prefix for the first time."""

from __future__ import annotations

import json

import pytest

from flarebench.bench.cli import main
from tests.test_ray import _answers, _env

pytest.importorskip("ray")

# One probe per spec (two pairs, one per worker): the model's cost bounds CI; tests/test_ray.py runs
# the six probes with a stand-in LM.
SPECS = ["--strategy", "single_time", "--strategy", "flare_direct", "--limit", "1"]


@pytest.mark.model
def test_ray_workers_with_one_thread_give_the_sequential_traces(tmp_path, monkeypatch, capsys):
    for name, value in _env().items():
        monkeypatch.setenv(name, value)
    assert main(["run", *SPECS, "--report-dir", str(tmp_path / "seq")]) == 0
    ray = ["--executor", "ray", "--workers", "2", "--threads-per-worker", "1"]
    assert main(["run", *SPECS, *ray, "--report-dir", str(tmp_path / "ray")]) == 0, capsys.readouterr().err
    seq, ray = _answers(tmp_path / "seq"), _answers(tmp_path / "ray")
    assert len(seq) == 2 and _without_evaluated(ray) == _without_evaluated(seq)
    # Every worker's model evaluates a static prompt prefix once, counted in its first call that
    # uses it: on Ray a call may count a prefix that the sequential run had evaluated earlier.
    assert all(r >= s for r, s in zip(_evaluated(ray, sorted(seq)), _evaluated(seq, sorted(seq))))
    info = json.loads((tmp_path / "ray" / "run.json").read_text())
    assert info["executor"]["threads_per_worker"] == 1 and info["status"] == "complete"


def _evaluated(traces: dict, pairs: list) -> list[int]:
    """Every LM call's evaluated tokens, probe by probe in the order of ``pairs``."""
    return [c["evaluated_tokens"] for pair in pairs for step in traces[pair]["steps"] for c in step["lm_calls"]]


def _without_evaluated(value):
    if isinstance(value, dict):
        return {k: _without_evaluated(v) for k, v in value.items() if k != "evaluated_tokens"}
    if isinstance(value, list):
        return [_without_evaluated(v) for v in value]
    return value
