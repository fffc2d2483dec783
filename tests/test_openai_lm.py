"""The OpenAI-compatible backend (``--lm openai:MODEL``, strategies/openai_lm.py).

Unit tests run against a scripted endpoint (an HTTP server in a thread shaped like
llama_cpp.server). The tests marked ``model`` start a real ``python -m llama_cpp.server`` with the
bundled SmolLM2 on 127.0.0.1, compare its answers with the in-process backend's, and put a proxy
in front of it that injects faults (malformed JSON, an empty completion, no logprobs, a server that
goes away mid-run).
"""

from __future__ import annotations

import csv
import dataclasses
import http.server
import json
import math
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from flarebench.bench.runner import StrategyRefused, TraceLog, check_compatible, run_strategy
from flarebench.bench.session import BenchSession, ConfigError
from flarebench.strategies.backends import make_lm
from flarebench.strategies.base import Strategy, finish
from flarebench.strategies.lm import LMError, LMUnavailable, Prompt
from flarebench.strategies.openai_lm import OpenAILM
from flarebench.strategies.records import Step
from flarebench.strategies.registry import parse_spec
from tests import servers
from tests.console import files_holding
from tests.scripted import ScriptedLM

ROOT = Path(__file__).resolve().parents[1]
SECRET = "sk-test-SECRET123"
KEY_ENV = "FLAREBENCH_TEST_LM_KEY"


# ------------------------------------------------------------------------------------------
# An HTTP endpoint in a thread, for the scripted server and the fault proxy
# ------------------------------------------------------------------------------------------

DROP = object()  # a reply that closes the port and drops the connection: the server "died"


