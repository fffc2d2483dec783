"""``--retriever http:URL`` (strategies/http_retriever.py): searches served by a service of one's own.

A small real search service on 127.0.0.1 (http.server in a thread, a free port) serves an index:
each POSTed ``{"query", "k"}`` is answered with the documents sharing most words with the query,
best first, unless a test scripts the replies. Transient failures are tried again, a malformed
reply is that probe's error naming the URL and the field, and a service that goes away stops the
run, which the same command resumes. No model is loaded: end-to-end runs answer with the scripted LM.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field

import pytest

from flarebench.bench.runner import TraceLog, run_probe, run_strategy
from flarebench.strategies import http_client
from flarebench.strategies.backends import RETRIEVER_SPECS, make_retriever
from flarebench.strategies.http_client import ServiceError, ServiceUnavailable, redact_url
from flarebench.strategies.http_retriever import HttpRetriever
from flarebench.strategies.lm import LMUnavailable
from flarebench.strategies.records import Passage
from flarebench.strategies.registry import parse_spec
from tests.console import files_holding
from tests.scripted import ScriptedLM, run_cli
from tests.servers import JSONHandler, free_port, http_service

# ------------------------------------------------------------------------------------------
# A search service on 127.0.0.1
# ------------------------------------------------------------------------------------------

DOCS = [
    {"id": "d1", "title": "Bea Tull", "text": "Bea Tull is the daughter of Rosa Tull."},
    {"id": "d2", "title": "Rosa Tull", "text": "Rosa Tull is a baker."},
    {"id": "d3", "title": "Ann Bell", "text": "Ann Bell is a friend of Bea."},
]
CORPUS = [Passage(**d) for d in DOCS]  # the probe set's corpus: its ids are the service's

pytestmark = pytest.mark.usefixtures("fast_backoff")


@dataclass
class Reply:
    """A scripted reply: an HTTP status and a body (an object sent as JSON, or raw bytes)."""

    body: object
    status: int = 200


@dataclass
class Search:
    """Ranks ``docs`` by the words they share with the query and returns the best ``k`` (all that
    share a word, with ``ignore_k``). ``replies`` are served first, one per request; from request
    number ``drop_after`` + 1 on, the connection is closed without a reply (the service died)."""

    docs: list[dict] = field(default_factory=lambda: list(DOCS))
    replies: list[Reply] = field(default_factory=list)
    delay: float = 0.0  # seconds before each reply
    ignore_k: bool = False
    drop_after: int | None = None
    requests: list[dict] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    headers: list[dict] = field(default_factory=list)
    url: str = ""

    def reply(self, path: str, body: dict, headers: dict) -> Reply | None:
        self.requests.append(body)
        self.paths.append(path)
        self.headers.append(headers)
        time.sleep(self.delay)
        if self.drop_after is not None and len(self.requests) > self.drop_after:
            return None
        if self.replies:
            return self.replies.pop(0)
        words = set(body["query"].lower().replace("?", " ").split())
        scored = [
            (len(words & set(f"{d['title']} {d['text']}".lower().replace(".", " ").split())), d) for d in self.docs
        ]
        ranked = [{**d, "score": float(s)} for s, d in sorted(scored, key=lambda x: -x[0]) if s]
        return Reply(ranked if self.ignore_k else ranked[: body["k"]])


@pytest.fixture
def search():
    svc = Search()

    class Handler(JSONHandler):
        def do_POST(self):
            reply = svc.reply(self.path, self.json_body(), dict(self.headers))
            if reply is None:
                self.close_connection = True  # no reply at all: the client sees the connection closed
                return
            self.send_json(reply.status, reply.body)

    with http_service(Handler) as base:
        svc.url = base + "/search"
        yield svc


@dataclass
class P:
    """A probe as the runner reads it."""

    id: str
    question: str


def _probe_error(retriever, question: str = "Who is Bea Tull's mother?") -> str:
    """The error single_time records when its first search fails."""
    trace = run_probe("single_time", parse_spec("single_time"), P("p1", question), ScriptedLM(["x"]), retriever)
    assert trace.stop_reason == "error" and "\n" not in trace.error
    return trace.error


# ------------------------------------------------------------------------------------------
# The spec
# ------------------------------------------------------------------------------------------


def test_the_spec_is_http_and_a_full_url():
    r = make_retriever("http:https://search.example/v1/search?index=wiki", corpus=[])
    assert isinstance(r, HttpRetriever) and r.name == "http" and "http:URL" in RETRIEVER_SPECS
    assert r.describe() == {"name": "http", "url": "https://search.example/v1/search?index=wiki"}
    # The last does not parse as a URL at all (urllib: "Invalid IPv6 URL").
    for spec in (
        "http",
        "http:",
        "http:ftp://h/search",
        "http:127.0.0.1:8080/search",
        "http:http://",
        "http:http://[::1",
    ):
        with pytest.raises(ValueError, match=r"^--retriever http:URL needs an http:// or https:// URL") as e:
            make_retriever(spec, corpus=[])
        assert "\n" not in str(e.value)
    with pytest.raises(
        ValueError, match=r"^--retriever http:URL: http://h:99999/s: the port is not one of 0 to 65535$"
    ):
        make_retriever("http:http://h:99999/s", corpus=[])


def test_a_bad_spec_is_a_usage_error_in_one_line(scripted_lm, tmp_path):
    code, out, err = run_cli("run", "--retriever", "http:localhost:8080", "--report-dir", str(tmp_path / "run"))
    assert code == 2 and err.strip() == (
        "flarebench: --retriever http:URL needs an http:// or https:// URL (http:http://HOST:PORT/PATH), "
        "got 'localhost:8080'"
    )


def test_timeout_and_retries_are_checked_and_apply_to_http_only():
    r = make_retriever("http:http://h/search", corpus=[], timeout=2.5, retries=0)
    assert isinstance(r, HttpRetriever)
    for kwargs, message in (
        ({"timeout": 0}, "--retriever-timeout must be a finite number > 0 seconds, got 0"),
        ({"timeout": float("nan")}, "--retriever-timeout must be a finite number > 0 seconds, got nan"),
        ({"timeout": float("inf")}, "--retriever-timeout must be a finite number > 0 seconds, got inf"),
        ({"retries": -1}, "--retriever-retries must be >= 0, got -1"),
    ):
        with pytest.raises(ValueError) as e:
            make_retriever("http:http://h/search", corpus=[], **kwargs)
        assert str(e.value) == message
    with pytest.raises(ValueError) as e:
        make_retriever("bm25s", corpus=[], timeout=5, retries=1)
    assert str(e.value) == "--retriever-timeout, --retriever-retries only apply to --retriever http:URL, not bm25s"


def test_the_options_reach_the_service_and_a_slow_one_stops_the_run_in_one_line(search, scripted_lm, tmp_path):
    search.delay = 1.0
    args = ("run", "--strategy", "single_time", "--retriever", f"http:{search.url}", "--limit", "2")
    code, out, err = run_cli(
        *args, "--retriever-timeout", "0.2", "--retriever-retries", "1", "--report-dir", str(tmp_path / "run")
    )
    assert code == 3, out + err
    assert err.strip().splitlines()[-1] == (
        f"flarebench: the search service at {search.url} did not answer within 0.2 s (2 attempts); "
        "finished probes are kept; run the same command to resume"
    )
    assert len(search.requests) == 2
    code, out, err = run_cli(
        *args, "--retriever-retries", "2", "--report-dir", str(tmp_path / "bm25"), "--retriever", "bm25s"
    )
    assert (
        code == 2 and err.strip() == "flarebench: --retriever-retries only applies to --retriever http:URL, not bm25s"
    )


# ------------------------------------------------------------------------------------------
# Results
# ------------------------------------------------------------------------------------------


def test_a_search_posts_query_and_k_and_reads_the_passages_best_first(search):
    passages, seconds = HttpRetriever(search.url, CORPUS).search("Rosa Tull baker", 2)
    assert search.requests == [{"query": "Rosa Tull baker", "k": 2}]
    assert search.headers[0]["Content-Type"] == "application/json"
    assert passages == [
        Passage("d2", "Rosa Tull", "Rosa Tull is a baker.", 3.0),
        Passage("d1", "Bea Tull", "Bea Tull is the daughter of Rosa Tull.", 2.0),
    ]
    assert seconds > 0  # the request's wall time: retrieval_s_per_q


def test_at_most_k_are_kept_and_only_they_are_read(search):
    search.ignore_k = True
    assert [p.id for p in HttpRetriever(search.url, CORPUS).search("Bea Tull Rosa", 1)[0]] == ["d1"]
    search.replies = [Reply([{"id": "d1", "text": "a"}, {"id": "d2", "text": "b"}, {"no": "id"}])]
    assert [p.id for p in HttpRetriever(search.url, CORPUS).search("q", 2)[0]] == ["d1", "d2"]  # item 2 not read
    search.replies = [Reply([])]
    assert HttpRetriever(search.url, CORPUS).search("nothing", 3)[0] == []


def test_title_and_score_default_to_empty_and_zero(search):
    search.replies = [
        Reply(
            [
                {"id": "d1", "text": "a"},
                {"id": "d2", "text": "b", "title": None, "score": None},
                {"id": "d3", "text": "c", "score": 7},
            ]
        )
    ]
    passages, _ = HttpRetriever(search.url, CORPUS).search("q", 3)
    assert passages == [Passage("d1", "", "a", 0.0), Passage("d2", "", "b", 0.0), Passage("d3", "", "c", 7.0)]
    assert isinstance(passages[2].score, float)


# ------------------------------------------------------------------------------------------
# Failures: retried, a probe's error, or the run stops
# ------------------------------------------------------------------------------------------


ITEM = '{"id", "text", "title", "score"}'
DOC_ID = "a non-empty string (a doc id of the probe set's corpus)"


@pytest.mark.parametrize(
    "body, message",
    [
        (b'[{"id": "d1', "returned malformed JSON (Unterminated string"),
        ({"results": []}, f'expected a JSON list of an object {ITEM}, got {{"results": []}}'),
        (["d1"], f'[0]: expected an object {ITEM}, got "d1"'),
        ([{"text": "a"}], f"[0].id: expected {DOC_ID}, got null"),
        ([{"id": "d1", "text": "a"}, {"id": 7, "text": "b"}], f"[1].id: expected {DOC_ID}, got 7"),
        ([{"id": "", "text": "a"}], f'[0].id: expected {DOC_ID}, got ""'),
        ([{"id": "d1"}], "[0].text: expected a string, got null"),
        ([{"id": "d1", "text": "a", "title": 3}], "[0].title: expected a string or null, got 3"),
        ([{"id": "d1", "text": "a", "score": "high"}], '[0].score: expected a number or null, got "high"'),
        ([{"id": "d1", "text": "a", "score": True}], "[0].score: expected a number or null, got true"),
        (
            [{"id": "d1", "text": "a"}, {"id": "wiki:42", "text": "b"}],
            'returned [1].id "wiki:42", which is not a doc id of the probe set\'s corpus (the service must index',
        ),
        (
            [{"id": "d1", "text": "a"}, {"id": "d2", "text": "b"}, {"id": "d1", "text": "a"}],
            'returned [2].id "d1" twice (also [0]); a document is listed once',
        ),
    ],
)
def test_a_malformed_reply_is_that_probes_error_naming_the_url_and_the_field(search, body, message):
    search.replies = [Reply(body)]
    error = _probe_error(HttpRetriever(search.url, CORPUS))
    if not message.startswith("returned "):
        message = f"returned a malformed reply: {message}"
    assert error.startswith(f"ServiceError: the search service at {search.url} {message}"), error
    assert len(search.requests) == 1  # not tried again


def test_a_4xx_is_that_probes_error_and_is_not_tried_again(search):
    search.replies = [Reply({"detail": "no such index"}, 404)]
    error = _probe_error(HttpRetriever(search.url, CORPUS))
    assert error.startswith(f"ServiceError: the search service at {search.url} answered HTTP 404: ")
    assert "no such index" in error and len(search.requests) == 1


def test_a_500_then_success_is_tried_again(search):
    search.replies = [Reply({"error": "oops"}, 500)]
    passages, _ = HttpRetriever(search.url, CORPUS, retries=1).search("Rosa Tull baker", 1)
    assert [p.id for p in passages] == ["d2"] and len(search.requests) == 2


def test_a_500_after_the_retries_is_a_probe_error_and_a_503_stops_the_run(search):
    search.replies = [Reply({"error": "oops"}, 500)] * 2
    error = _probe_error(HttpRetriever(search.url, CORPUS, retries=1))
    assert (
        error.startswith(f"ServiceError: the search service at {search.url} answered HTTP 500")
        and "(2 attempts)" in error
    )
    search.replies = [Reply({"error": "overloaded"}, 503)] * 2
    with pytest.raises(ServiceUnavailable, match=r"answered HTTP 503: .*\(2 attempts\)$"):
        _probe_error(HttpRetriever(search.url, CORPUS, retries=1))


def test_a_service_that_is_gone_stops_the_run_and_keeps_nothing_unfinished(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/search"
    log = TraceLog(tmp_path / "traces.jsonl")
    strategy, lm = parse_spec("single_time"), ScriptedLM(["x"])
    with pytest.raises(ServiceUnavailable, match=r"is unreachable \(ConnectError: .*; 3 attempts\)$") as e:
        list(run_strategy("single_time", strategy, [P("p1", "q")], lm, HttpRetriever(url, CORPUS, retries=2), log))
    assert isinstance(e.value, LMUnavailable) and str(e.value).startswith(f"the search service at {url} ")
    assert log.read() == [] and lm.requests == []


# ------------------------------------------------------------------------------------------
# End to end: flarebench run --retriever http:URL (the scripted LM answers)
# ------------------------------------------------------------------------------------------


@pytest.fixture
def phantom_search(search, phantom):
    """The search service over the default probe set's corpus, with its ids."""
    search.docs = [{"id": d.id, "title": d.title, "text": d.text} for d in phantom.corpus]
    return search


