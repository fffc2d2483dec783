"""Faithfulness (bench/faithfulness.py): claims, the offline score on answers (its rules are in
tests/test_support.py, its agreement in tests/test_agreement.py), the no-context policy, judge
configuration and key redaction, and the ragas path, for answers and for ``flarebench agreement
--judge``, against a scripted endpoint and a real local judge (``python -m llama_cpp.server`` with
the embedded model)."""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path

import pytest

from flarebench.bench import agreement
from flarebench.bench.cli import main
from flarebench.bench.faithfulness import (
    LEXICAL_METHOD,
    NO_CLAIMS,
    NO_CONTEXT,
    Judge,
    JudgeError,
    answer_claims,
    faithfulness_rows,
    parse_judge,
    summarize_faithfulness,
)
from flarebench.bench.support import claim_supported, content_tokens
from flarebench.strategies.records import FIRST_HOP, LOW_CONFIDENCE, Retrieval, Step, Trace
from tests import servers

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]

AIDA = (
    "# Aida Wang\n\n## Family\nThe mother of Aida Wang is Shelli Beltran.\nThe father of Aida Wang is "
    "Dino Beltran.\n\n## Attributes\nThe date of birth of Aida Wang is 0295-05-30.\n"
    "The occupation of Aida Wang is personal assistant."
)
PASSAGES = {
    "aida-wang": {"title": "Aida Wang", "text": AIDA},
    "dino-beltran": {"title": "Dino Beltran", "text": "The wife of Dino Beltran is Shelli Beltran."},
}


def _trace(strategy: str, probe_id: str, output: str, doc_ids: list[list[str]], error: str | None = None) -> Trace:
    steps = [Step(text=output)]
    for i, ids in enumerate(doc_ids):
        steps[0].retrievals.append(
            Retrieval(query="q", reason=FIRST_HOP if i == 0 else LOW_CONFIDENCE, doc_ids=ids, seconds=0.0)
        )
    return Trace(
        question="Who is the mother of Aida Wang?",
        output=output,
        answer=None,
        stop_reason="answer",
        steps=steps,
        probe_id=probe_id,
        strategy=strategy,
        error=error,
    )


# ------------------------------------------------------------------------------------------
# Claims and the offline score
# ------------------------------------------------------------------------------------------


def test_the_final_answer_is_a_claim_of_its_own():
    out = "The mother of Aida Wang is Shelli Beltran. So the answer is Shelli Beltran."
    assert answer_claims(out) == ["The mother of Aida Wang is Shelli Beltran.", "Shelli Beltran"]
    # each item of a list answer; a yes/no verdict is no claim about the passages
    assert answer_claims("So the answer is nurse, actor.") == ["nurse", "actor"]
    assert answer_claims("Aida Wang is a personal assistant. So the answer is yes.") == [
        "Aida Wang is a personal assistant."
    ]


def test_an_unsupported_final_answer_lowers_faithfulness():
    # Every sentence before it is supported, but the stated answer is not in any passage: not 1.0.
    out = "The mother of Aida Wang is Shelli Beltran. So the answer is Daisy Pike."
    claims = answer_claims(out)
    assert [claim_supported(c, [AIDA]) for c in claims] == [True, False]


def test_a_lone_final_answer_is_its_answer_part():
    assert answer_claims("So the answer is Shelli Beltran.") == ["Shelli Beltran"]


def test_claims_drop_search_markers_and_empty_sentences():
    out = "[Search(mother of Aida Wang)] The mother of Aida Wang is Shelli Beltran. So it is. So the answer is Xena."
    assert answer_claims(out) == ["The mother of Aida Wang is Shelli Beltran.", "Xena"]
    assert answer_claims("") == []
    # A search call the model left open runs to the end of its line; it is no claim.
    assert answer_claims("[Search(mother of Aida Wang\nSo the answer is Xena.") == ["Xena"]


def test_the_answers_items_are_checked_as_written_and_each_claim_once():
    (date,) = answer_claims("So the answer is 0295-05-30.")
    assert date == "0295-05-30" and claim_supported(date, [AIDA])  # not "02950530"
    assert not claim_supported("02950530", [AIDA])
    looping = "The mother of Aida Wang is Shelli Beltran. So the answer is Ryan Wang. " * 3
    assert answer_claims(looping) == ["The mother of Aida Wang is Shelli Beltran.", "Ryan Wang"]


