"""A scripted LM for unit tests of control flow: it returns chosen texts with chosen logprobs.

Never used for anything a benchmark reports on; the real embedded LM is tested elsewhere.
"""

from __future__ import annotations

import math

from strategies.lm import LM, GenerationRequest
from strategies.records import LMCall


class ScriptedLM(LM):
    """Replies with the next scripted item (a text, or a (tokens, probabilities) pair), cycling
    when the script runs out, and remembers every request."""

    name = "scripted"

    def __init__(self, script: list, supports_logprobs: bool = True):
        self.script = list(script)
        self.supports_logprobs = supports_logprobs
        self.requests: list[GenerationRequest] = []

    def _complete(self, request: GenerationRequest) -> LMCall:
        item = self.script[len(self.requests) % len(self.script)]
        self.requests.append(request)
        if isinstance(item, str):
            tokens, probs = [item], [1.0]
        else:
            tokens, probs = item
        return LMCall(
            purpose=request.purpose,
            prompt_tokens=len(request.prompt.text.split()),
            evaluated_tokens=len(request.prompt.dynamic.split()),
            completion_tokens=len(tokens),
            text="".join(tokens),
            finish_reason="stop",
            seconds=0.0,
            tokens=list(tokens),
            logprobs=[math.log(p) for p in probs] if request.logprobs else None,
        )
