"""The ``http`` strategy (strategies/http_service.py): a deployed pipeline behind an HTTP endpoint.

A small real HTTP server on 127.0.0.1 (http.server in a thread, a free port) answers each question
from a scripted table. The replies are recorded as the service reported them; what it does not
report is missing (NaN) in the summary, never 0, and the notes say so; transient failures are
tried again, other failures are that probe's error naming the URL (and the field), and a service
that cannot be reached stops the run. No model is loaded: the end-to-end run answers its LM
calls with the scripted LM (the http strategy makes none).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field

import pandas as pd
import pytest

from flarebench.bench.report import summary_frame
from flarebench.bench.runner import TraceLog, run_probe, run_strategy
from flarebench.strategies.http_service import HTTPService, ServiceUnavailable
from flarebench.strategies.lm import LMUnavailable
from flarebench.strategies.records import SERVICE, ServiceReport, Trace
from flarebench.strategies.registry import SpecError, expand, get, names, parse_spec
from tests.scripted import run_cli
from tests.servers import JSONHandler, free_port, http_service

# ------------------------------------------------------------------------------------------
# A scripted service on 127.0.0.1
# ------------------------------------------------------------------------------------------

pytestmark = pytest.mark.usefixtures("fast_backoff")


@dataclass
class Reply:
    """One reply: an HTTP status and a body (an object sent as JSON, or raw bytes), after ``delay`` s."""

    body: object
    status: int = 200
    delay: float = 0.0


@dataclass
class Service:
    """Answers POST {"question"} from ``table`` (question -> replies, one per request, the last one
    repeated; ``default`` for a question not in it) and remembers every request body."""

    table: dict[str, list[Reply]] = field(default_factory=dict)
    default: Reply | None = None
    requests: list[dict] = field(default_factory=list)
    headers: list[dict] = field(default_factory=list)

    def reply(self, body: dict, headers: dict) -> Reply:
        self.requests.append(body)
        self.headers.append(headers)
        replies = self.table.get(body.get("question"))
        if not replies:
            return self.default or Reply({"detail": "no such question"}, 404)
        asked = sum(1 for r in self.requests if r.get("question") == body.get("question"))
        return replies[min(asked, len(replies)) - 1]


@pytest.fixture
def service():
    svc = Service()

    class Handler(JSONHandler):
        def do_POST(self):
            reply = svc.reply(self.json_body(), dict(self.headers))
            time.sleep(reply.delay)
            self.send_json(reply.status, reply.body)

    with http_service(Handler) as base:
        svc.url = base + "/answer"
        yield svc


@dataclass
class P:
    """A probe as the runner and the scorers read it."""

    id: str
    question: str
    answers: list[str] = field(default_factory=lambda: ["Rosa Tull"])
    answer_type: str = "single"
    gold_doc_ids: list[str] = field(default_factory=lambda: ["d1"])
    metadata: dict = field(default_factory=dict)


FULL = {
    "answer": "Rosa Tull",
    "output": "Bea's mother is Rosa Tull. So the answer is Rosa Tull.",
    "retrievals": [{"query": "Bea Tull mother", "doc_ids": ["d1", "d2"]}, {"query": "Rosa Tull", "doc_ids": []}],
    "usage": {"lm_calls": 2, "prompt_tokens": 800, "completion_tokens": 40},
}


def _strategy(url: str, **params) -> HTTPService:
    return parse_spec(f"http:url={url}" + "".join(f",{k}={v}" for k, v in params.items()))


def _run(strategy, probes, tmp_path, spec="http") -> list[Trace]:
    log = TraceLog(tmp_path / "traces.jsonl")
    return list(run_strategy(spec, strategy, probes, None, None, log))


# ------------------------------------------------------------------------------------------
# The spec
# ------------------------------------------------------------------------------------------


def test_http_is_known_but_not_in_all_and_needs_a_url():
    assert get("http") is HTTPService
    assert "http" in names() and "http" not in expand(["all"]) and "http" not in expand(None)
    with pytest.raises(SpecError, match=r"^http: needs url=URL"):
        parse_spec("http")
    with pytest.raises(SpecError, match="url must be an http:// or https:// URL"):
        parse_spec("http:url=127.0.0.1:8000")
    with pytest.raises(SpecError, match="url http://h:99999/x: the port is not one of 0 to 65535"):
        parse_spec("http:url=http://h:99999/x")
    # A key in the URL would be recorded with the spec everywhere; the refusal does not show it either.
    for url in (
        "http://user:sk-SECRET123@127.0.0.1/answer",
        "http://127.0.0.1/answer?v=2&api_key=sk-SECRET123",
        "http://127.0.0.1/answer#sk-SECRET123",  # never sent, yet recorded everywhere
    ):
        with pytest.raises(
            SpecError, match="url holds credentials, a key-like query parameter or a fragment"
        ) as refused:
            parse_spec(f"http:url={url}")
        assert "SECRET123" not in str(refused.value) and "***" in str(refused.value)
        assert ": url holds credentials" in str(refused.value)  # the colon after the spec kept
    # A mistyped scheme is no URL to take apart: its key-like parameters are not shown all the same.
    with pytest.raises(SpecError) as refused:
        parse_spec("http:url=https//127.0.0.1:8765/answer?api_key=SECRETVAL3")
    assert str(refused.value) == (
        "http:url=https//127.0.0.1:8765/answer?api_key=***: url must be an http:// or https:// URL, "
        "got 'https//127.0.0.1:8765/answer?api_key=***'"
    )
    with pytest.raises(SpecError, match="timeout must be a finite number > 0 seconds, got 0"):
        parse_spec("http:url=http://h/a,timeout=0")
    for timeout in ("nan", "inf"):  # refused as every float parameter that is not a finite number
        with pytest.raises(SpecError, match=f"timeout must be a finite number, got '{timeout}'"):
            parse_spec(f"http:url=http://h/a,timeout={timeout}")
    s = parse_spec("http:url=http://127.0.0.1:8000/answer?v=2,retries=1")
    assert (s.url, s.timeout, s.retries) == ("http://127.0.0.1:8000/answer?v=2", 300.0, 1)  # --lm openai's timeout
    assert parse_spec("http:url=http://h/a").retries == 4
    assert s.params()["url"] == s.url and s.static_prompts() == ()


# ------------------------------------------------------------------------------------------
# What the trace records
# ------------------------------------------------------------------------------------------


def test_answer_output_retrievals_and_usage_are_recorded_as_reported(service, tmp_path):
    service.table["Who is Bea's mother?"] = [Reply(FULL)]
    (trace,) = _run(_strategy(service.url), [P("p1", "Who is Bea's mother?")], tmp_path)
    assert service.requests == [{"question": "Who is Bea's mother?"}]
    assert service.headers[0]["Content-Type"] == "application/json"
    assert trace.error is None and trace.answer == "Rosa Tull" and trace.output == FULL["output"]
    assert trace.stop_reason == "answer" and trace.seconds > 0  # the runner's end-to-end time
    assert [(r.query, r.doc_ids, r.reason, r.seconds) for r in trace.retrievals] == [
        ("Bea Tull mother", ["d1", "d2"], SERVICE, None),
        ("Rosa Tull", [], SERVICE, None),
    ]
    assert trace.lm_calls == []  # no LM call is made up
    assert trace.service == ServiceReport(
        stated_answer=True,
        listed_retrievals=True,
        usage={"lm_calls": 2, "prompt_tokens": 800, "completion_tokens": 40},
    )


def test_without_an_answer_it_is_read_from_the_output_and_without_an_output_the_answer_is_it(service, tmp_path):
    service.table["q1"] = [Reply({"output": "She is Rosa Tull. So the answer is Rosa Tull."})]
    service.table["q2"] = [Reply({"answer": "Rosa Tull"})]
    service.table["q3"] = [Reply({"answer": None, "output": "I could not find out."})]
    t1, t2, t3 = _run(_strategy(service.url), [P("p1", "q1"), P("p2", "q2"), P("p3", "q3")], tmp_path)
    assert (t1.answer, t1.service.stated_answer, t1.stop_reason) == ("Rosa Tull", False, "answer")
    assert (t2.output, t2.answer, t2.service.stated_answer) == ("Rosa Tull", "Rosa Tull", True)
    assert (t3.answer, t3.stop_reason) == (None, "eos")
    assert t1.service.listed_retrievals is False and t1.service.usage is None
    probes = {p.id: p for p in [P("p1", "q1"), P("p2", "q2"), P("p3", "q3")]}
    rows = summary_frame([t1, t2, t3], probes).iloc[0]
    # A stated answer is the statement (strict credit); the output's statement is read as for any strategy.
    assert rows["em"] == pytest.approx(2 / 3) and rows["incomplete_no_answer"] == pytest.approx(1 / 3)


def test_the_trace_round_trips_through_traces_jsonl(service, tmp_path):
    service.table["q1"] = [Reply(FULL)]
    service.table["q2"] = [Reply({"answer": "x"})]
    traces = _run(_strategy(service.url), [P("p1", "q1"), P("p2", "q2")], tmp_path, spec=f"http:url={service.url}")
    lines = [json.loads(line) for line in (tmp_path / "traces.jsonl").read_text().splitlines()]
    assert lines[0]["service"]["usage"] == FULL["usage"] and lines[0]["steps"][0]["retrievals"][0]["seconds"] is None
    assert lines[1]["service"] == {"stated_answer": True, "listed_retrievals": False, "usage": None}
    assert TraceLog(tmp_path / "traces.jsonl", writer=False).read() == traces
    # A strategy run in process keeps the trace shape it always had: no service key.
    assert "service" not in Trace("q", "o", None, "eos").to_dict()


# ------------------------------------------------------------------------------------------
# Missing, never 0: the summary and its notes
# ------------------------------------------------------------------------------------------


def _summary(tmp_path, spec, strategy, probes, price=None) -> pd.DataFrame:
    traces = _run(strategy, probes, tmp_path, spec=spec)
    return summary_frame(traces, {p.id: p for p in probes}, price=price)


def test_a_service_that_reports_no_usage_or_retrievals_has_them_missing_with_a_note(service, tmp_path):
    from flarebench.bench.prices import price_for

    service.default = Reply({"answer": "Rosa Tull"})
    spec = f"http:url={service.url}"
    probes = [P("p1", "q1"), P("p2", "q2", answers=["Nobody"])]
    summary = _summary(tmp_path, spec, _strategy(service.url), probes, price=price_for("llamacpp:smollm2"))
    row = summary.set_index("strategy").loc[spec]
    assert row["n"] == 2 and row["errors"] == 0 and row["em"] == pytest.approx(0.5)
    assert row["latency_p50_s"] > 0  # measured end to end
    missing = [
        "lm_calls_per_q", "prompt_tokens_per_q", "evaluated_tokens_per_q", "completion_tokens_per_q", "cost_per_q",
        "retrievals_per_q", "retrieval_rate", "recall", "recall_at_k", "triggered_share",
        "lm_s_per_q", "retrieval_s_per_q", "harness_s_per_q", "harness_share", "ttfs_p50_s", "stall_p95_s",
    ]  # fmt: skip
    assert [c for c in missing if not pd.isna(row[c])] == []
    notes = summary.attrs["notes"]
    assert (
        "lm_calls_per_q, prompt_tokens_per_q, evaluated_tokens_per_q, completion_tokens_per_q: "
        f"missing for {spec}: the service reported no usage"
    ) in notes
    assert f"retrievals_per_q, recall_at_k, recall: missing for {spec}: the service reported no retrievals" in notes
    assert any(n.startswith("retrieval_rate, triggered_share") and spec in n for n in notes)
    assert any(n.startswith("cost_per_q") and "not the service's model" in n for n in notes)
    assert any(n.startswith("lm_s_per_q") and "end to end" in n for n in notes)
    assert any(n.startswith("ttfs_p50_s") and "arrives whole" in n for n in notes)


def test_what_a_service_reports_is_counted_and_an_empty_list_is_zero_retrievals(service, tmp_path):
    service.table["q1"] = [Reply(FULL)]
    service.table["q2"] = [Reply({**FULL, "retrievals": [], "usage": {**FULL["usage"], "evaluated_tokens": 10}})]
    spec = f"http:url={service.url}"
    summary = _summary(tmp_path, spec, _strategy(service.url), [P("p1", "q1"), P("p2", "q2")])
    row = summary.iloc[0]
    assert row["lm_calls_per_q"] == 2 and row["prompt_tokens_per_q"] == 800 and row["completion_tokens_per_q"] == 40
    assert row["retrievals_per_q"] == 1.0  # 2 and 0
    assert row["recall"] == pytest.approx(0.5)  # d1 found on p1, nothing retrieved on p2
    assert math.isnan(row["evaluated_tokens_per_q"])  # reported on one probe only: not a mean over it
    assert pd.isna(row["retrieval_rate"])  # when a service retrieved is never known
    assert (
        f"evaluated_tokens_per_q: missing for {spec}: the service reported no evaluated_tokens "
        "on 1 of the 2 probes it answered"
    ) in summary.attrs["notes"]
    assert not any("retrievals_per_q" in n for n in summary.attrs["notes"])


def test_an_errored_probe_of_a_service_is_not_a_missing_value(service, tmp_path):
    service.table["q1"] = [Reply(FULL)]
    service.table["q2"] = [Reply({"detail": "bad question"}, 422)]
    spec = f"http:url={service.url}"
    summary = _summary(tmp_path, spec, _strategy(service.url), [P("p1", "q1"), P("p2", "q2")])
    row = summary.iloc[0]
    # As for every strategy, an errored probe is left out of the usage columns (what it used is
    # unknown; errors says how many, and a note): they are the answered probe's.
    assert row["errors"] == 1 and row["lm_calls_per_q"] == 2.0 and row["retrievals_per_q"] == 2.0
    assert any(n.startswith(f"{spec}: 1 of 2 probes raised an error") for n in summary.attrs["notes"])
    assert [n for n in summary.attrs["notes"] if "reported no" in n] == [
        f"evaluated_tokens_per_q: missing for {spec}: the service reported no evaluated_tokens"  # on its one answer
    ]


# ------------------------------------------------------------------------------------------
# Failures: retried, a probe's error, or the run stops
# ------------------------------------------------------------------------------------------


def test_a_5xx_then_success_is_tried_again(service, tmp_path):
    service.table["q"] = [Reply({"error": "busy"}, 503), Reply({"error": "oops"}, 500), Reply({"answer": "Rosa Tull"})]
    (trace,) = _run(_strategy(service.url, retries=2), [P("p1", "q")], tmp_path)
    assert trace.error is None and trace.answer == "Rosa Tull" and len(service.requests) == 3


def test_a_5xx_after_the_retries_is_a_probe_error_or_stops_the_run(service, tmp_path):
    service.table["q500"] = [Reply({"error": "oops"}, 500)]
    trace = run_probe("http", _strategy(service.url, retries=1), P("p1", "q500"), None, None)
    assert trace.error.startswith(f"ServiceError: the service at {service.url} answered HTTP 500")
    assert "(2 attempts)" in trace.error and len(service.requests) == 2
    service.table["q503"] = [Reply({"error": "overloaded"}, 503)]
    with pytest.raises(ServiceUnavailable, match=r"answered HTTP 503: .*\(1 attempt\)"):
        run_probe("http", _strategy(service.url, retries=0), P("p2", "q503"), None, None)


def test_a_4xx_is_that_probes_error_naming_the_url_and_is_not_tried_again(service, tmp_path):
    service.table["q"] = [Reply({"detail": "Not Found"}, 404)]
    (trace,) = _run(_strategy(service.url), [P("p1", "q")], tmp_path)
    assert trace.stop_reason == "error" and trace.service is None
    assert trace.error.startswith(f"ServiceError: the service at {service.url} answered HTTP 404: ")
    assert "Not Found" in trace.error and len(service.requests) == 1


@pytest.mark.parametrize(
    "body, message",
    [
        (b'{"answer": "Ros', "returned malformed JSON (Unterminated string"),
        ([1, 2], "returned a malformed reply: expected a JSON object, got [1, 2]"),
        ({"usage": {}}, "returned a malformed reply: expected an object with answer or output"),
        ({"answer": 3}, "returned a malformed reply: answer: expected a string or null, got 3"),
        ({"output": ["a"]}, "returned a malformed reply: output: expected a string or null"),
        ({"answer": "x", "retrievals": {"query": "q"}}, "retrievals: expected a list or null"),
        ({"answer": "x", "retrievals": [{"doc_ids": ["d1"]}]}, "retrievals[0].query: expected a string, got null"),
        ({"answer": "x", "retrievals": [{"query": "q", "doc_ids": [7]}]}, "retrievals[0].doc_ids: expected a list"),
        ({"answer": "x", "usage": [3]}, "usage: expected an object or null, got [3]"),
        ({"answer": "x", "usage": {"prompt_tokens": -1}}, "usage.prompt_tokens: expected an integer >= 0 or null"),
        ({"answer": "x", "usage": {"lm_calls": True}}, "usage.lm_calls: expected an integer >= 0 or null, got true"),
    ],
)
def test_a_malformed_reply_is_that_probes_error_naming_the_field(service, tmp_path, body, message):
    service.table["q"] = [Reply(body)]
    (trace,) = _run(_strategy(service.url), [P("p1", "q")], tmp_path)
    assert trace.error.startswith(f"ServiceError: the service at {service.url} ")
    assert message in trace.error and len(service.requests) == 1


class Moved(JSONHandler):
    """Answers ``/bom`` with a JSON reply led by a byte-order mark, and anything else with a 307 to it."""

    def do_POST(self):
        self.json_body()
        if self.path == "/bom":
            self.send_json(200, "\ufeff".encode() + json.dumps({"answer": "Ledger"}).encode())
            return
        self.send_response(307)
        self.send_header("Location", "/bom?api_key=sk-moved-secret")
        self.send_header("Content-Length", "0")
        self.end_headers()


def test_a_redirect_names_where_it_points_and_a_byte_order_mark_is_read_past():
    from flarebench.strategies.http_client import JSONEndpoint, ServiceError

    with http_service(Moved) as url:
        assert JSONEndpoint(f"{url}/bom", retries=0).post({"question": "q"}) == {"answer": "Ledger"}
        with pytest.raises(ServiceError, match=r"answered HTTP 307: '' \(Location: /bom\?api_key=\*\*\*\)$"):
            JSONEndpoint(f"{url}/answer", retries=0).post({"question": "q"})


class Trickle(JSONHandler):
    """Sends its reply a byte every 0.1 s: each read is quick, the whole reply takes seconds."""

    def do_POST(self):
        self.json_body()
        data = json.dumps({"answer": "Ledger", "output": "It is Ledger."}).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            for byte in data:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.1)
        except OSError:  # the client gave up: as it should
            pass


def test_the_timeout_bounds_the_whole_reply_not_each_read():
    from flarebench.strategies.http_client import JSONEndpoint

    with http_service(Trickle) as url:
        start = time.perf_counter()
        with pytest.raises(ServiceUnavailable, match=r"did not answer within 0\.5 s \(1 attempt\)"):
            JSONEndpoint(f"{url}/answer", timeout=0.5, retries=0).post({"question": "q"})
        assert time.perf_counter() - start < 2  # not the 4 s the reply takes


def test_the_timeout_is_honoured_and_a_service_that_keeps_timing_out_stops_the_run(service, tmp_path):
    service.table["fast"] = [Reply({"answer": "x"})]
    service.table["slow"] = [Reply({"answer": "x"}, delay=2.0)]
    strategy = _strategy(service.url, timeout=0.2, retries=1)
    log = TraceLog(tmp_path / "traces.jsonl")
    got, start = [], time.perf_counter()
    with pytest.raises(ServiceUnavailable, match=r"did not answer within 0\.2 s \(2 attempts\)") as e:
        for trace in run_strategy(
            "http", strategy, [P("p1", "fast"), P("p2", "slow"), P("p3", "fast")], None, None, log
        ):
            got.append(trace.probe_id)
    assert time.perf_counter() - start < 1.5  # two tries of 0.2 s, not the handler's 2 s
    assert isinstance(e.value, LMUnavailable) and service.url in str(e.value)
    assert got == ["p1"] and [t.probe_id for t in log.read()] == ["p1"]  # finished probes kept, resumable


def test_an_unreachable_service_stops_the_run_after_the_retries(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/answer"
    log = TraceLog(tmp_path / "traces.jsonl")
    with pytest.raises(ServiceUnavailable, match=r"is unreachable \(ConnectError: .*; 3 attempts\)$"):
        list(run_strategy("http", _strategy(url, retries=2), [P("p1", "q")], None, None, log))
    assert log.read() == []


# ------------------------------------------------------------------------------------------
# End to end: flarebench run --strategy http:url=... (the scripted LM stands in; none is called)
# ------------------------------------------------------------------------------------------


def test_a_run_through_the_cli_scores_the_service_and_score_reproduces_it(service, tmp_path, scripted_lm):
    service.default = Reply({"output": "I looked it up. So the answer is Nobody."})
    run_dir = tmp_path / "run"
    spec = f"http:url={service.url}"
    code, out, err = run_cli("run", "--strategy", spec, "--limit", "2", "--report-dir", str(run_dir))
    assert code == 0, out + err
    assert len(service.requests) == 2 and scripted_lm.requests == []  # the service answered, the LM was idle
    traces = [json.loads(line) for line in (run_dir / "traces.jsonl").read_text().splitlines()]
    assert [t["strategy"] for t in traces] == [spec, spec] and all("service" in t for t in traces)
    info = json.loads((run_dir / "run.json").read_text())
    assert info["config"]["strategies"][spec]["url"] == service.url
    md = (run_dir / "summary.md").read_text()
    assert "the service reported no usage" in md and f"missing for {spec}" in md
    summary = pd.read_csv(run_dir / "summary.csv")
    assert summary["lm_calls_per_q"].isna().all() and summary["n"].tolist() == [2]
    csv = (run_dir / "summary.csv").read_text()
    code, out, err = run_cli("score", str(run_dir))
    assert code == 0, out + err
    assert (run_dir / "summary.csv").read_text() == csv and (run_dir / "summary.md").read_text() == md
    adoption = (run_dir / "adoption.md").read_text()
    assert "No adoption table" in adoption  # the reference (single_time) did not run


def test_an_unreachable_service_ends_the_cli_run_with_one_line_and_exit_3(tmp_path, scripted_lm):
    url = f"http://127.0.0.1:{free_port()}/answer"
    code, out, err = run_cli(
        "run", "--strategy", f"http:url={url},retries=0", "--limit", "1", "--report-dir", str(tmp_path / "run")
    )
    assert code == 3
    assert err.strip().splitlines()[-1].startswith(f"flarebench: the service at {url} is unreachable (ConnectError")
    assert err.strip().endswith("run the same command to resume")


def test_faithfulness_is_missing_when_the_service_listed_retrievals_on_some_answers_only(service, tmp_path):
    from flarebench.bench.faithfulness import faithfulness_rows

    service.table["q1"] = [Reply(FULL)]
    service.table["q2"] = [Reply({"answer": "Rosa Tull", "output": "It is Rosa Tull."})]  # no retrievals
    spec = f"http:url={service.url}"
    probes = [P("p1", "q1"), P("p2", "q2")]
    traces = _run(_strategy(service.url), probes, tmp_path, spec=spec)
    faith = faithfulness_rows(traces, {"d1": "Bea's mother is Rosa Tull.", "d2": "Rosa Tull."})
    summary = summary_frame(traces, {p.id: p for p in probes}, faithfulness=faith)
    # A mean over the answer that listed them would pass for the whole set's.
    assert pd.isna(summary.iloc[0]["faithfulness"])
    assert (
        f"retrievals_per_q, recall_at_k, recall, faithfulness: missing for {spec}: the service reported no "
        "retrievals on 1 of the 2 probes it answered"
    ) in summary.attrs["notes"]