@pytest.mark.slow
def test_a_run_stopped_by_a_dying_service_resumes_with_the_same_command(phantom_search, phantom, tmp_path, scripted_lm):
    search = phantom_search
    run_dir = tmp_path / "run"
    args = ("run", "--strategy", "single_time", "--retriever", f"http:{search.url}", "--limit", "4")
    search.drop_after = 3  # the warm-up's and two probes' searches answered, then every connection closed
    code, out, err = run_cli(*args, "--report-dir", str(run_dir))
    assert code == 3, out + err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"flarebench: the search service at {search.url} is unreachable (RemoteProtocolError: ")
    assert last.endswith("; 5 attempts); finished probes are kept; run the same command to resume")
    traces = [json.loads(line) for line in (run_dir / "traces.jsonl").read_text().splitlines()]
    assert [t["probe_id"] for t in traces] == [p.id for p in phantom.probes[:2]]
    assert len(search.requests) == 3 + 5

    search.drop_after, search.requests = None, []  # the service is back
    code, out, err = run_cli(*args, "--report-dir", str(run_dir))
    assert code == 0, out + err
    # the warm-up's search (before anything is timed), then no probe twice
    assert [r["query"] for r in search.requests] == ["warm up", *(p.question for p in phantom.probes[2:4])]
    traces = [json.loads(line) for line in (run_dir / "traces.jsonl").read_text().splitlines()]
    assert [t["probe_id"] for t in traces] == [p.id for p in phantom.probes[:4]]
    assert all(t["error"] is None for t in traces)
    first_hop = traces[0]["steps"][0]["retrievals"][0]
    assert first_hop["doc_ids"][0] in phantom.probes[0].gold_doc_ids  # the service's ids are the corpus's
    info = json.loads((run_dir / "run.json").read_text())
    assert info["config"]["retriever"] == {"name": "http", "url": search.url}


