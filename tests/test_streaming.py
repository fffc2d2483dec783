"""The streaming scorer (bench/scorers/streaming.py): time to the first shown sentence and the longest
stall between two, on hand-built traces with chosen seconds and tokens (no model), and on traces of
the strategies themselves (scripted LM) to check that the model reads their records as they make
them. Every number is worked out by hand; seconds are binary fractions, so most compare exactly."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
import pytest

from flarebench.bench.metrics import probe_row, summarize
from flarebench.bench.scorers.streaming import events, sentence_times, shown_text, streaming_row
from flarebench.strategies.flare_instruct import SEARCH_CALL_RE
from flarebench.strategies.records import (
    FIRST_HOP,
    IRCOT_STEP,
    LOW_CONFIDENCE,
    SEARCH_CALL,
    LMCall,
    Retrieval,
    Step,
    Trace,
)
from flarebench.strategies.registry import parse_spec
from tests.scripted import ScriptedLM, ScriptedRetriever

ALPHA = [" Alpha", " is", " one", "."]
BETA = [" Beta", " is", " two", "."]
ANSWER = [" So", " the", " answer", " is", " one", "."]


@dataclass
class FakeProbe:
    id: str
    question: str = "q?"
    answers: list[str] = field(default_factory=lambda: ["one"])
    answer_type: str = "single"
    gold_doc_ids: list[str] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)


def call(tokens, seconds=1.0, completion=None, purpose="generate", text=None):
    """A call that generated ``tokens`` (and ``completion - len(tokens)`` more, cut off its text)."""
    return LMCall(
        purpose=purpose,
        prompt_tokens=10,
        evaluated_tokens=10,
        completion_tokens=len(tokens) if completion is None else completion,
        text="".join(tokens) if text is None else text,
        finish_reason="stop",
        seconds=seconds,
        tokens=list(tokens),
    )


def ret(reason=FIRST_HOP, seconds=0.5):
    return Retrieval(query="q", reason=reason, doc_ids=["d1"], seconds=seconds)


def trace(steps, probe_id="p1", strategy="s", error=None):
    output = "".join(s.text for s in steps).strip()
    return Trace("q?", output, None, "eos", steps, probe_id=probe_id, strategy=strategy, error=error)


def values(t):
    return streaming_row(t, None, {})


# ---------------------------------------------------------------- the timeline of one answer


def test_one_call_answer_ttfs_is_first_hop_plus_the_first_sentence_share_of_the_call():
    # single_time: first hop 0.5 s, then one 4 s call of 16 tokens, 14 of them in the text
    # (two more generated past the stop): sentence ends at tokens 4, 8 and 14.
    c = call(ALPHA + BETA + ANSWER, seconds=4.0, completion=16)
    t = trace([Step(c.text, [c], [ret(FIRST_HOP, 0.5)])])
    assert sentence_times(t) == [0.5 + 4.0 * 4 / 16, 0.5 + 4.0 * 8 / 16, 0.5 + 4.0 * 14 / 16] == [1.5, 2.5, 4.0]
    assert values(t) == {"ttfs_s": 1.5, "stall_s": 1.5}  # the wait from the 2nd sentence end to the 3rd


def test_a_recorded_prefill_comes_before_the_first_token():
    # The same call with 2 of its 4 s evaluating the prompt: the tokens share the other 2 s.
    c = call(ALPHA + BETA + ANSWER, seconds=4.0, completion=16)
    c.prefill_seconds = 2.0
    t = trace([Step(c.text, [c], [ret(FIRST_HOP, 0.5)])])
    assert sentence_times(t) == [0.5 + 2.0 + 2.0 * 4 / 16, 0.5 + 2.0 + 2.0 * 8 / 16, 0.5 + 2.0 + 2.0 * 14 / 16]
    assert values(t) == {"ttfs_s": 3.0, "stall_s": 0.75}


def test_a_step_whose_strategy_tidied_the_calls_whitespace_is_timed_by_the_call():
    # self_ask joins a turn as one space-led line: the call wrote "\nAlpha one.\n  Beta two.", the
    # answer shows " Alpha one. Beta two."; the first sentence ends in the call's 2nd token of 4.
    c = call(["\nAlpha", " one.", "\n  Beta", " two."], seconds=4.0)
    t = trace([Step(" Alpha one. Beta two.", [c])])
    assert sentence_times(t) == [2.0, 4.0]  # not both at the call's end


def test_flare_direct_stall_spans_the_draft_the_retrieval_and_the_regeneration():
    # Step 1: first hop 0.25, a draft of 1.25 s that generated 5 tokens, 4 of them the sentence
    # (the fifth began the next sentence): accepted at 0.25 + 1.25 * 4/5 = 1.25; the step ends at 1.5.
    # Step 2: the gate fired: a draft of 1 s (never shown), a retrieval of 0.5 s, a regeneration of 2 s.
    draft1 = call(ALPHA, seconds=1.25, completion=5, purpose="draft")
    draft2 = call([" Beta", " is", " three", "."], seconds=1.0, purpose="draft")
    regen = call(BETA, seconds=2.0, purpose="regenerate")
    t = trace(
        [
            Step(draft1.text, [draft1], [ret(FIRST_HOP, 0.25)]),
            Step(regen.text, [draft2, regen], [ret(LOW_CONFIDENCE, 0.5)]),
        ]
    )
    assert events(t.steps[1]) == [draft2, t.steps[1].retrievals[0], regen]
    assert sentence_times(t) == [1.25, 5.0]
    # 0.25 (the rest of draft 1) + 1 (draft 2) + 0.5 (retrieval) + 2 (regeneration)
    assert values(t) == {"ttfs_s": 1.25, "stall_s": 3.75}
    assert shown_text(t)[0] == " Alpha is one. Beta is two."  # the fired draft is never shown


def test_a_reranked_retrieval_takes_its_rerank_calls_time_too():
    # --rerank lm: the first hop's search took 0.5 s and two reranking calls 0.75 s each, so the
    # answer's 4 s call starts at 2 s (not 0.5 s) and its first sentence ends at 2 + 4 * 4/8.
    first_hop = ret(FIRST_HOP, 0.5)
    first_hop.lm_calls = [call([" Yes"], seconds=0.75, purpose="rerank") for _ in range(2)]
    c = call(ALPHA + BETA, seconds=4.0)
    t = trace([Step(c.text, [c], [first_hop])])
    assert sentence_times(t) == [4.0, 6.0]
    assert values(t) == {"ttfs_s": 4.0, "stall_s": 2.0}


def test_flare_direct_retrievals_during_a_step_come_after_its_draft_and_queries():
    draft, query = call(ALPHA, purpose="draft"), call([" Who?"], purpose="query")
    regen = call(ALPHA, purpose="regenerate")
    hop, low = ret(FIRST_HOP), ret(LOW_CONFIDENCE)
    assert events(Step("x", [draft, query, regen], [hop, low])) == [hop, draft, query, low, regen]
    # A kept draft whose explicit queries yielded nothing to search with: shown once they are done.
    t = trace([Step(draft.text, [draft, query], [ret(FIRST_HOP, 0.5)])])
    assert sentence_times(t) == [2.5]


def test_ircot_reader_chain_of_thought_is_waiting_time_and_the_reader_is_shown():
    cot1, cot2 = call(ALPHA, purpose="cot"), call(ANSWER, purpose="cot")
    # The reader: 8 tokens, the first sentence ends at the 2nd, the second at the 8th.
    reader = call([" One is it", ".", " So", " the", " answer", " is", " one", "."], seconds=2.0, purpose="reader")
    t = trace(
        [
            Step(cot1.text, [cot1], [ret(FIRST_HOP, 0.5)]),
            Step(cot2.text, [cot2], [ret(IRCOT_STEP, 0.25)]),
            Step(reader.text, [reader]),
        ]
    )
    assert shown_text(t)[0] == reader.text
    # The reader starts at 0.5 + 1 + 0.25 + 1 = 2.75.
    assert sentence_times(t) == [2.75 + 2.0 * 2 / 8, 2.75 + 2.0] == [3.25, 4.75]
    assert values(t) == {"ttfs_s": 3.25, "stall_s": 1.5}


def test_flare_instruct_search_calls_are_not_sentences():
    # Step 1's call wrote a sentence and a search call (stopped at ")]", which the strategy closes);
    # the retrieval for it comes first in step 2, whose call writes the next sentence.
    c1 = call(ALPHA + [" [", "Search", "(", "who is Beta"], seconds=2.0)
    c2 = call(BETA + [" So the answer is two", "."], seconds=1.0, completion=8)
    t = trace(
        [
            Step(c1.text + ")]", [c1], [ret(FIRST_HOP, 0.5)]),
            Step(c2.text, [c2], [ret(SEARCH_CALL, 0.25)]),
        ]
    )
    text, times = shown_text(t)
    assert "[Search" not in text and "Search" in t.output and len(text) == len(times)
    # 0.5 + 2 * 4/8; 0.5 + 2 + 0.25 + 1 * 4/8; + 1 * 6/8
    assert sentence_times(t) == [1.5, 3.25, 3.5]
    # An answer cut by the token cap right after a search call: the call is no sentence, so the
    # answer has one sentence and no stall (the unfinished call would otherwise be a second one).
    cut = trace([Step(c1.text + ")]", [c1], [ret(FIRST_HOP, 0.5)])])
    assert values(cut) == {"ttfs_s": 1.5, "stall_s": None}


@pytest.mark.parametrize(
    "text, shown",
    [
        (" A. [Search(x y)] B.", " A.   B."),
        (" A. [Search(x)] B. [Search(z)]", " A.   B.  "),
        (" A. [Search(cut short", " A.  "),  # cut by the token cap before it closed
        (" A. [Search(x)]\nB.", " A.  \nB."),
    ],
)
def test_search_call_pattern(text, shown):
    assert SEARCH_CALL_RE.sub(" ", text) == shown


def test_fixed_interval_windows_a_sentence_ends_in_the_window_that_completes_it():
    # Two windows of 4 tokens, 1 s each, a retrieval of 0.5 s before each; the first sentence ends
    # in the second window, at its 2nd token.
    w1 = call([" Alpha", " is", " the", " first"])
    w2 = call([" one", ".", " Beta", " is"])
    w3 = call([" two", "."])
    t = trace(
        [
            Step(w1.text, [w1], [ret(FIRST_HOP, 0.5)]),
            Step(w2.text, [w2], [ret("fixed_interval", 0.5)]),
            Step(w3.text, [w3], [ret("fixed_interval", 0.5)]),
        ]
    )
    assert sentence_times(t) == [2.5, 4.5]  # 0.5 + 1 + 0.5 + 1 * 2/4; 3.5 + 1 * 2/2
    assert values(t) == {"ttfs_s": 2.5, "stall_s": 2.0}


def test_text_the_strategy_wrote_itself_is_shown_when_its_step_ends():
    # An abstention (flare_direct with abstain on): the draft's text is not the step's.
    draft = call(ALPHA, seconds=2.0, purpose="draft")
    t = trace([Step(" I am not confident enough to answer this question.", [draft], [ret(FIRST_HOP, 0.5)])])
    assert values(t) == {"ttfs_s": 2.5, "stall_s": None}


def test_a_call_without_tokens_is_spread_over_its_characters():
    c = LMCall("generate", 1, 1, 4, " Alpha is one. Beta is two.", "stop", 2.0)  # 27 characters
    t = trace([Step(c.text, [c])])
    assert sentence_times(t) == [pytest.approx(2.0 * 14 / 27), 2.0]


@pytest.mark.parametrize(
    "t",
    [
        trace([Step("", [call([], seconds=1.0)], [ret()])]),  # an empty output
        trace([Step("  \n", [call(["  \n"])])]),  # nothing but whitespace
        trace([]),  # no step at all
        Trace("q?", "", None, "error", error="RuntimeError: boom (x.py:1)"),  # the runner's error trace
        trace([Step(" Alpha is one.", [call(ALPHA)])], error="RuntimeError: late"),  # raised after writing
    ],
)
def test_no_sentence_no_values(t):
    assert sentence_times(t) == []
    assert values(t) == {"ttfs_s": None, "stall_s": None}


# ---------------------------------------------------------------- the strategies' own records


def _timed(t: Trace, lm_s=1.0, retrieval_s=0.5) -> Trace:
    """The scripted trace with chosen seconds (a scripted LM and retriever take real, tiny ones)."""
    for c in t.lm_calls:
        c.seconds = lm_s
    for r in t.retrievals:
        r.seconds = retrieval_s
    return t


UNSURE = ([*ALPHA], [0.95, 0.95, 0.1, 0.95], "sentence")
SURE_END = ([*ANSWER], [0.95] * 6, "stop")


def test_flare_direct_as_run():
    lm, retriever = ScriptedLM([UNSURE, UNSURE, SURE_END]), ScriptedRetriever([["d1"]])
    t = _timed(parse_spec("flare_direct").run("q?", lm, retriever))
    assert [[c.purpose for c in s.lm_calls] for s in t.steps] == [["draft", "regenerate"], ["draft"]]
    # first hop 0.5, draft 1, retrieval 0.5, regeneration 1 -> 3; then the next draft -> 4
    assert values(t) == {"ttfs_s": 3.0, "stall_s": 1.0}


def test_single_time_and_no_retrieval_as_run():
    for spec, ttfs in (("single_time", 0.5 + 4 / 10), ("no_retrieval", 4 / 10)):
        lm = ScriptedLM([(ALPHA + ANSWER, [0.9] * 10)])
        t = _timed(parse_spec(spec).run("q?", lm, ScriptedRetriever([["d1"]])))
        assert values(t) == {"ttfs_s": pytest.approx(ttfs), "stall_s": pytest.approx(6 / 10)}


def test_ircot_reader_as_run():
    script = [(ALPHA, [0.9] * 4, "sentence"), (ANSWER, [0.9] * 6), (BETA + ANSWER, [0.9] * 10)]
    lm, retriever = ScriptedLM(script), ScriptedRetriever([["a1"], ["b1"]])
    t = _timed(parse_spec("ircot:reader=on").run("q?", lm, retriever))
    assert t.steps[-1].lm_calls[0].purpose == "reader"
    # first hop, cot, retrieval, cot: 3 s; then the reader's sentences at 4/10 and 10/10 of 1 s
    assert values(t) == {"ttfs_s": pytest.approx(3.4), "stall_s": pytest.approx(0.6)}


def test_flare_instruct_as_run():
    script = [(ALPHA + [" [Search(", "Beta"], [0.9] * 6), (BETA + ANSWER, [0.9] * 10)]
    t = _timed(parse_spec("flare_instruct").run("q?", ScriptedLM(script), ScriptedRetriever([["d1"], ["e1"]])))
    assert [r.reason for r in t.retrievals] == [FIRST_HOP, SEARCH_CALL]
    # 0.5 + 4/6; 0.5 + 1 + 0.5 + 4/10; 3 (the end of the second call)
    assert sentence_times(t) == [pytest.approx(0.5 + 4 / 6), pytest.approx(2.4), 3.0]


# ---------------------------------------------------------------- the summary columns


def _summary(traces):
    rows = pd.DataFrame([probe_row(t, FakeProbe(t.probe_id)) for t in traces])
    return summarize(rows).iloc[0]


def test_percentiles_over_the_answers_that_have_a_value():
    one = [call([" Alpha is one."], seconds=x) for x in (1.0, 2.0, 3.0, 4.0, 10.0)]
    traces = [trace([Step(c.text, [c])], probe_id=f"p{i}") for i, c in enumerate(one)]
    traces += [trace([Step("", [call([])])], probe_id="empty")]  # no sentence: left out, not 0
    traces += [trace([Step(" Alpha is one.", [call(ALPHA)])], probe_id="bad", error="boom")]
    s = _summary(traces)
    assert s["ttfs_p50_s"] == 3.0
    assert s["ttfs_p95_s"] == pytest.approx(8.8)  # 4 + 0.8 * (10 - 4)
    assert pd.isna(s["stall_p95_s"])  # no answer has two sentences: empty, never 0


def test_stall_p95_over_answers_with_two_sentences_only():
    two = [call(ALPHA + BETA, seconds=x) for x in (2.0, 4.0)]  # stalls 1 and 2
    traces = [trace([Step(c.text, [c])], probe_id=f"p{i}") for i, c in enumerate(two)]
    traces += [trace([Step(" Alpha is one.", [call(ALPHA, seconds=8.0)])], probe_id="one")]
    s = _summary(traces)
    assert s["stall_p95_s"] == pytest.approx(1.95)  # 1 + 0.95 * (2 - 1); the one-sentence answer left out
    assert (s["ttfs_p50_s"], s["ttfs_p95_s"]) == (2.0, pytest.approx(7.4))  # over 1, 2, 8: 2 + 0.9 * (8 - 2)


def test_no_answer_with_a_sentence_leaves_every_column_empty():
    s = _summary([trace([], probe_id="p1"), trace([Step("", [call([])])], probe_id="p2")])
    assert all(pd.isna(s[c]) for c in ("ttfs_p50_s", "ttfs_p95_s", "stall_p95_s"))
