"""Adaptive retrieval's control flow with a scripted LM and retriever: one closed-book draft, judged
once; kept when confident, else one retrieval with the question and one open-book answer."""

import pytest

from flarebench.bench.scorers.streaming import shown_text
from flarebench.strategies.adaptive import MIN_PROB_THRESHOLD, Adaptive
from flarebench.strategies.prompts import template
from flarebench.strategies.records import ADAPTIVE
from flarebench.strategies.registry import SpecError, parse_spec
from tests.scripted import ScriptedLM, ScriptedRetriever

QUESTION = "Where did Joe Biden study?"
DRAFT_TOKENS = [" He", " studied", " at", " Delaware", ".", " So the answer is", " Delaware", "."]
ANSWER = ([" So the answer is", " Pennsylvania", "."], [0.9, 0.9, 0.9])


def draft(low: float) -> tuple[list[str], list[float]]:
    """The closed-book draft, its least likely token (" Delaware") at probability ``low``."""
    return DRAFT_TOKENS, [0.9, 0.9, 0.9, low, 0.9, 0.9, 0.9, 0.9]


def run(strategy, script, **lm_options):
    lm, retriever = ScriptedLM(script, **lm_options), ScriptedRetriever([["d1", "d2", "d3", "d4"]])
    return strategy.run(QUESTION, lm, retriever), lm, retriever


def test_a_confident_draft_is_the_answer_in_one_call_without_retrieval():
    trace, lm, retriever = run(Adaptive(), [draft(0.5), ANSWER])
    assert len(lm.requests) == 1 and retriever.queries == []
    (request,) = lm.requests
    assert request.prompt.static == template("short", open_book=False).static
    assert request.logprobs and request.max_tokens == 128 and not request.stop_at_sentence
    assert trace.output == "".join(DRAFT_TOKENS).strip() and trace.answer == "Delaware"
    assert len(trace.steps) == 1 and not trace.steps[0].triggered
    assert trace.steps[0].gate == {"trigger": "min_prob", "score": 0.5, "threshold": 0.4, "fired": False}


def test_an_unsure_draft_retrieves_once_with_the_question_and_answers_open_book():
    trace, lm, retriever = run(Adaptive(k=3), [draft(0.2), ANSWER])
    assert retriever.queries == [QUESTION]
    assert [r.purpose for r in lm.requests] == ["draft", "regenerate"]
    assert lm.requests[1].prompt.static == template("short").static
    assert "[3] Doc d3" in lm.requests[1].prompt.dynamic and "d4" not in lm.requests[1].prompt.dynamic
    # The output is the open-book answer alone; the draft stays in the trace.
    assert trace.output == "So the answer is Pennsylvania." and trace.answer == "Pennsylvania"
    (step,) = trace.steps
    assert step.text.strip() == trace.output and step.triggered and step.gate["fired"]
    assert len(trace.lm_calls) == 2 and trace.lm_calls[0].text == "".join(DRAFT_TOKENS)
    assert sum(c.completion_tokens for c in trace.lm_calls) == len(DRAFT_TOKENS) + 3
    (r,) = trace.retrievals
    assert r.reason == ADAPTIVE and not r.first_hop and r.doc_ids == ["d1", "d2", "d3"]
    assert r.detail == {"trigger": "min_prob", "score": pytest.approx(0.2), "threshold": 0.4}
    assert shown_text(trace)[0].strip() == trace.output  # the streaming model shows the answer, not the draft


def test_the_threshold_is_inclusive_and_settable():
    assert MIN_PROB_THRESHOLD == 0.4
    at, _, _ = run(Adaptive(), [draft(0.4), ANSWER])
    above, _, _ = run(Adaptive(), [draft(0.41), ANSWER])
    assert at.retrievals and not above.retrievals
    raised, _, _ = run(parse_spec("adaptive:threshold=0.6"), [draft(0.5), ANSWER])
    assert raised.retrievals and raised.steps[0].gate["threshold"] == 0.6


def test_other_triggers_take_their_own_default_and_extras():
    entropy = parse_spec("adaptive:trigger=entropy")
    assert entropy.gate_trigger.threshold == 2.0 and entropy.needs() == {"logprobs", "top_logprobs"}
    assert "top_logprobs" in parse_spec("adaptive:trigger=margin").needs() and Adaptive().needs() == {"logprobs"}
    assert entropy.request_sha256() != Adaptive().request_sha256()


def test_self_check_needs_no_logprobs_and_its_call_counts():
    strategy = parse_spec("adaptive:trigger=self_check")
    assert not strategy.needs() and "logprobs" in Adaptive().needs()
    needs = '{"needs_fact": true, "missing": "Biden university"}'
    trace, lm, retriever = run(strategy, [" He studied at Delaware.", needs, ANSWER], supports_logprobs=False)
    assert [r.purpose for r in lm.requests] == ["draft", "self_check", "regenerate"]
    assert not lm.requests[0].logprobs and retriever.queries == [QUESTION]
    assert trace.output == "So the answer is Pennsylvania." and len(trace.lm_calls) == 3
    kept, lm, retriever = run(strategy, [" So the answer is Delaware.", '{"needs_fact": false}'])
    assert kept.output == "So the answer is Delaware." and not kept.retrievals and len(kept.lm_calls) == 2
    assert kept.stop_reason == "answer"


def test_long_answers_use_the_long_templates():
    strategy = parse_spec("adaptive", {"answer_form": "long", "max_tokens": 256})
    trace, lm, _ = run(strategy, [draft(0.1), ANSWER])
    assert [r.prompt.static for r in lm.requests] == [
        template("long", open_book=False).static,
        template("long").static,
    ]
    assert set(strategy.static_prompts()) == {r.prompt.static for r in lm.requests}
    assert strategy.request_sha256() != Adaptive().request_sha256()


def test_an_empty_draft_is_kept_unjudged():
    trace, lm, retriever = run(Adaptive(), [([], [])])
    assert len(lm.requests) == 1 and not trace.retrievals and trace.steps[0].gate is None


@pytest.mark.parametrize(
    "bad, message",
    [
        ("adaptive:trigger=nope", "unknown trigger 'nope'"),
        ("adaptive:threshold=1.5", "threshold of trigger min_prob"),
        ("adaptive:trigger=self_check,threshold=0.5", "trigger self_check takes no threshold"),
        ("adaptive:trigger=self_check,ignore_known=true", "ignore_terms and ignore_known apply"),
    ],
)
def test_bad_parameters_are_named(bad, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(bad)
