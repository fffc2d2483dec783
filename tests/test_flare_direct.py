"""FLARE direct's control flow with a scripted LM (chosen tokens and probabilities) and a scripted
retriever: when it retrieves, with what query, what it puts in context, what it costs."""

import pytest

from flarebench.strategies.flare_direct import ABSTENTION, FlareDirect, low_spans, masked_query, round_robin
from flarebench.strategies.records import FIRST_HOP, LOW_CONFIDENCE, Passage
from flarebench.strategies.registry import SpecError, parse_spec
from flarebench.strategies.steps import Sentence
from tests.scripted import ScriptedLM, ScriptedRetriever

SURE, UNSURE = 0.95, 0.1


def sentence(text_tokens, probs, finish="sentence"):
    """One scripted draft: more sentences may follow (finish 'sentence') unless it states the answer."""
    return (text_tokens, probs, finish)


ANSWER = [
    sentence(
        [" Joe", " Biden", " attended", " the", " University", " of", " Pennsylvania", "."],
        [SURE, SURE, SURE, SURE, SURE, SURE, UNSURE, SURE],
    ),
    sentence([" So", " the", " answer", " is", " Pennsylvania", "."], [SURE] * 6, "stop"),
]


def run(strategy, script, docs=(("d1", "d2", "d3"),)):
    lm, retriever = ScriptedLM(script), ScriptedRetriever([list(d) for d in docs])
    return strategy.run("Where did Joe Biden study?", lm, retriever), lm, retriever


def test_theta_0_retrieves_only_the_first_hop_whatever_the_logprobs():
    low = [
        sentence([" A", " is", " B", "."], [0.01] * 4),
        sentence([" So", " the answer is", " B", "."], [0.01] * 4, "stop"),
    ]
    trace, lm, _ = run(FlareDirect(theta=0.0), low)
    assert [r.reason for r in trace.retrievals] == [FIRST_HOP]
    assert len(lm.requests) == 2 and trace.answer == "B"


def test_theta_1_retrieves_for_every_sentence():
    trace, lm, _ = run(FlareDirect(theta=1.0), [ANSWER[0], ANSWER[0], ANSWER[1], ANSWER[1]])
    assert [s.triggered for s in trace.steps] == [True, True]
    assert [c.purpose for c in trace.lm_calls] == ["draft", "regenerate", "draft", "regenerate"]
    assert [r.reason for r in trace.retrievals] == [FIRST_HOP, LOW_CONFIDENCE, LOW_CONFIDENCE]


def test_implicit_query_masks_the_low_token_and_beta_0_keeps_the_whole_draft():
    trace, _, retriever = run(FlareDirect(), [ANSWER[0], ANSWER[0], ANSWER[1]])
    # The masked token leaves a space, as in the official code's masking.
    assert retriever.queries == ["Where did Joe Biden study?", "Joe Biden attended the University of ."]
    why = trace.retrievals[1].detail
    assert why["min_p"] == pytest.approx(UNSURE) and why["low_tokens"] == [[" Pennsylvania", pytest.approx(UNSURE)]]
    _, _, retriever = run(FlareDirect(beta=0.0), [ANSWER[0], ANSWER[0], ANSWER[1]])
    assert retriever.queries[1] == "Joe Biden attended the University of Pennsylvania."


def test_a_confident_sentence_costs_exactly_one_call():
    trace, lm, _ = run(FlareDirect(), [ANSWER[1]])
    assert len(lm.requests) == 1 and [c.purpose for c in trace.lm_calls] == ["draft"]
    assert trace.stop_reason == "answer" and trace.answer == "Pennsylvania"
    assert not any(s.triggered for s in trace.steps)


def test_a_triggered_sentence_costs_two_calls_plus_one_per_span_when_explicit():
    trace, _, _ = run(FlareDirect(), [ANSWER[0], ANSWER[0], ANSWER[1]])
    assert [len(s.lm_calls) for s in trace.steps] == [2, 1]
    assert trace.steps[0].text == "".join(ANSWER[0][0]) and trace.output.startswith("Joe Biden")
    two_spans = sentence(
        [" Ann", " is", " the", " mother", " of", " Bo", "."], [UNSURE, SURE, SURE, SURE, SURE, UNSURE, SURE]
    )
    script = [two_spans, "Who is the mother of Bo?", "Who is Ann the mother of?", two_spans, ANSWER[1]]
    trace, lm, retriever = run(FlareDirect(query="explicit"), script)
    assert [c.purpose for c in trace.steps[0].lm_calls] == ["draft", "query", "query", "regenerate"]
    assert retriever.queries[1:] == ["Who is the mother of Bo?", "Who is Ann the mother of?"]
    assert [r.detail["span"] for r in trace.steps[0].retrievals[1:]] == ["Ann", "Bo"]


