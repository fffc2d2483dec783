"""In-process LM backend: llama.cpp through llama-cpp-python, greedy decoding with per-token logprobs.

Two things make it fast and reproducible:

* Logprobs come from the raw logits of the last position, log-softmaxed with numpy, in our own
  decode loop. llama-cpp-python's ``logprobs=`` path sorts the whole vocabulary in Python for every
  token (~7 tok/s) and its ``echo=True`` prompt logprobs are wrong in 0.3.36; neither is used.
* Per-token alternatives (``top_logprobs``) and entropies are computed from the same logits, over
  the whole vocabulary, only for the requests that ask for them (FLARE's entropy and margin
  triggers): other calls decode exactly as before, at the same speed.
* The static prompt prefix is evaluated once per run; the KV cache is cut back to it (or restored
  from a snapshot of it) before every call, so each call evaluates only its own tokens, always in
  the same batches from the same state: same configuration, same answers. The prompt is tokenized
  whole, as a server tokenizes it, and only the tokens it shares with the static prefix's own
  tokenization come from the prefix's state, so both paths see the same tokens. The warm-up saves
  that state to a file named by everything that determines it (model file, settings, the CPU
  features llama.cpp uses, the tokens); a later run's warm-up restores it instead of evaluating
  the prefix again. A probe's own calls never read those files.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import io
import json
import os
import time
from pathlib import Path

import llama_cpp
import numpy as np

from flarebench.strategies.atomic import atomic_file
from flarebench.strategies.chat_template import ChatTemplate
from flarebench.strategies.lm import LM, WARM_UP, ChatRequest, GenerationRequest, LMError, token_texts
from flarebench.strategies.records import LMCall
from flarebench.strategies.retriever import cache_root
from flarebench.strategies.sentences import split_sentences
from flarebench.strategies.tool_markup import CALL_CLOSE, parse_tool_calls

# Fixed so that logits (and so answers) do not depend on how a prompt happens to be split into
# batches, and latency not on the machine's core count. The thread count itself changes no answer
# (1 and 2 threads give identical logprobs on SmolLM2; tests/test_llamacpp.py), so Ray workers, and
# processes that share the cores, may use fewer.
N_THREADS = 2
N_BATCH = 512
N_CTX = 4096
#: The environment variable that sets the in-process model's threads instead of N_THREADS, for every
#: run started in that environment: with 1, two flarebench processes share two cores (as the test
#: suite's two workers do) without llama.cpp's spinning threads slowing each other. Recorded as
#: ``config.lm.n_threads``, so a gate refuses a baseline made with another count (latency differs).
THREADS_ENV = "FLAREBENCH_LM_THREADS"
#: Where the warm-up saves each static prefix's evaluated state, for the next run's warm-up on this
#: machine to restore (``<flarebench cache>/prefix-states``; about 11 MB for a 465-token prefix).
PREFIX_STATES = "prefix-states"
#: How many saved prefix states the folder keeps, the most recently used (a few hundred MB at most).
MAX_STATES = 32


def default_threads() -> int:
    """The in-process model's threads: ``$FLAREBENCH_LM_THREADS`` where it is set, else N_THREADS."""
    value = os.environ.get(THREADS_ENV)
    if value is None:
        return N_THREADS
    if not value.strip().isdigit() or int(value) < 1:
        raise LMError(f"${THREADS_ENV} must be a whole number >= 1, got {value!r}")
    return int(value)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def vocabulary_only(**settings) -> llama_cpp.Llama:
    """A GGUF file's vocabulary and metadata without its weights (``llama_cpp.Llama`` keyword
    ``settings``): a fraction of a second and tens of MB. Without weights llama.cpp knows no training
    context and warns on stderr when it makes the (unused) context; the warning goes through
    Python's sys.stderr, so it is caught here."""
    with contextlib.redirect_stderr(io.StringIO()):
        return llama_cpp.Llama(**settings, vocab_only=True)


