"""No retrieval: the LM answers from its parameters alone (closed book)."""

from __future__ import annotations

from dataclasses import dataclass

from flarebench.strategies.base import Strategy, finish
from flarebench.strategies.lm import LM
from flarebench.strategies.prompts import STOP, PromptTemplate, template
from flarebench.strategies.records import Step, Trace
from flarebench.strategies.registry import register
from flarebench.strategies.retriever import Retriever


@register("no_retrieval")
@dataclass
class NoRetrieval(Strategy):
    """Generate the whole answer in one call with no documents. ``k`` is unused but kept so every
    strategy takes the same parameters."""

    @property
    def template(self) -> PromptTemplate:
        return template(self.answer_form, open_book=False)

    def request_shape(self) -> dict:
        return {"prompts": [self.template.sample()], "stops": [list(STOP)]}

    def run(self, question: str, lm: LM, retriever: Retriever) -> Trace:
        call = lm.generate(self.template.build(question), self.max_tokens, stop=STOP)
        return finish(question, [Step(call.text, [call])])
