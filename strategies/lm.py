"""The LM interface every strategy calls, and the prompt shape that lets backends reuse a prefix."""

from __future__ import annotations

import codecs
import dataclasses
import math
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from flarebench.strategies.capabilities import CHAT, LOGIT_BIAS, LOGPROBS, TOOLS, TOP_LOGPROBS
from flarebench.strategies.records import LMCall, checked


@dataclass(frozen=True)
class Prompt:
    """A prompt in two parts: ``static`` never changes within a run (instruction and exemplars),
    ``dynamic`` is the rest (docs, question, answer so far). Backends evaluate ``static`` once
    and reuse it; a server sees the concatenation."""

    static: str
    dynamic: str

    @property
    def text(self) -> str:
        return self.static + self.dynamic


#: The purpose of the calls made before any probe is timed (flarebench.bench.runner.warm_up). Only
#: these may take a static prompt prefix's state from a file an earlier run on the machine saved: a
#: probe's own calls evaluate, and count, the same tokens whatever ran before.
WARM_UP = "warm_up"


@dataclass
class GenerationRequest:
    """What a strategy asks of the LM for one call."""

    prompt: Prompt
    max_tokens: int
    stop: tuple[str, ...] = ()
    logprobs: bool = False
    purpose: str = "generate"
    logit_bias: dict[str, float] = field(default_factory=dict)
    #: A hint: the caller keeps only the first sentence, so the backend may stop once a second
    #: sentence begins (finish_reason "sentence"). Backends that cannot, generate on; callers cut.
    stop_at_sentence: bool = False
    #: Per generated token, the ``top_logprobs`` most likely tokens of the distribution with their
    #: logprobs (``LMCall.top_logprobs``); 0: none. A trigger that compares alternatives asks for it.
    top_logprobs: int = 0
    #: Per generated token, the entropy of the next-token distribution (``LMCall.entropies``): from
    #: the whole vocabulary in-process; a server's backend bounds it from its top logprobs.
    entropy: bool = False


@dataclass
class ChatRequest:
    """One chat turn: the conversation so far as OpenAI-style messages (``role`` system, user,
    assistant with optional ``tool_calls``, or tool with ``tool_call_id``), the tools the model may
    call (OpenAI function definitions; none: a plain chat turn) and the cap on its reply."""

    messages: list[dict]
    tools: list[dict]
    max_tokens: int
    purpose: str = "generate"


def topk_entropy(logprobs: list[float]) -> float:
    """The entropy (nats) of a distribution known only by its ``logprobs`` of the k most likely
    tokens: the k terms, plus the remaining mass ``1 - sum(p)`` counted as one more outcome.

    A lower bound of the true entropy: spreading the remaining mass over the tokens that hold it can
    only raise the entropy (the grouping property), so the bound is exact when those tokens are one.
    """
    probs = [math.exp(lp) for lp in logprobs]
    rest = max(0.0, 1.0 - sum(probs))
    return -sum(p * math.log(p) for p in [*probs, rest] if p > 0.0)


#: How far above 0 a logprob may be and still count as the log of a probability: float32 rounding can
#: put the most likely token a hair above 0 (the tolerance the OpenAI-compatible backend allows).
LOGPROB_SLACK = 1e-3


def is_logprob(value: object) -> bool:
    """Whether ``value`` is the natural log of a probability: a number <= 0 (but for
    :data:`LOGPROB_SLACK`), and finite: a greedy decoder never picks a token of probability 0."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return number and math.isfinite(value) and value <= LOGPROB_SLACK


def token_texts(pieces: list[bytes]) -> list[str]:
    """Each token's text, given its bytes, such that the texts join to exactly the decoded whole.

    A character split across tokens (a multi-byte name like "Zoë") belongs to the token that
    completes it: the token holding its first byte has no text of its own. Decoding each token alone
    would give two replacement characters for one letter and shift every character offset after it.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    texts = [decoder.decode(p) for p in pieces]
    if texts:
        texts[-1] += decoder.decode(b"", final=True)
    return texts


#: Seconds per request to a server (``--lm openai``, the ``http`` strategy): a busy server queues
#: requests, so allow for the wait.
DEFAULT_TIMEOUT = 300.0
#: Tries after the first on a transient failure; the backoff between them is 0.5, 1, 2, 4 s (with jitter).
DEFAULT_MAX_RETRIES = 4
#: Statuses that, still there after the retries, mean the server as a whole is unavailable, not this
#: request: the run stops (:class:`LMUnavailable`).
UNAVAILABLE_STATUS = frozenset({429, 502, 503, 504})
#: What a refused key (HTTP 401, :class:`KeyRefused`) adds to the endpoint's message.
KEY_REFUSED = "the key is refused: check the one in the variable {option} names, $OPENAI_API_KEY unless given"


