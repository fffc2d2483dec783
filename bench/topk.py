"""``--record-topk K``: every draft call records its top-K alternatives and entropies, so that
``flarebench score`` can judge every probability trigger again from one run
(:mod:`flarebench.bench.trigger_scores`).

:class:`RecordTopK` wraps the run's LM (outside the ``--cache``, so cache keys see the larger
request) and widens each request whose ``purpose`` is ``draft`` (flare_direct's and adaptive's):
logprobs on, ``top_logprobs`` at least K, ``entropy`` on. Every other request passes unchanged.
Decoding is greedy, so the tokens chosen are those of a run without it: a trigger that asked for two
alternatives (``margin``) reads the two most likely of the K, and ``min_prob`` and ``mean_logprob``
read the chosen tokens' logprobs only. The values are stored as computed and rounded only when a
trace is written (:data:`flarebench.strategies.records.PER_TOKEN_DIGITS`).
"""

from __future__ import annotations

import dataclasses

from flarebench.strategies.lm import LM, GenerationRequest, WrappedLM
from flarebench.strategies.records import DRAFT, LMCall

#: The most alternatives per token: what the OpenAI API serves. In-process they and the entropy
#: cost about 1 ms per drafted token (the whole vocabulary's softmax), some 5% of a draft's decode on
#: 2 cores (tests/test_decode_speed.py, group draft-topk).
MAX_K = 20


def check_k(k: int) -> None:
    """A ValueError naming the valid range for a K outside 1..:data:`MAX_K`."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise ValueError(
            f"--record-topk must be an integer from 1 to {MAX_K} (alternatives per drafted token), got {k}"
        )


def widened(request: GenerationRequest, k: int) -> GenerationRequest:
    """``request`` as :class:`RecordTopK` sends it: a draft asks for logprobs, at least ``k``
    alternatives per token and the entropies; any other request is returned as it is."""
    if request.purpose != DRAFT:
        return request
    return dataclasses.replace(request, logprobs=True, top_logprobs=max(k, request.top_logprobs), entropy=True)


class RecordTopK(WrappedLM):
    """An LM whose draft calls carry their top-``k`` alternatives and entropies (see the module)."""

    def __init__(self, inner: LM, k: int):
        check_k(k)
        super().__init__(inner)
        self.k = k

    def _complete(self, request: GenerationRequest) -> LMCall:
        return self.forward(widened(request, self.k))
