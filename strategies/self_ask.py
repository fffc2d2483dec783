"""Self-ask: question decomposition with retrieval (Press et al. 2022, "Measuring and Narrowing the
Compositionality Gap in Language Models", arXiv 2210.03350; code: ofirpress/self-ask).

The model first says whether follow-up questions are needed, then asks them one at a time ("Follow
up: ..."). Each follow-up question is sent to the retriever, and the model writes its "Intermediate
answer:" with those documents in context, until it states the final answer. The paper put a search
engine's answer snippet in the scratchpad as the intermediate answer; here the model reads the
retrieved passages and writes it, as the FLARE paper's self-ask baseline retrieves with each
sub-question (docs/strategies.md, self_ask).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from flarebench.strategies.base import Strategy, finish, first_hop, retrieve
from flarebench.strategies.lm import LM
from flarebench.strategies.prompts import (
    ANSWER_MARK,
    EXEMPLARS,
    LONG_EXEMPLARS,
    STOP,
    Exemplar,
    PromptTemplate,
    states_answer,
)
from flarebench.strategies.records import FOLLOW_UP, Passage, Step, Trace
from flarebench.strategies.registry import register
from flarebench.strategies.retriever import Retriever

#: Written by the harness after the question; the model answers "Yes." or "No.".
LABEL = "Are follow up questions needed here:"
FOLLOW_UP_MARK = "Follow up:"
INTERMEDIATE = "\nIntermediate answer:"
#: A turn ends where the model would start reading the answer to its own follow-up question.
TURN_STOP = (INTERMEDIATE, *STOP)
#: An intermediate answer, and a final answer the harness asks for, are one line.
LINE_STOP = ("\n",)
#: What the harness writes to ask for the final answer (short answers only).
FINAL_CUE = f"\n{ANSWER_MARK}"
#: What the harness writes after a bare "Yes.", to ask for the follow-up question it announced.
FOLLOW_UP_CUE = f"\n{FOLLOW_UP_MARK}"


def _pad(*rounds: tuple[str, str], final: str = "") -> str:
    """A worked scratchpad: the decision ("Yes.", as in every exemplar of the paper), each follow-up
    question with its intermediate answer, then the final line, if any."""
    lines = ["Yes."]
    for question, answer in rounds:
        lines += [f"{FOLLOW_UP_MARK} {question}", f"{INTERMEDIATE.strip()} {answer}"]
    return "\n".join([*lines, final] if final else lines)


# The shared exemplars' documents and questions (fictional), answered by self-asking. Short answers
# end "So the answer is X." (the paper's "So the final answer is: X" in our form, which
# extract_answer reads); long answers are their intermediate answers, one fact each, so they end
# after the last one.
SELF_ASK_ANSWERS = {
    "short": (
        _pad(
            ("Who is the friend of Ivo Lanark?", "The friend of Ivo Lanark is Bea Tull."),
            ("Who is the mother of Bea Tull?", "The mother of Bea Tull is Rosa Tull."),
            final="So the answer is Rosa Tull.",
        ),
        _pad(
            ("Who is the father of Nell Oster?", "The father of Nell Oster is Tam Oster."),
            ("What is the hobby of Tam Oster?", "The hobby of Tam Oster is fishing."),
            final="So the answer is fishing.",
        ),
        _pad(
            ("Who are the sons of Edda Voss?", "The sons of Edda Voss are Kai Voss, Lin Voss."),
            final="So the answer is 2.",
        ),
        _pad(
            ("Who are the friends of Ruth Kell?", "The friends of Ruth Kell are Ada Moss, Bo Fink."),
            ("What is the occupation of Ada Moss?", "The occupation of Ada Moss is nurse."),
            ("What is the occupation of Bo Fink?", "The occupation of Bo Fink is actor."),
            final="So the answer is nurse, actor.",
        ),
    ),
    "long": (
        _pad(
            ("Who is the mother of Ivo Lanark?", "The mother of Ivo Lanark is Mara Lanark."),
            ("What is the occupation of Mara Lanark?", "The occupation of Mara Lanark is surgeon."),
            ("What is the hobby of Mara Lanark?", "The hobby of Mara Lanark is chess."),
        ),
        _pad(
            ("Which image does quillpay run in production?", "Production runs the image quillpay:2.7.1."),
            ("Which base image is quillpay:2.7.1 built on?", "quillpay:2.7.1 is built on corvid-base 3.4."),
            (
                "What should be checked after a quillpay rollout?",
                "After the rollout, watch the error rate for 15 minutes and roll back if it exceeds 2%.",
            ),
        ),
        _pad(
            ("Who commanded incident 4410?", "Incident 4410 was commanded by Lene Brask."),
            (
                "What caused incident 4410?",
                "The billing cache filled its disk because a config change disabled log rotation.",
            ),
            ("Who is the follow-up owner of incident 4410?", "The follow-up owner of incident 4410 is Pim Hale."),
            ("Which team does Pim Hale lead?", "Pim Hale leads the storage team."),
        ),
    ),
}
_ASK_HOW = (
    "When you need a fact first, ask a follow up question; documents for it will be provided, and you "
    "write the intermediate answer from them. Ask one follow up question at a time."
)
INSTRUCTIONS = {
    "short": f'Answer the question using the documents. {_ASK_HOW} Then end with "So the answer is" followed by '
    "the answer.\n\n",
    "long": "Answer the question using the documents in a few short sentences, one fact per sentence. "
    f"{_ASK_HOW} Write each intermediate answer as one short sentence that gives the value exactly as the "
    "documents state it.\n\n",
}
SELF_ASK_TEMPLATES = {
    form: PromptTemplate(
        open_book=True,
        exemplars=tuple(Exemplar(ex.docs, ex.question, a) for ex, a in zip(base, SELF_ASK_ANSWERS[form], strict=True)),
        instruction=INSTRUCTIONS[form],
        answer_label=LABEL,
    )
    for form, base in (("short", EXEMPLARS), ("long", LONG_EXEMPLARS))
}


@register("self_ask")
@dataclass
class SelfAsk(Strategy):
    """Retrieve ``k`` documents with the question (``first_retrieval``), then let the model
    self-ask: each turn it writes a follow-up question or its answer. A follow-up question
    retrieves ``k`` documents, which replace those in context, and the model writes the
    intermediate answer from them. Short answers end with "So the answer is X": once
    ``max_follow_ups`` are answered, or when the model stops without an answer, the harness asks
    for it. Long answers are the intermediate answers and end when the model asks no more.
    """

    max_follow_ups: int = 4
    first_retrieval: bool = True

    def validate(self) -> None:
        super().validate()
        if self.max_follow_ups < 0:
            raise ValueError(f"max_follow_ups must be >= 0, got {self.max_follow_ups}")

    @property
    def template(self) -> PromptTemplate:
        return SELF_ASK_TEMPLATES[self.answer_form]

    def request_shape(self) -> dict:
        def render(tail: str) -> str:
            return self.template.build("<question>", [Passage("<id>", "<title>", "<text>")], f"<so far>{tail}").text

        tails = ("", FOLLOW_UP_CUE, INTERMEDIATE) + ((FINAL_CUE,) if self.answer_form == "short" else ())
        return {"prompts": [render(t) for t in tails], "stops": [list(TURN_STOP), list(LINE_STOP)]}

    def run(self, question: str, lm: LM, retriever: Retriever) -> Trace:
        # pending: retrievals not yet recorded on a step (they go on the step whose call they serve)
        docs, pending = first_hop(retriever, question, self.k, self.first_retrieval)
        steps: list[Step] = []
        scratch, answer, used, asked, capped = "", "", 0, 0, None
        while used < self.max_tokens:
            prompt = self.template.build(question, docs, scratch)
            call = lm.generate(prompt, self.max_tokens - used, stop=TURN_STOP, purpose="follow_up")
            used += call.completion_tokens
            calls, turn = [call], read_turn(call.text)
            if _BARE_YES.fullmatch(call.text) and asked < self.max_follow_ups and used < self.max_tokens:
                # "Yes." and nothing more (a small model stops there): the harness writes the label
                # of the line it announced, as it writes the final-answer cue, and the model asks.
                cued = call.text.rstrip() + FOLLOW_UP_CUE
                call = lm.generate(
                    self.template.build(question, docs, scratch + cued),
                    self.max_tokens - used,
                    stop=TURN_STOP,
                    purpose="follow_up",
                )
                used += call.completion_tokens
                calls, turn = [*calls, call], read_turn(cued + call.text)
            if turn.question is not None and asked == self.max_follow_ups:
                # Over the cap: the question goes unanswered and stays out of the prompt.
                steps.append(Step("", calls, pending))
                capped = "step_cap"
                break
            steps.append(Step(_said(turn.said), calls, pending))
            scratch, answer = scratch + turn.scratch, answer + _said(turn.said)
            if turn.question is None or used >= self.max_tokens or states_answer(answer):
                break
            asked += 1
            docs, found = retrieve(retriever, turn.question, self.k, FOLLOW_UP, follow_up=asked)
            call = lm.generate(
                self.template.build(question, docs, scratch + INTERMEDIATE),
                self.max_tokens - used,
                stop=LINE_STOP,
                purpose="intermediate",
            )
            used += call.completion_tokens
            steps.append(Step(_said(call.text), [call], [found]))
            scratch, answer, pending = scratch + INTERMEDIATE + call.text, answer + _said(call.text), []
            if states_answer(answer):
                break
        if self.answer_form == "short" and not states_answer(answer) and used < self.max_tokens:
            call = lm.generate(
                self.template.build(question, docs, scratch + FINAL_CUE),
                self.max_tokens - used,
                stop=LINE_STOP,
                purpose="final",
            )
            steps.append(Step(_said(ANSWER_MARK + call.text), [call]))
        return finish(question, steps, capped)


@dataclass(frozen=True)
class Turn:
    """What the model wrote in one turn of the scratchpad."""

    #: The lines that state something, joined: not the "Yes."/"No." decision, not a follow-up question.
    said: str
    #: The follow-up question it asked, if any.
    question: str | None
    #: Its text through the follow-up question or the final-answer line: what the prompt keeps.
    scratch: str


# The decision the model writes after LABEL, at the start of its first turn.
_DECISION_RE = re.compile(r"\s*(?:yes|no)\.", re.IGNORECASE)
_BARE_YES = re.compile(r"\s*yes\.\s*", re.IGNORECASE)


def read_turn(text: str) -> Turn:
    """Read one turn: the first follow-up question or final-answer line ends it (the model may run
    on past it on a backend that does not stop); a "Follow up:" with no question asks nothing."""
    decision = _DECISION_RE.match(text)
    said: list[str] = []
    end = decision.end() if decision else 0
    for line in text[end:].splitlines(keepends=True):
        end += len(line)
        body = line.strip()
        if body.startswith(FOLLOW_UP_MARK):
            if asked := " ".join(body[len(FOLLOW_UP_MARK) :].split()):
                return Turn(" ".join(said), asked, text[:end].rstrip())
        elif body:
            said.append(body)
            if states_answer(body):
                break
    return Turn(" ".join(said), None, text[:end].rstrip())


def _said(text: str) -> str:
    """A step's text as it joins the answer: one space-led line, or nothing."""
    return " " + " ".join(text.split()) if text.strip() else ""