def test_sentences_that_only_echo_the_question_are_no_claims():
    question = "Who is the mother of Aida Wang?"
    # An answer restating the question states nothing the passages could support or contradict.
    assert answer_claims("The mother of Aida Wang. Question: who is the mother of Aida Wang?", question) == []
    # The question repeated with something after it is a claim (and so is the stated answer).
    out = "The mother of Aida Wang is Shelli Beltran. Who is the mother of Aida Wang is Shelli Beltran."
    assert answer_claims(out, question) == [
        "The mother of Aida Wang is Shelli Beltran.", "Who is the mother of Aida Wang is Shelli Beltran."
    ]  # fmt: skip
    echo = _trace("single_time", "p1", "The mother of Aida Wang. " * 5, [["aida-wang"]])
    assert faithfulness_rows([echo], PASSAGES)[("single_time", "p1")]["faithfulness_method"] == NO_CLAIMS


def test_content_tokens_keep_numbers_whole_and_stem_words():
    toks = content_tokens("Aida Wang was born on 0295-05-30 in tw-north-1; the brothers are not here.")
    assert {"0295-05-30", "tw-north-1", "brother", "aida"} <= toks
    assert "the" not in toks and "was" not in toks


@pytest.mark.parametrize(
    "claim",
    [
        "The mother of Aida Wang is Shelli Beltran.",
        "Shelli Beltran is the mother of Aida Wang.",  # reordered
        "Aida Wang's mother is Shelli Beltran.",  # possessive
        "The occupation of Aida Wang is personal assistant.",
    ],
)
def test_supported_claims(claim):
    assert claim_supported(claim, [AIDA])


@pytest.mark.parametrize(
    "claim",
    [
        "The father of Aida Wang is Shelli Beltran.",  # right entities, wrong relation
        "The date of birth of Aida Wang is 0295-05-31.",  # wrong date: every number must match
        "The mother of Aida Wang is Daisy Beltran.",  # swapped name
        "Aida Wang lives in Lisbon.",
    ],
)
def test_unsupported_claims(claim):
    assert not claim_supported(claim, [AIDA])


def test_an_attribute_of_another_person_in_the_passages_is_not_support():
    shelli = "Shelli Beltran\nThe occupation of Shelli Beltran is actuary."
    assert not claim_supported("The occupation of Aida Wang is actuary.", [AIDA, shelli])
    assert claim_supported("Shelli Beltran works as an actuary.", [AIDA, shelli])


def test_support_needs_one_sentence_not_the_whole_context():
    # Every word is somewhere in the contexts, but no one sentence says it.
    assert not claim_supported("The father of Aida Wang is Shelli Beltran.", [AIDA, PASSAGES["dino-beltran"]["text"]])


# ------------------------------------------------------------------------------------------
# Rows, policies, summary
# ------------------------------------------------------------------------------------------


def test_rows_score_the_union_of_every_retrieval():
    out = (
        "The mother of Aida Wang is Shelli Beltran. The wife of Dino Beltran is Shelli Beltran. "
        "The hobby of Aida Wang is chess. So the answer is Shelli Beltran."
    )
    rows = faithfulness_rows([_trace("flare_direct", "p1", out, [["aida-wang"], ["dino-beltran"]])], PASSAGES)
    row = rows[("flare_direct", "p1")]
    # 3 sentences (the hobby unsupported) and the final answer (supported): 3 of 4
    assert row == {
        "faithfulness": pytest.approx(3 / 4),
        "faithfulness_method": LEXICAL_METHOD,
        "judge_parse_failures": 0,
        "claims": 4,
    }


def test_no_context_policy_is_none_never_zero():
    traces = [
        _trace("no_retrieval", "p1", "The mother of Aida Wang is Shelli Beltran.", []),
        _trace("no_retrieval", "p2", "So the answer is Bob.", []),
    ]
    rows = faithfulness_rows(traces, PASSAGES)
    assert all(r["faithfulness"] is None and r["faithfulness_method"] == NO_CONTEXT for r in rows.values())
    summary = summarize_faithfulness(rows)
    assert summary == {
        "no_retrieval": {
            "faithfulness": None,
            "faithfulness_n": 0,
            "faithfulness_method": NO_CONTEXT,
            "judge_parse_failures": 0,
        }
    }


