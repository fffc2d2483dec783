"""FLARE direct (Jiang et al. 2023, "Active Retrieval Augmented Generation", arXiv 2305.06983).

For each next sentence: draft it (a look-ahead of up to ``lookahead_tokens``, cut at the first
sentence boundary). If every token has p > theta, accept the draft as it is: one LM call. If any
token has p <= theta, retrieve with a query made from the draft, put the documents in context,
regenerate the sentence and accept that. Repeat until the answer ends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from strategies.base import Strategy, finish, first_hop, retrieve
from strategies.lm import LM, Prompt
from strategies.prompts import OPEN_BOOK
from strategies.records import LOW_CONFIDENCE, LMCall, Passage, Retrieval, Step, Trace
from strategies.registry import register
from strategies.retriever import Retriever
from strategies.steps import Sentence, answer_finished, next_sentence

ABSTENTION = " I am not confident enough to answer this question."

# Explicit queries: the LM writes one question per low-confidence span (the paper's Figure 3 prompt
# asks for a question "to which the answer is" the span). Static first, so its prefix is reused.
QUESTION_PROMPT = (
    "Write the question that the sentence answers with the given span.\n\n"
    "Sentence: The father of Nell Oster is Tam Oster.\nSpan: Tam Oster\nQuestion: Who is the father of Nell Oster?\n\n"
    "Sentence: The hobby of Tam Oster is fishing.\nSpan: fishing\nQuestion: What is the hobby of Tam Oster?\n\n"
)


def masked_query(s: Sentence, beta: float) -> str:
    """The implicit query: the draft with every token of probability <= beta left out."""
    kept = "".join(tok for tok, p in zip(s.tokens, s.probs) if p > beta)
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
        return (OPEN_BOOK.static, QUESTION_PROMPT)

    def run(self, question: str, lm: LM, retriever: Retriever) -> Trace:
        # pending: retrievals not yet recorded on a step (they go on the step they serve)
        docs, pending = first_hop(retriever, question, self.k, self.first_retrieval)
        steps: list[Step] = []
        answer, used, mid_retrievals = "", 0, 0
        while used < self.max_tokens:
            budget = min(self.lookahead_tokens, self.max_tokens - used)
            draft = next_sentence(lm, OPEN_BOOK.build(question, docs, answer), budget, logprobs=True, purpose="draft")
            calls, retrievals = [draft.call], pending
            pending = []
            low = [(tok, p) for tok, p in zip(draft.tokens, draft.probs) if p <= self.theta]
            sentence = draft
            if low and draft.text.strip():
                if self.max_retrievals is not None and mid_retrievals >= self.max_retrievals:
                    if self.abstain:
                        steps.append(Step(ABSTENTION, calls, retrievals))
                        return finish(question, steps, capped="abstain")
                else:
                    mid_retrievals += 1
                    found = self._retrieve(question, draft, lm, retriever, low, calls, retrievals)
                    docs = dedupe(docs + found)[: self.max_docs] if self.context == "accumulate" else dedupe(found)
                    sentence = next_sentence(
                        lm, OPEN_BOOK.build(question, docs, answer), budget, logprobs=True, purpose="regenerate"
                    )
                    calls.append(sentence.call)
            answer += sentence.text
            used += len(sentence.tokens)
            steps.append(Step(sentence.text, calls, retrievals))
            if answer_finished(answer, sentence.text, sentence.ended):
                return finish(question, steps)
        return finish(question, steps)

    def _retrieve(
        self,
        question: str,
        draft: Sentence,
        lm: LM,
        retriever: Retriever,
        low: list,
        calls: list[LMCall],
        retrievals: list[Retrieval],
    ) -> list[Passage]:
        """Form the query (or queries) from the draft, retrieve, and record why."""
        why = {
            "min_p": round(min(p for _, p in low), 4),
            "low_tokens": [[t, round(p, 4)] for t, p in low],
            "draft": draft.text,
        }
        spans = low_spans(draft, self.beta) if self.query == "explicit" else []
        if spans:
            queries = []
            for span in spans:
                call = lm.generate(
                    Prompt(QUESTION_PROMPT, f"Sentence: {draft.text.strip()}\nSpan: {span}\nQuestion:"),
                    32,
                    stop=("\n",),
                    purpose="query",
                )
                calls.append(call)
                queries.append((call.text.strip() or draft.text.strip(), span))
        else:  # implicit, or explicit with no token at or below beta: the masked draft itself
            queries = [(masked_query(draft, self.beta) or question, None)]
        found: list[Passage] = []
        for query, span in queries:
            passages, r = retrieve(retriever, query, self.k, LOW_CONFIDENCE, **why, **({"span": span} if span else {}))
            retrievals.append(r)
            found += passages
        return found
