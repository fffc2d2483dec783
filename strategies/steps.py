"""Building blocks for strategies that generate an answer step by step (a sentence or a window at
a time): draft the next sentence, and decide whether the answer is finished."""

from __future__ import annotations

import math
from dataclasses import dataclass

from flarebench.strategies.lm import LM, Prompt
from flarebench.strategies.prompts import STOP, states_answer
from flarebench.strategies.records import LMCall
from flarebench.strategies.sentences import first_sentence

#: Tokens drafted for one sentence (FLARE's look-ahead length). Backends stop once a second
#: sentence begins, so this only caps how long one sentence can get.
LOOKAHEAD_TOKENS = 64


@dataclass
class Sentence:
    """The first sentence of one LM call's output, with the tokens and logprobs that produced it."""

    text: str
    tokens: list[str]
    logprobs: list[float] | None
    call: LMCall
    #: The model ended the answer within this call (stop sequence or end of text, nothing after it).
    ended: bool
    #: Per token, the most likely alternatives as ``[text, logprob]`` pairs (when asked for).
    top_logprobs: list[list[list]] | None = None
    #: Per token, the entropy of the next-token distribution in nats (when asked for).
    entropies: list[float] | None = None

    @property
    def probs(self) -> list[float]:
        return [math.exp(lp) for lp in self.logprobs or []]


def kept_tokens(call: LMCall, n_chars: int) -> int:
    """How many of ``call``'s tokens produced its first ``n_chars`` characters."""
    kept, pos = 0, 0
    for tok in call.tokens:
        if pos >= n_chars:
            break
        pos += len(tok)
        kept += 1
    return kept


def cut_tokens(call: LMCall, n_chars: int) -> tuple[list[str], list[float] | None]:
    """The tokens (and their logprobs) of ``call`` that produced its first ``n_chars`` characters."""
    kept = kept_tokens(call, n_chars)
    return call.tokens[:kept], (call.logprobs[:kept] if call.logprobs is not None else None)


def next_sentence(
    lm: LM,
    prompt: Prompt,
    max_tokens: int,
    logprobs: bool = False,
    purpose: str = "generate",
    top_logprobs: int = 0,
    entropy: bool = False,
) -> Sentence:
    """Generate up to ``max_tokens`` tokens and keep the first sentence (the look-ahead of FLARE,
    or one chain-of-thought sentence of IRCoT). ``top_logprobs`` and ``entropy`` ask for the
    per-token alternatives and entropies a trigger judges by."""
    call = lm.generate(
        prompt,
        max_tokens,
        stop=STOP,
        logprobs=logprobs,
        purpose=purpose,
        stop_at_sentence=True,
        top_logprobs=top_logprobs,
        entropy=entropy,
    )
    return first_sentence_of(call)


def first_sentence_of(call: LMCall) -> Sentence:
    """The first sentence of ``call``'s output with the tokens (and their logprobs, alternatives and
    entropies) that produced it: what :func:`next_sentence` keeps, and what flare_direct's trigger
    judges (scored again from the recorded call by ``flarebench score``)."""
    # The space after the sentence belongs to the next one (" The ..."), as the tokenizer sees it.
    text = first_sentence(call.text).rstrip()
    kept = kept_tokens(call, len(text))
    ended = call.finish_reason == "stop" and not call.text[len(text) :].strip()
    return Sentence(
        text,
        call.tokens[:kept],
        call.logprobs[:kept] if call.logprobs is not None else None,
        call,
        ended,
        call.top_logprobs[:kept] if call.top_logprobs is not None else None,
        call.entropies[:kept] if call.entropies is not None else None,
    )


def whole_output(call: LMCall) -> Sentence:
    """``call``'s whole output as one draft, every token kept (adaptive's closed-book draft)."""
    return Sentence(
        call.text,
        call.tokens,
        call.logprobs,
        call,
        call.finish_reason == "stop",
        call.top_logprobs,
        call.entropies,
    )


def answer_finished(answer_so_far: str, last_text: str, ended: bool) -> bool:
    """An answer is finished once it states its final answer, the model ended it, or a step added
    nothing."""
    return states_answer(answer_so_far) or ended or not last_text.strip()