@pytest.mark.slow
def test_secrets_in_the_url_are_sent_but_never_recorded_or_shown(phantom_search, tmp_path, scripted_lm, monkeypatch):
    search, secret = phantom_search, "SECRET-42"
    url = f"{search.url}?index=wiki&api_key={secret}"
    shown = f"{search.url}?index=wiki&api_key=***"
    run_dir = tmp_path / "run"
    # The first probe's search (after the warm-up's) is refused with a reply that echoes the
    # request, key included.
    search.replies = [Reply([]), Reply({"detail": f"bad request to /search?api_key={secret}"}, 400)]
    args = [
        "run",
        "--strategy",
        "single_time",
        "--retriever",
        f"http:{url}",
        "--limit",
        "2",
        "--report-dir",
        str(run_dir),
    ]
    monkeypatch.setattr(sys, "argv", ["flarebench", *args])  # run.json records the command typed
    code, out, err = run_cli(*args)
    assert code == 1, out + err  # the errored probe fails the strategy
    info = json.loads((run_dir / "run.json").read_text())
    assert f"'http:{shown}'" in info["command"] and info["command"].startswith("flarebench run ")
    assert search.paths == [f"/search?index=wiki&api_key={secret}"] * 3  # the service gets the key
    assert info["config"]["retriever"]["url"] == shown
    errors = [json.loads(line)["error"] for line in (run_dir / "traces.jsonl").read_text().splitlines()]
    assert errors[1] is None and errors[0].startswith(f"ServiceError: the search service at {shown} answered HTTP 400")
    assert "api_key=***" in errors[0].split(" 400: ")[1]  # the echoed key too
    assert files_holding(run_dir, secret) == [] and secret not in out + err


