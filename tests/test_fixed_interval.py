"""fixed_interval: retrieval every ``interval`` tokens ("previous-window") or every sentence
("previous-sentence"), with a scripted LM and retriever for control flow and the real model once."""

import re

import pytest

from flarebench.strategies import parse_spec
from flarebench.strategies.fixed_interval import FixedInterval
from flarebench.strategies.lm import GenerationRequest
from flarebench.strategies.prompts import STOP
from flarebench.strategies.records import FIRST_HOP, FIXED_INTERVAL, LMCall, Trace
from flarebench.strategies.registry import SpecError
from flarebench.strategies.steps import LOOKAHEAD_TOKENS
from tests.scripted import ScriptedLM, ScriptedRetriever

QUESTION = "Who is the mother of the friend of Ivo Lanark?"
DOCS = [["a1", "a2", "a3"], ["b1", "b2", "b3"], ["c1", "c2", "c3"], ["d1", "d2", "d3"], ["e1", "e2", "e3"]]


class WindowLM(ScriptedLM):
    """A scripted LM that, like a real one, returns at most ``max_tokens`` tokens and reports
    "length" when it used them all."""

    def _complete(self, request: GenerationRequest) -> LMCall:
        call = super()._complete(request)
        if call.completion_tokens >= request.max_tokens:
            call.tokens = call.tokens[: request.max_tokens]
            call.text, call.completion_tokens, call.finish_reason = "".join(call.tokens), request.max_tokens, "length"
        return call


def window(*tokens: str) -> tuple[list[str], list[float]]:
    return list(tokens), [1.0] * len(tokens)


def doc_ids_in(request: GenerationRequest) -> list[str]:
    """The ids of the documents a prompt holds, in order."""
    return re.findall(r"^\[\d+\] Doc (\S+):", request.prompt.dynamic, re.MULTILINE)


def answer_so_far(request: GenerationRequest) -> str:
    return request.prompt.dynamic.split("\nAnswer:", 1)[1]


WINDOWS = [
    window(" The", " friend", " of", " Ivo"),
    window(" Lanark", " is", " Bea", " Tull."),
    window(" So", " the", " answer", " is"),
    window(" Bea", " Tull", "."),  # fewer than 4 tokens: the model ended the answer
]


def test_tokens_mode_retrieves_with_each_previous_window():
    lm, retriever = WindowLM(WINDOWS), ScriptedRetriever(DOCS)
    trace = parse_spec("fixed_interval:interval=4").run(QUESTION, lm, retriever)
    texts = ["".join(tokens) for tokens, _ in WINDOWS]

    assert (trace.answer, trace.stop_reason) == ("Bea Tull", "answer")
    assert [s.text for s in trace.steps] == texts
    # 4 windows: the first hop, then one retrieval before each later window, with the window before it.
    assert [[r.reason for r in s.retrievals] for s in trace.steps] == [[FIRST_HOP]] + [[FIXED_INTERVAL]] * 3
    assert retriever.queries == [QUESTION] + [t.strip() for t in texts[:-1]]
    assert [r.detail for r in trace.retrievals] == [{"step": 0}] + [
        {"step": i, "answer_tokens": 4 * i} for i in (1, 2, 3)
    ]
    assert [s.triggered for s in trace.steps] == [False, True, True, True]
    for i, (step, request) in enumerate(zip(trace.steps, lm.requests, strict=True)):
        assert step.retrievals[0].doc_ids == DOCS[i]
        assert step.lm_calls == [trace.lm_calls[i]] and step.lm_calls[0].text == texts[i]
        # The last retrieval's documents replace the earlier ones; the answer goes on where it was.
        assert doc_ids_in(request) == DOCS[i]
        assert answer_so_far(request) == "".join(texts[:i])
        assert (request.max_tokens, request.stop) == (4, STOP)


def test_tokens_mode_asks_for_at_most_the_remaining_budget():
    lm, retriever = WindowLM([window(" a", " b", " c", " d")]), ScriptedRetriever(DOCS)
    trace = parse_spec("fixed_interval:interval=4,max_tokens=10").run(QUESTION, lm, retriever)
    assert [r.max_tokens for r in lm.requests] == [4, 4, 2]
    assert sum(c.completion_tokens for c in trace.lm_calls) == 10
    assert trace.stop_reason == "token_cap" and trace.answer is None
    # No retrieval for a window that the budget leaves no room for.
    assert len(trace.retrievals) == 3


