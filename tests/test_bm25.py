"""The bm25s retriever: ranking, edge cases, and the on-disk index cache."""

import pytest

from flarebench.strategies.bm25 import BM25Retriever
from flarebench.strategies.records import Passage

DOCS = [
    Passage("a", "Alice Smith", "The mother of Alice Smith is Jane Smith."),
    Passage("b", "Bob Stone", "Bob Stone likes apples and pears."),
    Passage("c", "Carol Wu", "Carol Wu works as a baker in Paris."),
]


def test_ranks_matching_docs_first_and_drops_non_matches():
    r = BM25Retriever(DOCS)
    hits, seconds = r.search("Who is the mother of Alice Smith?", k=3)
    assert [h.id for h in hits] == ["a"]  # b and c share no term with the query
    assert hits[0].title == "Alice Smith" and hits[0].score > 0 and seconds >= 0


def test_k_larger_than_corpus_and_empty_queries():
    r = BM25Retriever(DOCS)
    assert len(r.search("baker apples mother", k=10)[0]) == 3
    assert r.search("", k=3)[0] == []
    assert r.search("the of is", k=3)[0] == []  # stopwords only


def test_index_is_cached_by_corpus_content(tmp_path, monkeypatch):
    monkeypatch.setenv("FLAREBENCH_CACHE", str(tmp_path))
    first = BM25Retriever(DOCS)
    assert first.built and first.index_dir.is_dir()
    again = BM25Retriever(DOCS)
    assert not again.built and again.index_dir == first.index_dir
    assert again.search("baker", 1)[0][0].id == "c"
    changed = BM25Retriever(DOCS[:2] + [Passage("c", "Carol Wu", "Carol Wu is a pilot.")])
    assert changed.built and changed.index_dir != first.index_dir


def test_real_corpus_finds_the_named_person(phantom, retriever):
    # Every question that names a person should retrieve that person's article in the top 3.
    named = [p for p in phantom.probes if p.gold_doc_ids and phantom.docs_by_id[p.gold_doc_ids[0]].title in p.question]
    assert named
    found = sum(p.gold_doc_ids[0] in [h.id for h in retriever.search(p.question, 3)[0]] for p in named)
    assert found / len(named) >= 0.9


def test_a_corpus_without_a_word_to_index_is_refused_saying_so(tmp_path, monkeypatch):
    monkeypatch.setenv("FLAREBENCH_CACHE", str(tmp_path))
    with pytest.raises(ValueError, match="no document holds a word to index"):
        BM25Retriever([Passage("a", "", ""), Passage("b", "the", "and of the")])
    assert not (tmp_path / "bm25s").exists()  # no index written
