"""``my_strategy``: draft an answer closed book, retrieve with the question and the draft, answer again.

The draft carries words the documents use that the question lacks, as HyDE's hypothetical
document does (Gao et al. 2022, arXiv 2212.10496), so the retrieval can find a fact the question
alone does not point at. Two LM calls and one retrieval per question.

The file imports only flarebench, so it also loads on its own: ``--plugin PATH/my_strategy.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from flarebench.strategies import Strategy, register
from flarebench.strategies.base import finish, retrieve
from flarebench.strategies.lm import LM
from flarebench.strategies.prompts import STOP, PromptTemplate, template
from flarebench.strategies.records import Step, Trace
from flarebench.strategies.retriever import Retriever


@register("my_strategy")
@dataclass
class DraftThenRetrieve(Strategy):
    """Draft closed book, retrieve ``k`` passages with question + draft, answer with them."""

    @property
    def closed_book(self) -> PromptTemplate:
        """The prompt the draft is written with: flarebench's own, without documents."""
        return template(self.answer_form, open_book=False)

    def static_prompts(self) -> tuple[str, ...]:
        return (self.closed_book.static, self.template.static)

    def request_shape(self) -> dict:
        # Every prompt sent goes into the run's configuration hash.
        return {"prompts": [self.closed_book.sample(), self.template.sample()], "stops": [list(STOP)]}

    def run(self, question: str, lm: LM, retriever: Retriever) -> Trace:
        draft = lm.generate(self.closed_book.build(question), self.max_tokens, stop=STOP, purpose="hypothesis")
        docs, retrieval = retrieve(retriever, f"{question} {draft.text.strip()}", self.k, "hypothesis")
        answer = lm.generate(self.template.build(question, docs), self.max_tokens, stop=STOP)
        # The draft is a step that writes none of the output; the answer is the second call's.
        return finish(question, [Step("", [draft]), Step(answer.text, [answer], [retrieval])])
