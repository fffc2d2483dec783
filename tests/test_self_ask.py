"""self_ask: one retrieval per follow-up question, with that question as the query; the intermediate
answer written from its documents; the cap that forces the final answer; answering without a
follow-up; long answers; with a scripted LM and retriever for control flow and the real model once."""

import re

import pytest

from flarebench.strategies import parse_spec
from flarebench.strategies.base import LONG_ANSWER_DEFAULTS
from flarebench.strategies.lm import GenerationRequest
from flarebench.strategies.prompts import EXEMPLARS, LONG_EXEMPLARS, PromptTemplate, extract_answer
from flarebench.strategies.records import FIRST_HOP, FOLLOW_UP
from flarebench.strategies.registry import SpecError
from flarebench.strategies.self_ask import (
    FINAL_CUE,
    FOLLOW_UP_CUE,
    INTERMEDIATE,
    LABEL,
    LINE_STOP,
    TURN_STOP,
    read_turn,
)
from tests.scripted import ScriptedLM, ScriptedRetriever

QUESTION = "Who is the mother of the friend of Ivo Lanark?"
ASK_FRIEND = " Yes.\nFollow up: Who is the friend of Ivo Lanark?"
FRIEND = " The friend of Ivo Lanark is Bea Tull."
ASK_MOTHER = "\nFollow up: Who is the mother of Bea Tull?"
MOTHER = " The mother of Bea Tull is Rosa Tull."
ANSWERS = "\nSo the answer is Rosa Tull."
ASK_MORE = "\nFollow up: Who is the friend of Rosa Tull?"
STATED = "The friend of Ivo Lanark is Bea Tull. The mother of Bea Tull is Rosa Tull."
TWO_ROUNDS = ["follow_up", "intermediate", "follow_up", "intermediate", "follow_up"]


def doc_ids_in(request: GenerationRequest) -> list[str]:
    """The ids of the documents a prompt holds, in order."""
    return re.findall(r"^\[\d+\] Doc (\S+):", request.prompt.dynamic, re.MULTILINE)


def three(prefix: str) -> list[str]:
    return [f"{prefix}{i}" for i in (1, 2, 3)]


def test_each_follow_up_retrieves_with_its_question_and_is_answered_from_its_documents():
    lm = ScriptedLM([ASK_FRIEND, FRIEND, ASK_MOTHER, MOTHER, ANSWERS])
    retriever = ScriptedRetriever([three("q"), three("a"), three("b")])
    strategy = parse_spec("self_ask")
    trace = strategy.run(QUESTION, lm, retriever)

    assert retriever.queries == [QUESTION, "Who is the friend of Ivo Lanark?", "Who is the mother of Bea Tull?"]
    assert [[r.reason for r in s.retrievals] for s in trace.steps] == [[FIRST_HOP], [FOLLOW_UP], [], [FOLLOW_UP], []]
    assert [r.detail for r in trace.retrievals] == [{}, {"follow_up": 1}, {"follow_up": 2}]
    assert [c.purpose for c in trace.lm_calls] == TWO_ROUNDS
    # Each follow-up's documents replace the context: its intermediate answer is written from them.
    assert [doc_ids_in(r) for r in lm.requests] == [three("q"), three("a"), three("a"), three("b"), three("b")]
    scratch = ASK_FRIEND + INTERMEDIATE + FRIEND + ASK_MOTHER + INTERMEDIATE + MOTHER
    assert lm.requests[0].prompt.dynamic.endswith(f"Question: {QUESTION}\n{LABEL}")
    assert lm.requests[1].prompt.dynamic.endswith(ASK_FRIEND + INTERMEDIATE)
    assert lm.requests[3].prompt.dynamic.endswith(ASK_FRIEND + INTERMEDIATE + FRIEND + ASK_MOTHER + INTERMEDIATE)
    assert lm.requests[4].prompt.dynamic.endswith(f"{LABEL}{scratch}")
    assert [r.stop for r in lm.requests] == [TURN_STOP, LINE_STOP, TURN_STOP, LINE_STOP, TURN_STOP]
    assert {r.prompt.static for r in lm.requests} == {strategy.template.static}
    # The answer is what the model stated, not its questions: the shared exemplars' chain of thought.
    assert trace.output == f"{STATED} So the answer is Rosa Tull."
    assert (trace.answer, trace.stop_reason) == ("Rosa Tull", "answer")


