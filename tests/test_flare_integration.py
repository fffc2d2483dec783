"""FLARE direct and instruct with the real embedded LM and BM25 on two default probes."""

import math

import pytest

from flarebench.bench.runner import StrategyRefused, check_compatible
from flarebench.strategies import parse_spec
from flarebench.strategies.records import FIRST_HOP, LOW_CONFIDENCE
from tests.scripted import ScriptedLM

pytestmark = pytest.mark.model


def test_flare_direct_retrieves_exactly_when_a_token_is_at_or_below_theta(lm, retriever, phantom):
    strategy = parse_spec("flare_direct")
    for probe in phantom.probes[:2]:
        trace = strategy.run(probe.question, lm, retriever)
        assert trace.error is None and trace.steps
        assert trace.steps[0].retrievals[0].reason == FIRST_HOP
        for step in trace.steps:
            draft = step.lm_calls[0]
            assert draft.purpose == "draft" and draft.logprobs is not None
            low = [lp for lp in draft.logprobs if math.exp(lp) <= strategy.theta]
            if step.triggered:
                assert low and [c.purpose for c in step.lm_calls] == ["draft", "regenerate"]
                mid = [r for r in step.retrievals if r.reason == LOW_CONFIDENCE]
                assert len(mid) == 1 and mid[0].detail["min_p"] <= strategy.theta
            else:  # a confident sentence: the draft is the sentence, one call
                assert not low and len(step.lm_calls) == 1 and step.text.strip() in draft.text


def test_flare_instruct_answers_and_records_its_searches(lm, retriever, phantom):
    strategy = parse_spec("flare_instruct")
    for probe in phantom.probes[:2]:
        trace = strategy.run(probe.question, lm, retriever)
        assert trace.error is None and trace.steps
        assert trace.retrievals[0].reason == FIRST_HOP
        assert len(trace.retrievals) <= 1 + strategy.max_searches
        assert all(c.purpose == "generate" for c in trace.lm_calls)


def test_flare_direct_is_refused_without_logprobs():
    with pytest.raises(StrategyRefused, match="flare_direct needs per-token logprobs"):
        check_compatible("flare_direct", parse_spec("flare_direct"), ScriptedLM(["x"], supports_logprobs=False))
