"""Hybrid retrieval and LM reranking end to end: a real ``llama_cpp.server`` in embedding mode (the
bundled SmolLM2, which returns one vector per token: the client mean-pools them), the real model
answering and reranking, on a small set cut from phantomwiki."""

from __future__ import annotations

import json
import math

import pytest

from flarebench.bench.session import BenchSession, ConfigError
from flarebench.probes.load import load_probe_set
from flarebench.strategies.rerank import RERANK
from tests.servers import llama_server

pytestmark = pytest.mark.model

DEPTH = 3


@pytest.fixture(scope="module")
def embed_url(tmp_path_factory):
    with llama_server(tmp_path_factory.mktemp("embed") / "server.log", "--embedding", "true") as url:
        yield url


@pytest.fixture(scope="module")
def small_set(tmp_path_factory):
    """The first two phantomwiki probes, their gold documents and a few others (a corpus that embeds in seconds)."""
    pw = load_probe_set("phantomwiki")
    probes = pw.probes[:2]
    keep = {d for p in probes for d in p.gold_doc_ids} | {d.id for d in pw.corpus[:4]}
    folder = tmp_path_factory.mktemp("sets") / "pw_small"
    folder.mkdir()
    with open(folder / "corpus.jsonl", "w") as f:
        for d in pw.corpus:
            if d.id in keep:
                f.write(json.dumps({"id": d.id, "title": d.title, "text": d.text}) + "\n")
    with open(folder / "probes.jsonl", "w") as f:
        for p in probes:
            row = {"id": p.id, "question": p.question, "answers": p.answers, "gold_doc_ids": p.gold_doc_ids}
            f.write(json.dumps(row) + "\n")
    return folder


def test_hybrid_retrieval_with_lm_reranking_is_recorded_and_costed(embed_url, small_set, tmp_path):
    session = BenchSession(
        strategy=["single_time"],
        probes=str(small_set),
        retriever="hybrid",
        limit=1,
        embed="openai:smollm2",
        embed_base_url=embed_url,
        rerank="lm",
        rerank_depth=DEPTH,
        progress=False,
        report_dir=str(tmp_path / "run"),
    )
    with session.closing():
        traces = session.run("single_time")
        summary = session.summary().set_index("strategy").loc["single_time"]
    retriever = json.loads((tmp_path / "run" / "run.json").read_text())["config"]["retriever"]
    assert retriever["name"] == "hybrid" and retriever["rerank"]["depth"] == DEPTH
    assert retriever["dense"]["embed"]["pooling"].startswith("mean of the per-token vectors")
    assert retriever["dense"]["search"] == "exact cosine"
    for t in traces:
        assert not t.error
        (first,) = t.retrievals
        assert len(first.doc_ids) == 3 and [c.purpose for c in first.lm_calls] == [RERANK] * DEPTH
    # Reranking's calls are the strategy's: 4 scoring calls and one answer per question.
    assert summary["lm_calls_per_q"] == DEPTH + 1
    assert not math.isnan(summary["recall_first_hop"]) and summary["retrieval_latency_p95_s"] > 0


def test_a_server_without_rerank_is_refused_naming_the_alternative(embed_url, small_set, tmp_path, scripted_lm):
    no_rerank = r"--rerank openai:smollm2: .*/rerank answered HTTP 404 \(no /rerank there: use --rerank lm\)"
    with pytest.raises(ConfigError, match=no_rerank):
        BenchSession(
            strategy=["single_time"],
            probes=str(small_set),
            rerank="openai:smollm2",
            embed_base_url=embed_url,
            progress=False,
            report_dir=str(tmp_path / "run"),
        )