def test_a_strategy_that_retrieved_but_made_no_claim_is_not_said_to_have_no_context():
    # adaptive: closed-book on most probes, retrieved on one whose answer held no claim.
    traces = [_trace("adaptive", "p1", "The mother of Aida Wang is Shelli Beltran.", [])]
    traces.append(_trace("adaptive", "p2", "Who is the mother of Aida Wang?", [["aida-wang"]]))
    summary = summarize_faithfulness(faithfulness_rows(traces, PASSAGES))["adaptive"]
    assert summary["faithfulness"] is None and summary["faithfulness_method"] == NO_CLAIMS


def test_empty_retrievals_errors_and_claimless_outputs():
    traces = [
        _trace("single_time", "p1", "The mother of Aida Wang is Shelli Beltran.", [[]]),  # looked, found nothing
        _trace("single_time", "p2", "", [["aida-wang"]]),  # said nothing
        _trace("single_time", "p3", "The mother of Aida Wang is Shelli Beltran.", [["aida-wang"]], error="boom"),
        _trace("single_time", "p4", "The mother of Aida Wang is Shelli Beltran.", [["aida-wang"]]),
    ]
    rows = faithfulness_rows(traces, PASSAGES)
    assert rows[("single_time", "p1")]["faithfulness"] == 0.0
    assert rows[("single_time", "p2")]["faithfulness_method"] == NO_CLAIMS
    assert rows[("single_time", "p3")]["faithfulness_method"] == "n/a: error"
    assert rows[("single_time", "p4")]["faithfulness"] == 1.0
    summary = summarize_faithfulness(rows)["single_time"]
    assert summary["faithfulness"] == pytest.approx(0.5)  # mean of the two scored probes
    assert summary["faithfulness_n"] == 2
    assert summary["faithfulness_method"] == LEXICAL_METHOD


def test_a_doc_id_the_corpus_lacks_leaves_that_answer_unscored_not_the_run():
    # A plugin's retriever indexed under other ids: its passages cannot be read, so no claim can be
    # checked; the other answers are scored, and the run's summary is written.
    out = "The father of Aida Wang is Dino Beltran."
    traces = [_trace("single_time", "p1", out, [["gone-doc"]]), _trace("single_time", "p2", out, [["aida-wang"]])]
    rows = faithfulness_rows(traces, PASSAGES)
    assert rows[("single_time", "p1")]["faithfulness"] is None
    assert rows[("single_time", "p1")]["faithfulness_method"] == "n/a: doc ids not in the corpus"
    assert rows[("single_time", "p2")]["faithfulness_method"] == LEXICAL_METHOD


# ------------------------------------------------------------------------------------------
# Judge configuration and the key
# ------------------------------------------------------------------------------------------

SECRET = "sk-test-DO-NOT-LEAK-1234567890"


def test_parse_judge():
    assert parse_judge(None) is None
    with pytest.raises(JudgeError, match="^--judge-base-url only applies to --judge openai:MODEL$"):
        parse_judge(None, "http://127.0.0.1:8000/v1")  # no judge to send it to: a mistake, not ignored
    j = parse_judge("openai:gpt-4o-mini", env={"JUDGE_API_KEY": SECRET})
    assert (j.model, j.base_url, j.api_key) == ("gpt-4o-mini", None, SECRET)
    j = parse_judge("openai:m", env={"JUDGE_BASE_URL": "http://h/v1", "OPENAI_API_KEY": "k2"})
    assert (j.base_url, j.api_key) == ("http://h/v1", "k2")
    j = parse_judge(
        "openai:m",
        "http://flag/v1",
        env={"JUDGE_BASE_URL": "http://env/v1", "JUDGE_API_KEY": "k1", "OPENAI_API_KEY": "k2"},
    )
    assert (j.base_url, j.api_key) == ("http://flag/v1", "k1")
    local = parse_judge("openai:m", "http://127.0.0.1:8000/v1", env={})
    assert local.api_key == "no-key" and local.describe()["api_key_set"] is False  # a placeholder is no key
    with pytest.raises(JudgeError, match=r"^--judge-base-url: http://h/v1\?token=\*\*\*: a query string"):
        parse_judge("openai:m", "http://h/v1?token=abc", env={})
    with pytest.raises(JudgeError, match=r"^\$JUDGE_BASE_URL: 'h:80' is not an http:// or https:// URL$"):
        parse_judge("openai:m", env={"JUDGE_BASE_URL": "h:80", "JUDGE_API_KEY": "k"})
    with pytest.raises(JudgeError, match="no API key"):
        parse_judge("openai:m", env={})
    assert parse_judge("openai:m", "http://h/v1", env={"JUDGE_JSON_MODE": "json_schema"}).json_mode == "json_schema"
    # A judge reused from run.json keeps its recorded mode; $JUDGE_JSON_MODE still sets another.
    assert parse_judge("openai:m", "http://h/v1", env={}, json_mode="json_schema").json_mode == "json_schema"
    assert (
        parse_judge("openai:m", "http://h/v1", env={"JUDGE_JSON_MODE": "json"}, json_mode="json_schema").json_mode
        == "json"
    )
    with pytest.raises(JudgeError, match="JUDGE_JSON_MODE"):
        parse_judge("openai:m", "http://h/v1", env={"JUDGE_JSON_MODE": "yaml"})
    for bad in ("gpt-4o", "anthropic:claude", "openai:"):
        with pytest.raises(JudgeError, match="openai:MODEL"):
            parse_judge(bad, env={"JUDGE_API_KEY": "k"})


