"""FLARE direct (Jiang et al. 2023, "Active Retrieval Augmented Generation", arXiv 2305.06983).

For each next sentence: draft it (a look-ahead of up to ``lookahead_tokens``, cut at the first
sentence boundary). If every token has p > theta, accept the draft as it is: one LM call. If any
token has p <= theta, retrieve with a query made from the draft, put the documents in context,
regenerate the sentence and accept that. Repeat until the answer ends.

"p <= theta" is the default trigger (``min_prob``); ``trigger`` picks another one of
:mod:`flarebench.strategies.triggers` (mean logprob, entropy, margin, an LM self-check), with its
own ``threshold``. The production options (``query=structured``, ``new_docs``, ``keep_last``,
``placement=near_pause``) are off by default; docs/strategies.md defines them.
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass
from typing import Any, Literal

from flarebench.strategies.base import Strategy, finish, first_hop, retrieve
from flarebench.strategies.lm import LM, Prompt
from flarebench.strategies.records import DRAFT, LOW_CONFIDENCE, LMCall, Passage, Retrieval, Step, Trace
from flarebench.strategies.registry import register
from flarebench.strategies.retriever import Retriever
from flarebench.strategies.steps import Sentence, answer_finished, next_sentence
from flarebench.strategies.triggers import DEFAULT as DEFAULT_TRIGGER
from flarebench.strategies.triggers import (
    SELF_CHECK_PROMPT,
    SELF_CHECK_QUERY,
    SELF_CHECK_STOP,
    Context,
    Gated,
    Judgement,
    read_terms,
    terms_sha256,
)
from flarebench.strategies.triggers import get as get_trigger

ABSTENTION = " I am not confident enough to answer this question."

#: The trigger flare_direct uses by default: any drafted token with p <= theta (recorded in ``Step.gate``).
TRIGGER = DEFAULT_TRIGGER

# Explicit queries: the LM writes one question per low-confidence span, having read the answer so far
# and the drafted sentence (the official prompt shows the generated text, then asks for "a question to
# which the answer is" the span). Static first, so its prefix is reused.
QUESTION_PROMPT = (
    "Read the passage, then write the question whose answer is the given span of its last sentence.\n\n"
    "Passage: The friend of Ivo Lanark is Bea Tull. The mother of Bea Tull is Rosa Tull.\n"
    "Span: Rosa Tull\nQuestion: Who is the mother of Bea Tull?\n\n"
    "Passage: The father of Nell Oster is Tam Oster. The hobby of Tam Oster is fishing.\n"
    "Span: fishing\nQuestion: What is the hobby of Tam Oster?\n\n"
)
QUESTION_QUERY = "Passage: {passage}\nSpan: {span}\nQuestion:"
QUESTION_STOP = ("\n",)

# Structured queries (a production option, not the paper's): one call per retrieval writes a search
# string from the question, the answer so far with the draft, and what the draft is unsure of.
SEARCH_PROMPT = (
    "Write a short search query for the fact that the answer is unsure of: the entity and the "
    "relation, taken from the question and the answer so far.\n\n"
    "Question: What is the hobby of the father of Nell Oster?\n"
    "Answer so far: The father of Nell Oster is Tam Oster. The hobby of Tam Oster is fishing.\n"
    "Unsure: fishing\nSearch: hobby of Tam Oster\n\n"
)
SEARCH_QUERY = "Question: {question}\nAnswer so far: {passage}\nUnsure: {span}\nSearch:"
SEARCH_STOP = ("\n",)
SEARCH_TOKENS = 32

#: The production options' values while off (the paper's behaviour); any other needs context=accumulate.
PRODUCTION_OFF = {"new_docs": None, "keep_last": None, "placement": "top"}


def masked_query(s: Sentence, beta: float, keep: frozenset[int] = frozenset()) -> str:
    """The implicit query: the draft with every token of probability <= beta replaced by a space and
    the ends stripped, character for character as the official code masks ("simple"), so a masked
    sub-word never glues its neighbours into a new term. Tokens in ``keep`` (those the trigger was
    told to ignore) are kept whatever their probability."""
    kept = "".join(tok if p > beta or i in keep else " " for i, (tok, p) in enumerate(zip(s.tokens, s.probs)))
    return kept.strip()


def low_spans(s: Sentence, beta: float, keep: frozenset[int] = frozenset()) -> list[str]:
    """Runs of consecutive tokens with probability <= beta, as text (the explicit query's targets);
    tokens in ``keep`` never belong to one."""
    spans, current = [], ""
    for i, (tok, p) in enumerate(zip(s.tokens, s.probs)):
        if p <= beta and i not in keep:
            current += tok
        elif current:
            spans.append(current)
            current = ""
    spans.append(current)
    return [sp.strip() for sp in spans if re.search(r"\w", sp)]


def dedupe(docs: list[Passage]) -> list[Passage]:
    """Documents in order, each doc id once."""
    seen: set[str] = set()
    return [d for d in docs if not (d.id in seen or seen.add(d.id))]


def round_robin(results: list[list[Passage]], k: int) -> list[Passage]:
    """Several queries' rankings merged as the official code merges them: every query's first
    document, then every query's second, ..., each doc id once, cut back to ``k``."""
    ranked = [d for rank in itertools.zip_longest(*results) for d in rank if d is not None]
    return dedupe(ranked)[:k]


@register("flare_direct")
@dataclass
class FlareDirect(Gated, Strategy):
    """FLARE with retrieval triggered by low-probability tokens of a drafted next sentence.

    ``context="replace"`` keeps only the last retrieval's documents (the official code);
    ``"accumulate"`` keeps the first-hop documents plus every new one, deduplicated, at most
    ``max_docs``. ``max_retrievals`` caps mid-generation retrievals per answer (None: no cap, as in
    the paper); with ``abstain`` on, a draft still at or below theta once the cap is spent ends the
    answer with a stated abstention instead of a guess.

    ``trigger`` names the gate (:mod:`flarebench.strategies.triggers`; ``min_prob``: p <= theta)
    and ``threshold`` its threshold (None: theta for ``min_prob``, the trigger's default otherwise).
    ``ignore_terms`` is a file of terms (one per line) whose tokens never fire a probability trigger,
    read once when the strategy is built; ``ignore_known`` keeps the words of the question and of the
    documents in context from firing it.

    Production options, off by default, for ``context="accumulate"``: ``new_docs`` adds at most that
    many documents not yet in context per retrieval; ``keep_last`` keeps the first-hop documents and
    only the last that many added by retrievals; ``placement="near_pause"`` puts the added ones after
    the question, before the answer so far. ``query="structured"`` has the LM write the search string.
    """

    theta: float = 0.8
    beta: float = 0.4
    lookahead_tokens: int = 64
    query: Literal["implicit", "explicit", "structured"] = "implicit"
    first_retrieval: bool = True
    context: Literal["replace", "accumulate"] = "replace"
    max_docs: int = 9
    max_retrievals: int | None = None
    abstain: bool = False
    trigger: str = TRIGGER
    threshold: float | None = None
    ignore_terms: str | None = None
    ignore_known: bool = False
    new_docs: int | None = None
    keep_last: int | None = None
    placement: Literal["top", "near_pause"] = "top"

    def __post_init__(self) -> None:
        # The ignore file is read here, once, never while answering (a strategy's run does no I/O).
        self._terms: tuple[str, ...] = read_terms(self.ignore_terms) if self.ignore_terms else ()
        super().__post_init__()

    def validate(self) -> None:
        super().validate()
        cls = get_trigger(self.trigger)
        for name in ("theta", "beta"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {getattr(self, name)}")
        if self.lookahead_tokens < 1:
            raise ValueError(f"lookahead_tokens must be >= 1, got {self.lookahead_tokens}")
        if self.max_docs < self.k:
            raise ValueError(f"max_docs must be >= k ({self.k}), got {self.max_docs}")
        if self.max_retrievals is not None and self.max_retrievals < 0:
            raise ValueError(f"max_retrievals must be >= 0 or none, got {self.max_retrievals}")
        if self.trigger == TRIGGER and self.threshold is not None and self.given("theta"):
            raise ValueError("give theta or threshold, not both: for trigger min_prob they are the same")
        if self.trigger != TRIGGER and self.given("theta"):
            raise ValueError(f"theta is min_prob's threshold; trigger {self.trigger} takes threshold")
        threshold = self.theta if self.trigger == TRIGGER and self.threshold is None else self.threshold
        self._gate = cls(threshold, self._terms, self.ignore_known)
        self._validate_production()

    def _validate_production(self) -> None:
        if self.placement not in ("top", "near_pause"):
            raise ValueError(f"placement must be 'top' or 'near_pause', got {self.placement!r}")
        # Parameters this configuration would ignore are refused, not recorded as if they acted.
        if self.trigger == "self_check":
            for name in ("query", "beta"):
                if self.given(name):
                    raise ValueError(
                        f"{name}={getattr(self, name)} does not apply with trigger=self_check, whose reply is the query"
                    )
        if self.context == "replace" and self.given("max_docs"):
            raise ValueError("max_docs is for context=accumulate; context=replace keeps the last retrieval's k")
        if self.abstain and self.max_retrievals is None:
            raise ValueError("abstain acts once max_retrievals is spent; set max_retrievals too")
        if self.new_docs is not None and not 1 <= self.new_docs <= self.k:
            raise ValueError(f"new_docs must be within [1, k={self.k}] or none, got {self.new_docs}")
        if self.keep_last is not None:
            hop = self.k if self.first_retrieval else 0
            if not 0 <= self.keep_last <= self.max_docs - hop:
                raise ValueError(
                    f"keep_last must be within [0, {self.max_docs - hop}] or none (max_docs {self.max_docs} "
                    f"less {hop} first-hop documents), got {self.keep_last}"
                )
        changed = {k: getattr(self, k) for k, off in PRODUCTION_OFF.items() if getattr(self, k) != off}
        if changed and self.context != "accumulate":
            name, value = next(iter(changed.items()))
            raise ValueError(f"{name}={value} needs context=accumulate (context=replace replaces every document)")

    @property
    def threshold_param(self) -> str:  # type: ignore[override]
        """min_prob's threshold is the paper's theta."""
        return "theta" if self.trigger == TRIGGER else "threshold"

    def static_prompts(self) -> tuple[str, ...]:
        statics = (self.template.static, QUESTION_PROMPT)
        if self.trigger == "self_check":
            statics += (SELF_CHECK_PROMPT,)
        return statics + ((SEARCH_PROMPT,) if self.query == "structured" else ())

    def request_shape(self) -> dict:
        shape = super().request_shape()
        shape["prompts"].append(QUESTION_PROMPT + QUESTION_QUERY)
        shape["stops"].append(list(QUESTION_STOP))
        if self.trigger == "self_check":
            shape["prompts"].append(SELF_CHECK_PROMPT + SELF_CHECK_QUERY)
            shape["stops"].append(list(SELF_CHECK_STOP))
        # Its own look-ahead, not the shared sentence look-ahead (the same at the default, 64).
        shape = {**shape, "lookahead_tokens": self.lookahead_tokens, "abstention": ABSTENTION, "trigger": self.trigger}
        if self._gate.top_logprobs or self._gate.entropy:
            shape["per_token"] = {"top_logprobs": self._gate.top_logprobs, "entropy": self._gate.entropy}
        if self._terms:
            shape["ignore_terms_sha256"] = terms_sha256(self._terms)
        if self.query == "structured":
            shape["prompts"].append(SEARCH_PROMPT + SEARCH_QUERY)
            shape["stops"].append(list(SEARCH_STOP))
        if self.placement == "near_pause":
            shape["prompts"].append(self.template.sample(late_docs=True))
        return shape

    def run(self, question: str, lm: LM, retriever: Retriever) -> Trace:
        # pending: retrievals not yet recorded on a step (they go on the step they serve)
        docs, pending = first_hop(retriever, question, self.k, self.first_retrieval)
        hop = frozenset(d.id for d in docs)  # the first hop's documents, kept at the top by the production options
        steps: list[Step] = []
        answer, used, mid_retrievals = "", 0, 0
        trigger = self._gate
        while used < self.max_tokens:
            budget = min(self.lookahead_tokens, self.max_tokens - used)
            prompt = self._prompt(question, docs, hop, answer)
            draft = next_sentence(
                lm,
                prompt,
                budget,
                logprobs=trigger.needs_logprobs,
                purpose=DRAFT,
                top_logprobs=trigger.top_logprobs,
                entropy=trigger.entropy,
            )
            calls, retrievals, pending = [draft.call], pending, []
            judgement = trigger.judge(draft, Context(question, answer, docs, lm))
            gate = judgement.record if judgement else None
            if judgement:
                calls += judgement.calls
            sentence = draft
            if judgement and judgement.fired:
                if self.max_retrievals is not None and mid_retrievals >= self.max_retrievals:
                    gate["skipped"] = "retrieval_cap"
                    if self.abstain:
                        steps.append(Step(ABSTENTION, calls, retrievals, gate))
                        return finish(question, steps, capped="abstain")
                else:
                    found = self._retrieve(question, answer, draft, lm, retriever, judgement, calls, retrievals)
                    if found is None:  # nothing left to search with: keep the draft
                        gate.setdefault("skipped", "empty_query")
                    else:
                        mid_retrievals += 1
                        before, docs = docs, self._context(docs, hop, found)
                        again = self._prompt(question, docs, hop, answer)
                        retrievals[-1].detail |= self._context_detail(before, docs, prompt, again)
                        sentence = next_sentence(
                            lm,
                            again,
                            budget,
                            logprobs=trigger.needs_logprobs,
                            purpose="regenerate",
                        )
                        calls.append(sentence.call)
            answer += sentence.text
            used += len(sentence.tokens)
            steps.append(Step(sentence.text, calls, retrievals, gate))
            if answer_finished(answer, sentence.text, sentence.ended):
                return finish(question, steps)
        return finish(question, steps)

    def _context(self, docs: list[Passage], hop: frozenset[str], found: list[Passage]) -> list[Passage]:
        """The documents in context after a retrieval found ``found``: ``replace`` takes them as
        they are; ``accumulate`` appends those not in context yet (at most ``new_docs``) and keeps
        the first hop's (ids ``hop``) and only the last ``keep_last`` added, at most ``max_docs``."""
        if self.context == "replace":
            return found
        held = {d.id for d in docs}
        added = [d for d in docs if d.id not in hop] + [d for d in dedupe(found) if d.id not in held][: self.new_docs]
        if self.keep_last is not None:
            added = added[max(0, len(added) - self.keep_last) :]
        return dedupe([d for d in docs if d.id in hop] + added)[: self.max_docs]

    def _prompt(self, question: str, docs: list[Passage], hop: frozenset[str], answer: str) -> Prompt:
        """The answer's prompt; with ``placement=near_pause`` the documents retrievals added go
        after the question, so the prompt up to it (first-hop documents included) stays the same."""
        if self.placement == "near_pause":
            late = [d for d in docs if d.id not in hop]
            return self.template.build(question, [d for d in docs if d.id in hop], answer, late_docs=late)
        return self.template.build(question, docs, answer)

    def _context_detail(self, before: list[Passage], after: list[Passage], draft: Prompt, again: Prompt) -> dict:
        """What the production options did to the context, for the step's last retrieval: the
        documents added and dropped, and with near_pause the characters of the draft's prompt after
        the first change, which the LM had evaluated and must evaluate again (``reeval_chars``)."""
        detail: dict[str, Any] = {}
        if self.new_docs is not None or self.keep_last is not None:
            ids_before, ids_after = {d.id for d in before}, {d.id for d in after}
            detail["added"] = [d.id for d in after if d.id not in ids_before]
            detail["dropped"] = [d.id for d in before if d.id not in ids_after]
        if self.placement == "near_pause":
            same = len(os.path.commonprefix([draft.dynamic, again.dynamic]))
            detail |= {"placement": "near_pause", "reeval_chars": len(draft.dynamic) - same}
        return detail

    def _retrieve(
        self,
        question: str,
        answer: str,
        draft: Sentence,
        lm: LM,
        retriever: Retriever,
        judgement: Judgement,
        calls: list[LMCall],
        retrievals: list[Retrieval],
    ) -> list[Passage] | None:
        """Form the query (or queries) from the draft (or take the trigger's), retrieve, record
        why, and return the k documents for context; None when no query is left (every token
        masked, or every explicit question rejected), as the official code then retrieves nothing."""
        gate = judgement.record
        if self.trigger == TRIGGER:
            why = {
                "min_p": round(gate["score"], 4),
                "low_tokens": [[t, round(p, 4)] for t, p in judgement.flagged],
                "draft": draft.text,
            }
        else:
            why = {"flagged": [[t, round(v, 4)] for t, v in judgement.flagged], "draft": draft.text}
        # Every retrieval says which trigger fired it, at what score against what threshold.
        why |= {"trigger": gate["trigger"], "score": gate["score"], "threshold": gate["threshold"]}
        if judgement.query is not None:  # the trigger's own query (self_check's "missing")
            passages, r = retrieve(retriever, judgement.query, self.k, LOW_CONFIDENCE, **why)
            retrievals.append(r)
            return passages
        keep = judgement.ignored
        queries: list[tuple[str, dict[str, str]]] = []
        if self.query == "structured":
            queries = self._search_string(question, answer, draft, keep, lm, calls)
        elif self.query == "explicit":
            passage = (answer + draft.text).strip()
            spans = low_spans(draft, self.beta, keep)
            if not spans:  # nothing to ask about: the official code searches with the whole draft
                queries = [(draft.text.strip(), {})]
            for span in spans:
                call = lm.generate(
                    Prompt(QUESTION_PROMPT, QUESTION_QUERY.format(passage=passage, span=span)),
                    32,
                    stop=QUESTION_STOP,
                    purpose="query",
                )
                calls.append(call)
                reply = call.text.strip()
                if reply.endswith("?"):  # the official code keeps questions only
                    queries.append((reply, {"span": span}))
                else:
                    gate.setdefault("rejected_questions", []).append(reply)
            if not queries:  # every question was rejected: the official code then retrieves nothing
                gate["skipped"] = "no_question"
                return None
        if not queries:  # implicit; or structured without a usable reply: the masked draft
            masked = masked_query(draft, self.beta, keep)
            if not masked:
                return None
            queries = [(masked, {"query_form": "implicit"} if self.query == "structured" else {})]
        results = []
        for query, extra in queries:
            passages, r = retrieve(retriever, query, self.k, LOW_CONFIDENCE, **why, **extra)
            retrievals.append(r)
            results.append(passages)
        return round_robin(results, self.k)

    def _search_string(
        self, question: str, answer: str, draft: Sentence, keep: frozenset[int], lm: LM, calls: list[LMCall]
    ) -> list[tuple[str, dict[str, str]]]:
        """``query=structured``: one LM call writes the search string from the question, the answer
        so far with the draft, and the draft's low-confidence spans (the draft itself when it has
        none). An empty reply gives none (the masked draft is then the query)."""
        span = ", ".join(low_spans(draft, self.beta, keep)) or draft.text.strip()
        passage = (answer + draft.text).strip()
        call = lm.generate(
            Prompt(SEARCH_PROMPT, SEARCH_QUERY.format(question=question, passage=passage, span=span)),
            SEARCH_TOKENS,
            stop=SEARCH_STOP,
            purpose="query",
        )
        calls.append(call)
        reply = call.text.strip()
        return [(reply, {"query_form": "structured", "span": span})] if reply else []
