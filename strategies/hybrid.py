"""``--retriever hybrid``: BM25 (bm25s) and dense rankings fused by reciprocal rank fusion.

A passage's fused score is ``sum over rankings of weight / (rrf_k + rank)`` (rank from 1), over the
top ``depth`` of each ranking (Cormack, Clarke and Buettcher, SIGIR 2009, use rrf_k = 60). A passage
both rankings hold is one passage, scored by both.
"""

from __future__ import annotations

import math

from flarebench.strategies.bm25 import BM25Retriever
from flarebench.strategies.dense import DenseRetriever
from flarebench.strategies.records import Passage
from flarebench.strategies.retriever import Retriever

RRF_K = 60
#: How deep each ranking is read before fusing.
DEPTH = 20


class HybridRetriever(Retriever):
    """Reciprocal rank fusion of ``bm25`` and ``dense``, weighted ``bm25_weight`` and ``dense_weight``."""

    name = "hybrid"

    def __init__(
        self,
        bm25: BM25Retriever,
        dense: DenseRetriever,
        rrf_k: float = RRF_K,
        bm25_weight: float = 1.0,
        dense_weight: float = 1.0,
        depth: int = DEPTH,
    ):
        for key, value in (("rrf_k", rrf_k), ("bm25_weight", bm25_weight), ("dense_weight", dense_weight)):
            # nan and inf too: they pass `< 0`, and json writes them as NaN and Infinity in run.json,
            # which strict JSON readers refuse.
            if not 0 <= value < math.inf:
                raise ValueError(f"hybrid: {key} must be a finite number >= 0, got {value}")
        if depth < 1:
            raise ValueError(f"hybrid: depth must be >= 1, got {depth}")
        self.bm25, self.dense = bm25, dense
        self.rrf_k, self.bm25_weight, self.dense_weight = float(rrf_k), float(bm25_weight), float(dense_weight)
        self.depth = depth

    def _search(self, query: str, k: int) -> list[Passage]:
        depth = max(k, self.depth)
        fused: dict[str, float] = {}
        by_id: dict[str, Passage] = {}
        for weight, ranking in (
            (self.bm25_weight, self.bm25.lookup(query, depth).passages),
            (self.dense_weight, [self.dense.passages[i] for i, _ in self.dense.ranked(query, depth)]),
        ):
            for rank, p in enumerate(ranking, start=1):
                fused[p.id] = fused.get(p.id, 0.0) + weight / (self.rrf_k + rank)
                by_id.setdefault(p.id, p)
        # Ties (equal fused scores) keep the order passages were first met: BM25's, then dense's.
        best = sorted(fused, key=lambda pid: -fused[pid])[:k]
        return [Passage(pid, by_id[pid].title, by_id[pid].text, fused[pid]) for pid in best]

    def describe(self) -> dict:
        return {
            "name": self.name,
            "fusion": "reciprocal rank",
            "rrf_k": self.rrf_k,
            "bm25_weight": self.bm25_weight,
            "dense_weight": self.dense_weight,
            "depth": self.depth,
            "bm25": self.bm25.describe(),
            "dense": self.dense.describe(),
        }
