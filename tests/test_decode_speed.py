"""Benchmarks (pytest-benchmark) of decoding: our logprob path against llama-cpp-python's plain
greedy decode on the same model, prompt and token count. Compare the two rows of the `decode`
group; each also records tokens/s in extra_info (`--benchmark-json` keeps it).

Group `draft-topk`: what `--record-topk` costs in-process. A draft-length decode (one sentence's
worth of tokens, as flare_direct drafts) with logprobs, against the same decode that also computes
the top 20 alternatives and the entropy of the whole distribution at every token (what a draft call
asks for under `--record-topk 20`): compare the two rows' minimum times.

pytest-benchmark turns itself off under xdist (`-n 2`): the tests then run each decode once and
check it, untimed. CI times them on their own (.ci/run)."""

import pytest

from flarebench.strategies.lm import Prompt

pytestmark = pytest.mark.model

PROMPT = "Once upon a time, in a small village by the sea, there lived an old fisherman who"
TOKENS = 48


def _record(benchmark, key: str, of_min) -> None:
    """``extra_info[key] = of_min(the fastest round's seconds)``, where pytest-benchmark timed the rounds."""
    if not benchmark.disabled:
        benchmark.extra_info[key] = of_min(benchmark.stats.stats.min)


@pytest.mark.benchmark(group="decode")
def test_decode_with_logprobs(benchmark, lm):
    call = benchmark.pedantic(lambda: lm.generate(Prompt("", PROMPT), TOKENS, logprobs=True), rounds=3, warmup_rounds=1)
    assert call.completion_tokens == TOKENS and len(call.logprobs) == TOKENS
    _record(benchmark, "tokens_per_s", lambda s: TOKENS / s)


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
    _record(benchmark, "tokens_per_s", lambda s: TOKENS / s)


#: About one drafted sentence (flare_direct's look-ahead is cut at the first sentence).
DRAFT_TOKENS = 24


def _draft(lm, **extra):
    call = lm.generate(Prompt("", PROMPT), DRAFT_TOKENS, logprobs=True, purpose="draft", **extra)
    assert call.completion_tokens == DRAFT_TOKENS
    return call


@pytest.mark.benchmark(group="draft-topk")
def test_draft_decode_with_logprobs(benchmark, lm):
    call = benchmark.pedantic(lambda: _draft(lm), rounds=10, warmup_rounds=2)
    assert call.top_logprobs is None and call.entropies is None
    _record(benchmark, "ms_per_token", lambda s: 1000 * s / DRAFT_TOKENS)


@pytest.mark.benchmark(group="draft-topk")
def test_draft_decode_with_top20_and_entropy(benchmark, lm):
    call = benchmark.pedantic(lambda: _draft(lm, top_logprobs=20, entropy=True), rounds=10, warmup_rounds=2)
    assert [len(t) for t in call.top_logprobs] == [20] * DRAFT_TOKENS and len(call.entropies) == DRAFT_TOKENS
    _record(benchmark, "ms_per_token", lambda s: 1000 * s / DRAFT_TOKENS)
