"""``--retriever dense``: passages ranked by the cosine of their embedding with the query's.

The corpus is embedded once, in batches, and its vectors are kept in the flarebench cache under a
key made of the corpus's content and the embedding model's identity (its name, endpoint, pooling and
the fingerprint of its vectors). Each finished batch is written as it comes, so an interrupted
embedding run resumes where it stopped. Search is exact (one matrix product in numpy) up to
``exact_limit`` passages; above it an HNSW index (faiss, extra ``dense``) takes over, and its
recall@10 against exact search is measured on a sample of the corpus and printed when it is built.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

from flarebench.strategies.atomic import atomic_file
from flarebench.strategies.embeddings import OpenAIEmbedder
from flarebench.strategies.records import Passage
from flarebench.strategies.retriever import CorpusDoc, Retriever, as_passages, cache_root

#: Passages embedded per request.
BATCH = 16
#: Above this many passages, search goes through an approximate (HNSW) index instead of exact cosine.
EXACT_LIMIT = 50_000
#: HNSW's graph degree and search breadth: faiss's usual settings for recall near 0.99.
HNSW_M, HNSW_EF_SEARCH = 32, 128
#: Sample queries (corpus vectors) and depth of the recall measured when an HNSW index is built.
RECALL_SAMPLE, RECALL_AT = 200, 10
INSTALL_HINT = "pip install 'flarebench[dense]'"


def _doc_text(p: Passage) -> str:
    return f"{p.title}\n{p.text}"  # what bm25s indexes, so both retrievers see the same text


class DenseRetriever(Retriever):
    """Cosine search over ``corpus`` embedded by ``embedder``; ``progress`` shows the embedding run."""

    name = "dense"

    def __init__(
        self,
        corpus: list[CorpusDoc] | list[Passage],
        embedder: OpenAIEmbedder,
        exact_limit: int = EXACT_LIMIT,
        batch: int = BATCH,
        progress: bool = True,
    ):
        if exact_limit < 1 or batch < 1:
            raise ValueError(f"dense: exact_limit and batch must be >= 1, got {exact_limit} and {batch}")
        self.passages = as_passages(corpus)
        if not self.passages:
            raise ValueError("cannot build a dense index over an empty corpus")
        self.embedder = embedder
        self.exact_limit = exact_limit
        self.key = self._key()
        self.vectors = self._embed_corpus(batch, progress)
        self.index = self._hnsw() if len(self.passages) > exact_limit else None

    def _key(self) -> str:
        h = hashlib.sha256(json.dumps(self.embedder.describe(), sort_keys=True).encode())
        for p in self.passages:
            h.update(json.dumps([p.id, p.title, p.text]).encode())
        return h.hexdigest()

    def _embed_corpus(self, batch: int, progress: bool) -> np.ndarray:
        """The corpus's vectors: from the cache, or embedded now, batch by batch, resuming the
        batches an interrupted run finished (kept in ``<key>.partial/`` until the last one)."""
        root = cache_root() / "dense"
        done = root / f"{self.key[:24]}.npy"
        if done.exists():
            return np.load(done)
        parts = root / f"{self.key[:24]}.partial"
        parts.mkdir(parents=True, exist_ok=True)
        have = sorted(parts.glob("*.npy"))
        vectors = [np.load(f) for f in have]
        start = sum(len(v) for v in vectors)
        texts = [_doc_text(p) for p in self.passages]
        bar = tqdm(total=len(texts), initial=start, desc=f"embedding corpus ({self.embedder.name})",
                   unit="doc", disable=not progress, file=sys.stderr)  # fmt: skip
        with bar:
            while start < len(texts):
                chunk = self.embedder.embed(texts[start : start + batch])
                _save(parts / f"{start:09d}.npy", chunk)
                vectors.append(chunk)
                start += len(chunk)
                bar.update(len(chunk))
        matrix = np.concatenate(vectors).astype(np.float32)
        _save(done, matrix)
        shutil.rmtree(parts, ignore_errors=True)
        return matrix

    def _hnsw(self):
        """An HNSW index over the vectors; prints its recall@10 against exact search."""
        try:
            import faiss
        except ImportError:
            raise ValueError(
                f"dense: {len(self.passages)} passages is more than exact_limit={self.exact_limit}, and the "
                f"approximate index needs faiss: {INSTALL_HINT}"
            ) from None
        index = faiss.IndexHNSWFlat(self.vectors.shape[1], HNSW_M, faiss.METRIC_INNER_PRODUCT)
        index.add(self.vectors)
        index.hnsw.efSearch = HNSW_EF_SEARCH
        self.recall = self._measure(index)
        print(
            f"dense: HNSW index (faiss {faiss.__version__}, M={HNSW_M}, efSearch={HNSW_EF_SEARCH}) over "
            f"{len(self.passages)} passages: recall@{RECALL_AT} against exact search {self.recall:.3f} "
            f"on {min(RECALL_SAMPLE, len(self.passages))} sample queries",
            file=sys.stderr,
        )
        return index

    def _measure(self, index) -> float:
        """Mean share of the exact top-10 that the index returns, over sample corpus vectors as
        queries; a returned passage that ties the exact 10th's score counts as found."""
        rng = np.random.default_rng(0)
        sample = rng.choice(len(self.vectors), size=min(RECALL_SAMPLE, len(self.vectors)), replace=False)
        scores = self.vectors[sample] @ self.vectors.T
        depth = min(RECALL_AT, len(self.vectors))
        kth = -np.sort(-scores, axis=1)[:, depth - 1]
        _, approx = index.search(self.vectors[sample], depth)
        found = [np.sum(row[a[a >= 0]] >= t - 1e-6) for row, a, t in zip(scores, approx, kth)]
        return float(np.mean(found) / depth)

    def ranked(self, query: str, depth: int) -> list[tuple[int, float]]:
        """The ``depth`` best (passage index, cosine) pairs for ``query``, best first."""
        q = self.embedder.embed([query])
        depth = min(depth, len(self.passages))
        if self.index is not None:
            scores, idx = self.index.search(q, depth)
            return [(int(i), float(s)) for i, s in zip(idx[0], scores[0]) if i >= 0]
        scores = self.vectors @ q[0]
        top = np.argsort(-scores, kind="stable")[:depth]
        return [(int(i), float(scores[i])) for i in top]

    def _search(self, query: str, k: int) -> list[Passage]:
        hits = []
        for i, score in self.ranked(query, k):
            p = self.passages[i]
            hits.append(Passage(p.id, p.title, p.text, score))
        return hits

    def describe(self) -> dict:
        return {
            "name": self.name,
            "embed": self.embedder.describe(),
            "search": "hnsw" if self.index is not None else "exact cosine",
            "exact_limit": self.exact_limit,
            "corpus_docs": len(self.passages),
            "vectors_key": self.key,
        }


def _save(path: Path, array: np.ndarray) -> None:
    """Write ``array`` to ``path``, never half a file."""
    with atomic_file(path) as f:
        np.save(f, array)