class Endpoint:
    """HTTP on 127.0.0.1: ``respond(method, path, body, headers)`` returns ``(status, bytes)`` or
    DROP. ``down()`` closes the port (connections refused), ``up()`` opens the same port again."""

    def __init__(self, respond):
        self.respond = respond
        self.port = 0
        self.up()

    def up(self) -> None:
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _serve(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                reply = endpoint.respond(self.command, self.path, body, dict(self.headers))
                if reply is DROP:
                    endpoint.down()
                    self.close_connection = True
                    return
                status, data = reply
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _serve

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self.server.server_port
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def down(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


def _json(status: int, data) -> tuple[int, bytes]:
    return status, json.dumps(data).encode()


# ------------------------------------------------------------------------------------------
# A scripted OpenAI-compatible server (the shapes llama_cpp.server returns)
# ------------------------------------------------------------------------------------------

VOCAB = {"": [], " Paris": [11], " London": [12], " [": [13]}
REPLY = [(" Paris", 0.9), (" is", 0.5), (" nice", 0.3), (".", 0.95), ("\n\n", 0.8), ("Question", 0.7)]


@dataclasses.dataclass
class Scripted:
    """Replies REPLY (" Paris is nice.\\n\\nQuestion"); a -100 bias on token 11 makes it " London".
    Switches turn off what a server may lack; ``fault`` breaks every generation response."""

    logprobs: bool = True
    completions: bool = True
    tokenize: bool = True
    fault: str | None = None  # malformed, empty, no_logprobs, no_usage, 503, 400
    #: Serve ``tools`` on chat: a named tool_choice gets a call; "auto" the next item of ``turns``,
    #: a text (the answer) or a list of (id, arguments JSON) calls of search. Off: tools are ignored.
    tools: bool = False
    turns: list = dataclasses.field(default_factory=list)
    requests: list = dataclasses.field(default_factory=list)
    auth: set = dataclasses.field(default_factory=set)

    def __call__(self, method, path, body, headers):
        self.auth.add(headers.get("Authorization"))
        req = json.loads(body) if body else {}
        self.requests.append((path, req))
        if path == "/extras/tokenize" and self.tokenize:
            return _json(200, {"tokens": [1] + VOCAB.get(req["input"], [99])})  # 1: a BOS
        chat = path == "/v1/chat/completions"
        if not (chat or (path == "/v1/completions" and self.completions)):
            return _json(404, {"detail": "Not Found"})
        if chat and req.get("tools") and self.tools:
            return _json(200, self._tool_reply(req))
        if req.get("max_tokens", 0) > 1 and self.fault in ("503", "400"):
            return _json(int(self.fault), {"error": {"message": f"failed; you sent {headers.get('Authorization')}"}})
        if req.get("max_tokens", 0) > 2 and self.fault == "malformed":
            return 200, b'{"id": "cmpl-1", "choices": [{"text": " Par'
        reply = list(REPLY)
        if req.get("logit_bias", {}).get("11", 0) < 0:
            reply[0] = (" London", 0.6)
        # Generate token by token until a stop sequence shows up (that token is returned too).
        text, finish, generated = "", "length", []
        for tok, p in reply[: req.get("max_tokens", 16)]:
            generated.append((tok, p))
            text += tok
            hit = [text.index(s) for s in req.get("stop") or [] if s in text]
            if hit:
                text, finish = text[: min(hit)], "stop"
                break
        reply = generated
        if req.get("echo"):
            text = req["prompt"] + text
        want = req.get("logprobs") and self.logprobs and self.fault != "no_logprobs"
        top = [{t: math.log(p), "x": math.log((1 - p) / 2)} for t, p in reply]
        if chat:
            choice = {"message": {"role": "assistant", "content": text}, "finish_reason": finish}
            if want:
                choice["logprobs"] = {
                    "content": [
                        {"token": t, "logprob": math.log(p), "top_logprobs": [{"token": t, "logprob": math.log(p)}] * 2}
                        for t, p in reply
                    ]
                }
        else:
            choice = {"text": text, "finish_reason": finish, "logprobs": None}
            if want:
                choice["logprobs"] = {
                    "tokens": [t for t, _ in reply],
                    "token_logprobs": [math.log(p) for _, p in reply],
                    "top_logprobs": top,
                }
        data = {"choices": [choice], "usage": {"prompt_tokens": 7, "completion_tokens": len(reply)}}
        if "cached" in req.get("prompt", ""):
            data["usage"]["prompt_tokens_details"] = {"cached_tokens": 5}
        if req.get("max_tokens", 0) > 2 and self.fault == "empty":
            data["choices"] = []
        if req.get("max_tokens", 0) > 2 and self.fault == "no_usage":
            del data["usage"]
        return _json(200, data)

    def _tool_reply(self, req: dict) -> dict:
        """What llama_cpp.server's chatml-function-calling returns: calls with ids, content None."""
        if isinstance(req.get("tool_choice"), dict):
            item = [("call_probe", '{"query": "Paris"}')]
        else:
            assert req.get("tool_choice") == "auto"
            item = self.turns.pop(0) if self.turns else "So the answer is Paris."
        message = {"role": "assistant", "content": item if isinstance(item, str) else None}
        if not isinstance(item, str):
            message["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": "search", "arguments": a}} for i, a in item
            ]
        finish = "stop" if isinstance(item, str) else "tool_calls"
        return {
            "choices": [{"message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 4},
        }


@pytest.fixture
def scripted():
    server = Scripted()
    endpoint = Endpoint(server)
    server.endpoint = endpoint
    yield server
    endpoint.down()


def _lm(server, **kw) -> OpenAILM:
    return OpenAILM(
        "scripted", base_url=server.endpoint.url, api_key=SECRET, max_retries=kw.pop("max_retries", 0), **kw
    )


PROMPT = Prompt("Static. ", "Question: where?\nAnswer:")


def test_the_probe_finds_what_a_llama_cpp_server_offers(scripted):
    lm = _lm(scripted)
    caps = lm.capabilities
    assert (caps.api, caps.logprobs, caps.top_logprobs, caps.echo, caps.logit_bias) == (
        "completions",
        True,
        True,
        True,
        True,
    )
    assert caps.tokenize == "/extras/tokenize" and caps.repeat_penalty_off
    assert lm.supports_logprobs and lm.supports_logit_bias and OpenAILM.thread_safe
    info = lm.describe()
    assert info["base_url"] == scripted.endpoint.url + "/" and info["model"] == "scripted"
    assert info["capabilities"]["logprobs"] is True
    assert lm.capabilities_line() == (
        f"openai:scripted at {scripted.endpoint.url}/: /completions; logprobs yes, top_logprobs yes, "
        "logit_bias yes, echo yes, tools no"
    )
    assert SECRET not in json.dumps(info) + lm.capabilities_line()
    assert scripted.auth == {f"Bearer {SECRET}"}  # the key goes to the endpoint, and nowhere else
    # Greedy with no repetition penalty (llama_cpp.server's default is 1.1).
    assert all(r["temperature"] == 0 and r["repeat_penalty"] == 1.0 for p, r in scripted.requests if "max_tokens" in r)


def test_token_texts_are_rebuilt_where_a_server_split_a_letter():
    from flarebench.strategies.openai_lm import _aligned

    # llama_cpp.server decodes each token alone, ignoring broken bytes: "ë" split over two tokens
    # comes back as two empty strings, and the tokens no longer join to the text.
    served = {
        "choices": [
            {
                "text": " Zo\u00eb is here. Next",
                "logprobs": {"tokens": [" Zo", "", "", " is", " here", ".", " Next"],
                             "text_offset": [30, 33, 33, 34, 37, 42, 43]},
            }
        ]
    }  # fmt: skip
    tokens = _aligned(served["choices"][0]["logprobs"]["tokens"], served, "completions")
    assert tokens == [" Zo", "", "\u00eb", " is", " here", ".", " Next"]
    assert "".join(tokens) == served["choices"][0]["text"]
    chat = {
        "choices": [
            {
                "message": {"content": " Zo\u00eb"},
                "logprobs": {"content": [
                    {"token": " Zo", "bytes": list(b" Zo")},
                    {"token": "\ufffd", "bytes": [0xC3]},
                    {"token": "\ufffd", "bytes": [0xAB]},
                ]},
            }
        ]
    }  # fmt: skip
    assert _aligned([" Zo", "\ufffd", "\ufffd"], chat, "chat") == [" Zo", "", "\u00eb"]


def test_a_completion_carries_tokens_logprobs_usage_and_is_cut_at_the_stop(scripted):
    lm = _lm(scripted)
    call = lm.generate(PROMPT, 16, stop=("\n\n", "\nQuestion:"), logprobs=True, purpose="draft")
    assert call.text == " Paris is nice." and call.finish_reason == "stop"
    # The server returns the token that held the stop too; it contributes no text and is dropped.
    assert call.tokens == [" Paris", " is", " nice", "."]
    assert [round(math.exp(lp), 6) for lp in call.logprobs] == [0.9, 0.5, 0.3, 0.95]
    assert (call.prompt_tokens, call.evaluated_tokens, call.completion_tokens) == (7, 7, 5)
    assert call.purpose == "draft" and call.seconds > 0
    sent = scripted.requests[-1][1]
    assert sent["prompt"] == PROMPT.text and sent["stop"] == ["\n\n", "\nQuestion:"] and sent["logprobs"] == 1
    # A caller that keeps the first sentence gets the token split (it counts its budget with it),
    # without logprobs unless asked; other calls get the text in completion_tokens equal pieces.
    sentence = lm.generate(PROMPT, 16, stop=("\n\n",), stop_at_sentence=True)
    assert sentence.tokens == call.tokens and sentence.logprobs is None and scripted.requests[-1][1]["logprobs"] == 1
    plain = lm.generate(PROMPT, 16, stop=("\n\n",))
    assert "logprobs" not in scripted.requests[-1][1] and plain.logprobs is None
    assert "".join(plain.tokens) == plain.text and len(plain.tokens) == plain.completion_tokens == 5
    # A server-side prompt cache: evaluated = prompt tokens - cached tokens.
    cached = lm.generate(Prompt("cached ", "x"), 3)
    assert (cached.prompt_tokens, cached.evaluated_tokens) == (7, 2) and cached.finish_reason == "length"
    # Stops past the API's four are cut here.
    many = lm.generate(PROMPT, 16, stop=("W", "X", "Y", "Z", " nice"), logprobs=True)
    assert (
        many.text == " Paris is"
        and many.tokens == [" Paris", " is"]
        and scripted.requests[-1][1]["stop"] == list("WXYZ")
    )


def test_top_logprobs_and_entropy_bounds_come_from_the_servers_alternatives(scripted):
    from flarebench.strategies.openai_lm import ENTROPY_TOP_K

    lm = _lm(scripted)
    assert lm.supports_top_logprobs
    call = lm.generate(PROMPT, 16, stop=("\n\n",), logprobs=True, top_logprobs=2, entropy=True)
    sent = scripted.requests[-1][1]
    assert sent["logprobs"] == ENTROPY_TOP_K == 20  # as many as a server gives, for the entropy bound
    # The scripted server lists the token (p) and "x" ((1 - p) / 2): the rest, (1 - p) / 2, is one
    # more outcome. For " is" (p = 0.5): H = -(0.5 ln 0.5 + 2 * 0.25 ln 0.25) = 1.5 ln 2.
    assert call.tokens == [" Paris", " is", " nice", "."]
    assert [[t for t, _ in top] for top in call.top_logprobs] == [
        [" Paris", "x"],
        [" is", "x"],
        ["x", " nice"],  # most likely first (this scripted server is not greedy there)
        [".", "x"],
    ]
    assert math.exp(call.top_logprobs[1][1][1]) == pytest.approx(0.25)
    assert call.entropies[1] == pytest.approx(1.5 * math.log(2))
    for p, h in zip([0.9, 0.5, 0.3, 0.95], call.entropies):
        assert h == pytest.approx(-p * math.log(p) - (1 - p) * math.log((1 - p) / 2))
    # Only what was asked for comes back; plain requests send what they always sent.
    margin = lm.generate(PROMPT, 16, stop=("\n\n",), logprobs=True, top_logprobs=2)
    assert scripted.requests[-1][1]["logprobs"] == 2 and margin.entropies is None and len(margin.top_logprobs) == 4
    plain = lm.generate(PROMPT, 16, stop=("\n\n",), logprobs=True)
    assert scripted.requests[-1][1]["logprobs"] == 1 and plain.top_logprobs is None and plain.entropies is None
    chat = Scripted(completions=False)
    endpoint = Endpoint(chat)
    chat.endpoint = endpoint
    try:
        served = _lm(chat).generate(PROMPT, 16, stop=("\n\n",), top_logprobs=2)
        assert chat.requests[-1][1]["top_logprobs"] == 2 and served.top_logprobs[0] == [[" Paris", math.log(0.9)]] * 2
    finally:
        endpoint.down()


def test_the_probe_finds_tools_where_the_server_serves_them(scripted):
    assert not _lm(scripted).capabilities.tools  # the scripted server ignores tools by default
    scripted.tools = True
    lm = _lm(scripted)
    assert lm.capabilities.tools and "tools" in lm.offers() and lm.capabilities_line().endswith("tools yes")
    probe = [r for p, r in scripted.requests if r.get("tools")][-1]
    assert probe["tool_choice"] == {"type": "function", "function": {"name": "search"}}
    assert probe["tools"][0]["function"]["parameters"]["properties"]["query"]["maxLength"] > 0


def test_tool_search_goes_through_the_endpoints_tools(scripted):
    from flarebench.strategies.tool_search import SEARCH_TOOL
    from tests.scripted import ScriptedRetriever

    scripted.tools = True
    lm = _lm(scripted)
    scripted.turns = [[("c1", '{"query": "capital of France"}')], [("c2", "not json")], "So the answer is Paris."]
    retriever = ScriptedRetriever([["a", "b"]])
    trace = parse_spec("tool_search").run("What is the capital of France?", lm, retriever)
    sent = [r for p, r in scripted.requests if r.get("tools") and r.get("tool_choice") == "auto"]
    assert len(sent) == 3 and all(r["tools"] == [SEARCH_TOOL] and r["temperature"] == 0 for r in sent)
    assert sent[0]["messages"][0]["role"] == "system" and sent[0]["messages"][1]["role"] == "user"
    assistant, result = sent[1]["messages"][2:4]
    assert assistant["content"] == "" and assistant["tool_calls"][0]["id"] == "c1"
    assert result["role"] == "tool" and result["tool_call_id"] == "c1" and "[1] Doc a" in result["content"]
    assert sent[2]["messages"][4]["tool_calls"][0]["function"]["arguments"] == "not json"  # as served
    assert retriever.queries == ["capital of France"] and trace.answer == "Paris"
    calls = [c for call in trace.lm_calls for c in call.tool_calls or []]
    assert [(c.id, c.ok) for c in calls] == [("c1", True), ("c2", False)] and calls[1].arguments is None
    assert all(c.prompt_tokens == 9 and c.completion_tokens == 4 for c in trace.lm_calls)


def test_tool_search_is_refused_where_the_server_serves_no_tools(scripted):
    with pytest.raises(StrategyRefused, match="tool_search needs tool calls, which openai:scripted does not offer"):
        check_compatible("tool_search", parse_spec("tool_search"), _lm(scripted))


def test_logit_bias_goes_by_the_servers_token_ids(scripted):
    lm = _lm(scripted)
    call = lm.generate(PROMPT, 1, logit_bias={" Paris": -100.0})
    assert call.text == " London"
    assert scripted.requests[-1][1]["logit_bias"] == {"11": -100.0}  # the BOS of /extras/tokenize stripped


def test_without_a_tokenize_endpoint_there_is_no_logit_bias(scripted):
    scripted.tokenize = False
    lm = _lm(scripted)
    assert not lm.supports_logit_bias and lm.capabilities.tokenize is None
    assert not lm.capabilities.repeat_penalty_off  # not a llama.cpp server: no llama.cpp parameters
    lm.generate(PROMPT, 1, logit_bias={" Paris": -100.0})
    assert "logit_bias" not in scripted.requests[-1][1] and "repeat_penalty" not in scripted.requests[-1][1]


def test_chat_completions_with_logprobs_when_completions_are_not_served(scripted):
    scripted.completions = False
    lm = _lm(scripted)
    assert lm.capabilities.api == "chat" and lm.supports_logprobs and not lm.capabilities.echo
    call = lm.generate(PROMPT, 16, stop=("\n\n",), logprobs=True)
    assert call.text == " Paris is nice." and call.tokens == [" Paris", " is", " nice", "."]
    sent = scripted.requests[-1][1]
    assert sent["messages"] == [{"role": "user", "content": PROMPT.text}] and sent["logprobs"] is True


def test_without_logprobs_flare_direct_is_refused_naming_the_alternatives(scripted):
    scripted.logprobs = False
    lm = _lm(scripted)
    assert not lm.supports_logprobs and lm.capabilities.api == "completions"
    call = lm.generate(PROMPT, 16, stop=("\n\n",))
    # No per-token data: the text in completion_tokens pieces of equal length.
    assert "".join(call.tokens) == call.text and len(call.tokens) == call.completion_tokens == 5
    with pytest.raises(StrategyRefused, match="would run on it: no_retrieval, single_time, fixed_interval"):
        check_compatible("flare_direct", parse_spec("flare_direct"), lm)
    check_compatible("flare_instruct", parse_spec("flare_instruct"), lm)


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("malformed", "the LM server returned malformed JSON for /completions"),
        ("empty", "empty completion: the LM server returned no choice with text"),
        ("no_logprobs", "the LM server returned no logprobs although they were asked for"),
        ("no_usage", "holds no usage counts"),
        ("400", "answered HTTP 400 to /completions"),
    ],
)
def test_a_bad_response_is_an_lm_error_of_that_call(scripted, fault, message):
    lm = _lm(scripted)
    scripted.fault = fault
    with pytest.raises(LMError, match=message) as e:
        lm.generate(PROMPT, 16, logprobs=True)
    assert not isinstance(e.value, LMUnavailable)
    assert SECRET not in str(e.value)  # the 400 body echoes the key: redacted