def test_the_cap_leaves_the_next_question_unasked_and_forces_the_final_answer():
    lm = ScriptedLM([ASK_FRIEND, FRIEND, ASK_MOTHER, MOTHER, ASK_MORE, " Rosa Tull."])
    retriever = ScriptedRetriever([three("q"), three("a"), three("b"), three("c")])
    trace = parse_spec("self_ask:max_follow_ups=2").run(QUESTION, lm, retriever)

    assert [r.reason for r in trace.retrievals] == [FIRST_HOP, FOLLOW_UP, FOLLOW_UP]
    assert "Who is the friend of Rosa Tull?" not in retriever.queries
    refused, final = trace.steps[-2:]
    assert (refused.text, refused.retrievals, refused.lm_calls[0].text) == ("", [], ASK_MORE)
    assert [c.purpose for c in final.lm_calls] == ["final"]
    # The unanswered question stays out of the prompt; the harness writes "So the answer is".
    request = lm.requests[-1]
    assert request.prompt.dynamic.endswith(INTERMEDIATE + MOTHER + FINAL_CUE)
    assert "Rosa Tull?" not in request.prompt.dynamic
    assert request.stop == LINE_STOP and doc_ids_in(request) == three("b")
    assert trace.output.endswith("Rosa Tull. So the answer is Rosa Tull.")
    assert (trace.answer, trace.stop_reason) == ("Rosa Tull", "answer")

    # No follow-up at all: the first question is left unasked and the answer comes from the first hop.
    lm = ScriptedLM([ASK_FRIEND, " Bea Tull."])
    retriever = ScriptedRetriever([three("q")])
    trace = parse_spec("self_ask:max_follow_ups=0").run(QUESTION, lm, retriever)
    assert retriever.queries == [QUESTION] and [c.purpose for c in trace.lm_calls] == ["follow_up", "final"]
    assert trace.output == "So the answer is Bea Tull."


def test_no_follow_up_needed_answers_directly():
    lm, retriever = ScriptedLM([" No.\nSo the answer is baker."]), ScriptedRetriever([three("q")])
    trace = parse_spec("self_ask").run("What is the occupation of Ivo Lanark?", lm, retriever)
    assert [r.reason for r in trace.retrievals] == [FIRST_HOP]
    assert len(trace.lm_calls) == 1 and doc_ids_in(lm.requests[0]) == three("q")
    assert (trace.output, trace.answer, trace.stop_reason) == ("So the answer is baker.", "baker", "answer")

    # Without the first retrieval, nothing at all is retrieved: the model answered from what it knows.
    lm, retriever = ScriptedLM([" No.\nSo the answer is baker."]), ScriptedRetriever([three("q")])
    trace = parse_spec("self_ask:first_retrieval=off").run("What is the occupation of Ivo Lanark?", lm, retriever)
    assert (retriever.queries, trace.retrievals, doc_ids_in(lm.requests[0])) == ([], [], [])
    assert trace.answer == "baker"


def test_a_bare_yes_gets_the_follow_up_label_written_for_it():
    # SmolLM2-135M writes " Yes." and stops: the harness writes "Follow up:" and the model asks.
    lm = ScriptedLM([" Yes.", " Who is the friend of Ivo Lanark?", FRIEND, ANSWERS])
    retriever = ScriptedRetriever([three("q"), three("a")])
    trace = parse_spec("self_ask").run(QUESTION, lm, retriever)
    assert retriever.queries == [QUESTION, "Who is the friend of Ivo Lanark?"]
    assert lm.requests[1].prompt.dynamic.endswith(f"{LABEL} Yes.{FOLLOW_UP_CUE}")
    assert lm.requests[2].prompt.dynamic.endswith(f"{LABEL}{ASK_FRIEND}{INTERMEDIATE}")
    assert [len(s.lm_calls) for s in trace.steps] == [2, 1, 1] and trace.answer == "Rosa Tull"
    # Once the cap is spent, a bare "Yes." is not answered with a cue.
    lm = ScriptedLM([" Yes.", "So the answer is Bea Tull."])
    trace = parse_spec("self_ask:max_follow_ups=0").run(QUESTION, lm, ScriptedRetriever([three("q")]))
    assert [r.purpose for r in lm.requests] == ["follow_up", "final"]