def test_the_key_never_reaches_repr_config_rows_or_errors():
    j = parse_judge("openai:m", "http://127.0.0.1:9/v1", env={"JUDGE_API_KEY": SECRET})
    assert SECRET not in repr(j)
    assert SECRET not in json.dumps(j.describe())
    assert j.describe()["api_key_set"] is True
    # Credentials in the endpoint's URL are not recorded either.
    with_password = parse_judge("openai:m", "http://user:sk-PASSWORD999@127.0.0.1:9/v1", env={"JUDGE_API_KEY": SECRET})
    assert with_password.describe()["base_url"] == "http://***@127.0.0.1:9/v1"
    assert SECRET not in j.redact(f"401: bad key {SECRET}")
    # A trace without context never calls the judge; its rows and summary hold no key.
    rows = faithfulness_rows([_trace("no_retrieval", "p1", "A is B.", [])], PASSAGES, judge=j)
    assert SECRET not in json.dumps([list(rows.values()), summarize_faithfulness(rows)])


@pytest.mark.slow
def test_unreachable_judge_is_an_error_not_a_parse_failure():
    _needs_ragas()
    port = servers.free_port()  # nothing listens there
    j = parse_judge("openai:m", f"http://127.0.0.1:{port}/v1", env={"JUDGE_API_KEY": SECRET})
    trace = _trace("single_time", "p1", "The mother of Aida Wang is Shelli Beltran.", [["aida-wang"]])
    with pytest.raises(JudgeError) as info:
        faithfulness_rows([trace], PASSAGES, judge=j)
    assert SECRET not in str(info.value)


def test_an_error_is_sorted_by_what_instructors_retry_wraps():
    """instructor 1.3 puts the last error right under its InstructorRetryException; 1.12 puts
    tenacity's RetryError between them. Either way a transport error is an error, a reply that
    does not validate a parse failure."""
    import httpx
    import openai
    import pydantic

    from flarebench.bench.faithfulness import _is_parse_failure

    def wrapped(inner: BaseException, *modules: str) -> BaseException:
        for module in modules:
            outer = type("Wrapper", (Exception,), {"__module__": module})()
            outer.__cause__, inner = inner, outer
        return inner

    try:
        pydantic.TypeAdapter(int).validate_python("not a number")
    except pydantic.ValidationError as e:
        invalid = e
    unreachable = openai.APIConnectionError(request=httpx.Request("POST", "http://127.0.0.1:9/v1"))
    for between in ([], ["tenacity"]):
        assert not _is_parse_failure(wrapped(unreachable, *between, "instructor.core.exceptions"))
        assert _is_parse_failure(wrapped(invalid, *between, "instructor.core.exceptions"))
    assert _is_parse_failure(wrapped(ValueError("no statements"), "instructor.core.exceptions"))
    assert not _is_parse_failure(ValueError("a bug"))


