"""``--executor ray`` with the real model: two workers on a local Ray instance, each loading its own
SmolLM2 with one thread, give the traces (answers, tokens, evaluated tokens, retrievals; not
timings) of the sequential run with the model's default threads: each worker evaluates the static
prompt prefixes in its own warm-up (or restores the states an earlier warm-up saved), as the
sequential run does once."""

from __future__ import annotations

import json

import pytest

from flarebench.bench.cli import main
from flarebench.strategies import llamacpp
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
    built, real = [], llamacpp.llama_cpp.Llama

    def spied(**settings):  # each model this process (the Ray run's driver) builds: vocabulary only?
        built.append(settings.get("vocab_only", False))
        return real(**settings)

    monkeypatch.setattr(llamacpp.llama_cpp, "Llama", spied)
    ray = ["--executor", "ray", "--workers", "2", "--threads-per-worker", "1"]
    assert main(["run", *SPECS, *ray, "--report-dir", str(tmp_path / "ray")]) == 0, capsys.readouterr().err
    assert built == [True]  # the driver describes the model and answers no probe: its weights never load
    seq, ray = _answers(tmp_path / "seq"), _answers(tmp_path / "ray")
    # Every worker's model evaluates the static prompt prefixes in its own warm-up, as the
    # sequential run does once: no probe counts them, so even the evaluated tokens are the same.
    assert len(seq) == 2 and ray == seq
    info = json.loads((tmp_path / "ray" / "run.json").read_text())
    assert info["executor"]["threads_per_worker"] == 1 and info["status"] == "complete"
    assert "warm_up" not in info  # the driver's backends serve no probe: the workers warm their own
    # Described without its weights, the model is the sequential run's: the runs are comparable.
    assert info["config"] == json.loads((tmp_path / "seq" / "run.json").read_text())["config"]
    assert json.loads((tmp_path / "seq" / "run.json").read_text())["warm_up"]["prefixes"] == 2
