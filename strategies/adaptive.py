"""Adaptive retrieval: decide once per question, from a closed-book draft's confidence, whether to
answer closed-book or retrieve once.

Draft the whole answer closed-book in one call; judge the draft with a confidence trigger
(:mod:`flarebench.strategies.triggers`, as flare_direct's gate, but over the whole draft rather
than one sentence). Confident: the draft is the answer. Not confident: retrieve ``k`` documents
with the question and answer again open-book in one call (as single_time does).

Mallen et al. 2023 ("When Not to Trust Language Models", arXiv 2212.10511) decide by the entity's
popularity; this decides by the model's own confidence in its draft, as the trigger literature does.
"""

from __future__ import annotations

from dataclasses import dataclass

from flarebench.strategies.base import Strategy, finish, retrieve
from flarebench.strategies.lm import LM
from flarebench.strategies.prompts import STOP, PromptTemplate, template
from flarebench.strategies.records import ADAPTIVE, DRAFT, Step, Trace
from flarebench.strategies.registry import register
from flarebench.strategies.retriever import Retriever
from flarebench.strategies.steps import whole_output
from flarebench.strategies.triggers import DEFAULT as DEFAULT_TRIGGER
from flarebench.strategies.triggers import SELF_CHECK_PROMPT, SELF_CHECK_QUERY, SELF_CHECK_STOP, Context, Gated
from flarebench.strategies.triggers import get as get_trigger

#: min_prob's default threshold here. FLARE's theta (0.8) judges one sentence; the lowest token
#: probability of a whole multi-sentence draft is lower, so at 0.8 nearly every draft would fire and
#: the strategy would be single_time plus a wasted call. 0.4 (FLARE's beta, its "clearly unsure"
#: level) is a starting point only: calibration on a dev split sets it per retrieval budget.
MIN_PROB_THRESHOLD = 0.4

#: The purpose of the open-book answer call: it regenerates the draft with documents, as FLARE
#: direct's regeneration does (the streaming model orders the step's retrieval before it).
ANSWER_PURPOSE = "regenerate"


@register("adaptive")
@dataclass
class Adaptive(Gated, Strategy):
    """Draft closed-book in one call; if the trigger fires on the draft, retrieve ``k`` documents
    with the question and answer open-book in one more call, else keep the draft.

    ``trigger`` names the gate and ``threshold`` its threshold (None: 0.4 for ``min_prob``, the
    trigger's default otherwise); ``ignore_known`` keeps the question's words from firing it (there
    are no documents in context when the draft is judged).

    The trace has one step per question, so ``retrieval_rate`` and ``triggered_share`` are both
    the share of questions it retrieved for: the step holds the draft call, the trigger's calls, and
    when it fired the retrieval and the answer call; its ``gate`` holds the judgement, and its text
    is the answer shown (the draft's text stays in the draft call's record).
    """

    trigger: str = DEFAULT_TRIGGER
    threshold: float | None = None
    ignore_known: bool = False

    #: The trigger judges the whole closed-book draft, not its first sentence.
    judged_draft = staticmethod(whole_output)

    @property
    def draft_template(self) -> PromptTemplate:
        """The closed-book template the draft is written with (as no_retrieval's)."""
        return template(self.answer_form, open_book=False)

    def validate(self) -> None:
        super().validate()
        # The trigger checks its own name and threshold, with the messages flare_direct gives.
        cls = get_trigger(self.trigger)
        threshold = MIN_PROB_THRESHOLD if self.trigger == DEFAULT_TRIGGER and self.threshold is None else self.threshold
        self._gate = cls(threshold, (), self.ignore_known)

    def static_prompts(self) -> tuple[str, ...]:
        prompts = (self.draft_template.static, self.template.static)
        return (*prompts, SELF_CHECK_PROMPT) if self.trigger == "self_check" else prompts

    def request_shape(self) -> dict:
        shape = {
            "prompts": [self.draft_template.sample(), self.template.sample()],
            "stops": [list(STOP), list(STOP)],
            "trigger": self.trigger,
        }
        if self.trigger == "self_check":
            shape["prompts"].append(SELF_CHECK_PROMPT + SELF_CHECK_QUERY)
            shape["stops"].append(list(SELF_CHECK_STOP))
        if self._gate.top_logprobs or self._gate.entropy:
            shape["per_token"] = {"top_logprobs": self._gate.top_logprobs, "entropy": self._gate.entropy}
        return shape

    def run(self, question: str, lm: LM, retriever: Retriever) -> Trace:
        gate = self._gate
        call = lm.generate(
            self.draft_template.build(question),
            self.max_tokens,
            stop=STOP,
            logprobs=gate.needs_logprobs,
            purpose=DRAFT,
            top_logprobs=gate.top_logprobs,
            entropy=gate.entropy,
        )
        draft = self.judged_draft(call)
        judgement = gate.judge(draft, Context(question, "", [], lm))  # None: an empty draft, kept
        calls = [call, *(judgement.calls if judgement else [])]
        record = judgement.record if judgement else None
        if not (judgement and judgement.fired):
            return finish(question, [Step(call.text, calls, [], record)])
        why = {"trigger": record["trigger"], "score": record["score"], "threshold": record["threshold"]}
        docs, retrieval = retrieve(retriever, question, self.k, ADAPTIVE, **why)
        answer = lm.generate(self.template.build(question, docs), self.max_tokens, stop=STOP, purpose=ANSWER_PURPOSE)
        return finish(question, [Step(answer.text, [*calls, answer], [retrieval], record)])