class _FakeJudge:
    """A minimal OpenAI-compatible /v1/chat/completions endpoint with scripted replies, to pin down
    the accounting of the ragas path without a model: ``mode`` "good" answers in the requested
    shape (statement 1 supported, the others not), "garbage" answers with text that is not JSON;
    the others parse but break the verdict format: "minus" gives verdicts of -1, "extra" a verdict
    for a statement it made up, "short" one verdict for two statements, "empty" none."""

    def __init__(self, mode: str):
        import http.server
        import threading

        self.mode, self.auth = mode, []
        judge = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                judge.auth.append(self.headers.get("Authorization", ""))
                prompt = " ".join(str(m.get("content", "")) for m in body["messages"])
                if judge.mode == "garbage":
                    content = "I think it is fine."
                elif "verdict" in prompt:  # ragas's NLI step: one verdict per statement
                    judged = {"extra": ["s1", "s2", "s3"], "short": ["s1"], "empty": []}.get(judge.mode, ["s1", "s2"])
                    verdict = (lambda i: -1) if judge.mode == "minus" else (lambda i: int(i != 1))
                    content = json.dumps(
                        {
                            "statements": [
                                {"statement": st, "reason": "r", "verdict": verdict(i)} for i, st in enumerate(judged)
                            ]
                        }
                    )
                else:
                    content = json.dumps({"statements": ["s1", "s2"]})
                reply = {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "m"),
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.slow  # ragas's first import and its client: about 2 s, more with the newest releases
@pytest.mark.parametrize("mode", ["good", "garbage", "minus", "extra", "short", "empty"])
def test_ragas_path_accounting_with_a_scripted_endpoint(mode, monkeypatch):
    _needs_ragas()
    fake = _FakeJudge(mode)
    try:
        monkeypatch.setenv("JUDGE_API_KEY", SECRET)
        j = parse_judge("openai:fake", fake.url)
        j = Judge(model=j.model, base_url=j.base_url, api_key=j.api_key, max_retries=1, spec=j.spec)
        traces = [
            _trace(
                "single_time",
                "p1",
                "The mother of Aida Wang is Shelli Beltran. So the answer is Shelli Beltran.",
                [["aida-wang"]],
            ),
            _trace("no_retrieval", "p1", "The mother of Aida Wang is Shelli Beltran.", []),
        ]
        rows = faithfulness_rows(traces, PASSAGES, judge=j)
    finally:
        fake.close()
    row = rows[("single_time", "p1")]
    assert rows[("no_retrieval", "p1")]["faithfulness_method"] == NO_CONTEXT
    assert row["faithfulness_method"] == "ragas-faithfulness:openai:fake"
    if mode == "good":
        assert row == {"faithfulness": 0.5, "faithfulness_method": j.method, "judge_parse_failures": 0, "claims": 2}
    else:  # a reply off the format is a parse failure, never a score (ragas would average what came)
        assert row["faithfulness"] is None and row["judge_parse_failures"] == 1
        assert summarize_faithfulness(rows)["single_time"]["judge_parse_failures"] == 1
    assert fake.auth and all(a == f"Bearer {SECRET}" for a in fake.auth)  # the key goes to the endpoint only
    assert SECRET not in json.dumps([list(rows.values()), summarize_faithfulness(rows), j.describe()])


