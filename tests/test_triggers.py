"""FLARE direct's triggers (strategies/triggers.py) with a scripted LM: each fires exactly where its
definition says, what it records, the ignore options, self_check's replies, and that the default
spec is the one it always was."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import pytest

from flarebench.bench.cache import CachedLM, DiskCache, _key
from flarebench.bench.confidence import gate_record, gate_summary
from flarebench.bench.runner import StrategyRefused, check_compatible
from flarebench.strategies.base import Strategy
from flarebench.strategies.flare_direct import ABSTENTION, QUESTION_PROMPT, QUESTION_QUERY, QUESTION_STOP, FlareDirect
from flarebench.strategies.lm import LMError, Prompt, topk_entropy
from flarebench.strategies.records import LOW_CONFIDENCE, LMCall, Step, Trace
from flarebench.strategies.registry import SpecError, parse_spec
from flarebench.strategies.triggers import fires_high, names, parse_self_check, top_margin
from flarebench.strategies.triggers import get as get_trigger
from tests.scripted import ScriptedLM, ScriptedRetriever

SURE = 0.95
QUESTION = "Where did Joe Biden study?"
_SURE_TOP = {"top": [[["x", SURE], ["y", 0.01]]] * 6, "entropies": [0.1] * 6}
FINAL = ([" So", " the", " answer", " is", " Penn", "."], [SURE] * 6, "stop", _SURE_TOP)


def draft(tokens, probs, **extra):
    """A drafted sentence that more sentences may follow; ``extra``: per-token ``top`` or ``entropies``."""
    return (tokens, probs, "sentence", extra) if extra else (tokens, probs, "sentence")


def run(spec, script, docs=(("d1", "d2", "d3"),), lm=None):
    strategy = parse_spec(spec) if isinstance(spec, str) else spec
    lm = lm or ScriptedLM(script)
    retriever = ScriptedRetriever([list(d) for d in docs])
    return strategy.run(QUESTION, lm, retriever), lm, retriever


def first_gate(spec, item):
    trace, _, _ = run(spec, [item, item, FINAL])
    return trace.steps[0].gate, trace


# -- the probability triggers, at their boundaries ---------------------------------------------------


@pytest.mark.parametrize(("threshold", "fires"), [(0.3, True), (0.29, False)])
def test_min_prob_fires_at_or_below_the_threshold(threshold, fires):
    gate, trace = first_gate(f"flare_direct:threshold={threshold}", draft([" A", " b", "."], [0.9, 0.3, 0.99]))
    assert gate == {"trigger": "min_prob", "score": pytest.approx(0.3), "threshold": threshold, "fired": fires}
    assert trace.steps[0].triggered == fires


def test_mean_logprob_fires_at_or_below_tau():
    probs = [0.5, 0.25, 0.125]
    mean = sum(math.log(p) for p in probs) / 3  # -ln 4 = -1.386
    item = draft([" A", " b", "."], probs)
    gate, trace = first_gate(f"flare_direct:trigger=mean_logprob,threshold={mean!r}", item)
    assert gate["score"] == pytest.approx(-math.log(4)) and gate["fired"] and trace.steps[0].triggered
    gate, trace = first_gate(f"flare_direct:trigger=mean_logprob,threshold={mean - 1e-9!r}", item)
    assert not gate["fired"] and not trace.steps[0].triggered
    # the default tau: -1.4, just below this draft's mean
    assert first_gate("flare_direct:trigger=mean_logprob", item)[0]["threshold"] == -1.4


def test_entropy_fires_at_or_above_h_on_the_highest_token_entropy():
    item = draft([" A", " b", "."], [0.9, 0.4, 0.99], entropies=[0.3, 1.75, 0.1])
    gate, trace = first_gate("flare_direct:trigger=entropy,threshold=1.75", item)
    assert gate == {"trigger": "entropy", "score": 1.75, "threshold": 1.75, "fired": True}
    detail = trace.retrievals[1].detail
    assert detail["flagged"] == [[" b", 1.75]] and (detail["trigger"], detail["threshold"]) == ("entropy", 1.75)
    gate, trace = first_gate("flare_direct:trigger=entropy,threshold=1.76", item)
    assert not gate["fired"] and not trace.steps[0].triggered


def test_entropy_from_a_truncated_top_k_counts_the_remaining_mass_as_one_outcome():
    # Top two 0.5 and 0.25, 0.25 left: H = -(0.5 ln 0.5 + 0.25 ln 0.25 + 0.25 ln 0.25) = 1.5 ln 2.
    assert topk_entropy([math.log(0.5), math.log(0.25)]) == pytest.approx(1.5 * math.log(2))
    assert topk_entropy([math.log(0.5), math.log(0.5)]) == pytest.approx(math.log(2))  # nothing left
    assert topk_entropy([0.0]) == 0.0
    # A server's backend: only the top logprobs come back, and the entropy is bounded from them.
    top = [[[" A", 0.9], [" a", 0.05]], [[" b", 0.5], [" c", 0.25]], [[".", 0.99], ["!", 0.01]]]
    item = draft([" A", " b", "."], [0.9, 0.5, 0.99], top=top)
    gate, _ = first_gate("flare_direct:trigger=entropy,threshold=1.0", item)
    assert gate["score"] == pytest.approx(1.5 * math.log(2)) and gate["fired"]


def test_margin_fires_at_or_below_the_gap_between_the_top_two():
    top = [[[" A", 0.9], [" a", 0.05]], [[" b", 0.6], [" c", 0.3]], [[".", 0.99], ["!", 0.01]]]
    item = draft([" A", " b", "."], [0.9, 0.6, 0.99], top=top)
    gap = top_margin([[t, math.log(p)] for t, p in top[1]])
    assert gap == pytest.approx(0.3)
    gate, trace = first_gate(f"flare_direct:trigger=margin,threshold={gap!r}", item)
    assert gate["score"] == gap and gate["fired"]
    draft_request = trace.steps[0].lm_calls[0]
    assert draft_request.top_logprobs is not None and len(draft_request.top_logprobs[0]) == 2
    gate, _ = first_gate(f"flare_direct:trigger=margin,threshold={gap - 1e-9!r}", item)
    assert not gate["fired"]
    # One alternative only: the runner-up is taken to hold all the rest (a lower bound of the gap).
    assert top_margin([["a", math.log(0.7)]]) == pytest.approx(0.4)


def test_each_trigger_asks_for_what_it_needs_and_nothing_else():
    top = [[[" A", 0.9], [" a", 0.05]], [[".", 0.99], ["!", 0.01]]]
    item = draft([" A", "."], [0.9, 0.99], top=top, entropies=[0.1, 0.1])
    asked = {}
    for trigger in names():
        script = (
            [item, '{"needs_fact": false}', FINAL, '{"needs_fact": false}']
            if trigger == "self_check"
            else [item, FINAL]
        )
        _, lm, _ = run(f"flare_direct:trigger={trigger}", script)
        r = lm.requests[0]
        asked[trigger] = (r.logprobs, r.top_logprobs, r.entropy)
    assert asked == {
        "min_prob": (True, 0, False),
        "mean_logprob": (True, 0, False),
        "entropy": (True, 0, True),
        "margin": (True, 2, False),
        "self_check": (False, 0, False),
    }


# -- self_check ----------------------------------------------------------------------------------------


def test_self_check_fires_on_needs_fact_and_searches_for_what_is_missing():
    item = draft([" Biden", " studied", " law", "."], [SURE] * 4)
    reply = 'JSON: {"needs_fact": true, "missing": "where Joe Biden studied law"}'
    lm = ScriptedLM([item, reply, item, '{"needs_fact": false, "missing": ""}', FINAL], supports_logprobs=False)
    trace, lm, retriever = run("flare_direct:trigger=self_check", None, lm=lm)
    first = trace.steps[0]
    assert [c.purpose for c in first.lm_calls] == ["draft", "self_check", "regenerate"]
    assert first.gate == {
        "trigger": "self_check",
        "score": 1.0,
        "threshold": None,
        "fired": True,
        "missing": "where Joe Biden studied law",
    }
    assert retriever.queries == [QUESTION, "where Joe Biden studied law"]
    detail = trace.retrievals[1].detail
    assert trace.retrievals[1].reason == LOW_CONFIDENCE
    assert (detail["trigger"], detail["score"], detail["threshold"]) == ("self_check", 1.0, None)
    # The check sees the documents, the question, the answer so far and the draft.
    check = lm.requests[1].prompt.dynamic
    assert check.startswith("Documents:\n[1] Doc d1") and f"Question: {QUESTION}\n" in check
    assert check.endswith("Next sentence: Biden studied law.\nJSON:")
    assert trace.steps[1].gate["fired"] is False and not trace.steps[1].triggered


def test_self_check_with_an_empty_missing_searches_with_the_draft():
    item = draft([" Biden", " studied", " law", "."], [SURE] * 4)
    trace, _, retriever = run("flare_direct:trigger=self_check", [item, '{"needs_fact": true}', item, FINAL])
    assert retriever.queries[1] == "Biden studied law." and trace.steps[0].gate["missing"] == ""


def test_a_step_judged_by_self_check_ends_for_the_reason_of_its_draft_not_of_the_check():
    # The draft runs into the token cap; the check after it stops normally: the answer is cut, not ended.
    capped = ([" Biden", " studied", " law", " at"], [SURE] * 4, "length")
    for spec in ("flare_direct:trigger=self_check,max_tokens=4", "adaptive:trigger=self_check,max_tokens=4"):
        trace, lm, _ = run(spec, [capped, '{"needs_fact": false}'])
        assert [c.purpose for c in trace.steps[-1].lm_calls][-1] == "self_check"
        assert trace.stop_reason == "token_cap", spec


@pytest.mark.parametrize(
    "reply",
    ["yes, it needs a fact", '{"needs_fact": "yes"}', '{"needs_fact": true, "missing": 3}', '{"needs_fact'],
)
def test_an_unparseable_self_check_reply_is_counted_and_retrieves_nothing(reply):
    item = draft([" Biden", " studied", " law", "."], [SURE] * 4)
    trace, _, retriever = run("flare_direct:trigger=self_check", [item, reply, FINAL, '{"needs_fact": false}'])
    gate = trace.steps[0].gate
    assert gate["unparsed"] is True and gate["fired"] is False and gate["score"] is None
    assert gate["reply"] == reply
    assert retriever.queries == [QUESTION] and trace.answer == "Penn"
    assert parse_self_check(reply) is None


def test_self_check_parses_the_first_json_object_of_a_reply():
    assert parse_self_check('```json\n{"needs_fact": true, "missing": " a  b "}\n```') == (True, "a b")
    assert parse_self_check('{"needs_fact": false, "missing": null} and more') == (False, "")


def test_self_check_runs_where_the_lm_returns_no_logprobs():
    no_logprobs = ScriptedLM(["x"], supports_logprobs=False)
    check_compatible("flare_direct:trigger=self_check", parse_spec("flare_direct:trigger=self_check"), no_logprobs)
    with pytest.raises(StrategyRefused, match="would run on it: .*flare_direct:trigger=self_check"):
        check_compatible("flare_direct", parse_spec("flare_direct"), no_logprobs)
    no_top = ScriptedLM(["x"])
    no_top.supports_top_logprobs = False
    for trigger in ("entropy", "margin"):
        with pytest.raises(StrategyRefused, match="needs per-token top logprobs"):
            check_compatible(f"flare_direct:trigger={trigger}", parse_spec(f"flare_direct:trigger={trigger}"), no_top)
    check_compatible("flare_direct:trigger=mean_logprob", parse_spec("flare_direct:trigger=mean_logprob"), no_top)


# -- ignore_terms and ignore_known -----------------------------------------------------------------------


NAME = draft([" Z", "ylox", "ar", " is", " in", " Penn", "."], [0.1, 0.2, 0.3, SURE, SURE, 0.5, SURE])


def test_ignore_terms_keeps_listed_terms_from_firing(tmp_path):
    terms = tmp_path / "terms.txt"
    terms.write_text("# internal code names\nzyloxar\n\nquill pay\n", encoding="utf-8")
    gate, trace = first_gate(f"flare_direct:ignore_terms={terms},threshold=0.4", NAME)
    # Z, ylox, ar are the listed name's pieces: ignored; " Penn" (0.5) is the lowest left.
    assert gate == {"trigger": "min_prob", "score": 0.5, "threshold": 0.4, "fired": False, "ignored": 3}
    assert not trace.steps[0].triggered
    gate, trace = first_gate(f"flare_direct:ignore_terms={terms},threshold=0.5", NAME)
    assert gate["fired"] and trace.retrievals[1].detail["low_tokens"] == [[" Penn", 0.5]]
    # The ignored tokens stay in the query as if confident (else Z, ylox, ar, below beta, are masked).
    assert trace.retrievals[1].query == "Zyloxar is in Penn."
    _, trace = first_gate("flare_direct:threshold=0.5", NAME)
    assert trace.retrievals[1].query == "is in Penn."
    gate, _ = first_gate("flare_direct:threshold=0.4", NAME)  # without the list it fires
    assert gate["fired"] and "ignored" not in gate


def test_ignore_terms_matches_whole_words_and_punctuated_terms(tmp_path):
    terms = tmp_path / "terms.txt"
    terms.write_text("quillpay:2.7.1\nZylo\n", encoding="utf-8")
    tokens = [" quill", "pay", ":", "2", ".", "7", ".", "1", " Z", "ylox", "ar", "."]
    item = draft(tokens, [0.1] * 11 + [SURE])
    gate, _ = first_gate(f"flare_direct:trigger=mean_logprob,ignore_terms={terms}", item)
    assert gate["ignored"] == 8  # the whole punctuated term; "Zylo" is not a word of "Zyloxar"
    assert gate["score"] == pytest.approx((3 * math.log(0.1) + math.log(SURE)) / 4)


def test_ignore_known_keeps_words_of_the_question_and_documents_from_firing():
    # "did" and "study" are words of the question (any case); Z-ylox-ar of nothing.
    item = draft([" Z", "ylox", "ar", " DID", " study", " Penn", "."], [0.3, SURE, SURE, 0.2, 0.2, 0.1, SURE])
    gate, _ = first_gate("flare_direct:ignore_known=true,threshold=0.25", item)
    assert gate["ignored"] == 2 and gate["score"] == pytest.approx(0.1) and gate["fired"]
    # With a document about "Penn" in context (the first hop found it), " Penn" is known too.
    trace, _, _ = run("flare_direct:ignore_known=true,threshold=0.25", [item, item, FINAL], docs=[["Penn"]])
    gate = trace.steps[0].gate
    assert gate["ignored"] == 3 and gate["score"] == pytest.approx(0.3) and not gate["fired"]
    assert first_gate("flare_direct:threshold=0.25", item)[0]["score"] == pytest.approx(0.1)


def test_the_ignore_list_is_read_once_and_its_hash_is_the_config(tmp_path):
    terms = tmp_path / "terms.txt"
    terms.write_text("Zyloxar\n", encoding="utf-8")
    strategy = parse_spec(f"flare_direct:ignore_terms={terms}")
    before = strategy.request_sha256()
    terms.unlink()
    trace, _, _ = run(strategy, [NAME, NAME, FINAL])  # no file read while answering
    assert trace.steps[0].gate["ignored"] == 3
    terms.write_text("Zyloxar\nPenn\n", encoding="utf-8")
    assert parse_spec(f"flare_direct:ignore_terms={terms}").request_sha256() != before
    assert strategy.params()["ignore_terms"] == str(terms)


# -- parameters and their errors ---------------------------------------------------------------------------


def test_trigger_parameters_are_validated_with_clear_messages(tmp_path):
    with pytest.raises(
        SpecError,
        match=r"unknown trigger 'foo'; known: min_prob, mean_logprob, entropy, margin, self_check "
        r"\(a plugin's trigger needs --plugin MODULE\|FILE\.py, or its package installed\)$",
    ):
        parse_spec("flare_direct:trigger=foo")
    with pytest.raises(SpecError, match=r"threshold of trigger entropy \(.*\) must be within \[0, inf\), got -1"):
        parse_spec("flare_direct:trigger=entropy,threshold=-1")
    with pytest.raises(SpecError, match=r"threshold of trigger mean_logprob \(.*\) must be within \(-inf, 0\]"):
        parse_spec("flare_direct:trigger=mean_logprob,threshold=0.5")
    with pytest.raises(SpecError, match=r"threshold of trigger margin \(.*\) must be within \[0, 1\]"):
        parse_spec("flare_direct:trigger=margin,threshold=2")
    with pytest.raises(SpecError, match="trigger self_check takes no threshold"):
        parse_spec("flare_direct:trigger=self_check,threshold=0.5")
    with pytest.raises(SpecError, match="ignore_terms and ignore_known apply to the probability triggers"):
        parse_spec("flare_direct:trigger=self_check,ignore_known=true")
    with pytest.raises(SpecError, match="theta is min_prob's threshold; trigger margin takes threshold"):
        parse_spec("flare_direct:trigger=margin,theta=0.5")
    with pytest.raises(SpecError, match="give theta or threshold, not both"):
        parse_spec("flare_direct:theta=0.5,threshold=0.6")
    with pytest.raises(SpecError, match="ignore_terms: cannot read .*missing.txt"):
        parse_spec(f"flare_direct:ignore_terms={tmp_path / 'missing.txt'}")
    (tmp_path / "empty.txt").write_text("# nothing\n\n", encoding="utf-8")
    with pytest.raises(SpecError, match="lists no terms"):
        parse_spec(f"flare_direct:ignore_terms={tmp_path / 'empty.txt'}")
    assert parse_spec("flare_direct:theta=0.6").gate_trigger.threshold == 0.6  # today's specs keep working
    assert parse_spec("flare_direct:threshold=0.6").gate_trigger.threshold == 0.6
    assert parse_spec("flare_direct:trigger=entropy").gate_trigger.threshold == 2.0


@pytest.mark.parametrize("value", ["inf", "1e309", "-inf", "nan"])
def test_a_threshold_that_is_not_a_finite_number_is_refused(value):
    # inf passed [0, inf) and was written to run.json and traces.jsonl as Infinity, which is not JSON.
    with pytest.raises(SpecError, match=rf"threshold must be a finite number, got '{value}'$"):
        parse_spec(f"flare_direct:trigger=entropy,threshold={value}")
    with pytest.raises(ValueError, match=r"threshold of trigger entropy \(.*\) must be within \[0, inf\), got inf"):
        get_trigger("entropy")(math.inf)  # a trigger made in code is held to its range as well


def test_triggers_that_fire_high_are_known_by_name():
    assert [n for n in names() if fires_high(n)] == ["entropy", "self_check"]
    assert not fires_high(None) and not fires_high("retired_trigger")


# -- the default spec is the one it always was ----------------------------------------------------------------


def test_the_default_spec_keeps_its_parameters_request_shape_and_gate_records():
    default = FlareDirect()
    # The parameters as run.json records them: those before triggers existed, the trigger's, then the
    # production options (off).
    assert default.params() == {
        "k": 3,
        "max_tokens": 128,
        "answer_form": "short",
        "theta": 0.8,
        "beta": 0.4,
        "lookahead_tokens": 64,
        "query": "implicit",
        "first_retrieval": True,
        "context": "replace",
        "max_docs": 9,
        "max_retrievals": None,
        "abstain": False,
        "trigger": "min_prob",
        "threshold": None,
        "ignore_terms": None,
        "ignore_known": False,
        "new_docs": None,
        "keep_last": None,
        "placement": "top",
    }
    # The request shape as the code before triggers built it.
    shape = Strategy.request_shape(default)
    shape["prompts"].append(QUESTION_PROMPT + QUESTION_QUERY)
    shape["stops"].append(list(QUESTION_STOP))
    assert default.request_shape() == {**shape, "abstention": ABSTENTION, "trigger": "min_prob"}
    same = ["flare_direct", "flare_direct:trigger=min_prob", "flare_direct:threshold=none,ignore_known=false"]
    assert len({json.dumps(parse_spec(s).params()) + parse_spec(s).request_sha256() for s in same}) == 1
    assert default.static_prompts() == (default.template.static, QUESTION_PROMPT)
    assert parse_spec("flare_direct:theta=0.6").params()["theta"] == 0.6
    assert parse_spec("flare_direct:trigger=margin").params()["trigger"] == "margin"
    assert parse_spec("flare_direct:trigger=margin").request_sha256() != default.request_sha256()
    # A step's gate record: the four keys, in their order.
    gate, trace = first_gate("flare_direct", draft([" A", " b", "."], [0.9, 0.3, 0.99]))
    assert list(gate) == ["trigger", "score", "threshold", "fired"]
    assert gate == {"trigger": "min_prob", "score": pytest.approx(0.3), "threshold": 0.8, "fired": True}
    detail = trace.retrievals[1].detail
    assert list(detail) == ["min_p", "low_tokens", "draft", "trigger", "score", "threshold"]


def test_traces_leave_out_what_no_trigger_asked_for_and_old_traces_load():
    call = LMCall("draft", 5, 5, 1, " a", "stop", 0.1, [" a"], [-0.1])
    trace = Trace("q", " a", None, "eos", steps=[Step(" a", lm_calls=[call])])
    d = trace.to_dict()
    assert set(d["steps"][0]["lm_calls"][0]) == {f.name for f in dataclasses.fields(LMCall)} - {
        "top_logprobs",
        "entropies",
        "tool_calls",
        "prefill_seconds",
    }
    assert Trace.from_dict(json.loads(json.dumps(d))) == trace
    call.top_logprobs, call.entropies = [[[" a", -0.1], [" b", -2.5]]], [0.4]
    again = Trace.from_dict(json.loads(json.dumps(trace.to_dict())))
    assert again.lm_calls[0].top_logprobs == [[[" a", -0.1], [" b", -2.5]]] and again.lm_calls[0].entropies == [0.4]


def test_cache_keys_of_requests_without_per_token_extras_are_unchanged(tmp_path):
    inner = ScriptedLM(["x"])
    cached = CachedLM(inner, DiskCache(tmp_path))
    prompt = Prompt("S ", "d")
    cached.generate(prompt, 4, stop=("\n",), logprobs=True, stop_at_sentence=True)
    # The key as it was made before top_logprobs and entropy existed.
    old = {
        "prompt": "S d",
        "max_tokens": 4,
        "stop": ["\n"],
        "logprobs": True,
        "logit_bias": {},
        "stop_at_sentence": True,
    }
    assert cached.cache.get(_key("lm", cached._identity, old), dict) is not None
    cached.generate(prompt, 4, stop=("\n",), logprobs=True, stop_at_sentence=True, top_logprobs=2)
    assert len(inner.requests) == 2  # another request: not served from the first one's entry


# -- the gate columns for triggers that fire high -------------------------------------------------------------


def _judged(*scores, trigger="entropy", threshold=2.0):
    steps = [
        Step("a", gate={"trigger": trigger, "score": s, "threshold": threshold, "fired": s >= threshold})
        for s in scores
    ]
    return Trace("q", "a", "a", "answer", steps=steps)


def test_an_entropy_gate_record_takes_the_highest_score_and_its_auroc_is_oriented():
    rec = gate_record(_judged(0.5, 2.5, 1.0))
    assert (rec.score, rec.fired, rec.trigger) == (2.5, True, "entropy")
    assert gate_record(_judged(0.5, 0.2, trigger="min_prob", threshold=0.3)).score == 0.2
    # Right answers have low entropy (0.5, 1.0), wrong ones high (2.5, 3.0): a perfect gate.
    out = gate_summary([0.5, 1.0, 2.5, 3.0], [False, False, True, True], [1, 1, 0, 0], [True] * 4)
    assert out["gate_auroc"] == 1.0 and out["gate_fire_wrong"] == 1.0 and out["gate_fire_right"] == 0.0
    assert gate_summary([0.5, 1.0, 2.5, 3.0], [False] * 4, [1, 1, 0, 0])["gate_auroc"] == 0.0  # unoriented


class _Spoiled(ScriptedLM):
    """Replies as ScriptedLM, then spoils each reply's per-token logprobs with ``spoil(call)``."""

    def __init__(self, script, spoil, supports_logprobs=True):
        super().__init__(script, supports_logprobs)
        self.spoil = spoil

    def _complete(self, request):
        call = super()._complete(request)
        self.spoil(call)
        return call


