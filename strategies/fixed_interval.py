"""Fixed-interval retrieval: the FLARE paper's baselines (Jiang et al. 2023, arXiv 2305.06983, section 6).

"Previous-window" (``mode=tokens``): retrieve every ``interval`` tokens with the window just
generated as the query. "Previous-sentence" (``mode=sentence``): retrieve before every sentence
with the sentence just generated. Either way the first step retrieves with the question, and each
retrieval replaces the documents in context, as in the paper.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from flarebench.strategies.base import Knob, Strategy, finish, retrieve
from flarebench.strategies.lm import LM, Prompt
from flarebench.strategies.prompts import STOP
from flarebench.strategies.records import FIRST_HOP, FIXED_INTERVAL, LMCall, Step, Trace
from flarebench.strategies.registry import register
from flarebench.strategies.retriever import Retriever
from flarebench.strategies.sentences import split_sentences
from flarebench.strategies.steps import LOOKAHEAD_TOKENS, answer_finished, next_sentence


@register("fixed_interval")
@dataclass
class FixedInterval(Strategy):
    """Retrieve at fixed points of the answer, whatever the model's confidence.

    ``mode=tokens``: each step is a window of ``interval`` tokens (the paper's l = 16);
    ``mode=sentence``: each step is one sentence (setting ``interval`` there is refused). Before every step but
    the first, the previous step's text is the query and its top ``k`` documents replace the
    context; the answer goes on from where it was, so a window may end and resume mid-word.
    """

    mode: Literal["tokens", "sentence"] = "tokens"
    interval: int = 16

    def validate(self) -> None:
        super().validate()
        if self.mode not in ("tokens", "sentence"):
            raise ValueError(f"mode must be 'tokens' or 'sentence', got {self.mode!r}")
        if self.interval < 1:
            raise ValueError(f"interval must be >= 1, got {self.interval}")
        # A sentence step has no window: an interval set there would be silently ignored.
        if self.mode == "sentence" and self.given("interval"):
            raise ValueError(
                "interval is for mode=tokens; mode=sentence retrieves before every sentence "
                f"(got interval={self.interval})"
            )

    def budget_knob(self) -> Knob | None:
        """In token windows, the interval: a longer window retrieves at fewer steps of an answer
        (the first window never does). In sentences, every step retrieves: nothing to tune."""
        if self.mode != "tokens":
            return None
        return Knob("interval", (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128), rate_rises=False)

    def run(self, question: str, lm: LM, retriever: Retriever) -> Trace:
        docs, retrieval = retrieve(retriever, question, self.k, FIRST_HOP, step=0)
        steps: list[Step] = []
        answer, used = "", 0
        while True:
            text, call, n_tokens, ended = self._next_step(
                lm, self.template.build(question, docs, answer), self.max_tokens - used
            )
            steps.append(Step(text, [call], [retrieval]))
            answer += text
            used += n_tokens
            if used >= self.max_tokens or answer_finished(self._settled(answer), text, ended):
                return finish(question, steps)
            docs, retrieval = retrieve(
                retriever, text.strip(), self.k, FIXED_INTERVAL, step=len(steps), answer_tokens=used
            )

    def _next_step(self, lm: LM, prompt: Prompt, budget: int) -> tuple[str, LMCall, int, bool]:
        """Generate the next window or sentence within ``budget`` tokens: its text, the call, the
        tokens it adds to the answer, and whether the model ended the answer."""
        if self.mode == "sentence":
            s = next_sentence(lm, prompt, min(LOOKAHEAD_TOKENS, budget))
            return s.text, s.call, len(s.tokens), s.ended
        call = lm.generate(prompt, min(self.interval, budget), stop=STOP)
        return call.text, call, call.completion_tokens, call.finish_reason == "stop"

    def _settled(self, answer: str) -> str:
        """The part of ``answer`` that can no longer change. A window cut at its token count may
        stop inside the final-answer statement ("So the answer is Rosa"), so in tokens mode its
        last sentence is not settled until a later window completes it."""
        if self.mode == "sentence":
            return answer
        return "".join(split_sentences(answer)[:-1])
