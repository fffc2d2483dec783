"""ircot: one chain-of-thought sentence per step, retrieval with each sentence, paragraphs
accumulated; its three limits and the optional reader, with a scripted LM and retriever for
control flow and the real model once."""

import re

import pytest

from flarebench.strategies import parse_spec
from flarebench.strategies.ircot import is_reasoning, search_text
from flarebench.strategies.lm import GenerationRequest
from flarebench.strategies.prompts import STOP
from flarebench.strategies.records import FIRST_HOP, IRCOT_STEP
from flarebench.strategies.registry import SpecError
from flarebench.strategies.steps import LOOKAHEAD_TOKENS
from tests.scripted import ScriptedLM, ScriptedRetriever

QUESTION = "Who is the mother of the friend of Ivo Lanark?"
# Look-aheads run past the sentence; only the first sentence is kept.
COT = [
    " The friend of Ivo Lanark is Bea Tull. The",
    " The mother of Bea Tull is Rosa Tull. So",
    " So the answer is Rosa Tull.",
]
SENTENCES = [
    " The friend of Ivo Lanark is Bea Tull.",
    " The mother of Bea Tull is Rosa Tull.",
    " So the answer is Rosa Tull.",
]
NEVER_ANSWERS = [" Ivo Lanark is a baker. He"]


def doc_ids_in(request: GenerationRequest) -> list[str]:
    """The ids of the documents a prompt holds, in order."""
    return re.findall(r"^\[\d+\] Doc (\S+):", request.prompt.dynamic, re.MULTILINE)


def test_stops_when_the_answer_is_stated_and_accumulates_paragraphs():
    lm = ScriptedLM(COT)
    retriever = ScriptedRetriever([["a1", "a2", "a3"], ["b1", "a2", "b3"], ["c1", "c2", "c3"]])
    trace = parse_spec("ircot").run(QUESTION, lm, retriever)

    assert (trace.answer, trace.stop_reason) == ("Rosa Tull", "answer")
    assert [s.text for s in trace.steps] == SENTENCES
    assert [[r.reason for r in s.retrievals] for s in trace.steps] == [[FIRST_HOP], [IRCOT_STEP], [IRCOT_STEP]]
    # Question words are dropped from every query, as the official code's BM25 queries drop them.
    assert retriever.queries == [
        "the mother of the friend of Ivo Lanark?",
        "The friend of Ivo Lanark Bea Tull.",
        "The mother of Bea Tull Rosa Tull.",
    ]
    assert [r.detail for r in trace.retrievals] == [
        {"step": 0},
        {"step": 1, "added": ["b1", "b3"], "paragraphs": 5},
        {"step": 2, "added": ["c1", "c2", "c3"], "paragraphs": 8},
    ]
    # Each sentence sees every paragraph collected so far (in order, each once) and the chain so far.
    assert [doc_ids_in(r) for r in lm.requests] == [
        ["a1", "a2", "a3"],
        ["a1", "a2", "a3", "b1", "b3"],
        ["a1", "a2", "a3", "b1", "b3", "c1", "c2", "c3"],
    ]
    for i, (step, request) in enumerate(zip(trace.steps, lm.requests, strict=True)):
        assert request.prompt.dynamic.endswith("\nAnswer:" + "".join(SENTENCES[:i]))
        assert (request.max_tokens, request.purpose, request.stop_at_sentence) == (LOOKAHEAD_TOKENS, "cot", True)
        assert step.lm_calls == [trace.lm_calls[i]]


def test_stops_after_max_steps():
    lm, retriever = ScriptedLM(NEVER_ANSWERS), ScriptedRetriever([["a1", "a2", "a3"], ["b1", "b2", "b3"]])
    trace = parse_spec("ircot:max_steps=3,max_paragraphs=20").run(QUESTION, lm, retriever)
    assert (trace.stop_reason, trace.answer) == ("step_cap", None)
    assert len(trace.steps) == len(trace.lm_calls) == 3
    # No retrieval after the last sentence: nothing would read its paragraphs.
    assert [r.reason for r in trace.retrievals] == [FIRST_HOP, IRCOT_STEP, IRCOT_STEP]


