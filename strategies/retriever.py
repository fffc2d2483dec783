"""The retriever interface every strategy calls."""

from __future__ import annotations

import functools
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

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


class RetrieverError(RuntimeError):
    """A retriever's search returned what a search may not: more than k passages, one passage
    twice, or something other than a list of :class:`Passage` (that probe's error)."""


class Retriever(ABC):
    """Top-k search over one corpus. :meth:`lookup` times the call so strategies never do, and
    checks what it found (:func:`check_lookup`), also where a subclass overrides it (a reranker, the
    cache)."""

    name: str = "retriever"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("lookup")
        if own is not None:  # a lookup of its own is checked as the one below is
            cls.lookup = _checked(own)

    def lookup(self, query: str, k: int) -> Lookup:
        """The top ``k`` passages for ``query`` (best first), timed; a RetrieverError when
        :meth:`_search` returns what a search may not (see :func:`check_lookup`)."""
        start = time.perf_counter()
        passages = self._search(query, k)
        found = Lookup(passages, time.perf_counter() - start)
        check_lookup(self, found, k)
        return found

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


def _checked(lookup: Callable[[Retriever, str, int], Lookup]) -> Callable[[Retriever, str, int], Lookup]:
    """A subclass's own ``lookup``, its result checked (:func:`check_lookup`)."""

    @functools.wraps(lookup)
    def checked(self: Retriever, query: str, k: int) -> Lookup:
        found = lookup(self, query, k)
        check_lookup(self, found, k)
        return found

    return checked


def check_lookup(retriever: Retriever, found: object, k: int) -> None:
    """Refuse (RetrieverError naming ``retriever``) a search's result that is not a Lookup of at
    most ``k`` :class:`Passage` with distinct string ids: extra or repeated passages would count as
    retrieved documents, inflating recall and the prompt past the k every strategy is compared at."""
    if not isinstance(found, Lookup):
        raise RetrieverError(f"retriever {retriever.name}: lookup returned {type(found).__name__}, not a Lookup")
    contract = f"retriever {retriever.name}: a search returns a list of at most k Passage objects with distinct ids"
    passages = found.passages
    if not isinstance(passages, list):
        raise RetrieverError(f"{contract}; returned {type(passages).__name__}")
    seen: set[str] = set()
    for p in passages:
        if not isinstance(p, Passage):
            raise RetrieverError(f"{contract}; returned a list holding {type(p).__name__}")
        if not isinstance(p.id, str):
            raise RetrieverError(f"{contract}; returned a Passage whose id is {type(p.id).__name__}, not str")
        if p.id in seen:
            raise RetrieverError(f"{contract}; returned {p.id!r} twice")
        seen.add(p.id)
    if len(passages) > k:
        raise RetrieverError(f"{contract}; returned {len(passages)} for k={k}")


#: The environment variable naming flarebench's cache folder (:func:`cache_root`).
CACHE_ENV = "FLAREBENCH_CACHE"


def cache_root() -> Path:
    """Where indexes (and later LM caches) live: ``$FLAREBENCH_CACHE`` or ``~/.cache/flarebench``."""
    root = os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "flarebench"
    return Path(root)


def as_passages(docs: Iterable[CorpusDoc]) -> list[Passage]:
    """Copy corpus documents into passages (score 0) so retrievers hold no probe-set types."""
    return [Passage(d.id, d.title, d.text) for d in docs]
