"""The runner and the run folder: traces written as produced, resume, refusal, error capture."""

import dataclasses
import json

import pytest

from bench.runner import StrategyRefused, TraceLog, check_compatible, run_strategy
from bench.session import BenchSession, ConfigError, first_difference
from strategies.base import Strategy, finish
from strategies.lm import Prompt
from strategies.records import Step
from strategies.registry import register
from tests.scripted import ScriptedLM


@register("_test_flaky")
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
        needs_logprobs = True

    check_compatible("x", NeedsLogprobs(), ScriptedLM(["a"]))
    with pytest.raises(StrategyRefused, match="flare_instruct or fixed_interval"):
        check_compatible("x", NeedsLogprobs(), ScriptedLM(["a"], supports_logprobs=False))


def test_first_difference_names_the_field():
    old = {"lm": {"name": "a", "sha256": "1"}, "strategies": {"s": {"k": 3}}}
    assert first_difference(old, old) is None
    assert (
        first_difference(old, {"lm": {"name": "a", "sha256": "1"}, "strategies": {"s": {"k": 5}}})
        == "strategies.s.k (was 3, now 5)"
    )
    assert first_difference(old, {**old, "extra": 1}) == "extra (was '<absent>', now 1)"


@pytest.mark.model
def test_resumed_run_equals_uninterrupted_run(tmp_path):
    """Run 2 probes, 'interrupt', resume to 3: the traces equal those of one run of 3."""
    opts = dict(strategy=["single_time"], progress=False)
    part = BenchSession(limit=2, report_dir=str(tmp_path / "a"), **opts)
    part.run("single_time")
    part.close()
    resumed = BenchSession(limit=3, report_dir=str(tmp_path / "a"), **opts)
    assert len(resumed.log.read()) == 2  # nothing lost, nothing redone yet
    resumed.run("single_time")
    resumed.close()
    whole = BenchSession(limit=3, report_dir=str(tmp_path / "b"), **opts)
    whole.run("single_time")
    whole.close()

    def key(t):
        return (t.probe_id, t.output, [c.logprobs for c in t.lm_calls], [r.doc_ids for r in t.retrievals])

    assert [key(t) for t in resumed.log.read()] == [key(t) for t in whole.log.read()]
    info = json.loads((tmp_path / "a" / "run.json").read_text())
    assert info["status"] == "complete" and info["config"]["strategies"] == {"single_time": {"k": 3, "max_tokens": 128}}


@pytest.mark.model
def test_run_folder_of_another_configuration_is_refused(tmp_path):
    BenchSession(strategy=["no_retrieval"], limit=1, report_dir=str(tmp_path), progress=False).run("no_retrieval")
    with pytest.raises(ConfigError, match=r"different configuration: strategies\.no_retrieval \(was \{'k': 3"):
        BenchSession(strategy=["no_retrieval:k=5"], limit=1, report_dir=str(tmp_path), progress=False)
    again = BenchSession(
        strategy=["no_retrieval:k=5"], limit=1, report_dir=str(tmp_path), overwrite=True, progress=False
    )
    assert again.log.read() == []
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="holds no flarebench run"):
        BenchSession(strategy=["no_retrieval"], limit=1, report_dir=str(tmp_path / "other"), progress=False)


def test_bad_options_are_config_errors():
    with pytest.raises(ConfigError, match="--limit must be >= 1"):
        BenchSession(limit=0)
    with pytest.raises(ConfigError, match="no probe set named or at 'nope'"):
        BenchSession(probes="nope")
    with pytest.raises(ConfigError, match="unknown strategy 'bogus'"):
        BenchSession(strategy=["bogus"])
