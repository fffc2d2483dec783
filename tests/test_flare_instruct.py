"""FLARE instruct's control flow with a scripted LM: search calls, malformed calls, the cap."""

import pytest

from flarebench.strategies.flare_instruct import SEARCH_TEMPLATES, FlareInstruct, parse_search
from flarebench.strategies.records import FIRST_HOP, SEARCH_CALL
from flarebench.strategies.registry import SpecError, parse_spec
from tests.scripted import ScriptedLM, ScriptedRetriever


def run(strategy, script, supports_bias=True):
    lm, retriever = ScriptedLM(script), ScriptedRetriever([["d1", "d2", "d3"], ["e1", "e2", "e3"]])
    lm.supports_logit_bias = supports_bias
    return strategy.run("Who is the mother of the friend of Ann?", lm, retriever), lm, retriever


def test_search_call_retrieves_with_its_query_and_generation_continues():
    script = [" [Search(friend of Ann", " The friend of Ann is Bo. So the answer is Cy."]
    trace, lm, retriever = run(FlareInstruct(), script)
    assert retriever.queries == ["Who is the mother of the friend of Ann?", "friend of Ann"]
    assert [r.reason for r in trace.retrievals] == [FIRST_HOP, SEARCH_CALL]
    assert trace.retrievals[1].detail == {"well_formed": True}
    assert trace.steps[1].retrievals[0].query == "friend of Ann"  # recorded on the step it served
    # generation continues after the closed call, with the new documents in context
    assert lm.requests[1].prompt.dynamic.endswith("Answer: [Search(friend of Ann)]")
    assert "[1] Doc e1" in lm.requests[1].prompt.dynamic and "Doc d1" not in lm.requests[1].prompt.dynamic
    assert trace.answer == "Cy" and trace.stop_reason == "answer"
    assert lm.requests[0].stop[-1] == ")]" and lm.requests[0].logit_bias == {"[": 2.0, " [": 2.0}


def test_unclosed_and_empty_search_calls_are_survived():
    script = [(["A is B.", " [Search(", "mother of B"], [1, 1, 1], "length"), " So the answer is B."]
    trace, _, retriever = run(FlareInstruct(max_tokens=10), script)
    assert retriever.queries[1] == "mother of B" and trace.retrievals[1].detail == {"well_formed": False}
    assert trace.answer == "B"
    trace, _, retriever = run(FlareInstruct(max_tokens=3), script)
    assert len(retriever.queries) == 1 and trace.stop_reason == "token_cap"  # nothing left to retrieve for
    script = [" [Search()", " So the answer is B."]
    trace, lm, retriever = run(FlareInstruct(), script)
    assert len(retriever.queries) == 1  # the empty call retrieves nothing
    assert trace.answer == "B" and "[Search(" not in trace.output
    assert parse_search("x [Search(") == ("x ", None)


def test_max_searches_is_respected():
    script = [" [Search(q1", " [Search(q2", " [Search(q3", " So the answer is B."]
    trace, lm, retriever = run(FlareInstruct(max_searches=2), script)
    assert retriever.queries[1:] == ["q1", "q2"]
    assert len(trace.retrievals) == 3
    third = lm.requests[2]
    assert ")]" not in third.stop and third.logit_bias == {}  # past the cap: no search stop, no bias
    assert "[Search(q3" in trace.output  # left in the text, unanswered


def test_no_logit_bias_where_the_backend_has_none_and_bias_0_turns_it_off():
    _, lm, _ = run(FlareInstruct(), [" So the answer is B."], supports_bias=False)
    assert lm.requests[0].logit_bias == {}
    _, lm, _ = run(FlareInstruct(search_bias=0.0), [" So the answer is B."])
    assert lm.requests[0].logit_bias == {}


def test_exemplars_teach_search_calls():
    for form, n in (("short", 4), ("long", 3)):
        assert SEARCH_TEMPLATES[form].static.count("[Search(") >= n
        assert "\nAnswer: [Search(" in SEARCH_TEMPLATES[form].static


def test_parameters_are_validated():
    with pytest.raises(SpecError, match="max_searches must be >= 0"):
        parse_spec("flare_instruct:max_searches=-1")
    assert parse_spec("flare_instruct:search_bias=0").search_bias == 0.0
