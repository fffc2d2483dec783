"""Capabilities: what a strategy needs of its LM and what a backend offers, as sets of names.

A strategy's :meth:`~flarebench.strategies.base.Strategy.needs` and an LM's
:meth:`~flarebench.strategies.lm.LM.offers` are compared before the first probe runs
(:func:`flarebench.bench.runner.refusal`), so a mismatch is one line, not an error on every probe.
"""

from __future__ import annotations

from collections.abc import Iterable

LOGPROBS = "logprobs"
TOP_LOGPROBS = "top_logprobs"
LOGIT_BIAS = "logit_bias"
TOOLS = "tools"
CHAT = "chat"

#: Every capability, with the words a message uses for it.
CAPABILITIES = {
    LOGPROBS: "per-token logprobs",
    TOP_LOGPROBS: "per-token top logprobs",
    LOGIT_BIAS: "logit_bias",
    TOOLS: "tool calls",
    CHAT: "chat messages",
}


def describe(names: Iterable[str]) -> str:
    """``names`` in words, in :data:`CAPABILITIES`' order: "per-token logprobs and tool calls"."""
    words = [CAPABILITIES[n] for n in CAPABILITIES if n in set(names)]
    return " and ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)
