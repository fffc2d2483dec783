"""No retrieval: the LM answers from its parameters alone (closed book)."""

from __future__ import annotations

from dataclasses import dataclass

from strategies.base import Strategy, finish
from strategies.lm import LM
from strategies.prompts import STOP, PromptTemplate
from strategies.records import Step, Trace
from strategies.registry import register
from strategies.retriever import Retriever

CLOSED_BOOK = PromptTemplate(open_book=False)


@register("no_retrieval")
@dataclass
class NoRetrieval(Strategy):
    """Generate the whole answer in one call with no documents. ``k`` is unused but kept so every
    strategy takes the same parameters."""

    def run(self, question: str, lm: LM, retriever: Retriever) -> Trace:
        call = lm.generate(CLOSED_BOOK.build(question), self.max_tokens, stop=STOP)
        return finish(question, [Step(call.text, [call])])
