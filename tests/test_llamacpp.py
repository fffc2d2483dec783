"""The in-process llama.cpp backend with the real embedded model (SmolLM2-135M-Instruct)."""

import llama_cpp
import numpy as np
import pytest

from flarebench.strategies.backends import make_lm, smollm2_path
from flarebench.strategies.llamacpp import PREFIX_STATES, THREADS_ENV, _common
from flarebench.strategies.lm import WARM_UP, LMError, Prompt
from flarebench.strategies.prompts import PromptTemplate

pytestmark = pytest.mark.model

TEXT = "The capital of France is Paris. The capital of Germany is"


def test_logprobs_match_llama_cpp_pythons_own_path(lm):
    # llama-cpp-python's slow path (logits_all + logprobs=1) is the reference for our numpy path.
    ref_llm = llama_cpp.Llama(model_path=str(smollm2_path()), n_ctx=512, logits_all=True, verbose=False, n_threads=2)
    ref = ref_llm.create_completion(TEXT, max_tokens=8, temperature=0, logprobs=1)["choices"][0]
    ref_llm.close()
    ours = lm.generate(Prompt("", TEXT), 8, logprobs=True)
    assert ours.text == ref["text"]
    assert ours.tokens == ref["logprobs"]["tokens"]
    np.testing.assert_allclose(ours.logprobs, ref["logprobs"]["token_logprobs"], atol=2e-3)
    assert all(lp <= 0 for lp in ours.logprobs)


def test_entropies_and_top_logprobs_are_those_of_the_logits_and_change_nothing_else(lm):
    # The logits each decoding step saw, copied as they are read: the reference for a numpy computation.
    seen, read = [], lm._last_logits
    lm._last_logits = lambda: seen.append(np.array(read(), dtype=np.float32)) or seen[-1]
    try:
        call = lm.generate(Prompt("", TEXT), 8, logprobs=True, top_logprobs=3, entropy=True)
    finally:
        del lm._last_logits  # the instance attribute shadowed the method
    plain = lm.generate(Prompt("", TEXT), 8, logprobs=True)
    assert (call.text, call.tokens, call.logprobs) == (plain.text, plain.tokens, plain.logprobs)
    assert plain.top_logprobs is None and plain.entropies is None
    assert len(call.top_logprobs) == len(call.entropies) == len(call.tokens) > 0
    for logits, lp, top, h in zip(seen, call.logprobs, call.top_logprobs, call.entropies):
        x = logits.astype(np.float64)
        logp = x - x.max() - np.log(np.exp(x - x.max()).sum())
        assert h == pytest.approx(float(-(np.exp(logp) * logp).sum()), abs=1e-6)
        best = np.argsort(-logp, kind="stable")[:3]
        assert [t for t, _ in top] == [lm._piece(int(i)).decode("utf-8", errors="replace") for i in best]
        assert [v for _, v in top] == pytest.approx(logp[best].tolist(), abs=1e-6)
        assert top[0][1] == pytest.approx(lp, abs=1e-5)  # greedy: the chosen token is the most likely


def test_token_cap_and_stop_sequences(lm):
    capped = lm.generate(Prompt("", TEXT), 3)
    assert (capped.completion_tokens, capped.finish_reason, capped.logprobs) == (3, "length", None)
    stopped = lm.generate(Prompt("", TEXT), 40, stop=(".",))
    assert stopped.finish_reason == "stop" and "." not in stopped.text
    assert stopped.text == lm.generate(Prompt("", TEXT), 40).text.split(".")[0]


def test_the_prompts_evaluation_is_timed_apart(lm):
    call = lm.generate(Prompt("", TEXT), 8)
    assert 0 < call.prefill_seconds < call.seconds  # the prefill, then 8 tokens


def test_static_prefix_is_evaluated_once(lm):
    t = PromptTemplate(open_book=False)
    first = lm.generate(t.build("Who is the mother of Ann Lee?"), 4)
    second = lm.generate(t.build("Who is the father of Bo Kim?"), 4)
    static_tokens = len(lm._prefix_ids[t.static, False])
    assert static_tokens > 100
    # Only the tokens the whole prompt shares with the static prefix's own tokenization are reused.
    shared = _common(
        lm._prefix_ids[t.static, False], lm._tokenize(t.build("Who is the father of Bo Kim?").text, bos=True)
    )
    assert static_tokens - 2 <= shared <= static_tokens
    assert second.evaluated_tokens == second.prompt_tokens - shared
    assert first.prompt_tokens > static_tokens and second.evaluated_tokens < 30


