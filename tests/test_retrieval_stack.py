"""Dense and hybrid retrieval, reranking, and the per-hop recall and retrieval latency columns: their
control flow, with a bag-of-words embedder and a scripted LM (tests/test_dense_model.py runs them
against a real embeddings server and the real model)."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pandas as pd
import pytest

from flarebench.bench.scorers.recall import recall_row
from flarebench.bench.scorers.registry import Group, Scoring
from flarebench.bench.scorers.retrieval_latency import retrieval_latency, search_seconds
from flarebench.strategies.bm25 import BM25Retriever
from flarebench.strategies.dense import DenseRetriever
from flarebench.strategies.hybrid import HybridRetriever
from flarebench.strategies.lm import KeyRefused
from flarebench.strategies.records import FIRST_HOP, LOW_CONFIDENCE, Passage, Retrieval, Step, Trace
from flarebench.strategies.rerank import RERANK, EndpointReranker, LMReranker, RerankedRetriever
from flarebench.strategies.single_time import SingleTime
from tests.scripted import BagOfWordsEmbedder, ScriptedLM, ScriptedRetriever
from tests.servers import JSONHandler, http_service

CORPUS = [
    Passage("kettle", "Kettle", "The kettle boils water in two minutes."),
    Passage("ledger", "Ledger", "The ledger service settles payments every night."),
    Passage("gateway", "Gateway", "The gateway routes public API traffic to services."),
    Passage("pager", "Pager", "The pager wakes the on-call engineer at night."),
    Passage("ferry", "Ferry", "The ferry crosses the river twice a day."),
]


def test_dense_ranks_passages_by_cosine_and_caches_the_corpus_vectors():
    dense = DenseRetriever(CORPUS, BagOfWordsEmbedder(), progress=False)
    hits = dense.lookup("which service settles payments", 3).passages
    assert hits[0].id == "ledger"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    again = BagOfWordsEmbedder()
    DenseRetriever(CORPUS, again, progress=False)
    assert again.batches == []  # the vectors came from the cache
    assert dense.describe()["search"] == "exact cosine"


def test_an_interrupted_embedding_run_resumes_where_it_stopped(tmp_path, monkeypatch):
    corpus = [Passage(f"d{i}", f"Doc {i}", f"text number {i} about topic {i % 3}") for i in range(7)]
    monkeypatch.setenv("FLAREBENCH_CACHE", str(tmp_path / "a"))
    with pytest.raises(ConnectionError):
        DenseRetriever(corpus, BagOfWordsEmbedder(fail_after=2), batch=2, progress=False)
    resumed = BagOfWordsEmbedder()
    vectors = DenseRetriever(corpus, resumed, batch=2, progress=False).vectors
    # Two batches (4 docs) were kept; only the 3 docs left were embedded again.
    assert [len(b) for b in resumed.batches] == [2, 1]
    monkeypatch.setenv("FLAREBENCH_CACHE", str(tmp_path / "b"))
    fresh = DenseRetriever(corpus, BagOfWordsEmbedder(), batch=2, progress=False).vectors
    np.testing.assert_array_equal(vectors, fresh)


def test_above_exact_limit_an_hnsw_index_serves_and_its_recall_is_printed(capsys):
    pytest.importorskip("faiss")
    rng = random.Random(0)
    words = [f"w{i}" for i in range(400)]
    corpus = [Passage(f"d{i}", "", " ".join(rng.sample(words, 12))) for i in range(300)]
    dense = DenseRetriever(corpus, BagOfWordsEmbedder(dim=128), exact_limit=50, progress=False)
    assert dense.describe()["search"] == "hnsw"
    assert dense.recall >= 0.9
    assert "recall@10 against exact search" in capsys.readouterr().err
    assert dense.lookup(corpus[17].text, 1).passages[0].id == "d17"


def test_hybrid_fuses_the_two_rankings_by_reciprocal_rank():
    bm25, dense = BM25Retriever(CORPUS), DenseRetriever(CORPUS, BagOfWordsEmbedder(), progress=False)
    hybrid = HybridRetriever(bm25, dense, rrf_k=10, bm25_weight=2.0, dense_weight=1.0, depth=5)
    query = "night payments service"
    hits = hybrid.lookup(query, 5).passages
    ranks_b = {p.id: r for r, p in enumerate(bm25.lookup(query, 5).passages, 1)}
    ranks_d = {CORPUS[i].id: r for r, (i, _) in enumerate(dense.ranked(query, 5), 1)}
    for h in hits:
        expected = 2.0 / (10 + ranks_b[h.id]) if h.id in ranks_b else 0.0
        expected += 1.0 / (10 + ranks_d[h.id])
        assert h.score == pytest.approx(expected)
    assert len({h.id for h in hits}) == len(hits) == 5
    assert hybrid.describe()["rrf_k"] == 10.0


def _yes(p: float) -> tuple:
    """A scripted one-token reply whose top alternatives give P(Yes) = p."""
    return ([" Yes"], [p], "stop", {"top": [[[" Yes", p], [" No", 1 - p]]]})


def test_lm_reranking_orders_by_the_odds_of_yes_and_its_calls_are_the_strategys():
    lm = ScriptedLM([_yes(0.2), _yes(0.9), _yes(0.5), "So the answer is x."])
    inner = ScriptedRetriever([["a", "b", "c"]])
    reranked = RerankedRetriever(inner, LMReranker(lm), depth=3)
    trace = SingleTime(k=2).run("q?", lm, reranked)
    retrieval = trace.retrievals[0]
    assert retrieval.doc_ids == ["b", "c"]
    assert [c.purpose for c in trace.lm_calls] == [RERANK, RERANK, RERANK, "generate"]
    assert all(r.top_logprobs == 20 for r in lm.requests[:3])
    # Written with the retrieval, read back the same; a retrieval without a reranker keeps its shape.
    d = trace.to_dict()
    assert len(d["steps"][0]["retrievals"][0]["lm_calls"]) == 3
    back = Trace.from_dict(json.loads(json.dumps(d))).lm_calls  # per-token alternatives are rounded when written
    assert [(c.purpose, c.text, c.prompt_tokens) for c in back] == [
        (c.purpose, c.text, c.prompt_tokens) for c in trace.lm_calls
    ]
    plain = SingleTime(k=2).run("q?", ScriptedLM(["x"]), ScriptedRetriever([["a"]]))
    assert "lm_calls" not in plain.to_dict()["steps"][0]["retrievals"][0]


def test_lm_reranking_needs_top_logprobs():
    lm = ScriptedLM(["x"])
    lm.supports_top_logprobs = False
    with pytest.raises(ValueError, match="needs per-token top logprobs"):
        LMReranker(lm)


class _RerankHandler(JSONHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.json_body()
        if self.path != "/v1/rerank":
            self.send_json(404, {"error": "not found"})
            return
        if body["query"] == "revoked":
            self.send_json(401, {"error": {"message": "Incorrect API key provided"}})
            return
        # Scores: the longer the document, the better.
        self.send_json(
            200, {"results": [{"index": i, "relevance_score": len(d)} for i, d in enumerate(body["documents"])]}
        )


@pytest.fixture
def rerank_server():
    with http_service(_RerankHandler) as base:
        yield base


def test_an_endpoint_reranker_orders_by_its_scores_and_one_without_rerank_is_refused(rerank_server):
    inner = ScriptedRetriever([["a", "bbbbbb", "ccc"]])
    reranked = RerankedRetriever(inner, EndpointReranker("r", base_url=f"{rerank_server}/v1"), depth=3)
    found = reranked.lookup("q", 2)
    assert [p.id for p in found.passages] == ["bbbbbb", "ccc"] and found.lm_calls == []
    with pytest.raises(ValueError, match=r"/rerank answered HTTP 404 \(no /rerank there: use --rerank lm\)$"):
        EndpointReranker("r", base_url=f"{rerank_server}/nothing")
    with pytest.raises(KeyRefused) as e:  # a key revoked mid-run stops the run, as the LM's does
        reranked.lookup("revoked", 2)
    assert e.value.address == "--embed-api-key-env" and str(e.value) == (
        f"--rerank openai:r: {rerank_server}/v1/rerank answered HTTP 401 (the key is refused: check the one in the "
        "variable --embed-api-key-env names, $OPENAI_API_KEY unless given)"
    )


def _trace(retrievals: list[Retrieval]) -> Trace:
    return Trace("q", "out", "a", "answer", steps=[Step("s", [], retrievals)])


def test_recall_per_hop_and_retrieval_latency_are_computed_per_query():
    probe = type("P", (), {"gold_doc_ids": ["g1", "g2"]})()
    trace = _trace(
        [
            Retrieval("q", FIRST_HOP, ["g1", "x", "y"], 0.1),
            Retrieval("s1", LOW_CONFIDENCE, ["g1", "g2", "x"], 0.3),
            Retrieval("s2", LOW_CONFIDENCE, ["x", "y", "z"], 0.2),
        ]
    )
    row = recall_row(trace, probe, {})
    assert row == {"recall": 1.0, "recall_first_hop": 0.5, "recall_later_hops": 0.5}
    assert recall_row(_trace([]), probe, {})["recall_first_hop"] is None
    rows = pd.DataFrame([search_seconds(trace, probe, {}), {"retrieval_seconds": "[0.4]"}])
    values = retrieval_latency(Group("s", rows, Scoring({})))
    assert values["retrieval_latency_p50_s"] == pytest.approx(0.25)
    none = retrieval_latency(Group("s", pd.DataFrame([{"retrieval_seconds": "[]"}]), Scoring({})))
    assert np.isnan(none["retrieval_latency_p95_s"])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"embed": "openai:e"}, "--embed only applies to --retriever dense or hybrid, not bm25s"),
        ({"retriever": "dense"}, "--retriever dense needs --embed openai:MODEL"),
        ({"retriever": "hybrid:rrf=3"}, "'rrf=3' is not KEY=VALUE with KEY one of rrf_k"),
        ({"retriever": "hybrid:depth=x", "embed": "openai:e"}, "depth must be an int, got 'x'"),
        ({"embed": "cohere:e", "retriever": "dense"}, "unknown --embed spec 'cohere:e'"),
        ({"rerank": "bogus"}, "unknown --rerank spec 'bogus'; known: lm, openai:MODEL"),
        ({"rerank": "lm", "rerank_depth": 0}, "--rerank-depth must be >= 1, got 0"),
        ({"rerank_depth": 5}, "--rerank-depth only applies to --rerank SPEC"),
        ({"retriever": "bogus"}, "unknown retriever spec 'bogus'; known: bm25s, pyserini"),
        ({"embed_base_url": "http://x"}, "--embed-base-url and --embed-api-key-env need --embed"),
    ],
)
def test_bad_retrieval_options_are_one_line_before_the_run(scripted_lm, tmp_path, options, message):
    from flarebench.bench.session import BenchSession, ConfigError

    with pytest.raises(ConfigError) as e:
        BenchSession(strategy=["single_time"], limit=1, progress=False, report_dir=str(tmp_path / "r"), **options)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"retriever": "bogus"}, "unknown retriever spec 'bogus'"),
        ({"retriever": "hybrid:rrf_k=abc"}, "rrf_k must be a float, got 'abc'"),
        ({"retriever": "hybrid:bm25_weight=nan"}, "bm25_weight must be a finite number, got 'nan'"),
        # Out of range, before the corpus is embedded (minutes, or a bill, on a large one).
        ({"retriever": "hybrid:bm25_weight=-1"}, "--retriever hybrid:bm25_weight=-1: bm25_weight must be >= 0, got -1"),
        ({"retriever": "hybrid:depth=0"}, "depth must be >= 1, got 0"),
        ({"retriever": "dense:batch=0"}, "--retriever dense:batch=0: batch must be >= 1, got 0"),
        ({"retriever": "hybrid:bm25_weight=0,dense_weight=0"}, "are both 0, which ranks nothing"),
        ({"retriever": "hybrid:depth=10,depth=20"}, "--retriever hybrid:depth=10,depth=20: depth is given twice"),
        ({"rerank": "bogus"}, "unknown --rerank spec 'bogus'"),
        ({"rerank": "lm", "rerank_depth": -5}, "--rerank-depth must be >= 1, got -5"),
        ({"retriever_retries": 1}, "--retriever-retries only applies to --retriever http:URL, not bm25s"),
    ],
)
def test_bad_retrieval_options_are_refused_before_an_lm_endpoint_is_asked(tmp_path, options, message):
    from flarebench.bench.session import BenchSession, ConfigError

    # Nothing listens on port 9: were the endpoint asked first, this would be "unreachable".
    dead = {"lm": "openai:m", "lm_base_url": "http://127.0.0.1:9/v1", "lm_retries": 0}
    with pytest.raises(ConfigError) as e:
        BenchSession(strategy=["single_time"], limit=1, progress=False, **dead, **options)
    assert message in str(e.value)


def test_measure_sets_measures_with_any_retriever_and_refuses_a_bad_one_in_a_line(capsys):
    from flarebench.probes.measure_sets import main

    assert main(["phantomwiki", "--k", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("retriever: bm25s\n") and "recall@3 (with gold)" in out
    with pytest.raises(SystemExit) as stopped:  # no documents measure nothing: a usage error, not a table of 0s
        main(["phantomwiki", "--k", "0"])
    assert stopped.value.code == 2 and "--k must be >= 1, got 0" in capsys.readouterr().err
    assert main(["phantomwiki", "--retriever", "dense"]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == "measure_sets: --retriever dense needs --embed openai:MODEL, an embeddings endpoint (see --embed-base-url)\n"
    )


class _EmbedHandler(JSONHandler):
    """An embeddings endpoint whose reply the model name chooses: ``list``, ``text``, ``nodata`` and
    ``noindex`` are not embeddings replies, ``zeros`` is all-zero vectors; any other model embeds a
    text as 3 numbers, except the texts ``zero`` (all zeros), ``long`` (4 numbers) and ``nan``."""

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.json_body()
        model, texts = body["model"], body["input"]
        special = {"zero": [0.0, 0.0, 0.0], "long": [1.0, 1.0, 1.0, 1.0], "nan": [float("nan"), 1.0, 1.0]}
        rows = [
            {"index": i, "embedding": [0.0] * 3 if model == "zeros" else special.get(t, [len(t), 1.0, t.count("e")])}
            for i, t in enumerate(texts)
        ]
        replies = {"list": [r["embedding"] for r in rows], "text": b"<html>gateway</html>", "nodata": {"vectors": []},
                   "noindex": {"data": [{"embedding": r["embedding"]} for r in rows]}}  # fmt: skip
        self.send_json(200, replies.get(model, {"data": rows[::-1]}))  # in any order: the indexes tell


@pytest.fixture
def embed_server():
    with http_service(_EmbedHandler) as base:
        yield f"{base}/v1"


@pytest.mark.parametrize(
    ("model", "problem"),
    [
        ("list", "is not an object holding a \"data\" list: '[[78, 1.0, 8]]'"),  # the canary's
        ("nodata", """is not an object holding a "data" list: '{"vectors": []}'"""),
        ("text", "is not JSON: '<html>gateway</html>'"),
        ("noindex", "has data[0] without an index of its own in 0..0"),
        ("zeros", "has an all-zero vector in data[0], which ranks nothing"),
    ],
)
def test_an_endpoint_that_does_not_reply_embeddings_is_one_line_naming_it(embed_server, model, problem):
    from flarebench.strategies.embeddings import OpenAIEmbedder
    from flarebench.strategies.lm import LMError

    with pytest.raises(LMError) as e:
        OpenAIEmbedder(model, base_url=embed_server, max_retries=0)
    where = f"--embed openai:{model}: the reply of --embed-base-url {embed_server} to /embeddings"
    assert str(e.value) == f"{where} {problem}"


def test_vectors_of_other_lengths_all_zeros_or_not_finite_are_refused_in_a_line(embed_server):
    from flarebench.strategies.embeddings import OpenAIEmbedder
    from flarebench.strategies.lm import LMError

    embedder = OpenAIEmbedder("m", base_url=embed_server, max_retries=0)
    vectors = embedder.embed(["kettle", "the gateway"])  # the reply came in reverse order
    expected = np.array([[6.0, 1.0, 2.0], [11.0, 1.0, 2.0]])  # length, 1, how many "e"
    np.testing.assert_allclose(vectors, expected / np.linalg.norm(expected, axis=1, keepdims=True), rtol=1e-6)
    for texts, problem in [
        (["a", "long"], "has vectors of different lengths (3 to 4 numbers)"),
        (["long"], "has vectors of 4 numbers, where the first reply's had 3"),
        (["a", "zero"], "has an all-zero vector in data[0], which ranks nothing"),
        (["nan"], "has a number that is not finite in data[0]"),
    ]:
        with pytest.raises(LMError, match=re.escape(f"{embed_server} to /embeddings {problem}")):
            embedder.embed(texts)


def test_a_bad_embeddings_reply_stops_the_run_in_a_line_before_anything_is_written(scripted_lm, embed_server, tmp_path):
    from tests.scripted import run_cli

    options = ["--strategy", "single_time", "--limit", "1", "--retriever", "dense", "--embed-base-url", embed_server]
    code, _, err = run_cli("run", *options, "--embed", "openai:list", "--report-dir", str(tmp_path / "r"))
    where = f"the reply of --embed-base-url {embed_server} to /embeddings"
    assert code == 2 and err.startswith(f"flarebench: --embed openai:list: {where} is not an object holding")
    assert err.count("\n") == 1 and not (tmp_path / "r").exists()


@pytest.mark.parametrize("weights", ["bm25_weight=nan", "dense_weight=inf", "rrf_k=1e309"])
def test_a_hybrid_weight_that_is_not_finite_is_refused_in_a_line(scripted_lm, embed_server, tmp_path, weights):
    from tests.scripted import run_cli

    key = weights.partition("=")[0]
    bm25, dense = BM25Retriever(CORPUS), DenseRetriever(CORPUS, BagOfWordsEmbedder(), progress=False)
    with pytest.raises(ValueError, match=f"hybrid: {key} must be a finite number >= 0, got "):
        HybridRetriever(bm25, dense, **{key: float(weights.partition("=")[2])})
    options = ["--strategy", "single_time", "--limit", "1", "--embed", "openai:m", "--embed-base-url", embed_server]
    code, _, err = run_cli("run", *options, "--retriever", f"hybrid:{weights}", "--report-dir", str(tmp_path / "r"))
    # Refused with the options, before the endpoint is asked or the corpus embedded.
    message = (
        f"flarebench: --retriever hybrid:{weights}: {key} must be a finite number, got '{weights.partition('=')[2]}'"
    )
    assert code == 2 and err == f"{message}\n"
    assert not (tmp_path / "r").exists()  # so no run.json holds NaN or Infinity


class _KeyQuotingHandler(JSONHandler):
    """Embeds as :class:`_EmbedHandler` does, but answers 401 quoting the Authorization header it
    got (as OpenAI's reply quotes a wrong key) for the model ``reject``, and for a question (a
    query embedded mid-run) of any model; 503 (overloaded) for the model ``busy``."""

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.json_body()
        if body["model"] == "busy":
            return self.send_json(503, {"error": {"message": "overloaded"}})
        if body["model"] == "reject" or any(t.rstrip().endswith("?") for t in body["input"]):
            quoted = f"Incorrect API key provided: {self.headers.get('Authorization')}"
            return self.send_json(401, {"error": {"message": quoted}})
        self.send_json(
            200, {"data": [{"index": i, "embedding": [len(t), 1.0, 2.0]} for i, t in enumerate(body["input"])]}
        )


def test_an_embeddings_key_in_a_variable_of_any_name_never_reaches_a_line_or_a_file(scripted_lm, tmp_path, monkeypatch):
    # --embed-api-key-env names the key's variable, whatever its name: an endpoint's error quoting
    # the key is redacted at start and mid-run (the command's one line, the run's files). A key
    # refused mid-run stops the run, resumable, as an unreachable endpoint does: each probe left
    # recorded as an error would be kept by the resumed run.
    from tests.console import files_holding
    from tests.scripted import run_cli

    secret = "sk-flarebench-embed-4f1c9e"
    monkeypatch.setenv("MYEMB", secret)
    with http_service(_KeyQuotingHandler) as base:
        options = ["--strategy", "single_time", "--limit", "2", "--retriever", "dense",
                   "--embed-base-url", f"{base}/v1", "--embed-api-key-env", "MYEMB"]  # fmt: skip
        code, out, err = run_cli("run", *options, "--embed", "openai:reject", "--report-dir", str(tmp_path / "start"))
        assert code == 2 and "Incorrect API key provided: Bearer ***" in err and secret not in out + err, err
        run_dir = tmp_path / "run"
        code, out, err = run_cli("run", *options, "--embed", "openai:m", "--report-dir", str(run_dir))
    assert code == 3 and err.splitlines()[-1] == (
        f"flarebench: --embed openai:m: {base}/v1/embeddings answered 401: Incorrect API key provided: Bearer *** "
        "(the key is refused: check the one in the variable --embed-api-key-env names, $OPENAI_API_KEY unless "
        "given); finished probes are kept; run the same command to resume"
    ), err
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    assert not (run_dir / "traces.jsonl").exists()  # no probe recorded as an error
    assert files_holding(run_dir, secret) == [] and secret not in out + err


def test_an_embeddings_endpoint_overloaded_or_down_stops_the_run_naming_its_option():
    # As an LM server's: 429/502/503/504 after the retries, or no connection, stops the run
    # (resumable), where any other answer is the probe's error; before any probe ran, the line
    # says which address to check.
    from flarebench.bench.runner import resume_hint
    from flarebench.strategies.embeddings import OpenAIEmbedder
    from flarebench.strategies.lm import LMUnavailable

    with http_service(_KeyQuotingHandler) as base, pytest.raises(LMUnavailable) as e:
        OpenAIEmbedder("busy", base_url=f"{base}/v1", max_retries=0)
    assert "answered 503" in str(e.value) and e.value.address == "--embed-base-url"
    e.value.before_run = True
    assert resume_hint(False, e.value) == (
        "no probe has run: check the embeddings (or rerank) endpoint's address (--embed-base-url) and that its "
        "server is up"
    )
