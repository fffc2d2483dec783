"""The retriever interface every strategy calls."""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from strategies.records import Passage


class CorpusDoc(Protocol):
    """Anything with an id, a title and a text (``probes.model.Document`` is one)."""

    id: str
    title: str
    text: str


class Retriever(ABC):
    """Top-k search over one corpus. :meth:`search` times the call so strategies never do."""

    name: str = "retriever"

    def search(self, query: str, k: int) -> tuple[list[Passage], float]:
        """Return the top ``k`` passages for ``query`` (best first) and the call's wall time."""
        start = time.perf_counter()
        passages = self._search(query, k)
        return passages, time.perf_counter() - start

    @abstractmethod
    def _search(self, query: str, k: int) -> list[Passage]:
        """Serve one query."""

    def describe(self) -> dict:
        """What identifies this retriever in run.json."""
        return {"name": self.name}


def cache_root() -> Path:
    """Where indexes (and later LM caches) live: ``$FLAREBENCH_CACHE`` or ``~/.cache/flarebench``."""
    root = os.environ.get("FLAREBENCH_CACHE") or Path.home() / ".cache" / "flarebench"
    return Path(root)


def as_passages(docs: Iterable[CorpusDoc]) -> list[Passage]:
    """Copy corpus documents into passages (score 0) so retrievers hold no probe-set types."""
    return [Passage(d.id, d.title, d.text) for d in docs]
