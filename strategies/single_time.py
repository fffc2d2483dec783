"""Single-time retrieval: retrieve once with the question, then generate the whole answer."""

from __future__ import annotations

from dataclasses import dataclass

from flarebench.strategies.base import Strategy, finish, retrieve
from flarebench.strategies.lm import LM
from flarebench.strategies.prompts import STOP
from flarebench.strategies.records import FIRST_HOP, Step, Trace
from flarebench.strategies.registry import register
from flarebench.strategies.retriever import Retriever


@register("single_time")
@dataclass
class SingleTime(Strategy):
    """Retrieve the top ``k`` documents for the question and answer with them in one call."""

    def run(self, question: str, lm: LM, retriever: Retriever) -> Trace:
        docs, retrieval = retrieve(retriever, question, self.k, FIRST_HOP)
        call = lm.generate(self.template.build(question, docs), self.max_tokens, stop=STOP)
        return finish(question, [Step(call.text, [call], [retrieval])])
