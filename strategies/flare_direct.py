"""FLARE direct (Jiang et al. 2023, "Active Retrieval Augmented Generation", arXiv 2305.06983).

For each next sentence: draft it (a look-ahead of up to ``lookahead_tokens``, cut at the first
sentence boundary). If every token has p > theta, accept the draft as it is: one LM call. If any
token has p <= theta, retrieve with a query made from the draft, put the documents in context,
regenerate the sentence and accept that. Repeat until the answer ends.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Literal

from flarebench.strategies.base import Strategy, finish, first_hop, retrieve
from flarebench.strategies.lm import LM, Prompt
from flarebench.strategies.records import LOW_CONFIDENCE, LMCall, Passage, Retrieval, Step, Trace
from flarebench.strategies.registry import register
from flarebench.strategies.retriever import Retriever
from flarebench.strategies.steps import Sentence, answer_finished, next_sentence

ABSTENTION = " I am not confident enough to answer this question."

#: The trigger flare_direct uses: any drafted token with p <= theta (recorded in ``Step.gate``).
TRIGGER = "min_prob"

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


def masked_query(s: Sentence, beta: float) -> str:
    """The implicit query: the draft with every token of probability <= beta replaced by a space, as
    the official code masks, so a masked sub-word never glues its neighbours into a new term."""
    kept = "".join(tok if p > beta else " " for tok, p in zip(s.tokens, s.probs))
    return " ".join(kept.split())


def low_spans(s: Sentence, beta: float) -> list[str]:
    """Runs of consecutive tokens with probability <= beta, as text (the explicit query's targets)."""
    spans, current = [], ""
    for tok, p in zip(s.tokens, s.probs):
        if p <= beta:
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
class FlareDirect(Strategy):
    """FLARE with retrieval triggered by low-probability tokens of a drafted next sentence.

    ``context="replace"`` keeps only the last retrieval's documents (the official code);
    ``"accumulate"`` keeps the first-hop documents plus every new one, deduplicated, at most
    ``max_docs``. ``max_retrievals`` caps mid-generation retrievals per answer (None: no cap, as in
    the paper); with ``abstain`` on, a draft still at or below theta once the cap is spent ends the
    answer with a stated abstention instead of a guess.
    """

    needs_logprobs = True

    theta: float = 0.8
    beta: float = 0.4
    lookahead_tokens: int = 64
    query: Literal["implicit", "explicit"] = "implicit"
    first_retrieval: bool = True
    context: Literal["replace", "accumulate"] = "replace"
    max_docs: int = 9
    max_retrievals: int | None = None
    abstain: bool = False

    def validate(self) -> None:
        super().validate()
        for name in ("theta", "beta"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {getattr(self, name)}")
        if self.lookahead_tokens < 1:
            raise ValueError(f"lookahead_tokens must be >= 1, got {self.lookahead_tokens}")
        if self.max_docs < self.k:
            raise ValueError(f"max_docs must be >= k ({self.k}), got {self.max_docs}")
        if self.max_retrievals is not None and self.max_retrievals < 0:
            raise ValueError(f"max_retrievals must be >= 0 or none, got {self.max_retrievals}")

    def static_prompts(self) -> tuple[str, ...]:
        return (self.template.static, QUESTION_PROMPT)

    def request_shape(self) -> dict:
        shape = super().request_shape()
        shape["prompts"].append(QUESTION_PROMPT + QUESTION_QUERY)
        shape["stops"].append(list(QUESTION_STOP))
        return {**shape, "abstention": ABSTENTION, "trigger": TRIGGER}

    def run(self, question: str, lm: LM, retriever: Retriever) -> Trace:
        # pending: retrievals not yet recorded on a step (they go on the step they serve)
        docs, pending = first_hop(retriever, question, self.k, self.first_retrieval)
        steps: list[Step] = []
        answer, used, mid_retrievals = "", 0, 0
        while used < self.max_tokens:
            budget = min(self.lookahead_tokens, self.max_tokens - used)
            prompt = self.template.build(question, docs, answer)
            draft = next_sentence(lm, prompt, budget, logprobs=True, purpose="draft")
            calls, retrievals, pending = [draft.call], pending, []
            gate = self.judge(draft)
            sentence = draft
            if gate and gate["fired"]:
                if self.max_retrievals is not None and mid_retrievals >= self.max_retrievals:
                    gate["skipped"] = "retrieval_cap"
                    if self.abstain:
                        steps.append(Step(ABSTENTION, calls, retrievals, gate))
                        return finish(question, steps, capped="abstain")
                else:
                    found = self._retrieve(answer, draft, lm, retriever, gate, calls, retrievals)
                    if found is None:
                        gate["skipped"] = "empty_query"  # nothing left to search with: keep the draft
                    else:
                        mid_retrievals += 1
                        docs = dedupe(docs + found)[: self.max_docs] if self.context == "accumulate" else found
                        sentence = next_sentence(
                            lm, self.template.build(question, docs, answer), budget, logprobs=True, purpose="regenerate"
                        )
                        calls.append(sentence.call)
            answer += sentence.text
            used += len(sentence.tokens)
            steps.append(Step(sentence.text, calls, retrievals, gate))
            if answer_finished(answer, sentence.text, sentence.ended):
                return finish(question, steps)
        return finish(question, steps)

    def judge(self, draft: Sentence) -> dict | None:
        """What the trigger saw in a drafted sentence: its score (the lowest token probability of the
        sentence's own tokens), the threshold, and whether it fired (score <= theta). None for an
        empty draft, which is never judged."""
        if not draft.text.strip() or not draft.probs:
            return None
        score = min(draft.probs)
        return {"trigger": TRIGGER, "score": score, "threshold": self.theta, "fired": score <= self.theta}

    def _retrieve(
        self,
        answer: str,
        draft: Sentence,
        lm: LM,
        retriever: Retriever,
        gate: dict,
        calls: list[LMCall],
        retrievals: list[Retrieval],
    ) -> list[Passage] | None:
        """Form the query (or queries) from the draft, retrieve, record why, and return the k
        documents for context; None when no query is left (every token masked), as the official
        code then retrieves nothing."""
        low = [(t, p) for t, p in zip(draft.tokens, draft.probs) if p <= self.theta]
        why = {"min_p": round(gate["score"], 4), "low_tokens": [[t, round(p, 4)] for t, p in low], "draft": draft.text}
        queries: list[tuple[str, str | None]] = []
        if self.query == "explicit":
            passage = (answer + draft.text).strip()
            for span in low_spans(draft, self.beta):
                call = lm.generate(
                    Prompt(QUESTION_PROMPT, QUESTION_QUERY.format(passage=passage, span=span)),
                    32,
                    stop=QUESTION_STOP,
                    purpose="query",
                )
                calls.append(call)
                reply = call.text.strip()
                if reply.endswith("?"):  # the official code keeps questions only
                    queries.append((reply, span))
                else:
                    gate.setdefault("rejected_questions", []).append(reply)
        if not queries:  # implicit; or explicit without a span or a usable question: the masked draft
            masked = masked_query(draft, self.beta)
            if not masked:
                return None
            queries = [(masked, None)]
        results = []
        for query, span in queries:
            passages, r = retrieve(retriever, query, self.k, LOW_CONFIDENCE, **why, **({"span": span} if span else {}))
            retrievals.append(r)
            results.append(passages)
        return round_robin(results, self.k)
