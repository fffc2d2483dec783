"""OpenAI-compatible LM backend (``--lm openai:MODEL``): OpenAI, vLLM, llama.cpp's ``llama-server``,
``python -m llama_cpp.server`` or any other server that speaks the OpenAI API, through the ``openai``
client.

At construction a capability probe (a few requests of one or two tokens) finds out what the
endpoint offers: per-token logprobs and top logprobs on ``/completions`` (else on
``/chat/completions``), ``echo``, a tokenize endpoint, and whether ``logit_bias`` changes the
output. What it found is recorded in run.json (:meth:`OpenAILM.describe`) and summed up by
:meth:`OpenAILM.capabilities_line`.

* ``/completions`` is used where it serves logprobs: the prompt goes as it is, as in-process. Else
  ``/chat/completions`` with logprobs, the prompt being one user message (answers are then not
  comparable with a completions run).
* Decoding is greedy (temperature 0). Servers of the llama.cpp family (those with a tokenize
  endpoint) also get ``repeat_penalty`` 1.0: llama_cpp.server defaults to 1.1, which changes
  greedy answers.
* Per-token alternatives (``top_logprobs``) are asked for only when a trigger wants them; an entropy
  request asks for the top :data:`ENTROPY_TOP_K` and bounds the entropy from them, the remaining
  probability mass counted as one outcome (:func:`flarebench.strategies.lm.topk_entropy`: a lower
  bound of the entropy of the whole distribution, which a server does not return).
* Per-token logprobs are asked for when the strategy wants them, and also when it keeps only the
  first sentence (``stop_at_sentence``): they carry the token split it counts its budget with.
  Otherwise (and on endpoints without logprobs) the text is divided into ``completion_tokens``
  pieces of equal length; strategies use the server's count there. Asking always would cost:
  llama_cpp.server sorts the whole vocabulary in Python per token with logprobs (measured 15 vs
  60 tokens/s for SmolLM2-135M on 2 cores).
* ``logit_bias`` needs token ids: they come from the tokenize endpoint, so without one the bias
  is not supported (the strategy then runs without it).
* ``stop_at_sentence`` cannot be honoured by a server: it decodes on and the strategy cuts.
* Tools (``tool_search``): chat turns go to ``/chat/completions`` with ``tools`` and an explicit
  ``tool_choice: "auto"`` (llama_cpp.server's default is none); an assistant turn with calls
  carries ``"content": ""`` (llama_cpp.server's chatml-function-calling fails on a missing or null
  content) and each result goes back as a ``tool`` message with its call's id. The probe counts
  tools as supported when one request naming the tool (``tool_choice`` of that function, its
  argument bounded by ``maxLength``: chatml-function-calling's argument grammar ignores
  ``max_tokens``) comes back with a call of it whose arguments are JSON.
* Failures: timeouts and retries with exponential backoff on 408/409/429/5xx and connection errors
  are the client's own (``timeout``, ``max_retries``). Malformed JSON, an empty completion (no
  choice, or a choice without text), a response without usage counts, or missing logprobs where
  they were asked for raise :class:`LMError` (the runner records it as that probe's error). A
  server that cannot be reached, keeps timing out, or still answers 429/502/503/504 after the
  retries raises :class:`LMUnavailable` (the runner stops the run).

The API key lives only in the client and in this object (to redact it from error messages); it
never reaches a record, run.json or an error message.
"""

from __future__ import annotations

import json
import math
import os
import urllib.parse
from dataclasses import asdict, dataclass

import httpx
import openai

from flarebench.strategies.http_client import base_url_problem
from flarebench.strategies.lm import (  # the timeout, retry and unavailable settings are shared with http
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    LM,
    UNAVAILABLE_STATUS,
    ChatRequest,
    GenerationRequest,
    KeyRefused,
    LMError,
    LMUnavailable,
    token_texts,
    topk_entropy,
)
from flarebench.strategies.records import LMCall, ToolCall
from flarebench.strategies.tool_markup import valid_call