def test_a_warm_up_restores_the_prefix_state_an_earlier_one_saved_and_answers_the_same(tmp_path, monkeypatch):
    """The warm-up saves each static prefix's evaluated state; the next process's warm-up restores
    it (evaluating only its own token) and the calls after it are the same to the last logprob. A
    damaged file is evaluated again, and a probe's own call never reads one."""
    monkeypatch.setenv("FLAREBENCH_CACHE", str(tmp_path))
    prompt = PromptTemplate(open_book=False).build("Who is the mother of Ann Lee?")

    def fresh_run(purpose=WARM_UP):
        lm = make_lm("llamacpp:smollm2")
        try:
            warm = lm.generate(Prompt(prompt.static, " "), 1, purpose=purpose)
            return warm, lm.generate(prompt, 12, logprobs=True)
        finally:
            lm.close()

    evaluated, first = fresh_run()
    assert evaluated.evaluated_tokens > 100
    (state,) = (tmp_path / PREFIX_STATES).iterdir()
    restored, again = fresh_run()
    assert restored.evaluated_tokens < 5  # the warm-up's own " " (and the junction token)
    assert (again.text, again.tokens, again.logprobs, again.evaluated_tokens) == (
        first.text, first.tokens, first.logprobs, first.evaluated_tokens
    )  # fmt: skip
    state.write_bytes(state.read_bytes()[:-1000])  # cut short: its checksum no longer matches
    damaged, third = fresh_run()
    assert damaged.evaluated_tokens == evaluated.evaluated_tokens and third.logprobs == first.logprobs
    assert fresh_run(purpose="generate")[0].evaluated_tokens == evaluated.evaluated_tokens


def test_a_chat_prompt_reads_its_special_tokens_and_keeps_its_own_prefix(lm):
    """SmolLM2's chat template: <|im_start|> is one control token in a chat turn (plain text
    elsewhere), and the rendered system message is a static prefix of its own."""
    messages = [{"role": "system", "content": "Answer."}, {"role": "user", "content": "Who is Ann Lee?"}]
    call = lm.chat(messages, [], 4)
    assert call.tool_calls is None and call.prompt_tokens < 25 and call.seconds > 0
    assert len(lm._tokenize("<|im_start|>", bos=False, special=True)) == 1
    assert len(lm._tokenize("<|im_start|>", bos=False)) > 1
    assert ("<|im_start|>system\nAnswer.<|im_end|>\n", True) in lm._prefix_ids


def test_the_whole_prompt_is_tokenized_as_a_server_tokenizes_it(lm):
    # The static part ends in a blank line and the dynamic part starts a new block: tokenized apart,
    # the junction is "\n\n" + "Documents"; a server sees the whole text and may merge otherwise.
    t = PromptTemplate(open_book=True)
    prompt = t.build("Who is the mother of Ann Lee?")
    call = lm.generate(prompt, 1)
    assert call.prompt_tokens == len(lm._llm.tokenize(prompt.text.encode(), add_bos=True, special=False))
    # and the reuse of the prefix changes no answer: the same call on a fresh state gives the same
    lm._snapshots.clear()
    again = lm.generate(prompt, 12, logprobs=True)
    other = lm.generate(Prompt(t.static, "Question: unrelated\nAnswer:"), 3)
    assert other.text is not None
    assert lm.generate(prompt, 12, logprobs=True).logprobs == again.logprobs


def test_token_texts_join_to_the_text_with_a_non_ascii_name(lm):
    # A letter split across tokens belongs to the token that completes it, so the texts join to the
    # text and a sentence cut by characters keeps the right tokens.
    call = lm.generate(Prompt("", "Zoë Øvergård met Zoë Øvergård. Zoë Øvergård met Zoë"), 12)
    assert "".join(call.tokens) == call.text
    assert "\ufffd" not in call.text


