"""FLARE instruct (Jiang et al. 2023, arXiv 2305.06983, section 3.1).

Exemplars teach the model to ask for information by writing ``[Search(query)]`` while it answers.
Generation stops at each search call; the query is sent to the retriever, the documents replace
those in context, and generation continues after the call. The paper raises the logit of "[" by
2.0 so that the model searches more readily.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from flarebench.strategies.base import Knob, Strategy, finish, first_hop, retrieve
from flarebench.strategies.lm import LM
from flarebench.strategies.prompts import EXEMPLARS, LONG_EXEMPLARS, STOP, Exemplar, PromptTemplate
from flarebench.strategies.records import SEARCH_CALL, Step, Trace
from flarebench.strategies.registry import register
from flarebench.strategies.retriever import Retriever
from flarebench.strategies.steps import answer_finished

SEARCH_OPEN = "[Search("
SEARCH_CLOSE = (")]",)  # the stop that ends a search call
BIASED = ("[", " [")  # the tokens that open a search call, raised by search_bias
#: A search call in generated text, closed, or cut short at the end of its line: not part of the answer
#: a reader sees or that is scored.
SEARCH_CALL_RE = re.compile(re.escape(SEARCH_OPEN) + r"(?:[^\]\n]*\)\]|[^\n]*)")

# The shared exemplars, short and long, with a search call before each fact the answer needs.
SEARCH_ANSWERS = {
    "short": (
        "[Search(friend of Ivo Lanark)] The friend of Ivo Lanark is Bea Tull. [Search(mother of Bea Tull)] "
        "The mother of Bea Tull is Rosa Tull. So the answer is Rosa Tull.",
        "[Search(father of Nell Oster)] The father of Nell Oster is Tam Oster. [Search(hobby of Tam Oster)] "
        "The hobby of Tam Oster is fishing. So the answer is fishing.",
        "[Search(sons of Edda Voss)] The sons of Edda Voss are Kai Voss, Lin Voss. So the answer is 2.",
        "[Search(friends of Ruth Kell)] The friends of Ruth Kell are Ada Moss, Bo Fink. "
        "[Search(occupation of Ada Moss)] The occupation of Ada Moss is nurse. [Search(occupation of Bo Fink)] "
        "The occupation of Bo Fink is actor. So the answer is nurse, actor.",
    ),
    "long": (
        "[Search(mother of Ivo Lanark)] The mother of Ivo Lanark is Mara Lanark. "
        "[Search(occupation and hobby of Mara Lanark)] The occupation of Mara Lanark is surgeon. "
        "The hobby of Mara Lanark is chess.",
        "[Search(quillpay production image)] Production runs the image quillpay:2.7.1, as its deploy manifest pins. "
        "[Search(base image of quillpay:2.7.1)] That image is built on the base image corvid-base 3.4. "
        "[Search(quillpay rollout checks)] After the rollout, watch the error rate for 15 minutes and roll back "
        "if it exceeds 2%.",
        "[Search(incident 4410 postmortem)] Incident 4410 was commanded by Lene Brask. The billing cache filled its "
        "disk because a config change disabled log rotation. [Search(team of Pim Hale)] The follow-up is owned by "
        "Pim Hale, who leads the storage team.",
    ),
}
_SEARCH_HOW = (
    "When you need a fact that the documents do not give, write [Search(query)] and the documents for that "
    "query will be provided. "
)
SEARCH_TEMPLATES = {
    "short": PromptTemplate(
        open_book=True,
        exemplars=tuple(Exemplar(ex.docs, ex.question, a) for ex, a in zip(EXEMPLARS, SEARCH_ANSWERS["short"])),
        instruction=(
            f"Answer the question using the documents. {_SEARCH_HOW}Reason step by step, "
            'then end with "So the answer is" followed by the answer.\n\n'
        ),
    ),
    "long": PromptTemplate(
        open_book=True,
        exemplars=tuple(Exemplar(ex.docs, ex.question, a) for ex, a in zip(LONG_EXEMPLARS, SEARCH_ANSWERS["long"])),
        instruction=(
            f"Answer the question using the documents in a few short sentences, one fact per sentence. {_SEARCH_HOW}"
            "\n\n"
        ),
    ),
}


def parse_search(text: str) -> tuple[str, str | None] | None:
    """Split generated text at its first search call: (text before it, the query, or None when the
    call is empty). The call may be cut short (no closing parenthesis): its query runs to the end
    of the line. None when the text holds no search call."""
    at = text.find(SEARCH_OPEN)
    if at < 0:
        return None
    rest = text[at + len(SEARCH_OPEN) :]
    query = rest.split(")")[0].split("\n")[0]
    return text[:at], (" ".join(query.split()) or None)


@register("flare_instruct")
@dataclass
class FlareInstruct(Strategy):
    """Retrieval when the model itself asks for it with ``[Search(query)]``.

    ``max_searches`` caps the search calls served per answer; past it, calls are left in the text
    unanswered and generation goes on. ``search_bias`` is added to the logit of "[" where the
    backend supports a logit bias (0 turns it off).
    """

    search_bias: float = 2.0
    max_searches: int = 3
    first_retrieval: bool = True

    def validate(self) -> None:
        super().validate()
        if self.max_searches < 0:
            raise ValueError(f"max_searches must be >= 0, got {self.max_searches}")
        # OpenAI's logit_bias takes [-100, 100], and llama.cpp's behaves alike past it.
        if not -100 <= self.search_bias <= 100:
            raise ValueError(f"search_bias must be within [-100, 100], got {self.search_bias}")

    @property
    def template(self) -> PromptTemplate:
        return SEARCH_TEMPLATES[self.answer_form]

    def budget_knob(self) -> Knob | None:
        """The bias on "[": a higher one opens more search calls."""
        return Knob("search_bias", (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0), rate_rises=True)

    def request_shape(self) -> dict:
        return {
            "prompts": [self.template.sample()],
            "stops": [list(STOP + SEARCH_CLOSE), list(STOP)],
            "search_call": SEARCH_OPEN,
            "biased_tokens": list(BIASED),
        }

    def run(self, question: str, lm: LM, retriever: Retriever) -> Trace:
        # pending: retrievals not yet recorded on a step (they go on the step they serve)
        docs, pending = first_hop(retriever, question, self.k, self.first_retrieval)
        steps: list[Step] = []
        answer, used, searches = "", 0, 0
        while used < self.max_tokens:
            can_search = searches < self.max_searches
            bias = (
                dict.fromkeys(BIASED, self.search_bias)
                if can_search and self.search_bias and lm.supports_logit_bias
                else {}
            )
            call = lm.generate(
                self.template.build(question, docs, answer),
                self.max_tokens - used,
                stop=STOP + SEARCH_CLOSE if can_search else STOP,
                purpose="generate",
                logit_bias=bias,
            )
            used += call.completion_tokens
            search = parse_search(call.text) if can_search else None
            if search is None:
                answer += call.text
                steps.append(Step(call.text, [call], pending))
                if answer_finished(answer, call.text, call.finish_reason == "stop"):
                    break
                pending = []
                continue
            before, query = search
            searches += 1
            # Stopped by ")]" (or by a blank line right after the query); cut by the token cap it is not.
            well_formed = call.finish_reason == "stop"
            # Keep the call in the answer as the model wrote it (closed), so it reads its own search.
            text = before + (f"{SEARCH_OPEN}{query})]" if query else "")
            answer += text
            steps.append(Step(text, [call], pending))
            pending = []
            if query and used < self.max_tokens:  # retrieve only if generation can go on
                docs, r = retrieve(retriever, query, self.k, SEARCH_CALL, well_formed=well_formed)
                pending.append(r)
        return finish(question, steps, capped="token_cap" if used >= self.max_tokens else None)
