"""flare_direct's production options (query=structured, new_docs, keep_last, placement=near_pause)
with a scripted LM and retriever: each changes what it should, and left off they change nothing."""

import json

import pytest

from flarebench.strategies.base import Strategy
from flarebench.strategies.flare_direct import (
    PRODUCTION_OFF,
    SEARCH_PROMPT,
    SEARCH_QUERY,
    SEARCH_STOP,
    SEARCH_TOKENS,
    FlareDirect,
)
from flarebench.strategies.prompts import OPEN_BOOK, PromptTemplate
from flarebench.strategies.records import Passage
from flarebench.strategies.registry import SpecError, parse_spec
from tests.scripted import ScriptedLM, ScriptedRetriever

SURE, UNSURE = 0.95, 0.1
QUESTION = "Where did Joe Biden study?"
CONFIDENT = ([" Joe", " Biden", " studied", " law", "."], [SURE] * 5, "sentence")
UNSURE_DRAFT = (
    [" He", " attended", " the", " University", " of", " Pennsylvania", "."],
    [SURE, SURE, SURE, SURE, SURE, UNSURE, SURE],
    "sentence",
)
FINAL = ([" So", " the", " answer", " is", " Pennsylvania", "."], [SURE] * 6, "stop")

#: FlareDirect().request_sha256() on the code before the production options existed (commit
#: 4383a6b; also bench/baselines/smoke.json's requests_sha256.flare_direct). Recompute on that
#: commit with `python -c "from flarebench.strategies.flare_direct import FlareDirect;
#: print(FlareDirect().request_sha256())"`; it must only move with a deliberate change of the
#: default request shape (and a remade smoke baseline).
DEFAULT_REQUEST_SHA256 = "f56b0d745ff1db57a7b5f97ea3cd7e1d0d395ab0add85b0f21deb76165e451b7"


def run(strategy, script, docs=(("a1", "a2", "a3"),)):
    lm, retriever = ScriptedLM(script), ScriptedRetriever([list(d) for d in docs])
    return strategy.run(QUESTION, lm, retriever), lm, retriever


def doc_ids(prompt):
    """The doc ids of a prompt's document lines, in order (titles are ``Doc <id>``)."""
    return [line.split(": ")[0].split("Doc ")[1] for line in prompt.dynamic.splitlines() if line.startswith("[")]


def regenerations(lm):
    return [r.prompt for r in lm.requests if r.purpose == "regenerate"]


# -- off by default: nothing moves ------------------------------------------------------------------------------


def test_defaults_keep_the_request_shape_the_parameters_and_the_records():
    default = FlareDirect()
    assert default.request_sha256() == DEFAULT_REQUEST_SHA256
    off = FlareDirect(query="implicit", new_docs=None, keep_last=None, placement="top")
    assert off.request_shape() == default.request_shape() and off.params() == default.params()
    assert {k: default.params()[k] for k in PRODUCTION_OFF} == PRODUCTION_OFF  # recorded, as every parameter
    spec = parse_spec("flare_direct:new_docs=none,keep_last=none,placement=top")
    assert json.dumps(spec.params()) == json.dumps(default.params())
    assert spec.request_sha256() == DEFAULT_REQUEST_SHA256
    assert FlareDirect(context="accumulate").request_sha256() == DEFAULT_REQUEST_SHA256


def test_defaults_send_the_prompts_and_queries_they_always_sent():
    script = [CONFIDENT, UNSURE_DRAFT, UNSURE_DRAFT, FINAL]
    docs = [("a1", "a2", "a3"), ("b1", "a2", "b3")]
    trace, lm, retriever = run(FlareDirect(), script, docs)
    assert retriever.queries == [QUESTION, "He attended the University of ."]
    first = [Passage(i, f"Doc {i}", f"Text of {i}.") for i in ("a1", "a2", "a3")]
    found = [Passage(i, f"Doc {i}", f"Text of {i}.") for i in ("b1", "a2", "b3")]
    answer = "".join(CONFIDENT[0])
    assert [r.prompt for r in lm.requests[:3]] == [
        OPEN_BOOK.build(QUESTION, first, ""),
        OPEN_BOOK.build(QUESTION, first, answer),
        OPEN_BOOK.build(QUESTION, found, answer),  # replaced, as the paper
    ]
    assert list(trace.retrievals[1].detail) == ["min_p", "low_tokens", "draft", "trigger", "score", "threshold"]
    assert [c.purpose for c in trace.lm_calls] == ["draft", "draft", "regenerate", "draft"]


# -- query=structured --------------------------------------------------------------------------------------------