def test_replace_and_accumulate_put_the_promised_documents_in_context():
    docs = [("a1", "a2", "a3"), ("b1", "a2", "b3"), ("c1", "c2", "c3")]
    script = [ANSWER[0], ANSWER[0], ANSWER[0], ANSWER[0], ANSWER[1]]

    def context_of(lm, i):
        return [
            line.split(": ")[0].split("Doc ")[1]
            for line in lm.requests[i].prompt.dynamic.splitlines()
            if line.startswith("[")
        ]

    _, lm, _ = run(FlareDirect(), script, docs)
    assert context_of(lm, 0) == ["a1", "a2", "a3"] and context_of(lm, 1) == ["b1", "a2", "b3"]
    assert context_of(lm, 3) == ["c1", "c2", "c3"]  # the paper: each retrieval replaces the docs
    _, lm, _ = run(FlareDirect(context="accumulate", max_docs=7), script, docs)
    assert context_of(lm, 1) == ["a1", "a2", "a3", "b1", "b3"]  # first hop kept, a2 not twice
    assert context_of(lm, 3) == ["a1", "a2", "a3", "b1", "b3", "c1", "c2"]  # capped at max_docs


def test_retrieval_cap_and_abstention():
    script = [ANSWER[0]] * 6 + [ANSWER[1]]
    trace, _, _ = run(FlareDirect(max_retrievals=1), script)
    assert [r.reason for r in trace.retrievals] == [FIRST_HOP, LOW_CONFIDENCE]
    assert [len(s.lm_calls) for s in trace.steps][:3] == [2, 1, 1]  # past the cap, drafts are accepted
    trace, _, _ = run(FlareDirect(max_retrievals=1, abstain=True), script)
    assert trace.stop_reason == "abstain" and trace.output.endswith(ABSTENTION.strip()) and trace.answer is None


def test_token_cap_ends_the_answer():
    trace, lm, _ = run(FlareDirect(theta=0.0, max_tokens=10), [ANSWER[0]] * 5)
    assert len(trace.steps) == 2 and trace.answer is None
    assert [r.max_tokens for r in lm.requests] == [10, 2]


def test_query_helpers():
    s = Sentence("", [" Ann", " is", " Bo", "'s", " mother", "."], [0.1, 0.9, 0.2, 0.3, 0.9, 0.9], None, False)
    s.logprobs = [__import__("math").log(p) for p in [0.1, 0.9, 0.2, 0.3, 0.9, 0.9]]
    assert masked_query(s, 0.4) == "is   mother."  # each masked token a space, as the official code joins them
    # A name split into sub-word tokens: the masked piece becomes a space, never glues its neighbours.
    sub = Sentence("", [" Nell", " is", " O", "ster", "."], [], None, False)
    sub.logprobs = [__import__("math").log(p) for p in [0.9, 0.9, 0.1, 0.9, 0.9]]
    assert masked_query(sub, 0.4) == "Nell is ster."
    assert low_spans(s, 0.4) == ["Ann", "Bo's"]
    assert low_spans(s, 0.0) == []


def test_parameters_are_validated():
    with pytest.raises(SpecError, match=r"theta must be within \[0, 1\]"):
        parse_spec("flare_direct:theta=1.5")
    with pytest.raises(SpecError, match="query must be one of implicit, explicit"):
        parse_spec("flare_direct:query=both")
    with pytest.raises(SpecError, match="max_docs must be >= k"):
        parse_spec("flare_direct:k=5,max_docs=4")
    assert parse_spec("flare_direct:max_retrievals=none").max_retrievals is None
    assert FlareDirect().needs() == {"logprobs"} and not parse_spec("flare_direct:trigger=self_check").needs()