@pytest.mark.slow
def test_a_server_that_stays_unavailable_raises_lm_unavailable(scripted):
    lm = _lm(scripted, max_retries=1)
    scripted.fault = "503"
    start = time.perf_counter()
    with pytest.raises(LMUnavailable, match=r"answered HTTP 503 to /completions.*2 attempts") as e:
        lm.generate(PROMPT, 16)
    assert SECRET not in str(e.value)
    assert time.perf_counter() - start >= 0.3  # the client backed off before its retry
    scripted.endpoint.down()
    with pytest.raises(LMUnavailable, match=r"is unreachable \(ConnectError: .*refused.*2 attempts\)"):
        lm.generate(PROMPT, 16)
    scripted.endpoint.up()  # for the fixture's teardown


def test_an_unreachable_server_at_start_is_lm_unavailable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(LMUnavailable, match=f"127.0.0.1:{port}/v1/ is unreachable"):
        OpenAILM("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)


def test_a_base_url_that_is_no_endpoint_is_refused_before_it_is_asked(monkeypatch, tmp_path):
    # The openai client appends its paths to the URL's text: a query string (a key in the URL) would
    # be mangled into every request and printed in the "unreachable" line; a URL without http(s)
    # would be reported as an unreachable server, a run folder opened and resuming suggested.
    cases = {
        "ftp://x": "--lm-base-url: 'ftp://x' is not an http:// or https:// URL",
        "http://127.0.0.1:1/v1?api_key=sk-in-url": "--lm-base-url: http://127.0.0.1:1/v1?api_key=***: a query string",
        "http://127.0.0.1:1/v1#frag": "--lm-base-url: http://127.0.0.1:1/v1#***: a query string",
        "http://127.0.0.1:99999/v1": "--lm-base-url: http://127.0.0.1:99999/v1: the port is not one of 0 to 65535",
    }
    for url, message in cases.items():
        with pytest.raises(ValueError, match=re.escape(message)) as e:
            make_lm("openai:m", base_url=url, max_retries=0)
        assert "sk-in-url" not in str(e.value)
    monkeypatch.setenv("OPENAI_BASE_URL", "localhost:8000/v1")
    with pytest.raises(ValueError, match=r"^\$OPENAI_BASE_URL: 'localhost:8000/v1' is not an http"):
        make_lm("openai:m", max_retries=0)
    with pytest.raises(ConfigError, match=r"^--lm-base-url: 'nonsense' is not an http"):
        BenchSession(strategy=["single_time"], lm="openai:m", lm_base_url="nonsense", limit=1, progress=False,
                     report_dir=str(tmp_path / "run"))  # fmt: skip
    assert not (tmp_path / "run").exists()


def test_make_lm_reads_the_key_from_the_named_variable(scripted, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-other-key")
    lm = make_lm("openai:scripted", base_url=scripted.endpoint.url, api_key_env=KEY_ENV, max_retries=0)
    assert lm.name == "openai:scripted" and scripted.auth == {"Bearer sk-other-key"}
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(LMError, match=f"--lm-api-key-env {KEY_ENV}: the environment variable {KEY_ENV} is not set"):
        make_lm("openai:scripted", base_url=scripted.endpoint.url, api_key_env=KEY_ENV)
    with pytest.raises(LMError, match="--lm-base-url only applies to --lm openai:MODEL, not llamacpp:smollm2"):
        make_lm("llamacpp:smollm2", base_url=scripted.endpoint.url)
    # Refused before the endpoint is asked anything: no client can wait nan or inf seconds.
    for timeout in (0.0, float("nan"), float("inf")):
        with pytest.raises(LMError, match=f"--lm-timeout must be a finite number > 0 seconds, got {timeout:g}"):
            make_lm("openai:scripted", base_url="http://127.0.0.1:9/v1", timeout=timeout)


def test_a_base_url_with_credentials_is_recorded_without_them(scripted):
    lm = OpenAILM("m", base_url=f"http://user:pw@127.0.0.1:{scripted.endpoint.port}/v1", max_retries=0)
    assert lm.describe()["base_url"] == f"http://127.0.0.1:{scripted.endpoint.port}/v1/"


def test_concurrency_needs_a_thread_safe_backend():
    # Refused before any model is loaded.
    with pytest.raises(ConfigError, match="--concurrency 2 needs a backend that serves calls in parallel; llamacpp"):
        BenchSession(strategy=["no_retrieval"], limit=1, concurrency=2, progress=False)
    with pytest.raises(ConfigError, match="--concurrency must be >= 1"):
        BenchSession(strategy=["no_retrieval"], limit=1, concurrency=0, progress=False)
    with pytest.raises(ConfigError, match="--lm-base-url only applies to --lm openai:MODEL"):
        BenchSession(strategy=["no_retrieval"], limit=1, lm_base_url="http://x/v1", progress=False)
    with pytest.raises(ConfigError, match="unknown LM spec 'foo:bar'"):
        BenchSession(strategy=["no_retrieval"], limit=1, lm="foo:bar", progress=False)


# ------------------------------------------------------------------------------------------
# The runner: an unreachable LM stops the run; concurrent probes
# ------------------------------------------------------------------------------------------


@dataclasses.dataclass
class LMEcho(Strategy):
    """Answers with one LM call; the LM sees the question."""

    def run(self, question, lm, retriever):
        call = lm.generate(Prompt("static ", question), 8)
        return finish(question, [Step(call.text, [call])])


class DyingLM(ScriptedLM):
    """A thread-safe scripted LM that sleeps a little per call and is unreachable for questions
    holding 'down'."""

    thread_safe = True

    def _complete(self, request):
        time.sleep(0.05 * (len(request.prompt.dynamic) % 3))  # probes finish out of order
        if "down" in request.prompt.dynamic:
            raise LMUnavailable("the LM server at http://x/v1/ is unreachable")
        return super()._complete(request)


@dataclasses.dataclass
class P:
    id: str
    question: str


@pytest.mark.parametrize("concurrency", [1, 3])
def test_an_unreachable_lm_stops_the_run_and_keeps_the_finished_probes(tmp_path, concurrency):
    log = TraceLog(tmp_path / "traces.jsonl")
    probes = [P("p1", "one"), P("p2", "down now"), P("p3", "three"), P("p4", "four"), P("p5", "five")]
    lm = DyingLM([" So the answer is x."])
    got = []
    with pytest.raises(LMUnavailable, match="unreachable"):
        for trace in run_strategy("_test_lm_echo", LMEcho(), probes, lm, None, log, concurrency=concurrency):
            got.append(trace.probe_id)
    kept = [t.probe_id for t in log.read()]
    assert kept == got and "p1" in kept and "p2" not in kept
    assert all(t.error is None for t in log.read())  # no error trace for the unreachable server
    if concurrency == 1:
        assert kept == ["p1"]
    # The server is back: the same run resumes and finishes the rest.
    lm = DyingLM([" So the answer is x."])
    probes[1] = P("p2", "two")
    list(run_strategy("_test_lm_echo", LMEcho(), probes, lm, None, TraceLog(log.path), concurrency=concurrency))
    assert sorted(t.probe_id for t in log.read()) == ["p1", "p2", "p3", "p4", "p5"]


def test_concurrent_probes_give_the_sequential_answers_as_they_finish(tmp_path):
    probes = [P(f"p{i}", "q" * i) for i in range(1, 8)]
    answers = {}
    for n in (1, 4):
        log = TraceLog(tmp_path / f"c{n}.jsonl")
        lm = DyingLM([" So the answer is x."])
        seen = []
        traces = list(run_strategy("_test_lm_echo", LMEcho(), probes, lm, None, log, seen.append, concurrency=n))
        assert [t.probe_id for t in traces] == [t.probe_id for t in log.read()] == [t.probe_id for t in seen]
        assert all(t.seconds > 0 for t in traces)
        answers[n] = {t.probe_id: t.answer for t in traces}
        if n == 4:
            assert [t.probe_id for t in traces] != [p.id for p in probes]  # written as they finished
    assert answers[1] == answers[4] and len(answers[1]) == 7
    with pytest.raises(ValueError, match="cannot serve calls from several threads"):
        list(run_strategy("_test_lm_echo", LMEcho(), probes, ScriptedLM(["x"]), None, log, concurrency=2))


# ------------------------------------------------------------------------------------------
# flarebench run against the scripted endpoint (no model): refusal, secrets, faults
# ------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Proxy:
    """Forwards to the real server; a request whose prompt holds a key of ``faults`` gets that
    fault (malformed: a torn JSON body; empty: no choices; no_logprobs: logprobs stripped), one
    holding ``down_on`` closes the proxy's port (the server is gone), and from the request holding
    ``refuse_from`` on, every request is refused as with a revoked key (HTTP 401, quoting it as
    OpenAI's reply does). Counts requests in flight."""

    upstream: str
    faults: dict = dataclasses.field(default_factory=dict)
    down_on: str | None = None
    refuse_from: str | None = None
    refusing: bool = False
    auth: set = dataclasses.field(default_factory=set)
    in_flight: int = 0
    max_in_flight: int = 0

    def __post_init__(self):
        self.lock = threading.Lock()
        self.endpoint = Endpoint(self)

    def __call__(self, method, path, body, headers):
        self.auth.add(headers.get("Authorization"))
        prompt = str(json.loads(body).get("prompt") or "") if body else ""
        if self.down_on and self.down_on in prompt:
            return DROP
        self.refusing = self.refusing or bool(self.refuse_from and self.refuse_from in prompt)
        if self.refusing:
            quoted = f"Incorrect API key provided: {headers.get('Authorization')}"
            return 401, json.dumps({"error": {"message": quoted, "code": "invalid_api_key"}}).encode()
        fault = next((f for text, f in self.faults.items() if text in prompt), None)
        if fault == "malformed":
            return 200, b'{"id": "cmpl-1", "choices": [{"text": " Par'
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        request = urllib.request.Request(
            self.upstream.removesuffix("/v1") + path,
            data=body or None,
            method=method,
            headers={"Content-Type": "application/json", "Authorization": headers.get("Authorization", "")},
        )
        try:
            with urllib.request.urlopen(request, timeout=600) as r:
                status, data = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, data = e.code, e.read()
        finally:
            with self.lock:
                self.in_flight -= 1
        if fault in ("empty", "no_logprobs") and status == 200:
            reply = json.loads(data)
            if fault == "empty":
                reply["choices"] = []
            for choice in reply["choices"]:
                choice["logprobs"] = None
            data = json.dumps(reply).encode()
        return status, data


# ------------------------------------------------------------------------------------------


def flarebench(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flarebench", "run", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **(env or {})},
    )


def _traces(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "traces.jsonl").read_text().splitlines()]


def _answers(run_dir: Path) -> dict[tuple[str, str], str | None]:
    return {(t["strategy"], t["probe_id"]): t["answer"] for t in _traces(run_dir)}


def _server_args(url: str, *more: str) -> list[str]:
    return ["--lm", "openai:smollm2", "--lm-base-url", url, "--lm-api-key-env", KEY_ENV, *more]


@pytest.mark.slow
def test_flare_direct_is_refused_on_an_endpoint_without_logprobs(scripted, tmp_path):
    scripted.logprobs = False
    r = flarebench(
        "--lm", "openai:scripted", "--lm-base-url", scripted.endpoint.url, "--strategy", "flare_direct",
        "--limit", "1", "--report-dir", str(tmp_path / "run"),
    )  # fmt: skip
    # Refused before the first probe, in one line naming what would run, and no run folder is made.
    assert r.returncode == 2, r.stderr
    line = (
        "flarebench: flare_direct needs per-token logprobs, which openai:scripted does not offer; "
        "these would run on it: "
    )
    assert r.stderr.startswith(line) and r.stderr.count("\n") == 1, r.stderr
    would_run = r.stderr.removeprefix(line).strip().split(", ")
    assert {"single_time", "flare_instruct", "flare_direct:trigger=self_check"} <= set(would_run)
    assert "flare_direct" not in would_run and not (tmp_path / "run").exists()


@pytest.mark.slow
def test_the_key_is_sent_but_never_written(scripted, tmp_path):
    run_dir = tmp_path / "run"
    r = flarebench(
        "--lm", "openai:scripted", "--lm-base-url", scripted.endpoint.url, "--lm-api-key-env", KEY_ENV,
        "--strategy", "no_retrieval", "--limit", "2", "--report-dir", str(run_dir),
        env={KEY_ENV: SECRET, "OPENAI_API_KEY": SECRET},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert scripted.auth == {f"Bearer {SECRET}"}
    assert len((run_dir / "traces.jsonl").read_text().splitlines()) == 2
    info = json.loads((run_dir / "run.json").read_text())
    assert info["config"]["lm"]["base_url"] == scripted.endpoint.url + "/"
    assert KEY_ENV in info["command"] and SECRET not in info["command"]
    assert files_holding(run_dir, SECRET) == [] and SECRET not in r.stdout + r.stderr
    assert len(list(run_dir.iterdir())) >= 4


@pytest.mark.slow
def test_an_endpoint_down_at_start_is_one_line_and_exit_3(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = flarebench(
        "--lm", "openai:m", "--lm-base-url", f"http://127.0.0.1:{port}/v1", "--lm-retries", "0",
        "--strategy", "no_retrieval", "--limit", "1", "--report-dir", str(tmp_path / "run"),
    )  # fmt: skip
    assert r.returncode == 3
    # Nothing ran and no folder was opened: what to check, not "finished probes are kept; ... resume".
    assert r.stderr.strip().splitlines() == [
        f"flarebench: the LM server at http://127.0.0.1:{port}/v1/ is unreachable (ConnectError: [Errno 111] "
        "Connection refused; 1 attempt); no probe has run: check the LM's address (--lm-base-url) and that its "
        "server is up"
    ]
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------------------------------
# Against a real server: python -m llama_cpp.server with the bundled model
# ------------------------------------------------------------------------------------------

#: Probes of single_time's reference runs (flare_direct's run the first one).
LIMIT = "2"
#: flare_direct as the reference runs it. Through the server every draft decodes its whole look-ahead
#: with logprobs (the README, "Server vs in-process"), by far the costliest request of this module:
#: 40 tokens still take the probe through drafts, two fired gates, masked queries and regenerations.
FLARE = "flare_direct:max_tokens=40"
#: (strategy, probe) answers that may differ between the server and the in-process backend: none.
#: Both tokenize the whole prompt (the in-process backend reuses the static prefix's state only up
#: to the last token the two tokenizations share), so they see the same tokens; what remains is
#: batch-split rounding, which flips no answer on these probes.
MAX_FLIPPED = 0


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    """The base URL of ``python -m llama_cpp.server`` serving the bundled SmolLM2 with its full
    context, started for this test session and stopped at its end."""
    with servers.llama_server(tmp_path_factory.mktemp("llama-server") / "server.log") as url:
        yield url


@pytest.fixture(scope="module")
def reference(llama_server, tmp_path_factory):
    """single_time on the first LIMIT probes and FLARE on the first one, through the server and
    in-process: {"server"|"inprocess": ([single_time's run folder, FLARE's], wall seconds),
    "in_flight": the most requests the server had at once}. The server's single_time runs with
    ``--concurrency 2`` through a proxy that counts requests in flight: the one concurrent run of
    this module, and the uninterrupted run the resumed one is compared with (a sequential one would
    only repeat its prompts at the server)."""
    base = tmp_path_factory.mktemp("reference")
    proxy = Proxy(llama_server)
    lm_args = {
        ("server", "single_time"): _server_args(proxy.endpoint.url, "--concurrency", "2"),
        ("server", FLARE): _server_args(llama_server),
        ("inprocess", "single_time"): ["--lm", "llamacpp:smollm2"],
        ("inprocess", FLARE): ["--lm", "llamacpp:smollm2"],
    }
    runs = {}
    try:
        for name in ("server", "inprocess"):
            start = time.perf_counter()
            folders = []
            for spec, limit in (("single_time", LIMIT), (FLARE, "1")):
                folders.append(base / name / spec)
                r = flarebench(
                    *lm_args[name, spec], "--strategy", spec, "--limit", limit, "--report-dir", str(folders[-1]),
                    env={KEY_ENV: SECRET},
                )  # fmt: skip
                assert r.returncode == 0, r.stdout + r.stderr
            runs[name] = (folders, time.perf_counter() - start)
    finally:
        proxy.endpoint.down()
    runs["in_flight"] = proxy.max_in_flight
    return runs


@pytest.mark.model
def test_the_probe_of_a_llama_cpp_server(llama_server):
    lm = OpenAILM("smollm2", base_url=llama_server)
    caps = lm.capabilities
    assert (caps.api, caps.logprobs, caps.top_logprobs, caps.logit_bias, caps.echo) == (
        "completions", True, True, True, True
    )  # fmt: skip
    assert caps.tokenize == "/extras/tokenize" and caps.repeat_penalty_off
    # Tools "yes" without --chat_format too: a named tool_choice is grammar-forced by the GGUF template's
    # handler (though "auto" turns never yield a call there; docs/strategies.md, tool_search).
    assert lm.capabilities_line().endswith(
        "/completions; logprobs yes, top_logprobs yes, logit_bias yes, echo yes, tools yes"
    )


@pytest.mark.model
def test_a_served_completion_has_sane_tokens_and_logprobs(llama_server, phantom, retriever, lm):
    from flarebench.strategies.prompts import OPEN_BOOK, STOP

    server = OpenAILM("smollm2", base_url=llama_server)
    probe = phantom.probes[0]
    prompt = OPEN_BOOK.build(probe.question, retriever.search(probe.question, 3)[0])
    call = server.generate(prompt, 48, stop=STOP, logprobs=True)
    assert call.text and "".join(call.tokens) == call.text
    assert call.logprobs and len(call.logprobs) == len(call.tokens) <= call.completion_tokens <= 48
    assert all(0 < math.exp(lp) <= 1 for lp in call.logprobs)
    assert call.prompt_tokens > 100 and call.evaluated_tokens == call.prompt_tokens  # no cached-token count
    # The same prompt tokens and greedy tokens as in-process, with logprobs equal up to batch-split
    # rounding: both tokenize the whole prompt.
    local = lm.generate(prompt, 48, stop=STOP, logprobs=True)
    assert call.prompt_tokens == local.prompt_tokens
    assert call.tokens == local.tokens and call.text == local.text
    gap = max(abs(a - b) for a, b in zip(call.logprobs, local.logprobs))
    print(f"max logprob difference server vs in-process: {gap:.4f}")
    assert gap < 0.05
    # A -100 bias on the first token makes the server choose another one.
    biased = server.generate(prompt, 1, logit_bias={call.tokens[0]: -100.0})
    assert biased.text != call.tokens[0]


@pytest.mark.model
def test_served_answers_match_in_process_ones(reference):
    (server_dirs, server_s), (local_dirs, local_s) = reference["server"], reference["inprocess"]
    server = {k: v for folder in server_dirs for k, v in _answers(folder).items()}
    local = {k: v for folder in local_dirs for k, v in _answers(folder).items()}
    assert server.keys() == local.keys() and len(server) == int(LIMIT) + 1
    flipped = sorted(k for k in server if server[k] != local[k])
    outputs = {(t["strategy"], t["probe_id"]): t["output"] for folder in local_dirs for t in _traces(folder)}
    server_traces = [t for folder in server_dirs for t in _traces(folder)]
    same_output = sum(t["output"] == outputs[(t["strategy"], t["probe_id"])] for t in server_traces)
    print(
        f"server vs in-process: {len(flipped)} of {len(server)} answers differ {flipped}; "
        f"{same_output} identical outputs; wall {server_s:.1f} s (single_time 2 at a time) vs {local_s:.1f} s"
    )
    assert len(flipped) <= MAX_FLIPPED
    assert reference["in_flight"] == 2  # the server's single_time had both its probes there at once
    assert all(t["error"] is None for t in server_traces)
    info = json.loads((server_dirs[1] / "run.json").read_text())
    assert info["config"]["lm"]["capabilities"]["logprobs"] is True
    # The key is sent with every request and written nowhere.
    assert all(files_holding(folder, SECRET) == [] for folder in server_dirs)


def _check_faults(proxy: Proxy, args: list[str], run_dir: Path) -> None:
    """flare_direct (it asks for logprobs) on four probes; the first three probes' responses are
    broken (malformed, empty, no logprobs), the fourth's are not: three per-probe errors in
    traces.jsonl and the summary, and the run went through."""
    r = flarebench(*args, "--limit", "4", "--report-dir", str(run_dir), env={KEY_ENV: SECRET})
    proxy.endpoint.down()
    assert r.returncode == 1, r.stdout + r.stderr  # a strategy with probe errors fails; the run went on
    traces = _traces(run_dir)
    errors = [t["error"] for t in traces]
    assert len(errors) == 4
    assert errors[0].startswith("LMError: the LM server returned malformed JSON for /completions")
    assert errors[1].startswith("LMError: empty completion: the LM server returned no choice with text")
    assert errors[2].startswith("LMError: the LM server returned no logprobs although they were asked for")
    assert errors[3] is None and traces[3]["output"]
    with open(run_dir / "summary.csv") as f:
        [row] = csv.DictReader(f)
    assert row["errors"] == "3" and row["n"] == "4"
    assert proxy.auth == {f"Bearer {SECRET}"} and files_holding(run_dir, SECRET) == []


def _check_gone_and_resumed(proxy: Proxy, args: list[str], run_dir: Path, probe_ids: list[str]) -> dict:
    """The proxy's port closes when the second probe's request arrives: the run stops with one line
    and exit status 3, keeping the first probe; with the port open again the same command resumes
    and finishes. Returns the answers."""
    args = [*args, "--lm-retries", "1", "--limit", str(len(probe_ids)), "--report-dir", str(run_dir)]
    r = flarebench(*args, env={KEY_ENV: SECRET})
    assert r.returncode == 3, r.stdout + r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"flarebench: the LM server at {proxy.endpoint.url}/ is unreachable (")
    assert last.endswith("2 attempts); finished probes are kept; run the same command to resume")
    assert "Traceback" not in r.stderr
    assert [t["probe_id"] for t in _traces(run_dir)] == probe_ids[:1]
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    assert "flarebench: openai:" in r.stderr and "logprobs yes" in r.stderr  # the capability probe said so
    proxy.down_on = None
    proxy.endpoint.up()  # the server is back, at the same address
    r = flarebench(*args, env={KEY_ENV: SECRET})
    proxy.endpoint.down()
    assert r.returncode == 0, r.stdout + r.stderr
    assert [t["probe_id"] for t in _traces(run_dir)] == probe_ids
    assert files_holding(run_dir, SECRET) == []
    return _answers(run_dir)


@pytest.mark.slow
def test_bad_responses_mid_run_are_per_probe_errors(scripted, phantom, tmp_path):
    q = [p.question for p in phantom.probes]
    proxy = Proxy(scripted.endpoint.url, faults={q[0]: "malformed", q[1]: "empty", q[2]: "no_logprobs"})
    # theta 0: the fourth probe's drafts (logprobs asked, as for every flare_direct call) are kept,
    # so its one sound answer costs no retrieval round trips through the server.
    args = _server_args(proxy.endpoint.url, "--strategy", "flare_direct:theta=0")
    _check_faults(proxy, args, tmp_path / "run")


@pytest.mark.slow
def test_a_server_gone_mid_run_stops_it_and_the_same_command_resumes(scripted, phantom, tmp_path):
    proxy = Proxy(scripted.endpoint.url, down_on=phantom.probes[1].question)
    ids = [p.id for p in phantom.probes[:3]]
    answers = _check_gone_and_resumed(
        proxy, _server_args(proxy.endpoint.url, "--strategy", "no_retrieval"), tmp_path / "run", ids
    )
    assert len(answers) == 3


def test_a_key_refused_mid_run_stops_it_and_the_same_command_resumes_once_it_is_fixed(
    scripted, phantom, tmp_path, monkeypatch
):
    # A key revoked mid-run would fail every probe left, each recorded as an error that a resumed
    # run keeps: the run stops at the first refusal instead, saying so, and resumes.
    from tests.scripted import run_cli

    proxy = Proxy(scripted.endpoint.url, refuse_from=phantom.probes[1].question)
    run_dir = tmp_path / "run"
    args = _server_args(proxy.endpoint.url, "--strategy", "no_retrieval", "--limit", "3", "--report-dir", str(run_dir))
    monkeypatch.setenv(KEY_ENV, SECRET)
    code, out, err = run_cli("run", *args)
    assert code == 3 and err.splitlines()[-1] == (
        f"flarebench: the LM server at {proxy.endpoint.url}/ answered HTTP 401 to /completions: Incorrect API key "
        "provided: Bearer *** (the key is refused: check the one in the variable --lm-api-key-env names, "
        "$OPENAI_API_KEY unless given); finished probes are kept; run the same command to resume"
    ), err
    assert [t["probe_id"] for t in _traces(run_dir)] == [phantom.probes[0].id]
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    proxy.refusing = False
    proxy.refuse_from = None  # the key is replaced
    code, out, err = run_cli("run", *args)
    assert code == 0, err
    traces = _traces(run_dir)
    assert [t["probe_id"] for t in traces] == [p.id for p in phantom.probes[:3]] and not any(t["error"] for t in traces)
    assert files_holding(run_dir, SECRET) == [] and SECRET not in out + err
    proxy.refusing = True  # refused from the start: the capability probe says so, before any run
    with pytest.raises(LMError) as e:
        make_lm("openai:smollm2", proxy.endpoint.url, KEY_ENV, max_retries=0)
    assert not isinstance(e.value, LMUnavailable)  # a mistake in the options (exit 2), not a server gone
    assert str(e.value) == (  # the key, once: not "serves neither ..." with each path's refusal
        f"the LM server at {proxy.endpoint.url}/ answered HTTP 401 to /completions: Incorrect API key provided: "
        "Bearer *** (the key is refused: check the one in the variable --lm-api-key-env names, $OPENAI_API_KEY "
        "unless given)"
    )
    proxy.endpoint.down()


@pytest.mark.model
def test_bad_responses_from_a_real_server_mid_run_are_per_probe_errors(llama_server, phantom, tmp_path):
    q = [p.question for p in phantom.probes]
    proxy = Proxy(llama_server, faults={q[0]: "malformed", q[1]: "empty", q[2]: "no_logprobs"})
    # theta 0: the fourth probe's drafts (logprobs asked, as for every flare_direct call) are kept,
    # so its one sound answer costs no retrieval round trips through the server; 16 tokens: one
    # draft, as the served look-ahead decodes in full with logprobs.
    args = _server_args(proxy.endpoint.url, "--strategy", "flare_direct:theta=0,max_tokens=16")
    _check_faults(proxy, args, tmp_path / "run")


@pytest.mark.model
def test_a_real_server_gone_mid_run_resumes_to_the_uninterrupted_answers(llama_server, reference, phantom, tmp_path):
    proxy = Proxy(llama_server, down_on=phantom.probes[1].question)
    ids = [p.id for p in phantom.probes[: int(LIMIT)]]
    args = _server_args(proxy.endpoint.url, "--strategy", "single_time")
    answers = _check_gone_and_resumed(proxy, args, tmp_path / "run", ids)
    # The uninterrupted run ran with --concurrency 2: this sequential run resumes to its answers.
    uninterrupted = _answers(reference["server"][0][0])  # single_time's
    assert answers == uninterrupted


@pytest.mark.slow
def test_pytest_bench_stops_with_one_line_when_the_server_goes(scripted, phantom, tmp_path):
    proxy = Proxy(scripted.endpoint.url, down_on=phantom.probes[1].question)
    run_dir = tmp_path / "run"
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "bench", "-p", "no:cacheprovider", "--lm", "openai:scripted",
         "--lm-base-url", proxy.endpoint.url, "--lm-retries", "0", "--strategy", "no_retrieval", "--limit", "3",
         "--report-dir", str(run_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert (
        f"Exit: flarebench: the LM server at {proxy.endpoint.url}/ is unreachable (" in r.stdout
        and "1 attempt); finished probes are kept; run the same command to resume" in r.stdout
    )
    assert "Traceback" not in r.stdout + r.stderr
    assert [t["probe_id"] for t in _traces(run_dir)] == [phantom.probes[0].id]