@pytest.mark.slow
def test_a_run_whose_judge_fails_answers_every_probe_and_says_faithfulness_is_not_judged(
    tmp_path, scripted_lm, pytester
):
    # The judge is a scoring matter: its outage costs the run its faithfulness, not its answers, its
    # summary or its report; `flarebench score` judges the answers later.
    _needs_ragas()
    from tests.scripted import run_cli

    run_dir, port = tmp_path / "run", servers.free_port()  # nothing listens there
    judge = ["--judge", "openai:m", "--judge-base-url", f"http://127.0.0.1:{port}/v1"]
    specs = ["--strategy", "single_time", "--strategy", "flare_direct", "--limit", "2"]
    code, out, err = run_cli("run", *specs, *judge, "--report-dir", str(run_dir))
    assert code == 1 and "Traceback" not in out + err, err
    assert f"flarebench: faithfulness not judged: judge openai:m at http://127.0.0.1:{port}/v1: " in err  # a reason
    import pandas as pd

    summary = pd.read_csv(run_dir / "summary.csv")
    assert list(summary["strategy"]) == ["single_time", "flare_direct"] and (summary["n"] == 2).all()
    assert summary["faithfulness"].isna().all()
    assert set(summary["faithfulness_method"]) == {"n/a: not judged (the judge failed)"}
    assert "flarebench score RUN_DIR judges them" in (run_dir / "summary.md").read_text()
    assert (run_dir / "report.html").exists() and json.loads((run_dir / "run.json").read_text())["status"] == "complete"
    # pytest bench alike: its tests pass (the answers are there), its session does not.
    args = ["-p", "no:cacheprovider", "--strategy", "single_time", "--limit", "1", "--report-dir", str(tmp_path / "b")]
    result = pytester.inline_run(str(ROOT / "bench"), *args, *judge)
    result.assertoutcome(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_run_stopped_while_its_judge_works_waits_for_no_more_judging(tmp_path, scripted_lm, monkeypatch):
    # Ctrl-C while the judge scores a strategy's answers: what finished is summarised at once, its
    # answers left unjudged (a slow judge took minutes per answer while the run was being marked).
    import pandas as pd

    from flarebench.bench import faithfulness as module
    from tests.scripted import run_cli

    calls = []

    def judging(traces, passages, judge=None):
        calls.append(judge)
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "faithfulness_rows", judging)
    run_dir = tmp_path / "run"
    judge = ["--judge", "openai:m", "--judge-base-url", "http://127.0.0.1:9/v1"]
    code, out, err = run_cli("run", "--strategy", "single_time", "--limit", "2", *judge, "--report-dir", str(run_dir))
    assert code == 130 and len(calls) == 1, err
    assert err.strip().endswith(f"its faithfulness is not judged yet: flarebench score {run_dir} judges it")
    summary = pd.read_csv(run_dir / "summary.csv")
    assert list(summary["faithfulness_method"]) == ["n/a: not judged (the run was stopped)"]


# ------------------------------------------------------------------------------------------
# The ragas path against a real judge: llama_cpp.server with the embedded model
# ------------------------------------------------------------------------------------------


def _needs_ragas() -> None:
    # Not importorskip: ragas 0.4.3 imports only after flarebench.bench.faithfulness's shim (see _import_ragas).
    if importlib.util.find_spec("ragas") is None:
        pytest.skip("ragas is not installed (pip install -e '.[judge]')")


@pytest.fixture(scope="module")
def local_judge_url(tmp_path_factory):
    """A real llama_cpp.server with a chat format, standing in for a judge endpoint."""
    with servers.llama_server(tmp_path_factory.mktemp("judge") / "server.log", "--chat_format", "chatml") as url:
        yield url


@pytest.mark.model
@pytest.mark.parametrize("json_mode", ["json", "json_schema"])
def test_ragas_path_against_a_local_judge(local_judge_url, json_mode, monkeypatch):
    """The whole ragas path against llama_cpp.server with the bundled 135M model. "json" is ragas's
    own setting (the 135M judge's replies mostly fail to validate: counted as parse failures);
    "json_schema" makes the server force the schema with a grammar (the replies parse)."""
    _needs_ragas()
    import tiktoken

    # The faithfulness path must not tokenise with tiktoken (it would fetch BPE files offline).
    def no_tiktoken(*a, **k):
        raise AssertionError("tiktoken was used on the faithfulness path")

    monkeypatch.setattr(tiktoken, "get_encoding", no_tiktoken)
    monkeypatch.setattr(tiktoken, "encoding_for_model", no_tiktoken)
    monkeypatch.setenv("JUDGE_API_KEY", SECRET)
    monkeypatch.setenv("JUDGE_JSON_MODE", json_mode)
    judge = parse_judge("openai:smollm2", local_judge_url)
    assert judge.json_mode == json_mode
    # Short replies and one attempt per call keep this test to a few LM calls on 2 cores.
    judge = Judge(
        judge.model, judge.base_url, judge.api_key, max_tokens=192, max_retries=1, spec=judge.spec, json_mode=json_mode
    )
    traces = [
        _trace(
            "single_time",
            "p1",
            "The mother of Aida Wang is Shelli Beltran. Aida Wang is a personal assistant. "
            "So the answer is Shelli Beltran.",
            [["aida-wang"]],
        ),
        _trace("no_retrieval", "p1", "The mother of Aida Wang is Shelli Beltran.", []),
    ]
    t0 = time.time()
    rows = faithfulness_rows(traces, PASSAGES, judge=judge)
    summary = summarize_faithfulness(rows)
    print(f"ragas ({json_mode}) via llama_cpp.server in {time.time() - t0:.1f}s: {rows} {summary}")
    assert rows[("no_retrieval", "p1")]["faithfulness_method"] == NO_CONTEXT
    row = rows[("single_time", "p1")]
    # The judged answer got a score in [0, 1], or no statement (n/a: no claims), or is a counted
    # parse failure: never a silent 0.
    assert row["faithfulness_method"] in (judge.method, NO_CLAIMS)
    if row["faithfulness"] is None:
        assert row["judge_parse_failures"] == 1 or row["faithfulness_method"] == NO_CLAIMS
    else:
        assert 0.0 <= row["faithfulness"] <= 1.0 and row["judge_parse_failures"] == 0
    assert summary["single_time"]["judge_parse_failures"] == row["judge_parse_failures"]
    assert SECRET not in json.dumps([{f"{k[0]}/{k[1]}": v for k, v in rows.items()}, summary, judge.describe()])
    assert os.environ.get("RAGAS_DO_NOT_TRACK") == "true"