class LlamaCppLM(LM):
    """A GGUF model run in-process. ``name`` is the spec it was made from (``llamacpp:smollm2``)."""

    supports_logprobs = True
    supports_top_logprobs = True
    supports_logit_bias = True

    def __init__(
        self,
        model_path: str | Path,
        name: str | None = None,
        n_ctx: int = N_CTX,
        n_threads: int | None = None,
        weights: bool = True,
    ):
        """``weights=False`` reads only the vocabulary and metadata now (all that describing the
        model, tokenizing and its chat template need); the weights load before its first call. A Ray
        run's driver builds its model so: its workers answer the probes."""
        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise LMError(f"model file not found: {self.model_path}")
        self.name = name or f"llamacpp:{self.model_path}"
        self.n_threads = n_threads = default_threads() if n_threads is None else n_threads
        self._settings = {
            "model_path": str(self.model_path),
            "n_ctx": n_ctx,
            "n_batch": N_BATCH,
            "n_ubatch": N_BATCH,
            "n_threads": n_threads,
            "n_threads_batch": n_threads,
            "seed": 0,
            "verbose": False,
            "logits_all": False,
        }
        self._llm = llama_cpp.Llama(**self._settings) if weights else vocabulary_only(**self._settings)
        self._ctx = self._llm._ctx.ctx
        self._n_vocab = self._llm.n_vocab()
        self._eog = {t for t in range(self._n_vocab) if llama_cpp.llama_vocab_is_eog(self._llm._model.vocab, t)}
        self._sha256: str | None = None
        self._prefix_ids: dict[tuple[str, bool], list[int]] = {}
        self._snapshots: dict[tuple[str, bool], bytes] = {}
        self._kv: list[int] = []  # the tokens whose keys and values are in the cache, in order
        self._pristine = 0  # how many leading ones were computed by a static prefix's own evaluation
        self._last: list[int] = []  # the last call's whole prompt
        self._piece_cache: dict[int, bytes] = {}
        self._chat_template = ChatTemplate.of(self._llm)
        # Tools only where the model has a chat template to render them with (gemma3-270m has none).
        self.supports_tools = self._chat_template is not None

    # -- prefix handling -------------------------------------------------------------------------

    def _tokenize(self, text: str, bos: bool, special: bool = False) -> list[int]:
        return self._llm.tokenize(text.encode("utf-8"), add_bos=bos, special=special)

    def _prefix(self, key: tuple[str, bool], saved: bool = False) -> tuple[list[int], int]:
        """The static prefix's own tokens, evaluated once per run (its state kept as a snapshot);
        returns them and how many tokens had to be evaluated now (0 once it exists). ``key`` is the
        prefix and whether it is a chat prompt (special tokens read as such, no BOS added: the
        chat template writes its own). ``saved`` (warm-up calls only): the state is restored from
        the file an earlier run saved, or evaluated and saved there."""
        static, special = key
        ids = self._prefix_ids.get(key)
        if ids is None:
            ids = self._prefix_ids[key] = self._tokenize(static, bos=not special, special=special)
        if key in self._snapshots:
            return ids, 0
        path = self._state_file(ids, special) if saved else None
        if path is not None and (state := _read_state(path)) is not None:
            self._snapshots[key] = state
            try:
                self._restore(key)
                return ids, 0
            except LMError:  # a state this build cannot read: evaluate the prefix instead
                del self._snapshots[key]
        self._llm.reset()
        self._kv, self._last = [], []
        self._eval(ids, at=0)
        size = llama_cpp.llama_state_get_size(self._ctx)
        buf = (ctypes.c_uint8 * size)()
        n = llama_cpp.llama_state_get_data(self._ctx, buf, size)
        self._snapshots[key] = bytes(buf[:n])
        self._pristine = len(ids)
        if path is not None:
            _write_state(path, self._snapshots[key])
        return ids, len(ids)

    def _state_file(self, ids: list[int], special: bool) -> Path:
        """The file of a prefix's saved state, named by all that determines the state: the model
        file and the backend's settings, the CPU features llama.cpp computes with, the tokens."""
        identity = {k: v for k, v in self.describe().items() if k != "name"}  # the spec naming the file
        key = json.dumps([identity, llama_cpp.llama_print_system_info().decode(), special, ids])
        return cache_root() / PREFIX_STATES / f"{hashlib.sha256(key.encode()).hexdigest()}.state"

    def _restore(self, key: tuple[str, bool]) -> None:
        """Put the cache back at the end of the static prefix's own evaluation, from its snapshot."""
        snap, ids = self._snapshots[key], self._prefix_ids[key]
        buf = (ctypes.c_uint8 * len(snap)).from_buffer_copy(snap)
        if llama_cpp.llama_state_set_data(self._ctx, buf, len(snap)) != len(snap):
            raise LMError("could not restore the prompt-prefix state")
        self._llm.input_ids[: len(ids)] = ids
        self._llm.n_tokens = len(ids)
        self._kv, self._pristine, self._last = list(ids), len(ids), []

    def _start(self, key: tuple[str, bool], full: list[int], saved: bool = False) -> tuple[int, int]:
        """Make the cache hold the first tokens of ``full`` that can be reused; returns how many it
        holds and how many tokens building the static prefix evaluated (``saved``: a warm-up call,
        whose prefix state may come from, and goes to, its file; see :meth:`_prefix`).

        The whole prompt is tokenized as one text (as a server does), so the junction between the
        static and the dynamic part may tokenize differently from the static part alone: only the
        tokens both share are taken from the static prefix's state. Beyond that, tokens are reused
        only when this prompt extends the previous call's whole prompt (the next step of the same
        answer): a prompt of another probe never does, so every probe's calls evaluate the same
        tokens from the same state wherever the run starts.
        """
        prefix, evaluated = self._prefix(key, saved)
        shared = _common(prefix, full)
        # Of the prefix evaluated now, count only the tokens this prompt holds (not the junction
        # token or two that its own tokenization merges differently).
        evaluated = min(evaluated, shared)
        clean = self._pristine >= shared and self._kv[:shared] == prefix[:shared]
        if clean and self._last and full[: len(self._last)] == self._last:
            return min(_common(self._kv, full), len(full) - 1), evaluated  # >= 1 token for fresh logits
        if not clean:
            self._restore(key)
        return min(shared, len(full) - 1), evaluated

    def _load_weights(self) -> None:
        """Load the weights of a model built without them (``weights=False``); nothing once loaded."""
        if self._llm.model_params.vocab_only:
            vocab, self._llm = self._llm, llama_cpp.Llama(**self._settings)
            self._ctx = self._llm._ctx.ctx
            vocab.close()

    def begin_answer(self) -> None:
        """The next call continues no earlier call: it starts from its static prefix's state."""
        self._last = []

    def _eval(self, ids: list[int], at: int) -> None:
        """Evaluate ``ids`` after the first ``at`` tokens in the cache (eval() cuts the cache there)."""
        if at + len(ids) > self._llm.n_ctx():
            raise LMError(f"prompt of {at + len(ids)} tokens exceeds the context of {self._llm.n_ctx()}")
        self._kv, self._last = self._kv[:at], []  # unknown until this evaluation succeeds
        self._pristine = min(self._pristine, at)
        self._llm.n_tokens = at
        self._llm.eval(ids)
        self._kv += ids

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
        return self._decode(request, special=False)

    def _chat(self, request: ChatRequest) -> LMCall:
        """A chat turn: the GGUF's own chat template renders the messages (and the tools, or the
        tool preamble where the template has no ``tools``), the prompt is read with its special
        tokens, and the tool calls are parsed from the markup the model writes."""
        if self._chat_template is None:
            raise LMError(f"{self.name} has no chat template in its GGUF (tokenizer.chat_template): it cannot chat")
        prompt = self._chat_template.render(request.messages, request.tools)
        stop = (CALL_CLOSE,) if request.tools else ()
        call = self._decode(GenerationRequest(prompt, request.max_tokens, stop, purpose=request.purpose), special=True)
        if request.tools:
            first = sum(len(m.get("tool_calls") or []) for m in request.messages)
            call.text, call.tool_calls = parse_tool_calls(call.text, request.tools, first)
        return call

    def _decode(self, request: GenerationRequest, special: bool) -> LMCall:
        """Greedy decoding of ``request``; ``special``: a chat prompt (special tokens read as such,
        the template's own BOS)."""
        self._load_weights()  # before the call's clock starts
        start = time.perf_counter()
        full = self._tokenize(request.prompt.text, bos=not special, special=special)
        if len(full) <= 1 or not request.prompt.dynamic:
            raise LMError("the prompt's dynamic part is empty: there is nothing to continue from")
        keep, evaluated = self._start((request.prompt.static, special), full, saved=request.purpose == WARM_UP)
        self._eval(full[keep:], at=keep)
        evaluated += len(full) - keep
        prefill = time.perf_counter() - start  # the first token's logits are ready
        self._last = full
        bias = self._bias_vector(request.logit_bias)
        out = bytearray()
        ends: list[int] = []  # byte offset where each generated token's text ends
        toks: list[int] = []
        logprobs: list[float] = []
        tops: list[list[list]] = []
        entropies: list[float] = []
        finish, cut = "length", None
        for _ in range(request.max_tokens):
            logits = self._last_logits()
            if bias is not None:
                logits = logits + bias
            tok = int(np.argmax(logits))
            # log-softmax at the argmax: logit - logsumexp = -log(sum(exp(logits - max)))
            logprobs.append(-float(np.log(np.exp(logits - logits[tok]).sum(dtype=np.float64))))
            if request.top_logprobs or request.entropy:  # only when a trigger asks: plain decoding pays nothing
                top, entropy = self._distribution(logits, tok, request.top_logprobs)
                tops.append(top)
                entropies.append(entropy)
            if tok in self._eog:
                logprobs.pop()
                del tops[len(logprobs) :], entropies[len(logprobs) :]
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
            self._llm.eval([tok])
            self._kv.append(tok)
        text_bytes = bytes(out[:cut]) if cut is not None else bytes(out)
        # Keep the tokens that contribute text before the stop sequence.
        keep = len(toks) if cut is None else sum(1 for i in range(len(toks)) if (ends[i - 1] if i else 0) < cut)
        return LMCall(
            purpose=request.purpose,
            prompt_tokens=len(full),
            evaluated_tokens=evaluated,
            completion_tokens=len(toks),
            text=text_bytes.decode("utf-8", errors="replace"),
            finish_reason=finish,
            seconds=0.0,
            tokens=token_texts([self._piece(t) for t in toks[:keep]]),
            logprobs=logprobs[:keep] if request.logprobs else None,
            top_logprobs=tops[:keep] if request.top_logprobs else None,
            entropies=entropies[:keep] if request.entropy else None,
            prefill_seconds=prefill,
        )

    def _distribution(self, logits: np.ndarray, tok: int, k: int) -> tuple[list[list], float]:
        """The ``k`` most likely tokens as ``[text, logprob]`` pairs (most likely first) and the
        entropy in nats of the whole next-token distribution, from the logits (``tok`` is their
        argmax)."""
        shifted = logits.astype(np.float64) - float(logits[tok])  # <= 0, the argmax at 0
        weights = np.exp(shifted)
        total = float(weights.sum())
        log_total = float(np.log(total))
        # H = -sum p log p with p = w / Z and log p = shifted - log Z: H = log Z - sum(w * shifted) / Z.
        # Summed by numpy, not a BLAS dot product: OpenBLAS's threads spin after a call and take the
        # cores llama.cpp's threads decode on (the decode ran 2.8x slower with `weights @ shifted`).
        entropy = max(0.0, log_total - float((weights * shifted).sum()) / total)
        top: list[list] = []
        if k:
            # The k largest, found on the float32 logits (the order of ``shifted``; partitioning them
            # from the top end takes a third of the time of partitioning a negated float64 copy), with
            # every token tied with the k-th, so that ties go to the lowest token id (as the argmax).
            if k < len(logits):
                kth = logits[np.argpartition(logits, -k)[-k:]].min()
                ids = np.flatnonzero(logits >= kth)
            else:
                ids = np.arange(len(logits))
            ids = sorted(ids.tolist(), key=lambda i: (-shifted[i], i))[:k]
            top = [[self._piece(i).decode("utf-8", errors="replace"), float(shifted[i]) - log_total] for i in ids]
        return top, entropy

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
            "n_threads": self.n_threads,
            "n_batch": N_BATCH,
            # The whole prompt is tokenized as one text, as a server does (answers changed with it).
            "tokenization": "whole-prompt",
            "decoding": "greedy",
        }

    def close(self) -> None:
        self._llm.close()


def _read_state(path: Path) -> bytes | None:
    """A saved prefix state, or None when there is none or its checksum (its last 32 bytes, the
    SHA-256 of the rest) does not match: a file cut short or damaged is evaluated again."""
    try:
        data = path.read_bytes()
        os.utime(path)  # used now: the last to be dropped
    except OSError:
        return None
    state, digest = data[:-32], data[-32:]
    return state if state and hashlib.sha256(state).digest() == digest else None


def _write_state(path: Path, state: bytes) -> None:
    """Save a prefix state with its checksum, whole or not at all (a temporary file renamed: Ray
    workers warming the same prefix at once each write their own), and drop all but the
    MAX_STATES most recently used. A cache that cannot be written only costs the next run its
    evaluation."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(path) as f:
            f.write(state + hashlib.sha256(state).digest())
        by_use = sorted(path.parent.glob("*.state"), key=lambda p: p.stat().st_mtime)
        for old in by_use[:-MAX_STATES]:
            old.unlink(missing_ok=True)
    except OSError:  # another process dropped a file first
        pass


def _common(a: list[int], b: list[int]) -> int:
    """How many leading tokens two token lists share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


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