def test_a_turn_that_neither_asks_nor_answers_gets_the_final_answer_asked_for():
    lm = ScriptedLM([" Yes.\nThe friend of Ivo Lanark is Bea Tull.", " Bea Tull."])
    trace = parse_spec("self_ask").run(QUESTION, lm, ScriptedRetriever([three("q")]))
    assert [c.purpose for c in trace.lm_calls] == ["follow_up", "final"]
    assert lm.requests[1].prompt.dynamic.endswith("Yes.\nThe friend of Ivo Lanark is Bea Tull." + FINAL_CUE)
    assert trace.output == "The friend of Ivo Lanark is Bea Tull. So the answer is Bea Tull."


def test_the_token_budget_is_shared_and_a_cut_question_is_not_retrieved():
    lm = ScriptedLM([ASK_FRIEND, ([" The", " friend", " is", " Bea", " Tull", "."], [1.0] * 6), ANSWERS])
    trace = parse_spec("self_ask:max_tokens=10").run(QUESTION, lm, ScriptedRetriever([three("q")]))
    # each call is given what the previous ones left
    assert [r.max_tokens for r in lm.requests] == [10, 9, 3]

    cut = ([" Yes.", "\nFollow up:", " Who is"], [1.0] * 3, "length")
    lm, retriever = ScriptedLM([cut]), ScriptedRetriever([three("q")])
    trace = parse_spec("self_ask:max_tokens=3").run(QUESTION, lm, retriever)
    assert retriever.queries == [QUESTION] and len(lm.requests) == 1
    assert (trace.answer, trace.stop_reason) == (None, "token_cap")


def test_long_answers_are_the_intermediate_answers_without_a_final_statement():
    strategy = parse_spec("self_ask", LONG_ANSWER_DEFAULTS)
    assert "answer is" not in strategy.template.static.lower()
    lm = ScriptedLM([ASK_FRIEND, FRIEND, ASK_MOTHER, MOTHER, ""])
    trace = strategy.run(QUESTION, lm, ScriptedRetriever([three("q"), three("a"), three("b")]))
    assert [c.purpose for c in trace.lm_calls] == TWO_ROUNDS
    assert trace.output == STATED
    assert (trace.answer, trace.stop_reason) == (None, "eos")
    assert {r.prompt.static for r in lm.requests} == {strategy.template.static}

    # Past the cap a long answer ends, cut by it: no final answer is asked for.
    lm = ScriptedLM([ASK_FRIEND, FRIEND, ASK_MOTHER])
    trace = parse_spec("self_ask:max_follow_ups=1", LONG_ANSWER_DEFAULTS).run(QUESTION, lm, ScriptedRetriever([["a"]]))
    assert [c.purpose for c in trace.lm_calls] == ["follow_up", "intermediate", "follow_up"]
    assert (trace.output, trace.stop_reason) == (FRIEND.strip(), "step_cap")


@pytest.mark.parametrize(
    "text, said, question, scratch",
    [
        (ASK_FRIEND, "", "Who is the friend of Ivo Lanark?", ASK_FRIEND),
        # A backend that does not stop runs on; the turn ends at its first question.
        (ASK_MOTHER + INTERMEDIATE + MOTHER + ASK_MORE, "", "Who is the mother of Bea Tull?", ASK_MOTHER),
        (" No.\nSo the answer is 2.\nFollow up: Why?", "So the answer is 2.", None, " No.\nSo the answer is 2."),
        ("\nFollow up:\nFollow up:  Who  is Bo?", "", "Who is Bo?", "\nFollow up:\nFollow up:  Who  is Bo?"),
        (" Yes.\nBo is a pilot.\n", "Bo is a pilot.", None, " Yes.\nBo is a pilot."),
        (" Nobody knows.", "Nobody knows.", None, " Nobody knows."),
        ("", "", None, ""),
    ],
)
def test_read_turn(text, said, question, scratch):
    turn = read_turn(text)
    assert (turn.said, turn.question, turn.scratch) == (said, question, scratch)