def test_structured_query_is_one_lm_call_whose_reply_is_the_query():
    script = [CONFIDENT, UNSURE_DRAFT, "  Joe Biden university  ", UNSURE_DRAFT, FINAL]
    trace, lm, retriever = run(FlareDirect(query="structured"), script)
    step = trace.steps[1]
    assert [c.purpose for c in step.lm_calls] == ["draft", "query", "regenerate"]
    assert retriever.queries == [QUESTION, "Joe Biden university"]
    request = next(r for r in lm.requests if r.purpose == "query")
    assert request.prompt.static == SEARCH_PROMPT and request.stop == SEARCH_STOP
    assert request.max_tokens == SEARCH_TOKENS == 32
    passage = "Joe Biden studied law. He attended the University of Pennsylvania."
    assert request.prompt.dynamic == SEARCH_QUERY.format(question=QUESTION, passage=passage, span="Pennsylvania")
    detail = step.retrievals[0].detail
    assert detail["query_form"] == "structured" and detail["span"] == "Pennsylvania"


def test_an_empty_structured_reply_falls_back_to_the_masked_draft():
    script = [UNSURE_DRAFT, "", UNSURE_DRAFT, FINAL]
    trace, _, retriever = run(FlareDirect(query="structured"), script)
    assert [c.purpose for c in trace.steps[0].lm_calls] == ["draft", "query", "regenerate"]
    assert retriever.queries[1] == "He attended the University of ."
    assert trace.steps[0].retrievals[1].detail["query_form"] == "implicit"


def test_structured_query_is_in_the_request_shape_only_when_on():
    structured = FlareDirect(query="structured")
    assert SEARCH_PROMPT + SEARCH_QUERY in structured.request_shape()["prompts"]
    assert SEARCH_PROMPT in structured.static_prompts()
    assert structured.request_sha256() != DEFAULT_REQUEST_SHA256
    for other in (FlareDirect(), FlareDirect(query="explicit")):
        assert SEARCH_PROMPT + SEARCH_QUERY not in other.request_shape()["prompts"]
        assert SEARCH_PROMPT not in other.static_prompts()


# -- new_docs and keep_last ------------------------------------------------------------------------------------


def test_new_docs_adds_at_most_n_documents_not_yet_in_context():
    script = [UNSURE_DRAFT, UNSURE_DRAFT] * 3 + [FINAL]
    docs = [("a1", "a2", "a3"), ("a2", "b1", "b2"), ("a1", "a3", "a2"), ("c1", "c2", "b1")]
    trace, lm, _ = run(FlareDirect(context="accumulate", new_docs=1), script, docs)
    contexts = [doc_ids(p) for p in regenerations(lm)]
    assert contexts == [
        ["a1", "a2", "a3", "b1"],  # a2 is in context already: b1 is the one new document
        ["a1", "a2", "a3", "b1"],  # nothing new found: nothing added
        ["a1", "a2", "a3", "b1", "c1"],
    ]
    added = [r.detail["added"] for r in trace.retrievals[1:]]
    assert added == [["b1"], [], ["c1"]] and all(r.detail["dropped"] == [] for r in trace.retrievals[1:])
    _, lm, _ = run(FlareDirect(context="accumulate"), script, docs)  # without it: every new one
    assert doc_ids(regenerations(lm)[0]) == ["a1", "a2", "a3", "b1", "b2"]


def test_keep_last_keeps_the_first_hop_and_only_the_last_added():
    script = [UNSURE_DRAFT, UNSURE_DRAFT] * 3 + [FINAL]
    docs = [("a1", "a2", "a3"), ("b1", "b2", "b3"), ("c1", "c2", "c3"), ("d1", "a1", "d3")]
    trace, lm, _ = run(FlareDirect(context="accumulate", keep_last=2), script, docs)
    assert [doc_ids(p) for p in regenerations(lm)] == [
        ["a1", "a2", "a3", "b2", "b3"],
        ["a1", "a2", "a3", "c2", "c3"],
        ["a1", "a2", "a3", "d1", "d3"],  # a1 is first-hop: neither added again nor dropped
    ]
    assert trace.retrievals[2].detail["dropped"] == ["b2", "b3"]
    trace, lm, _ = run(FlareDirect(context="accumulate", new_docs=1, keep_last=2), script, docs)
    assert [doc_ids(p) for p in regenerations(lm)] == [
        ["a1", "a2", "a3", "b1"],
        ["a1", "a2", "a3", "b1", "c1"],
        ["a1", "a2", "a3", "c1", "d1"],  # b1, the oldest, slid out
    ]
    assert (trace.retrievals[3].detail["added"], trace.retrievals[3].detail["dropped"]) == (["d1"], ["b1"])
    _, lm, _ = run(FlareDirect(context="accumulate", keep_last=0), script, docs)
    assert all(doc_ids(p) == ["a1", "a2", "a3"] for p in regenerations(lm))  # retrievals add nothing


# -- placement=near_pause --------------------------------------------------------------------------------------