def test_never_holds_more_than_max_paragraphs():
    lm = ScriptedLM(NEVER_ANSWERS)
    retriever = ScriptedRetriever([["p1", "p2", "p3"], ["p3", "p4", "p1"], ["p5", "p6", "p7"], ["p8", "p9", "p10"]])
    trace = parse_spec("ircot:max_steps=5,max_paragraphs=5").run(QUESTION, lm, retriever)
    held = [doc_ids_in(r) for r in lm.requests]
    assert all(len(ids) <= 5 and len(set(ids)) == len(ids) for ids in held)
    assert held[-1] == ["p1", "p2", "p3", "p4", "p5"]
    assert [r.detail.get("added") for r in trace.retrievals] == [None, ["p4"], ["p5"]]
    # Once the context is full, no more retrievals: those steps did not trigger one.
    assert [s.triggered for s in trace.steps] == [False, True, True, False, False]
    assert trace.stop_reason == "step_cap"


def test_reader_answers_from_all_paragraphs():
    lm = ScriptedLM(COT[:2] + [" The friend is Bea Tull, whose mother is Rosa Tull. So the answer is Rosa Tull."])
    retriever = ScriptedRetriever([["a1", "a2", "a3"], ["b1", "b2", "b3"]])
    trace = parse_spec("ircot:reader=on,max_steps=2").run(QUESTION, lm, retriever)

    *cot, read = trace.steps
    assert [s.text for s in cot] == SENTENCES[:2]
    assert [c.purpose for c in read.lm_calls] == ["reader"] and read.retrievals == []
    assert trace.output == read.text.strip()
    assert (trace.answer, trace.stop_reason) == ("Rosa Tull", "answer")
    request = lm.requests[-1]
    assert doc_ids_in(request) == ["a1", "a2", "a3", "b1", "b2", "b3"]
    assert request.prompt.dynamic.endswith("\nAnswer:")  # from scratch, not after the chain of thought
    assert (request.max_tokens, request.stop, request.stop_at_sentence) == (128, STOP, False)


def test_a_reasoning_sentence_is_no_query_the_last_fact_is():
    # The official code queries with the last generated sentence that is no conclusion or sum, and
    # with the question while there is none.
    cot = [  # each runs past its sentence, as a look-ahead does
        " Thus we need the friend first. The",
        " The friend of Ivo Lanark is Bea Tull. The",
        " 2 + 3 = 5. The",
        " So the answer is Rosa Tull.",
    ]
    retriever = ScriptedRetriever([[f"d{i}"] for i in range(5)])
    parse_spec("ircot:k=1").run(QUESTION, ScriptedLM(cot), retriever)
    friend = "The friend of Ivo Lanark Bea Tull."
    assert retriever.queries == [search_text(QUESTION), search_text(QUESTION), friend, friend]
    assert [is_reasoning(s) for s in ["So,", "Therefore x.", "Hence.", "That is, y.", "Sorting is a fact."]] == [
        True,
        True,
        True,
        True,
        False,
    ]
    assert search_text("Who is the  father of Where Is?") == "the  father of Is?"


def test_parameters_are_validated():
    assert parse_spec("ircot").params() == {
        "k": 3,
        "max_tokens": 128,
        "answer_form": "short",
        "max_steps": 10,
        "max_paragraphs": 15,
        "reader": False,
    }
    with pytest.raises(SpecError, match="max_steps must be >= 1, got 0"):
        parse_spec("ircot:max_steps=0")
    with pytest.raises(SpecError, match=r"max_paragraphs must be >= k \(5\), got 4"):
        parse_spec("ircot:k=5,max_paragraphs=4")
    with pytest.raises(SpecError, match="reader must be bool, got 'maybe'"):
        parse_spec("ircot:reader=maybe")


@pytest.mark.model
def test_real_model(lm, retriever, phantom):
    probe = phantom.probes[0]
    trace = parse_spec("ircot").run(probe.question, lm, retriever)
    assert trace.output and trace.stop_reason in ("answer", "eos", "token_cap", "step_cap")
    first, *later = trace.retrievals
    assert (first.reason, first.query, len(first.doc_ids)) == (FIRST_HOP, search_text(probe.question), 3)
    assert all(r.reason == IRCOT_STEP for r in later)
    assert len(trace.steps) <= 10 and all(len(s.lm_calls) == 1 for s in trace.steps)
    assert all(r.detail["paragraphs"] <= 15 for r in later)


def test_defaults_are_the_official_codes():
    # StonyBrookNLP/ircot: max_num_sentences = 10 (not overridden by any base config),
    # global_max_num_paras = 15; k is the harness's common 3.
    from flarebench.strategies.ircot import IRCoT

    assert (IRCoT().max_steps, IRCoT().max_paragraphs) == (10, 15)