MAX_STOPS = 4  # the OpenAI API takes at most 4 stop sequences; any further ones are cut here
# A local server needs no key, but the client refuses to start without one.
NO_KEY = "no-key"
PROBE_PROMPT = "The capital of France is"
#: The tool the capability probe names: a call of it with JSON arguments means tools are served.
PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the documents.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "maxLength": 24}},
            "required": ["query"],
        },
    },
}
#: Alternatives asked per token for an entropy request: the most the OpenAI chat API serves. The
#: entropy is then bounded from them, the rest of the mass counted as one outcome (a lower bound).
ENTROPY_TOP_K = 20


@dataclass(frozen=True)
class Capabilities:
    """What the endpoint offers, as the capability probe found it."""

    #: "completions" or "chat": the API every call goes to.
    api: str
    logprobs: bool
    top_logprobs: bool
    logit_bias: bool
    echo: bool
    #: The tokenize endpoint's path ("/extras/tokenize", "/tokenize"), or None.
    tokenize: str | None
    #: Whether ``repeat_penalty`` 1.0 is sent (llama.cpp-family servers).
    repeat_penalty_off: bool
    #: Whether ``/chat/completions`` serves ``tools`` and returns the model's tool calls.
    tools: bool = False


class OpenAILM(LM):
    """A model behind an OpenAI-compatible endpoint. ``base_url`` and ``api_key`` default to what
    the openai client reads (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``)."""

    thread_safe = True  # the client's connection pool serves concurrent requests; no per-call state

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        name: str | None = None,
    ):
        self.model = model
        self.name = name or f"openai:{model}"
        self._key = api_key or os.environ.get("OPENAI_API_KEY") or NO_KEY
        self._client, self.base_url = endpoint_client(base_url, self._key, timeout, max_retries)
        self.timeout = timeout
        self.max_retries = max_retries
        self._repeat_penalty_off = False  # set by the probe
        self._tokenize_url = ""  # set by the probe where the server has one
        self._empty_ids: list[int] = []  # what the tokenize endpoint returns for "" (a BOS, or nothing)
        self._ids: dict[str, list[int]] = {}  # token ids of logit-bias texts
        self._refused: KeyRefused | None = None  # the probe's first refused key on a generation path
        self.capabilities = self._probe()
        self.supports_logprobs = self.capabilities.logprobs
        self.supports_logit_bias = self.capabilities.logit_bias
        self.supports_top_logprobs = self.capabilities.top_logprobs
        self.supports_chat = self.capabilities.api == "chat"
        self.supports_tools = self.capabilities.tools

    # -- transport ---------------------------------------------------------------------------------

    def _post(self, path: str, body: dict) -> dict:
        """POST ``body`` to ``path`` (relative to the base URL, or absolute); the decoded JSON object."""
        try:
            response = self._client.post(path, body=body, cast_to=httpx.Response)
        except openai.APITimeoutError:
            raise LMUnavailable(
                f"the LM server at {self.base_url} did not answer within {self.timeout:g} s ({self._attempts})"
            ) from None
        except openai.APIConnectionError as e:
            raise LMUnavailable(
                self._redact(f"the LM server at {self.base_url} is unreachable ({_cause(e)}; {self._attempts})")
            ) from None
        except openai.APIStatusError as e:
            message = self._redact(
                f"the LM server at {self.base_url} answered HTTP {e.status_code} to {path}: {status_message(e)}"
            )
            if e.status_code in UNAVAILABLE_STATUS:
                raise LMUnavailable(f"{message} ({self._attempts})") from None
            if e.status_code == 401:
                raise KeyRefused.answered(message) from None
            raise LMError(message) from None
        try:
            data = json.loads(response.text)
        except ValueError as e:
            raise LMError(
                f"the LM server returned malformed JSON for {path} ({e}): {_short(response.text)!r}"
            ) from None
        if not isinstance(data, dict):
            raise LMError(f"the LM server returned malformed JSON for {path}, not an object: {_short(response.text)!r}")
        return data

    @property
    def _attempts(self) -> str:
        n = self.max_retries + 1
        return f"{n} attempt{'s' if n > 1 else ''}"

    def _redact(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key != NO_KEY and len(self._key) >= 4 else text

    def _body(self, api: str, prompt: str, max_tokens: int, top: int = 0, stop=(), bias=None, echo=False) -> dict:
        """A request body: greedy, ``top`` logprobs per token (0: none asked for)."""
        body: dict = {"model": self.model, "max_tokens": max_tokens, "temperature": 0}
        if self._repeat_penalty_off:
            body["repeat_penalty"] = 1.0
        if api == "completions":
            body["prompt"] = prompt
            if top:
                body["logprobs"] = top
            if echo:
                body["echo"] = True
        else:
            body["messages"] = [{"role": "user", "content": prompt}]
            if top:
                body["logprobs"] = True
                body["top_logprobs"] = top
        if stop:
            body["stop"] = list(stop[:MAX_STOPS])
        if bias:
            body["logit_bias"] = bias
        return body

    # -- the capability probe ----------------------------------------------------------------------

    def _try(self, path: str, body: dict, errors: list[str]) -> dict | None:
        """``_post``, or None (the reason appended to ``errors``) when the endpoint refuses it."""
        try:
            return self._post(path, body)
        except KeyRefused as e:  # one path's refusal (a gateway's unknown route): the probe says them all
            errors.append(str(e))
            if path in ("/completions", "/chat/completions"):
                self._refused = self._refused or e
            return None
        except LMUnavailable:
            raise
        except LMError as e:
            errors.append(str(e))
            return None

    def _probe(self) -> Capabilities:
        errors: list[str] = []
        tokenize = self._find_tokenize(errors)
        self._repeat_penalty_off = tokenize is not None
        comp = self._try("/completions", self._body("completions", PROBE_PROMPT, 2, top=2), errors)
        chat = None
        if comp is not None and _has_logprobs(comp, "completions"):
            api, logprobs, sample = "completions", True, comp
        else:
            chat = self._try("/chat/completions", self._body("chat", PROBE_PROMPT, 2, top=2), errors)
            if chat is not None and _has_logprobs(chat, "chat"):
                api, logprobs, sample = "chat", True, chat
            else:
                # No logprobs anywhere: plain completions, else plain chat.
                comp = comp or self._try("/completions", self._body("completions", PROBE_PROMPT, 2), errors)
                if comp is None and chat is None:
                    chat = self._try("/chat/completions", self._body("chat", PROBE_PROMPT, 2), errors)
                if comp is None and chat is None:
                    if self._refused is not None:  # the key, not the server: said once, as it is
                        raise LMError(str(self._refused))
                    raise LMError(
                        f"{self.name} at {self.base_url} serves neither /completions nor /chat/completions: "
                        + "; ".join(errors)
                    )
                api, logprobs, sample = ("completions", False, comp) if comp else ("chat", False, chat)
        top = logprobs and _top_count(sample, api) >= 2
        echo = api == "completions" and self._echoes(errors)
        bias = tokenize is not None and self._bias_works(api, errors)
        tools = self._tools_work(errors)
        return Capabilities(api, logprobs, bool(top), bias, echo, tokenize, self._repeat_penalty_off, tools)

    def _server_root(self) -> str:
        # Tokenize endpoints live at the server's root, not under /v1.
        root = str(self._client.base_url).rstrip("/")
        return root[: -len("/v1")] if root.endswith("/v1") else root

    def _find_tokenize(self, errors: list[str]) -> str | None:
        # llama_cpp.server: /extras/tokenize {input}; llama.cpp's server: /tokenize {content}; vLLM:
        # /tokenize {model, prompt}. One body carries all three spellings.
        for path in ("/extras/tokenize", "/tokenize"):
            url = self._server_root() + path
            data = self._try(url, self._tokenize_body(""), errors)
            if data is not None and _int_list(data.get("tokens")):
                self._tokenize_url, self._empty_ids = url, data["tokens"]
                return path
        return None

    def _tokenize_body(self, text: str) -> dict:
        return {"model": self.model, "input": text, "content": text, "prompt": text}

    def _token_ids(self, text: str) -> list[int]:
        """The ids of ``text``'s tokens, without what the server adds to any text (a BOS)."""
        ids = self._ids.get(text)
        if ids is None:
            data = self._post(self._tokenize_url, self._tokenize_body(text))
            if not _int_list(data.get("tokens")):
                raise LMError(f"the LM server's tokenize endpoint returned no token list for {text!r}")
            ids = data["tokens"]
            if ids[: len(self._empty_ids)] == self._empty_ids:
                ids = ids[len(self._empty_ids) :]
            self._ids[text] = ids  # concurrent callers may both fill it: same value
        return ids

    def _echoes(self, errors: list[str]) -> bool:
        data = self._try("/completions", self._body("completions", PROBE_PROMPT, 1, echo=True), errors)
        text = _choice_text(data, "completions") if data is not None else None
        return bool(text and text.startswith(PROBE_PROMPT))

    def _bias_works(self, api: str, errors: list[str]) -> bool:
        """Whether a -100 bias on the greedy first token makes the server pick another one."""
        plain = self._try(f"/{_PATH[api]}", self._body(api, PROBE_PROMPT, 1), errors)
        first = _choice_text(plain, api) if plain is not None else None
        if not first:
            return False
        try:
            ids = self._token_ids(first)
        except LMUnavailable:
            raise
        except LMError as e:
            errors.append(str(e))
            return False
        if not ids:
            return False
        biased = self._try(f"/{_PATH[api]}", self._body(api, PROBE_PROMPT, 1, bias={str(ids[0]): -100}), errors)
        return biased is not None and _choice_text(biased, api) not in (None, first)

    def _tools_work(self, errors: list[str]) -> bool:
        """Whether a request naming :data:`PROBE_TOOL` comes back with a call of it (JSON arguments)."""
        messages = [
            {"role": "system", "content": "Search for what the user asks."},
            {"role": "user", "content": "Find the capital of France."},
        ]
        choice = {"type": "function", "function": {"name": "search"}}
        data = self._try("/chat/completions", self._chat_body(messages, [PROBE_TOOL], 64, choice), errors)
        calls = _tool_calls(data, [PROBE_TOOL]) if data is not None else []
        return bool(calls) and calls[0].name == "search" and calls[0].arguments is not None

    # -- generation --------------------------------------------------------------------------------

    def _chat_body(self, messages: list[dict], tools: list[dict], max_tokens: int, choice="auto") -> dict:
        """A greedy chat request body; with ``tools``, ``tool_choice`` is always sent."""
        body: dict = {"model": self.model, "messages": messages, "max_tokens": max_tokens, "temperature": 0}
        if self._repeat_penalty_off:
            body["repeat_penalty"] = 1.0
        if tools:
            body["tools"], body["tool_choice"] = tools, choice
        return body

    def _chat(self, request: ChatRequest) -> LMCall:
        # Assistant turns with calls carry "" for content, never None (see the module).
        messages = [{**m, "content": m.get("content") or ""} for m in request.messages]
        data = self._post("/chat/completions", self._chat_body(messages, request.tools, request.max_tokens))
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise LMError("empty completion: the LM server returned no choice")
        text = _choice_text(data, "chat") or ""
        prompt_tokens, evaluated, completion_tokens = _usage(data)
        finish = str(choices[0].get("finish_reason") or "stop")
        return LMCall(
            purpose=request.purpose,
            prompt_tokens=prompt_tokens,
            evaluated_tokens=evaluated,
            completion_tokens=completion_tokens,
            text=text,
            finish_reason="length" if finish == "length" else "stop",
            seconds=0.0,
            tokens=_even_pieces(text, completion_tokens),
            tool_calls=_tool_calls(data, request.tools) if request.tools else None,
        )

    def _complete(self, request: GenerationRequest) -> LMCall:
        caps = self.capabilities
        bias: dict[str, float] = {}
        if request.logit_bias and caps.logit_bias:
            for text, value in request.logit_bias.items():
                for tok in self._token_ids(text)[:1]:  # the first token, as the in-process backend does
                    bias[str(tok)] = bias.get(str(tok), 0.0) + value
        # Per-token data where the caller needs it: logprobs, or the token split of the first
        # sentence it keeps. Not otherwise: llama_cpp.server decodes 4x slower with logprobs.
        # Alternatives where a trigger asks for them; the entropy bound takes the most a server gives.
        top_k = max(request.top_logprobs, ENTROPY_TOP_K if request.entropy else 0) if caps.top_logprobs else 0
        per_token = caps.logprobs and (request.logprobs or request.stop_at_sentence or top_k > 0)
        body = self._body(
            caps.api,
            request.prompt.text,
            request.max_tokens,
            top=(top_k or 1) if per_token else 0,
            stop=request.stop,
            bias=bias,
        )
        data = self._post(f"/{_PATH[caps.api]}", body)
        text = _choice_text(data, caps.api)
        if text is None:
            raise LMError("empty completion: the LM server returned no choice with text")
        finish = str(data["choices"][0].get("finish_reason") or "stop")
        prompt_tokens, evaluated, completion_tokens = _usage(data)
        # The server cut at the first MAX_STOPS stops; cut at every one (a no-op when it did).
        cut = min((i for i in (text.find(s) for s in request.stop) if i >= 0), default=None)
        if cut is not None:
            text, finish = text[:cut], "stop"
        tops: list[list[list]] | None = None
        if per_token:
            tokens, logprobs = _token_logprobs(data, caps.api)
            tokens = _aligned(tokens, data, caps.api)
            if top_k:
                tops = _top_lists(data, caps.api, len(tokens))
            # Keep the tokens that contribute text before the cut (the server returns the token
            # that held the stop sequence too).
            kept, pos = 0, 0
            for tok in tokens:
                if pos >= len(text):
                    break
                pos += len(tok)
                kept += 1
            tokens, logprobs = tokens[:kept], logprobs[:kept]
            tops = tops[:kept] if tops is not None else None
        else:
            tokens, logprobs = _even_pieces(text, completion_tokens), None
        return LMCall(
            purpose=request.purpose,
            prompt_tokens=prompt_tokens,
            evaluated_tokens=evaluated,
            completion_tokens=completion_tokens,
            text=text,
            finish_reason=finish,
            seconds=0.0,
            tokens=tokens,
            logprobs=logprobs if request.logprobs else None,
            top_logprobs=[t[: request.top_logprobs] for t in tops]
            if tops is not None and request.top_logprobs
            else None,
            entropies=[topk_entropy([lp for _, lp in t]) for t in tops]
            if tops is not None and request.entropy
            else None,
        )

    def describe(self) -> dict:
        """Name, base URL (never the key), model and capabilities: what run.json records."""
        return {
            "name": self.name,
            "backend": "openai-compatible",
            "base_url": self.base_url,
            "model": self.model,
            "capabilities": asdict(self.capabilities),
            "decoding": "greedy",
        }

    def capabilities_line(self) -> str:
        """One line for a terminal: the endpoint and what it offers."""
        c = self.capabilities

        def yes(flag: bool) -> str:
            return "yes" if flag else "no"

        return (
            f"{self.name} at {self.base_url}: /{_PATH[c.api]}; logprobs {yes(c.logprobs)}, "
            f"top_logprobs {yes(c.top_logprobs)}, logit_bias {yes(c.logit_bias)}, echo {yes(c.echo)}, "
            f"tools {yes(c.tools)}"
        )

    def close(self) -> None:
        self._client.close()


_PATH = {"completions": "completions", "chat": "chat/completions"}


def endpoint_client(
    base_url: str | None,
    api_key: str | None,
    timeout: float = DEFAULT_TIMEOUT,
    max_retries: int = DEFAULT_MAX_RETRIES,
    option: str = "--lm-base-url",
) -> tuple[openai.OpenAI, str]:
    """An openai client of the endpoint at ``base_url`` (else ``$OPENAI_BASE_URL``) with ``api_key``
    (else ``$OPENAI_API_KEY``; a local server needs none), and its base URL as run.json may record
    it: without credentials. ``--lm``, ``--embed`` and ``--rerank`` share it. A URL that is no
    endpoint's base URL raises ValueError naming ``option`` (or the variable it came from)."""
    url = base_url or os.environ.get("OPENAI_BASE_URL")
    if url and (why := base_url_problem(url)):
        raise ValueError(f"{option if base_url else '$OPENAI_BASE_URL'}: {why}")
    key = api_key or os.environ.get("OPENAI_API_KEY") or NO_KEY
    client = openai.OpenAI(base_url=base_url, api_key=key, timeout=timeout, max_retries=max_retries)
    return client, _without_credentials(str(client.base_url))


def _without_credentials(url: str) -> str:
    """``url`` without a ``user:password@`` part, so it can be recorded."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def _cause(e: Exception) -> str:
    """The innermost reason of a connection error (``Connection refused``, ...)."""
    while e.__cause__ is not None:
        e = e.__cause__
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def status_message(e) -> str:
    """What an endpoint's error reply (an ``openai.APIStatusError``) says: the message of its JSON
    (``{"error": {"message": ...}}``), else the client's own text (``Error code: 404 - ...``)."""
    body = getattr(e, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    return _short(message if isinstance(message, str) and message.strip() else e.message)


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."


def _int_list(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) for v in value)


def _choice_text(data: dict, api: str) -> str | None:
    """The first choice's text, or None when the response holds no choice or no text."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    choice = choices[0]
    text = choice.get("text") if api == "completions" else (choice.get("message") or {}).get("content")
    return text if isinstance(text, str) else None


def _tool_calls(data: dict, tools: list[dict]) -> list[ToolCall]:
    """The tool calls of the first choice's message (none when it holds none), each checked against
    ``tools``: arguments that are not a JSON object make a malformed call."""
    choices = data.get("choices")
    message = (
        choices[0].get("message") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    )
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    out = []
    for i, c in enumerate(calls if isinstance(calls, list) else []):
        fn = c.get("function") if isinstance(c, dict) else None
        fn = fn if isinstance(fn, dict) else {}
        raw = fn.get("arguments")
        raw = raw if isinstance(raw, str) else json.dumps(raw)
        try:
            args = json.loads(raw)
        except ValueError:
            args = None
        args = args if isinstance(args, dict) else None
        name = str(fn.get("name") or "")
        call_id = str(c.get("id") or f"call_{i}") if isinstance(c, dict) else f"call_{i}"
        out.append(ToolCall(call_id, name, args, raw, valid_call(name, args, tools)))
    return out


def _logprob_entries(data: dict, api: str):
    """(tokens, logprobs, top logprobs per token) of the first choice, or None when absent."""
    lp = data["choices"][0].get("logprobs") if _choice_text(data, api) is not None else None
    if not isinstance(lp, dict):
        return None
    if api == "completions":
        tokens, values, top = lp.get("tokens"), lp.get("token_logprobs"), lp.get("top_logprobs")
    else:
        content = lp.get("content")
        if not isinstance(content, list) or not all(isinstance(c, dict) for c in content):
            return None
        tokens = [c.get("token") for c in content]
        values = [c.get("logprob") for c in content]
        top = [c.get("top_logprobs") for c in content]
    if not isinstance(tokens, list) or not isinstance(values, list) or len(tokens) != len(values):
        return None
    return tokens, values, top if isinstance(top, list) else []


def _has_logprobs(data: dict, api: str) -> bool:
    entries = _logprob_entries(data, api)
    return entries is not None and len(entries[0]) > 0


def _top_count(data: dict, api: str) -> int:
    """How many alternatives the first token's top logprobs list (asked for 2)."""
    entries = _logprob_entries(data, api)
    top = entries[2] if entries else []
    return len(top[0]) if top and isinstance(top[0], dict | list) else 0


def _top_lists(data: dict, api: str, n: int) -> list[list[list]]:
    """Per token, its alternatives as ``[text, logprob]`` pairs, most likely first; an LMError when
    the response holds none for some of the ``n`` tokens."""
    entries = _logprob_entries(data, api)
    top = entries[2] if entries else []
    out: list[list[list]] = []
    for alternatives in top[:n]:
        if isinstance(alternatives, dict):  # /completions: {text: logprob}
            pairs = list(alternatives.items())
        elif isinstance(alternatives, list):  # /chat/completions: [{"token", "logprob"}, ...]
            pairs = [(a.get("token"), a.get("logprob")) for a in alternatives if isinstance(a, dict)]
        else:
            pairs = []
        pairs = [
            [str(t), min(float(v), 0.0)]
            for t, v in pairs
            if isinstance(v, int | float) and not isinstance(v, bool) and not math.isnan(v) and v != -math.inf
        ]
        out.append(sorted(pairs, key=lambda p: -p[1]))
    if len(out) < n or not all(out):
        raise LMError("the LM server returned no top logprobs for some tokens although they were asked for")
    return out


def _token_logprobs(data: dict, api: str) -> tuple[list[str], list[float]]:
    """Per-token texts and logprobs, checked: an LMError when missing or not probabilities."""
    entries = _logprob_entries(data, api)
    if entries is None:
        raise LMError("the LM server returned no logprobs although they were asked for")
    tokens, values, _ = entries
    if not all(isinstance(t, str) for t in tokens):
        raise LMError("the LM server returned logprobs with a token that is not text")
    out = []
    for v in values:
        if not isinstance(v, int | float) or isinstance(v, bool) or math.isnan(v) or v == -math.inf or v > 1e-3:
            raise LMError(f"the LM server returned a logprob that is not the log of a probability: {v!r}")
        out.append(min(float(v), 0.0))  # float32 rounding can put the top token a hair above 0
    return tokens, out


def _aligned(tokens: list[str], data: dict, api: str) -> list[str]:
    """Token texts that join to the served text, so that a sentence cut by characters keeps the
    right tokens. Servers decode each token alone: a letter split across two tokens comes back as
    two empty strings (llama_cpp.server) or as replacement characters. Where the response says
    where each token starts (``text_offset`` on /completions) or holds its bytes (``bytes`` on
    /chat/completions), the texts are rebuilt from that; otherwise they are kept as served."""
    served = _choice_text(data, api) or ""
    lp = data["choices"][0].get("logprobs") or {}
    offsets = lp.get("text_offset") if api == "completions" else None
    if offsets and _int_list(offsets) and len(offsets) == len(tokens) and offsets == sorted(offsets):
        bounds = [o - offsets[0] for o in offsets] + [max(len(served), offsets[-1] - offsets[0])]
        return [served[a:b] for a, b in zip(bounds, bounds[1:])]
    pieces = [c.get("bytes") for c in lp.get("content") or []] if api != "completions" else []
    if pieces and len(pieces) == len(tokens) and all(_int_list(b) for b in pieces):
        return token_texts([bytes(b) for b in pieces])
    return tokens


def _usage(data: dict) -> tuple[int, int, int]:
    """(prompt tokens, evaluated prompt tokens, completion tokens) from the server's ``usage``;
    evaluated = prompt tokens minus those the server reports as served from its prompt cache."""
    usage = data.get("usage")
    counts = ("prompt_tokens", "completion_tokens")
    if not isinstance(usage, dict) or not all(isinstance(usage.get(k), int) for k in counts):
        raise LMError("the LM server's response holds no usage counts (prompt_tokens, completion_tokens)")
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    prompt = usage["prompt_tokens"]
    return prompt, prompt - (cached if isinstance(cached, int) else 0), usage["completion_tokens"]


def _even_pieces(text: str, n: int) -> list[str]:
    """``text`` in ``n`` pieces of (nearly) equal length: the token split stands in for the real
    one when the endpoint returns no per-token data."""
    n = max(1, min(n, len(text))) if text else 0
    bounds = [round(i * len(text) / n) for i in range(n + 1)] if n else []
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]
