"""Benchmarks (pytest-benchmark) of decoding: our logprob path against llama-cpp-python's plain
greedy decode on the same model, prompt and token count. Compare the two rows of the `decode`
group; each also records tokens/s in extra_info (`--benchmark-json` keeps it)."""

import pytest

from flarebench.strategies.lm import Prompt

pytestmark = pytest.mark.model

PROMPT = "Once upon a time, in a small village by the sea, there lived an old fisherman who"
TOKENS = 48


@pytest.mark.benchmark(group="decode")
def test_decode_with_logprobs(benchmark, lm):
    call = benchmark.pedantic(lambda: lm.generate(Prompt("", PROMPT), TOKENS, logprobs=True), rounds=3, warmup_rounds=1)
    assert call.completion_tokens == TOKENS and len(call.logprobs) == TOKENS
    benchmark.extra_info["tokens_per_s"] = TOKENS / benchmark.stats.stats.min


@pytest.mark.benchmark(group="decode")
def test_decode_plain_llama_cpp(benchmark, lm):
    llm = lm._llm  # the same loaded model, through llama-cpp-python's own completion path

    def plain():
        # Start from an empty cache, as our path starts from the (empty) static prefix, so both
        # evaluate the same prompt tokens; and make our backend restore its prefix next time.
        llm.reset()
        lm._loaded = None
        return llm.create_completion(PROMPT, max_tokens=TOKENS, temperature=0)

    out = benchmark.pedantic(plain, rounds=3, warmup_rounds=1)
    assert out["usage"]["completion_tokens"] == TOKENS
    benchmark.extra_info["tokens_per_s"] = TOKENS / benchmark.stats.stats.min