SPOILED = {
    "none": (lambda c: setattr(c, "logprobs", None), "none"),
    "short": (lambda c: c.logprobs.pop(), "5 for 6 tokens (one per token)"),
    "positive": (lambda c: c.logprobs.__setitem__(0, 0.5), "0.5 (float), not the log of a probability"),
    "nan": (lambda c: c.logprobs.__setitem__(0, math.nan), "nan (float), not the log of a probability"),
    "no_tokens": (lambda c: (c.tokens.clear(), c.logprobs.clear()), "no tokens for the text ' So the answer is"),
}


@pytest.mark.parametrize("strategy", ["flare_direct", "adaptive", "flare_direct:trigger=mean_logprob"])
@pytest.mark.parametrize("spoiled", SPOILED)
def test_a_draft_without_one_logprob_per_token_is_an_error_not_a_trigger_that_never_fires(strategy, spoiled):
    # Left to the trigger, such a draft would be skipped (never judged: never retrieving) or misjudged.
    spoil, said = SPOILED[spoiled]
    with pytest.raises(LMError, match=f"^LM scripted: asked for per-token logprobs, returned {re.escape(said)}"):
        run(strategy, [FINAL], lm=_Spoiled([FINAL], spoil))


def test_an_lm_that_offers_no_logprobs_may_answer_a_request_for_them_without():
    lm = _Spoiled([FINAL], SPOILED["none"][0], supports_logprobs=False)
    assert lm.generate(Prompt("", "q"), 8, logprobs=True).logprobs is None


