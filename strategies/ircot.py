"""IRCoT: interleaving retrieval with chain-of-thought reasoning (Trivedi et al. 2023, arXiv 2212.10509)."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from flarebench.strategies.base import Strategy, finish, retrieve
from flarebench.strategies.lm import LM
from flarebench.strategies.prompts import STOP
from flarebench.strategies.records import FIRST_HOP, IRCOT_STEP, Passage, Retrieval, Step, Trace
from flarebench.strategies.registry import register
from flarebench.strategies.retriever import Retriever
from flarebench.strategies.steps import LOOKAHEAD_TOKENS, answer_finished, next_sentence

#: How the official code tells a reasoning sentence (a conclusion or a sum) from a fact, which alone
#: may be a query (``is_reasoning_sentence``).
REASONING_STARTS = ("thus ", "thus,", "so ", "so,", "that is,", "therefore", "hence")
ARITHMETIC = re.compile(r"(.*)(\d[\d,]*\.?\d+|\d+) ([+-]) (\d[\d,]*\.?\d+|\d+) = (\d[\d,]*\.?\d+|\d+)(.*)")
#: The words the official code drops from every BM25 query, the question's too (``remove_wh_words``).
WH_WORDS = frozenset({"who", "what", "when", "where", "why", "which", "how", "does", "is"})


def is_reasoning(sentence: str) -> bool:
    """A sentence that draws a conclusion ("So ...", "Thus, ...") or states a sum: no query."""
    text = sentence.strip()
    return text.lower().startswith(REASONING_STARTS) or ARITHMETIC.match(text) is not None


def search_text(text: str) -> str:
    """``text`` without its question words, split on single spaces as the official code splits it."""
    return " ".join(w for w in text.split(" ") if w.strip().lower() not in WH_WORDS)


@register("ircot")
@dataclass
class IRCoT(Strategy):
    """Retrieve ``k`` paragraphs with the question, then repeat: write one chain-of-thought
    sentence with every paragraph collected so far in context; stop once the answer says "answer
    is" (or the model ends it), or after ``max_steps`` sentences; otherwise retrieve ``k`` with
    the last sentence that is no reasoning step (the question while there is none; question words
    dropped from every query, as the official code does) and add the paragraphs not collected yet,
    up to ``max_paragraphs`` in all (the paper's 15). Once the context is full no retrieval could add
    anything, so none is made.

    With ``reader`` on, one last call answers the question from scratch with all collected
    paragraphs (the paper's separate reader), and its answer is the output.
    """

    # The official code's defaults: its CoT generator stops after max_num_sentences = 10 sentences,
    # and its configs cap the collected paragraphs at global_max_num_paras = 15.
    max_steps: int = 10
    max_paragraphs: int = 15
    reader: bool = False

    def validate(self) -> None:
        super().validate()
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        if self.max_paragraphs < self.k:
            raise ValueError(f"max_paragraphs must be >= k ({self.k}), got {self.max_paragraphs}")

    def request_shape(self) -> dict:
        """The default shape and how queries are formed: a run made before they dropped question
        words and reasoning sentences is never resumed, nor gated as the same configuration."""
        shape = super().request_shape()
        shape["queries"] = {"reasoning_starts": list(REASONING_STARTS), "dropped_words": sorted(WH_WORDS)}
        return shape

    def run(self, question: str, lm: LM, retriever: Retriever) -> Trace:
        paragraphs, first = retrieve(retriever, search_text(question), self.k, FIRST_HOP, step=0)
        retrievals = [first]
        steps: list[Step] = []
        cot, used, capped, query = "", 0, None, question
        while True:
            s = next_sentence(
                lm,
                self.template.build(question, paragraphs, cot),
                min(LOOKAHEAD_TOKENS, self.max_tokens - used),
                purpose="cot",
            )
            steps.append(Step(s.text, [s.call], retrievals))
            cot += s.text
            used += len(s.tokens)
            if used >= self.max_tokens or answer_finished(cot, s.text, s.ended):
                break
            if len(steps) == self.max_steps:
                capped = "step_cap"
                break
            retrievals = []
            if not is_reasoning(s.text):
                query = s.text.strip()
            if len(paragraphs) < self.max_paragraphs:
                retrievals.append(self._collect(retriever, search_text(query), paragraphs, step=len(steps)))
        if not self.reader:
            return finish(question, steps, capped)
        call = lm.generate(self.template.build(question, paragraphs), self.max_tokens, stop=STOP, purpose="reader")
        read = Step(call.text, [call])
        # The reader's answer alone is the output; the trace still holds the chain of thought.
        return dataclasses.replace(finish(question, [read]), steps=steps + [read])

    def _collect(self, retriever: Retriever, query: str, paragraphs: list[Passage], step: int) -> Retrieval:
        """Retrieve with ``query`` and append the paragraphs not collected yet, in rank order,
        while there is room; the retrieval's detail names the ones added."""
        found, retrieval = retrieve(retriever, query, self.k, IRCOT_STEP, step=step)
        held = {p.id for p in paragraphs}
        added = [p for p in found if p.id not in held][: self.max_paragraphs - len(paragraphs)]
        paragraphs.extend(added)
        retrieval.detail.update(added=[p.id for p in added], paragraphs=len(paragraphs))
        return retrieval
