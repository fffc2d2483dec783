"""The retriever interface every strategy calls."""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from flarebench.strategies.records import LMCall, Passage


class CorpusDoc(Protocol):
    """Anything with an id, a title and a text (``flarebench.probes.model.Document`` is one)."""

    id: str
    title: str
    text: str


@dataclass
class Lookup:
    """One search's result: the passages (best first), the search's wall time, whether a cache
    served it, and the LM calls a reranker made to order it (timed on their own)."""

    passages: list[Passage]
    seconds: float
    cached: bool = False
    lm_calls: list[LMCall] = field(default_factory=list)


class Retriever(ABC):
    """Top-k search over one corpus. :meth:`lookup` times the call so strategies never do."""

    name: str = "retriever"

    def lookup(self, query: str, k: int) -> Lookup:
        """The top ``k`` passages for ``query`` (best first), timed."""
        start = time.perf_counter()
        passages = self._search(query, k)
        return Lookup(passages, time.perf_counter() - start)

    def search(self, query: str, k: int) -> tuple[list[Passage], float]:
        """:meth:`lookup` as a (passages, seconds) pair."""
        found = self.lookup(query, k)
        return found.passages, found.seconds

    @abstractmethod
    def _search(self, query: str, k: int) -> list[Passage]:
        """Serve one query."""

    def describe(self) -> dict:
        """What identifies this retriever in run.json."""
        return {"name": self.name}


#: The environment variable naming flarebench's cache folder (:func:`cache_root`).
CACHE_ENV = "FLAREBENCH_CACHE"


def cache_root() -> Path:
    """Where indexes (and later LM caches) live: ``$FLAREBENCH_CACHE`` or ``~/.cache/flarebench``."""
    root = os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "flarebench"
    return Path(root)


def as_passages(docs: Iterable[CorpusDoc]) -> list[Passage]:
    """Copy corpus documents into passages (score 0) so retrievers hold no probe-set types."""
    return [Passage(d.id, d.title, d.text) for d in docs]