# ------------------------------------------------------------------------------------------
# flarebench agreement --judge: a judge's agreement with the labelled claims
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["good", "garbage"])
def test_judge_agreement_with_a_scripted_endpoint(mode, monkeypatch, capsys):
    """Against the scripted judge ("good": of its two statements only the first is supported, so no
    claim gets a full score and every verdict is "unsupported"; "garbage": no reply parses, so no
    claim gets a verdict), the command's figures follow from the labels; the key is never printed."""
    _needs_ragas()
    fake = _FakeJudge(mode)
    monkeypatch.setenv("JUDGE_API_KEY", SECRET)
    try:
        code = main(["agreement", "--judge", "openai:fake", "--judge-base-url", fake.url, "--limit", "4"])
    finally:
        fake.close()
    out = capsys.readouterr()
    assert code == 0
    claims = agreement.load_claims()[:4]
    if mode == "good":
        got = agreement.measure("ragas-faithfulness:openai:fake", "test", claims, [False] * 4)
        assert got.line() in out.out
        assert got.unsupported_recall in (None, 1.0) and got.supported_recall in (None, 0.0)
    else:
        assert "no claim of the test split got a verdict" in out.out
        assert "no verdict on 4 of 4 claims" in out.out
    assert "ragas-faithfulness:openai:fake" in out.out
    assert SECRET not in out.out + out.err


@pytest.mark.model
def test_judge_agreement_against_a_local_judge(local_judge_url, monkeypatch, capsys):
    """`flarebench agreement --judge` end to end against llama_cpp.server: every claim gets a verdict
    or is counted as undecided, and the figures are those of the verdicts given."""
    _needs_ragas()
    monkeypatch.setenv("JUDGE_JSON_MODE", "json_schema")
    code = main(["agreement", "--judge", "openai:smollm2", "--judge-base-url", local_judge_url, "--limit", "2"])
    out = capsys.readouterr().out
    print(out)
    assert code == 0
    assert "ragas-faithfulness:openai:smollm2" in out
    decided = 2 - int(out.split("no verdict on ")[1].split(" ")[0]) if "no verdict on" in out else 2
    if decided:
        assert f"split of the labelled claims ({decided})" in out
    else:
        assert "no claim of the test split got a verdict" in out


def test_the_notes_say_how_many_judged_answers_got_no_verdict_that_parsed():
    from flarebench.bench.scorers.faithfulness import method_note
    from flarebench.bench.scorers.registry import Scoring

    method = "ragas-faithfulness:openai:j"
    rows = {
        ("s", "p1"): {"faithfulness": None, "faithfulness_method": method, "judge_parse_failures": 1, "claims": 2},
        ("s", "p2"): {"faithfulness": 0.5, "faithfulness_method": method, "judge_parse_failures": 0, "claims": 2},
    }
    note = method_note(Scoring(groups={}, faithfulness=rows))
    assert note.endswith("; 1 of 2 judged answers got no verdict that parsed (left out; a small local judge may need "
                         "JUDGE_JSON_MODE=json_schema)")  # fmt: skip
    rows[("s", "p1")].update(faithfulness=1.0, judge_parse_failures=0)
    assert "parsed" not in method_note(Scoring(groups={}, faithfulness=rows))