def test_an_unreachable_service_message_is_redacted_too(tmp_path):
    port = free_port()
    with pytest.raises(ServiceUnavailable) as e:
        HttpRetriever(f"http://user:hunter22@127.0.0.1:{port}/search?token=SECRET-42", CORPUS, retries=0).search("q", 3)
    assert str(e.value).startswith(f"the search service at http://***@127.0.0.1:{port}/search?token=*** is unreachable")
    assert "hunter22" not in str(e.value) and "SECRET-42" not in str(e.value)


@pytest.mark.parametrize(
    "url, shown",
    [
        ("http://h/s", "http://h/s"),
        ("http://h/s?v=2&api_key=S1&token=T2&q=x", "http://h/s?v=2&api_key=***&token=***&q=x"),
        ("https://u:p@h:8/s?key=K&apikey=&Secret=Z", "https://***@h:8/s?key=***&apikey=&Secret=***"),
        ("https://TOKEN@h/s?access%5Ftoken=A", "https://***@h/s?access%5Ftoken=***"),
        ("http://u:p@[::1/s", "***"),  # no URL to take apart: nothing of it is shown
        ("http://127.0.0.1:9/v1#sk-FRAGMENT", "http://127.0.0.1:9/v1#***"),  # never sent: pasted there by mistake
    ],
)
def test_redact_url(url, shown):
    assert redact_url(url) == shown
    if shown != "***":
        assert HttpRetriever(url, CORPUS).describe()["url"] == shown


def test_a_secret_is_redacted_wherever_it_appears_in_a_message():
    endpoint = http_client.JSONEndpoint("http://h/s?key=abc%2Fdef&sig=xy", what="the search service")
    error = endpoint.error("answered HTTP 400: 'key abc/def and abc%2Fdef, sig xy'")
    # xy is too short to replace everywhere: only in the URL.
    assert str(error) == "the search service at http://h/s?key=***&sig=*** answered HTTP 400: 'key *** and ***, sig xy'"
    assert isinstance(error, ServiceError)
