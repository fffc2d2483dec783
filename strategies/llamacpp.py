"""In-process LM backend: llama.cpp through llama-cpp-python, greedy decoding with per-token logprobs.

Two things make it fast and reproducible:

* Logprobs come from the raw logits of the last position, log-softmaxed with numpy, in our own
  decode loop. llama-cpp-python's ``logprobs=`` path sorts the whole vocabulary in Python for every
  token (~7 tok/s) and its ``echo=True`` prompt logprobs are wrong in 0.3.36; neither is used.
* The static prompt prefix is evaluated once per run; the KV cache is cut back to it (or restored
  from a snapshot of it) before every call, so each call evaluates only its own tokens, always in
  the same batches from the same state: same configuration, same answers.
"""

from __future__ import annotations

import ctypes
import hashlib
from pathlib import Path

import llama_cpp
import numpy as np

from strategies.lm import LM, GenerationRequest, LMError
from strategies.records import LMCall
from strategies.sentences import split_sentences

# Fixed so that logits (and so answers) do not depend on the machine's core count or on how a
# prompt happens to be split into batches.
N_THREADS = 2
N_BATCH = 512
N_CTX = 4096


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class LlamaCppLM(LM):
    """A GGUF model run in-process. ``name`` is the spec it was made from (``llamacpp:smollm2``)."""

    supports_logprobs = True
    supports_logit_bias = True

    def __init__(self, model_path: str | Path, name: str | None = None, n_ctx: int = N_CTX):
        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise LMError(f"model file not found: {self.model_path}")
        self.name = name or f"llamacpp:{self.model_path}"
        self._llm = llama_cpp.Llama(
            model_path=str(self.model_path),
            n_ctx=n_ctx,
            n_batch=N_BATCH,
            n_ubatch=N_BATCH,
            n_threads=N_THREADS,
            n_threads_batch=N_THREADS,
            seed=0,
            verbose=False,
            logits_all=False,
        )
        self._ctx = self._llm._ctx.ctx
        self._n_vocab = self._llm.n_vocab()
        self._eog = {t for t in range(self._n_vocab) if llama_cpp.llama_vocab_is_eog(self._llm._model.vocab, t)}
        self._sha256: str | None = None
        self._prefix_ids: dict[str, list[int]] = {}
        self._snapshots: dict[str, bytes] = {}
        self._loaded: str | None = None  # the static prefix whose KV is in the cache now
        self._last_dyn: list[int] = []  # the last call's dynamic prompt tokens
        self._kv_dyn: list[int] = []  # tokens in the KV cache after the static prefix
        self._piece_cache: dict[int, bytes] = {}

    # -- prefix handling -------------------------------------------------------------------------

    def _tokenize(self, text: str, bos: bool) -> list[int]:
        return self._llm.tokenize(text.encode("utf-8"), add_bos=bos, special=False)

    def _use_prefix(self, static: str) -> int:
        """Put the KV cache at the end of ``static``; return how many tokens had to be evaluated."""
        ids = self._prefix_ids.get(static)
        if ids is None:
            ids = self._prefix_ids[static] = self._tokenize(static, bos=True)
        if self._loaded == static:
            return 0
        self._last_dyn, self._kv_dyn = [], []
        snap = self._snapshots.get(static)
        if snap is not None:
            buf = (ctypes.c_uint8 * len(snap)).from_buffer_copy(snap)
            if llama_cpp.llama_state_set_data(self._ctx, buf, len(snap)) != len(snap):
                raise LMError("could not restore the prompt-prefix state")
            self._llm.input_ids[: len(ids)] = ids
            self._llm.n_tokens = len(ids)
            self._loaded = static
            return 0
        self._llm.reset()
        self._eval(ids)
        size = llama_cpp.llama_state_get_size(self._ctx)
        buf = (ctypes.c_uint8 * size)()
        n = llama_cpp.llama_state_get_data(self._ctx, buf, size)
        self._snapshots[static] = bytes(buf[:n])
        self._loaded = static
        return len(ids)

    def _reusable(self, dyn: list[int]) -> int:
        """How many tokens of ``dyn`` can be kept from the KV cache beyond the static prefix.

        Only when this prompt extends the previous call's whole prompt (the next step of the same
        answer, as when FLARE accepts a sentence and drafts the next): then the cache holds that
        prompt and the tokens generated after it. A prompt of another probe never extends it, so
        each probe's calls evaluate the same tokens from the same state wherever the run starts.
        """
        if not self._last_dyn or dyn[: len(self._last_dyn)] != self._last_dyn:
            return 0
        common = 0
        for a, b in zip(dyn, self._kv_dyn):
            if a != b:
                break
            common += 1
        return min(common, len(dyn) - 1)  # evaluate at least one token to get fresh logits

    def _eval(self, ids: list[int]) -> None:
        if self._llm.n_tokens + len(ids) > self._llm.n_ctx():
            raise LMError(
                f"prompt of {self._llm.n_tokens + len(ids)} tokens exceeds the context of {self._llm.n_ctx()}"
            )
        self._llm.eval(ids)

    # -- decoding ----------------------------------------------------------------------------------

    def _last_logits(self) -> np.ndarray:
        ptr = llama_cpp.llama_get_logits_ith(self._ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self._n_vocab,))

    def _piece(self, tok: int) -> bytes:
        piece = self._piece_cache.get(tok)
        if piece is None:
            piece = self._piece_cache[tok] = self._llm.detokenize([tok])
        return piece

    def _bias_vector(self, bias: dict[str, float]) -> np.ndarray | None:
        if not bias:
            return None
        vec = np.zeros(self._n_vocab, dtype=np.float32)
        for text, value in bias.items():
            for tok in self._tokenize(text, bos=False)[:1]:
                vec[tok] += value
        return vec

    def _complete(self, request: GenerationRequest) -> LMCall:
        static_in_cache = self._loaded == request.prompt.static
        evaluated = self._use_prefix(request.prompt.static)
        prefix_len = len(self._prefix_ids[request.prompt.static])
        dyn = self._tokenize(request.prompt.dynamic, bos=False)
        if not dyn:
            raise LMError("the prompt's dynamic part is empty: there is nothing to continue from")
        keep = self._reusable(dyn) if static_in_cache else 0
        self._last_dyn, self._kv_dyn = [], []  # unknown until this evaluation succeeds
        self._llm.n_tokens = prefix_len + keep  # eval() cuts the KV cache back to n_tokens
        self._eval(dyn[keep:])
        evaluated += len(dyn) - keep
        self._last_dyn, self._kv_dyn = dyn, list(dyn)
        bias = self._bias_vector(request.logit_bias)
        out = bytearray()
        ends: list[int] = []  # byte offset where each generated token's text ends
        toks: list[int] = []
        logprobs: list[float] = []
        finish, cut = "length", None
        for _ in range(request.max_tokens):
            logits = self._last_logits()
            if bias is not None:
                logits = logits + bias
            tok = int(np.argmax(logits))
            # log-softmax at the argmax: logit - logsumexp = -log(sum(exp(logits - max)))
            logprobs.append(-float(np.log(np.exp(logits - logits[tok]).sum(dtype=np.float64))))
            if tok in self._eog:
                logprobs.pop()
                finish = "stop"
                break
            toks.append(tok)
            out += self._piece(tok)
            ends.append(len(out))
            cut = _find_stop(out, request.stop, ends[-2] if len(ends) > 1 else 0)
            if cut is not None:
                finish = "stop"
                break
            if (
                request.stop_at_sentence
                and self._piece(tok)[:1].isspace()
                and _ends_sentence(out, len(out) - len(self._piece(tok)))
            ):
                # A token that starts with whitespace may start a second sentence; the caller keeps
                # only the first, so the look-ahead ends here (same first sentence, fewer tokens).
                cut = _first_sentence_end(out)
                if cut is not None:
                    finish = "sentence"
                    break
            if self._llm.n_tokens + 1 > self._llm.n_ctx():
                break
            self._eval([tok])
            self._kv_dyn.append(tok)
        text_bytes = bytes(out[:cut]) if cut is not None else bytes(out)
        # Keep the tokens that contribute text before the stop sequence.
        keep = len(toks) if cut is None else sum(1 for i in range(len(toks)) if (ends[i - 1] if i else 0) < cut)
        return LMCall(
            purpose=request.purpose,
            prompt_tokens=prefix_len + len(dyn),
            evaluated_tokens=evaluated,
            completion_tokens=len(toks),
            text=text_bytes.decode("utf-8", errors="replace"),
            finish_reason=finish,
            seconds=0.0,
            tokens=[self._piece(t).decode("utf-8", errors="replace") for t in toks[:keep]],
            logprobs=logprobs[:keep] if request.logprobs else None,
        )

    def describe(self) -> dict:
        if self._sha256 is None:
            self._sha256 = sha256_file(self.model_path)
        return {
            "name": self.name,
            "file": self.model_path.name,
            "sha256": self._sha256,
            "backend": "llama-cpp-python",
            "llama_cpp_python": llama_cpp.__version__,
            "n_ctx": self._llm.n_ctx(),
            "n_threads": N_THREADS,
            "n_batch": N_BATCH,
            "decoding": "greedy",
        }

    def close(self) -> None:
        self._llm.close()


def _ends_sentence(out: bytearray, at: int) -> bool:
    """Whether the text before byte ``at`` ends like a sentence (cheap test before running pysbd)."""
    return out[:at].rstrip().rstrip(b"\"')]").endswith((b".", b"!", b"?"))


def _first_sentence_end(out: bytearray) -> int | None:
    """Byte offset where the first sentence of ``out`` ends (trailing space excluded), when a
    second one has begun; else None."""
    sentences = split_sentences(out.decode("utf-8", errors="ignore"))
    if len(sentences) < 2 or not sentences[1].strip():
        return None
    return len(sentences[0].rstrip().encode("utf-8"))


def _find_stop(out: bytearray, stops: tuple[str, ...], since: int) -> int | None:
    """Byte offset of the earliest stop sequence that ends in the newest token's text, or None."""
    best = None
    for s in stops:
        sb = s.encode("utf-8")
        at = out.find(sb, max(0, since - len(sb) + 1))
        if at >= 0 and (best is None or at < best):
            best = at
    return best