class LMError(RuntimeError):
    """The LM could not serve a request (bad model file, server failure, missing capability)."""


class EndpointError(LMError):
    """An endpoint beside the LM (--embed, --rerank) could not serve a request: handled as the LM's
    own errors are, but named apart, so that a probe's recorded error says which service failed."""


class LMUnavailable(LMError):
    """The LM cannot be reached at all (its server is down, refuses connections or keeps timing
    out after the retries): the run stops instead of recording an error for every probe left.
    ``address`` is the option that names the server (another endpoint's, such as --embed-base-url)."""

    def __init__(self, message: str, address: str = "--lm-base-url"):
        super().__init__(message)
        self.address = address


class KeyRefused(LMUnavailable):
    """The endpoint refused its key (HTTP 401): revoked, rotated or expired. Every later request
    would be refused too, so the run stops, to be resumed once the key is fixed, rather than record
    each probe left as an error that a resumed run would keep. ``address`` is the option naming the
    key's environment variable."""

    def __init__(self, message: str, address: str = "--lm-api-key-env"):
        super().__init__(message, address)

    @classmethod
    def answered(cls, message: str, option: str = "--lm-api-key-env") -> KeyRefused:
        """The refusal an endpoint's ``message`` reports, followed by what to check: the key in the
        variable ``option`` names."""
        return cls(f"{message} ({KEY_REFUSED.format(option=option)})", option)


class LM(ABC):
    """A language model decoding greedily (temperature 0).

    Subclasses implement :meth:`_complete`; :meth:`generate` wraps it with the wall-clock time of
    the call so that no strategy ever times itself.
    """

    #: Short name recorded in run.json, e.g. ``llamacpp:smollm2``.
    name: str = "lm"
    #: Whether completions carry per-token logprobs (FLARE direct refuses to run without them).
    supports_logprobs: bool = True
    #: Whether ``top_logprobs`` (per-token alternatives) and ``entropy`` requests are served.
    supports_top_logprobs: bool = False
    #: Whether ``logit_bias`` is honoured.
    supports_logit_bias: bool = False
    #: Whether the model can be given tools and returns its tool calls.
    supports_tools: bool = False
    #: Whether requests go to the model as chat messages (an endpoint's chat API).
    supports_chat: bool = False
    #: Whether several threads may call :meth:`generate` at once (``--concurrency`` > 1).
    thread_safe: bool = False

    def generate(
        self,
        prompt: Prompt,
        max_tokens: int,
        stop: tuple[str, ...] | list[str] = (),
        logprobs: bool = False,
        purpose: str = "generate",
        logit_bias: dict[str, float] | None = None,
        stop_at_sentence: bool = False,
        top_logprobs: int = 0,
        entropy: bool = False,
    ) -> LMCall:
        """Continue ``prompt`` greedily for at most ``max_tokens`` tokens, stopping before any of
        ``stop``. Returns the call's record; ``text`` excludes the stop sequence."""
        request = GenerationRequest(
            prompt,
            max_tokens,
            tuple(stop),
            logprobs,
            purpose,
            dict(logit_bias or {}),
            stop_at_sentence,
            top_logprobs,
            entropy,
        )
        start = time.perf_counter()
        call = self._complete(request)
        seconds = time.perf_counter() - start
        check_reply(self, call, "_complete", request.logprobs)
        call.seconds = seconds
        return call

    @abstractmethod
    def _complete(self, request: GenerationRequest) -> LMCall:
        """Serve one request; ``seconds`` is filled in by :meth:`generate`."""

    def chat(self, messages: list[dict], tools: list[dict], max_tokens: int, purpose: str = "generate") -> LMCall:
        """One greedy chat turn: the model's reply to ``messages``, given ``tools`` it may call. The
        record's ``text`` is what it wrote besides its calls and ``tool_calls`` the calls it made
        (None when no tools were given). Timed as :meth:`generate` is; backends that offer
        ``tools`` implement :meth:`_chat`."""
        request = ChatRequest([dict(m) for m in messages], [dict(t) for t in tools], max_tokens, purpose)
        start = time.perf_counter()
        call = self._chat(request)
        seconds = time.perf_counter() - start
        check_reply(self, call, "_chat")
        call.seconds = seconds
        return call

    def _chat(self, request: ChatRequest) -> LMCall:
        """Serve one chat turn; ``seconds`` is filled in by :meth:`chat`."""
        raise LMError(f"{self.name} does not serve chat turns with tools")

    def offers(self) -> frozenset[str]:
        """The capabilities this LM serves (names of :mod:`flarebench.strategies.capabilities`),
        compared with a strategy's :meth:`~flarebench.strategies.base.Strategy.needs`."""
        flags = {
            LOGPROBS: self.supports_logprobs,
            TOP_LOGPROBS: self.supports_top_logprobs,
            LOGIT_BIAS: self.supports_logit_bias,
            TOOLS: self.supports_tools,
            CHAT: self.supports_chat,
        }
        return frozenset(name for name, offered in flags.items() if offered)

    def begin_answer(self) -> None:
        """A new answer starts: its first call must not continue from an earlier call's state.

        The runner calls this before every probe, so that a probe's calls are evaluated the same
        way whatever ran before it (a backend that reuses the previous call's state, as the
        in-process one does within an answer, would otherwise batch the same prompt differently
        after an identical one). Stateless backends need nothing."""

    def describe(self) -> dict:
        """What identifies this model in run.json (name, file, sha256, settings)."""
        return {"name": self.name}

    def close(self) -> None:
        """Release the model."""