def test_same_call_same_answer_whatever_ran_before(lm):
    a, b = PromptTemplate(open_book=False), PromptTemplate(open_book=True)

    def ask(t):
        return lm.generate(t.build("How many sons does Edda Voss have?"), 24, logprobs=True)

    first = ask(a)
    ask(b)  # another prefix in between: the first one's state is restored from its snapshot
    lm.generate(Prompt(a.static, "Question: something else entirely\nAnswer:"), 10)
    again = ask(a)
    assert (again.text, again.logprobs) == (first.text, first.logprobs)


def test_an_answer_begun_after_the_same_prompt_is_evaluated_afresh(lm, phantom, retriever):
    # Without begin_answer, the second call would continue from the first one's state (evaluating
    # one token, where a fresh call evaluates the whole dynamic part in one batch): on an AVX-512
    # CPU that moved this prompt's logprobs by up to 0.94.
    from flarebench.strategies.prompts import OPEN_BOOK, STOP

    probe = phantom.probes[1]
    prompt = OPEN_BOOK.build(probe.question, retriever.search(probe.question, 3)[0])
    lm.begin_answer()
    first = lm.generate(prompt, 48, stop=STOP, logprobs=True)
    lm.begin_answer()
    again = lm.generate(prompt, 48, stop=STOP, logprobs=True)
    assert (again.text, again.logprobs) == (first.text, first.logprobs)


def test_the_thread_count_changes_no_answer(lm, phantom, retriever, monkeypatch):
    # Ray workers (--threads-per-worker) and the test suite's two workers ($FLAREBENCH_LM_THREADS)
    # run the model with another thread count than a plain run: the same tokens and logprobs, exactly.
    from flarebench.strategies.prompts import OPEN_BOOK

    monkeypatch.setenv(THREADS_ENV, "1" if lm.n_threads != 1 else "2")
    other = make_lm("llamacpp:smollm2")
    probe = phantom.probes[2]
    prompt = OPEN_BOOK.build(probe.question, retriever.search(probe.question, 3)[0])
    try:
        calls = []
        for model in (lm, other):
            model.begin_answer()
            calls.append(model.generate(prompt, 24, logprobs=True, top_logprobs=3, entropy=True))
    finally:
        other.close()
    assert {lm.n_threads, other.n_threads} == {1, 2}
    ours, theirs = ((c.text, c.tokens, c.logprobs, c.top_logprobs, c.entropies) for c in calls)
    assert ours == theirs and len(ours[1]) == 24


def test_a_model_built_without_its_weights_is_described_alike_and_loads_them_for_its_first_call(lm, phantom, capsys):
    # A Ray run's driver builds its model so (bench/session.py): the run configuration (so the
    # fingerprint a gate compares), the chat template and the tokens are those of the loaded model,
    # and the weights, read only before a first call, give the same answer.
    light = make_lm("llamacpp:smollm2", weights=False)
    try:
        assert light._llm.model_params.vocab_only and not lm._llm.model_params.vocab_only
        assert light.describe() == lm.describe()
        assert light.supports_tools == lm.supports_tools and light._eog == lm._eog
        question = phantom.probes[0].question
        assert light._tokenize(question, bos=True) == lm._tokenize(question, bos=True)
        assert capsys.readouterr().err == ""  # llama.cpp's warning about a vocabulary alone is held back
        lm.begin_answer()
        calls = [model.generate(Prompt("", TEXT), 8, logprobs=True) for model in (lm, light)]
        assert not light._llm.model_params.vocab_only
        assert (calls[1].text, calls[1].logprobs) == (calls[0].text, calls[0].logprobs)
    finally:
        light.close()


def test_prompt_longer_than_context_is_a_clear_error(lm):
    with pytest.raises(LMError, match="exceeds the context"):
        lm.generate(Prompt("", "word " * 5000), 2)


def test_unknown_lm_spec_names_the_known_ones(tmp_path):
    with pytest.raises(LMError, match="llamacpp:smollm2"):
        make_lm("vllm:gpt")
    with pytest.raises(LMError, match="model file not found"):
        make_lm(f"llamacpp:{tmp_path / 'missing.gguf'}")
    assert make_lm.__doc__