def test_a_trigger_whose_declaration_contradicts_the_contract_is_refused_when_declared():
    # Accepted before, these failed later naming neither the class nor what to mend in it.
    from flarebench.strategies.plugins import PluginError
    from flarebench.strategies.triggers import TokenTrigger, trigger

    class NotATrigger:
        pass

    class BadDefault(TokenTrigger):
        default_threshold, valid_range, grid = 5.0, (0.0, 1.0), (0.5,)

    class BadGrid(TokenTrigger):
        default_threshold, valid_range, grid = 0.5, (0.0, 1.0), (1.0, 0.5, 2.0)

    for cls, why in [
        (NotATrigger, "not a subclass of Trigger (flarebench.strategies.triggers.Trigger)"),
        (BadDefault, "default_threshold 5.0 is not a number within valid_range [0, 1]"),
        (BadGrid, "grid (1.0, 0.5, 2.0) must be increasing numbers within valid_range [0, 1]"),
        (type("TextDefault", (BadDefault,), {"default_threshold": "0.5"}), "default_threshold '0.5' is not a"),
    ]:
        with pytest.raises(PluginError) as e:
            trigger("_test_misdeclared")(cls)
        assert str(e.value).startswith(f"trigger '_test_misdeclared' ({cls.__module__}.{cls.__qualname__}): {why}")
    with pytest.raises(PluginError, match=r"NotATrigger\): not a subclass of Trigger"):  # an instance, not a class
        trigger("_test_misdeclared")(NotATrigger())
    assert "_test_misdeclared" not in names()