def test_the_papers_final_answer_form_is_read_too():
    turn = read_turn("\nSo the final answer is: Rosa Tull")
    assert turn.question is None and extract_answer(turn.said) == "Rosa Tull"


def test_exemplars_are_the_shared_fictional_ones_and_teach_the_format():
    for form, shared in (("short", EXEMPLARS), ("long", LONG_EXEMPLARS)):
        template = parse_spec(f"self_ask:answer_form={form}").template
        assert [(ex.docs, ex.question) for ex in template.exemplars] == [(ex.docs, ex.question) for ex in shared]
        for ex in template.exemplars:
            assert ex.answer.startswith("Yes.\nFollow up: ")  # the paper's exemplars all ask
            assert ("So the answer is" in ex.answer) == (form == "short")
            assert f"Question: {ex.question}\n{LABEL} {ex.answer}\n\n" in template.static


def test_request_shape_holds_every_prompt_it_sends(monkeypatch):
    import flarebench.strategies.self_ask as self_ask

    short, long = parse_spec("self_ask"), parse_spec("self_ask", LONG_ANSWER_DEFAULTS)
    prompts = short.request_shape()["prompts"]
    assert all(p.startswith(short.template.static) for p in prompts)
    tails = ("", FOLLOW_UP_CUE, INTERMEDIATE, FINAL_CUE)
    assert [p.endswith(f"{LABEL}<so far>{tail}") for p, tail in zip(prompts, tails, strict=True)] == [True] * 4
    assert len(long.request_shape()["prompts"]) == 3  # a long answer is never asked for a final statement
    assert short.request_shape()["stops"] == [list(TURN_STOP), list(LINE_STOP)]
    before = short.request_sha256()
    assert before != long.request_sha256()
    # A changed instruction is another configuration.
    changed = PromptTemplate(
        exemplars=short.template.exemplars, instruction="Answer.\n\n", answer_label=short.template.answer_label
    )
    monkeypatch.setitem(self_ask.SELF_ASK_TEMPLATES, "short", changed)
    assert parse_spec("self_ask").request_sha256() != before


def test_parameters_are_validated():
    assert parse_spec("self_ask").params() == {
        "k": 3,
        "max_tokens": 128,
        "answer_form": "short",
        "max_follow_ups": 4,
        "first_retrieval": True,
    }
    assert parse_spec("self_ask:max_follow_ups=2").max_follow_ups == 2
    with pytest.raises(SpecError, match="max_follow_ups must be >= 0, got -1"):
        parse_spec("self_ask:max_follow_ups=-1")
    with pytest.raises(SpecError, match="max_follow_ups must be int, got 'two'"):
        parse_spec("self_ask:max_follow_ups=two")
    with pytest.raises(SpecError, match="first_retrieval must be bool, got 'maybe'"):
        parse_spec("self_ask:first_retrieval=maybe")


def test_the_questions_are_never_streamed_as_answer_text():
    from flarebench.bench.scorers.streaming import shown_text

    trace = parse_spec("self_ask").run(
        QUESTION, ScriptedLM([ASK_FRIEND, FRIEND, ASK_MOTHER, MOTHER, ANSWERS]), ScriptedRetriever([["a"]])
    )
    assert shown_text(trace)[0].strip() == trace.output and "Follow up" not in trace.output


@pytest.mark.model
def test_real_model(lm, retriever, phantom):
    probe = phantom.probes[0]
    trace = parse_spec("self_ask").run(probe.question, lm, retriever)
    assert trace.stop_reason in ("answer", "eos", "token_cap", "step_cap")
    first, *later = trace.retrievals
    assert (first.reason, first.query, len(first.doc_ids)) == (FIRST_HOP, probe.question, 3)
    assert all(r.reason == FOLLOW_UP and r.query for r in later) and len(later) <= 4
    asks = [c for c in trace.lm_calls if c.purpose == "follow_up"]
    assert asks and sum(c.completion_tokens for c in trace.lm_calls) <= 128
    assert "Follow up:" not in trace.output