def test_a_window_cut_inside_the_answer_statement_is_completed():
    windows = WINDOWS[:3] + [window(" Rosa", " Tull", " and", " Bea"), window(" Tull", ".")]
    trace = parse_spec("fixed_interval:interval=4").run(QUESTION, WindowLM(windows), ScriptedRetriever(DOCS))
    assert len(trace.steps) == 5
    assert trace.answer == "Rosa Tull and Bea Tull"


def test_a_window_running_on_past_the_answer_statement_ends_the_answer():
    lm = WindowLM([window(" So", " the", " answer", " is"), window(" Bea", " Tull.", " The", " answer")])
    trace = parse_spec("fixed_interval:interval=4").run(QUESTION, lm, ScriptedRetriever(DOCS))
    assert len(trace.steps) == 2
    assert (trace.answer, trace.stop_reason) == ("Bea Tull", "answer")


def test_sentence_mode_queries_with_the_previous_sentence():
    lm = ScriptedLM(
        [  # look-aheads run past the sentence; only the first sentence is kept
            " The friend of Ivo Lanark is Bea Tull. The mother",
            " The mother of Bea Tull is Rosa Tull. So the",
            " So the answer is Rosa Tull.",
        ]
    )
    retriever = ScriptedRetriever(DOCS)
    trace = parse_spec("fixed_interval:mode=sentence").run(QUESTION, lm, retriever)
    sentences = [
        " The friend of Ivo Lanark is Bea Tull.",
        " The mother of Bea Tull is Rosa Tull.",
        " So the answer is Rosa Tull.",
    ]

    assert (trace.answer, trace.stop_reason) == ("Rosa Tull", "answer")
    assert [s.text for s in trace.steps] == sentences
    assert retriever.queries == [QUESTION] + [s.strip() for s in sentences[:2]]
    assert [r.reason for r in trace.retrievals] == [FIRST_HOP, FIXED_INTERVAL, FIXED_INTERVAL]
    for i, request in enumerate(lm.requests):
        assert doc_ids_in(request) == DOCS[i]
        assert answer_so_far(request) == "".join(sentences[:i])
        assert request.max_tokens == LOOKAHEAD_TOKENS and request.stop_at_sentence


def test_trace_round_trips_through_json():
    trace = parse_spec("fixed_interval:interval=4").run(QUESTION, WindowLM(WINDOWS), ScriptedRetriever(DOCS))
    again = Trace.from_dict(trace.to_dict())
    assert again == trace
    assert again.retrievals[1].detail == {"step": 1, "answer_tokens": 4}


def test_parameters_are_validated():
    assert parse_spec("fixed_interval").params() == {
        "k": 3,
        "max_tokens": 128,
        "answer_form": "short",
        "mode": "tokens",
        "interval": 16,
    }
    assert parse_spec("fixed_interval:mode=sentence,k=5").mode == "sentence"
    with pytest.raises(SpecError, match="interval must be >= 1, got 0"):
        parse_spec("fixed_interval:interval=0")
    with pytest.raises(SpecError, match="mode must be one of tokens, sentence, got 'words'"):
        parse_spec("fixed_interval:mode=words")
    with pytest.raises(ValueError, match="mode must be 'tokens' or 'sentence'"):
        FixedInterval(mode="words")
    # A sentence step has no window: an interval set with it would be silently ignored.
    with pytest.raises(SpecError, match="interval is for mode=tokens; mode=sentence retrieves before every sentence"):
        parse_spec("fixed_interval:mode=sentence,interval=8")


@pytest.mark.model
# 48 tokens: three 16-token intervals, two of them retrieving (each retrieval evaluates its documents
# afresh, so the default 128 tokens would cost eight).
@pytest.mark.parametrize("strategy_spec", ["fixed_interval:max_tokens=48", "fixed_interval:mode=sentence"])
def test_real_model(strategy_spec, lm, retriever, phantom):
    probe = phantom.probes[0]
    trace = parse_spec(strategy_spec).run(probe.question, lm, retriever)
    assert trace.output and trace.stop_reason != "error" and len(trace.steps) >= 2
    assert trace.steps[0].retrievals[0].reason == FIRST_HOP
    assert trace.steps[0].retrievals[0].query == probe.question
    for step in trace.steps[1:]:
        assert [r.reason for r in step.retrievals] == [FIXED_INTERVAL]
        assert len(step.retrievals[0].doc_ids) == 3