def test_near_pause_puts_new_documents_after_the_question_before_the_answer_so_far():
    script = [CONFIDENT, UNSURE_DRAFT, UNSURE_DRAFT, FINAL]
    docs = [("a1", "a2", "a3"), ("b1", "a2", "b3")]
    strategy = FlareDirect(context="accumulate", placement="near_pause")
    trace, lm, _ = run(strategy, script, docs)
    draft, again = lm.requests[1].prompt, lm.requests[2].prompt
    assert again.static == draft.static == OPEN_BOOK.static  # the static part is unchanged
    answer = "".join(CONFIDENT[0])
    top = "Documents:\n[1] Doc a1: Text of a1.\n[2] Doc a2: Text of a2.\n[3] Doc a3: Text of a3.\n"
    assert draft.dynamic == f"{top}Question: {QUESTION}\nAnswer:{answer}"
    late = "Documents:\n[4] Doc b1: Text of b1.\n[5] Doc b3: Text of b3.\n"
    assert again.dynamic == f"{top}Question: {QUESTION}\n{late}Answer:{answer}"
    # Only the answer so far, after the insertion point, is evaluated again.
    detail = trace.retrievals[1].detail
    assert detail["placement"] == "near_pause" and detail["reeval_chars"] == len("Answer:" + answer)
    # On top (accumulate alone) the new documents join the top block: the question and answer are re-read.
    _, lm, _ = run(FlareDirect(context="accumulate"), script, docs)
    top_again = lm.requests[2].prompt.dynamic
    assert top_again.startswith(top + "[4] Doc b1") and top_again.endswith(f"Question: {QUESTION}\nAnswer:{answer}")


def test_near_pause_with_keep_last_keeps_the_prefix_up_to_the_question():
    script = [UNSURE_DRAFT, UNSURE_DRAFT] * 2 + [FINAL]
    docs = [("a1", "a2", "a3"), ("b1", "b2", "b3"), ("c1", "c2", "c3")]
    strategy = FlareDirect(context="accumulate", new_docs=1, keep_last=1, placement="near_pause")
    _, lm, _ = run(strategy, script, docs)
    prefix = lm.requests[0].prompt.dynamic.split("Answer:")[0]
    for prompt in regenerations(lm):
        assert prompt.dynamic.startswith(prefix)
    assert [doc_ids(p)[3:] for p in regenerations(lm)] == [["b1"], ["c1"]]


def test_prompt_template_late_documents():
    t = PromptTemplate()
    docs = [Passage("a", "Doc A", "text a")]
    assert t.build("Q?", docs, " So far.", late_docs=[]) == t.build("Q?", docs, " So far.")
    p = t.build("Q?", docs, " So far.", late_docs=[Passage("b", "Doc B", "text b")])
    assert p.static == t.static
    assert p.dynamic == "Documents:\n[1] Doc A: text a\nQuestion: Q?\nDocuments:\n[2] Doc B: text b\nAnswer: So far."
    assert t.sample() == Strategy.request_shape(FlareDirect())["prompts"][0]
    near = FlareDirect(context="accumulate", placement="near_pause")
    assert t.sample(late_docs=True) in near.request_shape()["prompts"]
    assert near.request_sha256() != FlareDirect(context="accumulate").request_sha256()


# -- validation and records ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "setting, message",
    [
        ("new_docs=1", "new_docs=1 needs context=accumulate"),
        ("keep_last=2", "keep_last=2 needs context=accumulate"),
        ("placement=near_pause", "placement=near_pause needs context=accumulate"),
        ("context=accumulate,new_docs=0", r"new_docs must be within \[1, k=3\]"),
        ("context=accumulate,new_docs=4", r"new_docs must be within \[1, k=3\]"),
        ("context=accumulate,keep_last=-1", r"keep_last must be within \[0, 6\]"),
        ("context=accumulate,keep_last=7", r"keep_last must be within \[0, 6\]"),
        ("placement=middle", "placement must be one of top, near_pause"),
        ("query=search", "query must be one of implicit, explicit, structured"),
        ("query=structured,trigger=self_check", "query=structured does not apply with trigger=self_check"),
    ],
)
def test_bad_values_and_combinations_are_refused_naming_the_parameter(setting, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(f"flare_direct:{setting}")


def test_options_that_are_on_are_recorded():
    on = parse_spec("flare_direct:context=accumulate,new_docs=2,keep_last=0,placement=near_pause,query=structured")
    assert {k: on.params()[k] for k in ("new_docs", "keep_last", "placement", "query")} == {
        "new_docs": 2,
        "keep_last": 0,
        "placement": "near_pause",
        "query": "structured",
    }
    assert parse_spec("flare_direct:context=accumulate,first_retrieval=false,keep_last=9").keep_last == 9
    with pytest.raises(SpecError, match=r"keep_last must be within \[0, 12\] or none \(max_docs 12 less 0"):
        parse_spec("flare_direct:context=accumulate,first_retrieval=false,max_docs=12,keep_last=13")
    with pytest.raises(ValueError, match="placement must be 'top' or 'near_pause'"):
        FlareDirect(context="accumulate", placement="bottom")