@pytest.mark.parametrize(
    "spec, message",
    [
        # Set to its default, a parameter the configuration ignores was accepted and recorded as if it acted.
        ("flare_direct:theta=0.8,threshold=0.5", "give theta or threshold, not both"),
        ("flare_direct:trigger=entropy,theta=0.8", "theta is min_prob's threshold; trigger entropy takes threshold"),
        ("flare_direct:trigger=self_check,query=implicit", "query=implicit does not apply with trigger=self_check"),
        ("flare_direct:trigger=self_check,query=explicit", "query=explicit does not apply with trigger=self_check"),
        ("flare_direct:trigger=self_check,beta=0.4", "beta=0.4 does not apply with trigger=self_check"),
        ("flare_direct:max_docs=9", "max_docs is for context=accumulate"),
        ("flare_direct:abstain=true", "abstain acts once max_retrievals is spent"),
        ("fixed_interval:mode=sentence,interval=16", "interval is for mode=tokens"),
        ("flare_instruct:search_bias=1e30", r"search_bias must be within \[-100, 100\]"),
    ],
)
def test_a_parameter_the_configuration_would_ignore_is_refused_even_at_its_default(spec, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(spec)


def test_the_same_parameters_are_taken_where_they_act():
    assert parse_spec("flare_direct:context=accumulate,max_docs=9").max_docs == 9
    assert parse_spec("flare_direct:abstain=true,max_retrievals=2").abstain
    assert parse_spec("flare_direct:threshold=0.5")._gate.threshold == 0.5
    assert parse_spec("fixed_interval:mode=tokens,interval=16").interval == 16
    # Built in Python, not from a spec: a value at its default is not told from one left unset.
    assert FlareDirect(theta=0.8, threshold=0.5)._gate.threshold == 0.5


def test_explicit_queries_keep_k_documents_merged_round_robin():
    two_spans = sentence(
        [" Ann", " is", " the", " mother", " of", " Bo", "."], [UNSURE, SURE, SURE, SURE, SURE, UNSURE, SURE]
    )
    script = [two_spans, "Who is the mother of Bo?", "Who is Ann the mother of?", two_spans, ANSWER[1]]
    docs = [("q1", "q2", "q3"), ("a1", "a2", "a3"), ("b1", "a2", "b3")]
    trace, lm, _ = run(FlareDirect(query="explicit"), script, docs)
    regenerate = next(i for i, r in enumerate(lm.requests) if r.purpose == "regenerate")
    context = [
        line.split(": ")[0].split("Doc ")[1]
        for line in lm.requests[regenerate].prompt.dynamic.splitlines()
        if line.startswith("[")
    ]
    assert context == ["a1", "b1", "a2"]  # first of each query, then second of each, no duplicate, k = 3
    assert round_robin([[Passage(i, "", "") for i in ids] for ids in (["x", "y"], ["y", "z"])], 5) == [
        Passage("x", "", ""),
        Passage("y", "", ""),
        Passage("z", "", ""),
    ]


def test_explicit_question_prompt_sees_the_answer_so_far_and_replies_must_be_questions():
    unsure_second = sentence([" Bo", " is", " a", " pilot", "."], [SURE, SURE, SURE, UNSURE, SURE])
    first = sentence([" Ann", " is", " the", " mother", " of", " Bo", "."], [SURE] * 7)
    script = [first, unsure_second, "the pilot", ANSWER[1]]
    trace, lm, retriever = run(FlareDirect(query="explicit"), script)
    query_call = next(r for r in lm.requests if r.purpose == "query")
    assert "Passage: Ann is the mother of Bo. Bo is a pilot.\nSpan: pilot" in query_call.prompt.dynamic
    # "the pilot" is no question: dropped; with no question left the official code retrieves
    # nothing, so the draft is kept as drafted.
    assert retriever.queries == ["Where did Joe Biden study?"]
    assert trace.steps[1].gate["rejected_questions"] == ["the pilot"]
    assert trace.steps[1].gate["skipped"] == "no_question" and trace.steps[1].text == " Bo is a pilot."
    assert [c.purpose for c in trace.steps[1].lm_calls] == ["draft", "query"]


def test_an_explicit_query_without_a_span_is_the_whole_draft():
    # The gate fires (p 0.6 <= theta) on no token at or below beta: nothing to ask about, so, as the
    # official code does, the draft as generated is the query (nothing masked).
    hesitant = sentence([" Bo", " is", " a", " pilot", "."], [SURE, SURE, SURE, 0.6, SURE])
    trace, lm, retriever = run(FlareDirect(query="explicit"), [hesitant, hesitant, ANSWER[1]])
    assert retriever.queries[1] == "Bo is a pilot."
    assert not any(r.purpose == "query" for r in lm.requests)


def test_an_empty_masked_query_retrieves_nothing_and_keeps_the_draft():
    all_low = sentence([" Zed", "."], [UNSURE, UNSURE])
    trace, lm, retriever = run(FlareDirect(), [all_low, ANSWER[1]])
    assert retriever.queries == ["Where did Joe Biden study?"]  # never the question in disguise
    assert [c.purpose for c in trace.steps[0].lm_calls] == ["draft"] and not trace.steps[0].triggered
    assert trace.steps[0].gate == {
        "trigger": "min_prob",
        "score": pytest.approx(UNSURE),
        "threshold": 0.8,
        "fired": True,
        "skipped": "empty_query",
    }


def test_each_step_records_what_the_gate_judged():
    trace, _, _ = run(FlareDirect(theta=0.5), [ANSWER[0], ANSWER[0], ANSWER[1]])
    first, second = (s.gate for s in trace.steps)
    assert first["fired"] and first["score"] == pytest.approx(UNSURE) and first["threshold"] == 0.5
    assert not second["fired"] and second["score"] == pytest.approx(SURE)
    trace, _, _ = run(FlareDirect(max_retrievals=0), [ANSWER[0], ANSWER[1]])
    assert trace.steps[0].gate["skipped"] == "retrieval_cap"