def check_reply(lm: LM, call: object, method: str, logprobs: bool = False) -> None:
    """Refuse (LMError naming ``lm``) a reply of its ``method`` that is not an LMCall with a text,
    or, ``logprobs`` asked for, one without them right. Every backend's reply passes here
    (:meth:`LM.generate`, :meth:`LM.chat`), so a plugin's mistake is that probe's error, never an
    AttributeError deep in a strategy, nor a confidence trigger that silently never fires."""
    if not isinstance(call, LMCall):
        raise LMError(f"LM {lm.name}: {method} returned {type(call).__name__}, not an LMCall")
    if not isinstance(call.text, str):
        what = type(call.text).__name__
        raise LMError(f"LM {lm.name}: {method} returned an LMCall whose text is {what}, not str")
    if logprobs:
        _check_logprobs(lm, call)
    # Every field as a trace records it (token counts whole and >= 0, seconds finite): a call the
    # trace could not hold would otherwise be written, and refused when the run folder is read back.
    try:
        checked(dataclasses.asdict(call), LMCall)
    except (ValueError, TypeError) as e:
        raise LMError(f"LM {lm.name}: {method} returned an LMCall a trace cannot hold ({e})") from None


def _check_logprobs(lm: LM, call: LMCall) -> None:
    """Refuse (LMError) a reply to a request for per-token logprobs that lacks them, or holds
    other than one log-probability per token: a confidence trigger skips a draft without them
    (it would never retrieve) and misjudges one whose values are not probabilities."""
    asked = f"LM {lm.name}: asked for per-token logprobs, returned"
    if call.logprobs is None:
        # An LM that says it serves none may answer without them (a strategy needing them was refused).
        if lm.supports_logprobs:
            raise LMError(f"{asked} none")
        return
    if not isinstance(call.tokens, list) or not isinstance(call.logprobs, list):
        raise LMError(f"{asked} tokens and logprobs that are not lists")
    if call.text and not call.tokens:
        raise LMError(f"{asked} no tokens for the text {call.text[:40]!r}")
    if len(call.logprobs) != len(call.tokens):
        raise LMError(f"{asked} {len(call.logprobs)} for {len(call.tokens)} tokens (one per token)")
    for value in call.logprobs:
        if not is_logprob(value):
            raise LMError(f"{asked} {value!r} ({type(value).__name__}), not the log of a probability (a float <= 0)")


class WrappedLM(LM):
    """An LM that serves its calls through another (``inner``): it offers what ``inner`` offers,
    describes itself and closes as ``inner``; subclasses change what :meth:`_complete` does."""

    def __init__(self, inner: LM):
        self.inner = inner
        self.name = inner.name
        self.supports_logprobs = inner.supports_logprobs
        self.supports_logit_bias = inner.supports_logit_bias
        self.supports_top_logprobs = inner.supports_top_logprobs
        self.supports_tools = inner.supports_tools
        self.supports_chat = inner.supports_chat
        self.thread_safe = inner.thread_safe

    def forward(self, request: GenerationRequest) -> LMCall:
        """``request`` served by ``inner``, timed there."""
        return self.inner.generate(
            request.prompt,
            request.max_tokens,
            request.stop,
            request.logprobs,
            request.purpose,
            request.logit_bias,
            request.stop_at_sentence,
            request.top_logprobs,
            request.entropy,
        )

    def begin_answer(self) -> None:
        """``inner`` starts a new answer."""
        self.inner.begin_answer()

    def _chat(self, request: ChatRequest) -> LMCall:
        """Chat turns go to ``inner`` unchanged."""
        return self.inner.chat(request.messages, request.tools, request.max_tokens, request.purpose)

    def describe(self) -> dict:
        return self.inner.describe()

    def close(self) -> None:
        self.inner.close()
