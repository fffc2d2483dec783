"""The embedded default retriever: BM25 through ``bm25s``, parameters matched to Lucene's."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile

import bm25s
import Stemmer

from flarebench.strategies.records import Passage
from flarebench.strategies.retriever import CorpusDoc, Retriever, as_passages, cache_root

# Lucene's BM25 as Anserini configures it for passage search; with the Porter stemmer bm25s's top-5
# agrees with Lucene's on ~98% of queries (docs/design.md, Engines).
PARAMS = {"k1": 0.9, "b": 0.4, "method": "lucene"}
STOPWORDS = "en"


def _doc_text(p: Passage) -> str:
    return f"{p.title}\n{p.text}"


class BM25Retriever(Retriever):
    """BM25 over a probe set's corpus; the index is built on first use and cached on disk, keyed
    by the corpus's content and the BM25 parameters."""

    name = "bm25s"

    def __init__(self, corpus: list[CorpusDoc] | list[Passage]):
        self.passages = as_passages(corpus)
        if not self.passages:
            raise ValueError("cannot build a BM25 index over an empty corpus")
        self._stemmer = Stemmer.Stemmer("porter")
        self.corpus_hash = self._hash()
        self.index_dir = cache_root() / "bm25s" / self.corpus_hash[:24]
        self.built = False
        self._bm25 = self._load_or_build()

    def _hash(self) -> str:
        h = hashlib.sha256(json.dumps({"params": PARAMS, "stopwords": STOPWORDS, "bm25s": bm25s.__version__}).encode())
        for p in self.passages:
            h.update(json.dumps([p.id, p.title, p.text]).encode())
        return h.hexdigest()

    def _tokenize(self, texts: list[str], return_ids: bool):
        return bm25s.tokenize(
            texts, stopwords=STOPWORDS, stemmer=self._stemmer, return_ids=return_ids, show_progress=False
        )

    def _load_or_build(self) -> bm25s.BM25:
        if (self.index_dir / "params.index.json").exists():
            return bm25s.BM25.load(str(self.index_dir), show_progress=False)
        tokens = self._tokenize([_doc_text(p) for p in self.passages], True)
        if not tokens.vocab:  # bm25s fails deep inside (an empty max()) without saying why
            raise ValueError(
                "cannot build a BM25 index: no document holds a word to index (every title and text is "
                "empty or stopwords)"
            )
        bm25 = bm25s.BM25(**PARAMS)
        bm25.index(tokens, show_progress=False)
        # Write to a temporary folder and rename, so an interrupted build never leaves half an index.
        self.index_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = tempfile.mkdtemp(dir=self.index_dir.parent)
        bm25.save(tmp, show_progress=False)
        try:
            shutil.move(tmp, self.index_dir)
        except OSError:  # another process won the race; its index is the same
            shutil.rmtree(tmp, ignore_errors=True)
        self.built = True
        return bm25

    def _search(self, query: str, k: int) -> list[Passage]:
        tokens = self._tokenize([query], False)
        if not tokens[0]:
            return []
        k = min(k, len(self.passages))
        idx, scores = self._bm25.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        hits = []
        for i, s in zip(idx[0], scores[0]):
            if s <= 0:  # no query term in the doc: Lucene would not return it
                continue
            p = self.passages[int(i)]
            hits.append(Passage(p.id, p.title, p.text, float(s)))
        return hits

    def describe(self) -> dict:
        return {
            "name": self.name,
            "params": PARAMS,
            "stopwords": STOPWORDS,
            "stemmer": "porter (PyStemmer)",
            "bm25s": bm25s.__version__,
            "corpus_docs": len(self.passages),
            "corpus_hash": self.corpus_hash,
        }
