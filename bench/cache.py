"""``--cache [DIR]``: LM calls and retrievals served from disk when everything that determines them
is the same, so a re-run costs lookups instead of model time.

Off by default, so measured latency is real. A hit is recorded as one (``LMCall.cached``,
``Retrieval.cached``) with the lookup's own wall time; the summary reports cold and warm probes
apart. The key of an LM call is the backend's ``describe()`` (model file and its sha256, decoding
settings, or endpoint and model) and the flarebench version, plus the whole request (prompt, token cap, stop sequences,
logprobs, logit bias, the one-sentence hint, and the per-token alternatives and entropies a trigger
asks for, which enter the key only when asked: other requests keep their keys); the key of a
retrieval is the retriever's ``describe()`` (parameters and corpus hash) plus the query and k. One
SQLite file holds both.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from flarebench.bench import version
from flarebench.bench.paths import StorageFailed
from flarebench.strategies.lm import LM, WARM_UP, ChatRequest, GenerationRequest, WrappedLM
from flarebench.strategies.records import LMCall, Passage, call_from_dict
from flarebench.strategies.retriever import Lookup, Retriever, cache_root

CACHE_FILE = "calls.sqlite"


def default_dir() -> Path:
    """Where ``--cache`` with no folder keeps its file: ``<flarebench cache>/calls``."""
    return cache_root() / "calls"


def _key(kind: str, identity: str, request: dict) -> str:
    return hashlib.sha256(json.dumps([kind, identity, request], sort_keys=True).encode()).hexdigest()


def _hit(stored: LMCall, purpose: str) -> LMCall:
    """A stored call served again: marked cached, nothing evaluated, and no prefill observed (the
    lookup's time, filled in by the caller, is all it took)."""
    return dataclasses.replace(stored, purpose=purpose, evaluated_tokens=0, cached=True, prefill_seconds=None)


T = TypeVar("T")


class DiskCache:
    """A key -> JSON value store in one SQLite file, safe to share between threads (concurrent probes)."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.path = self.folder / CACHE_FILE
        self._lock = threading.Lock()
        # A cache that exists is opened (and checked) now; a new one is made at its first entry, so a
        # run refused before its first call (another configuration's folder) leaves nothing behind.
        self._db = self._open() if self.path.exists() or self.path.is_symlink() else None

    def _open(self) -> sqlite3.Connection:
        try:  # checked before the run (bench/paths.py), but a place can still refuse (/proc as root)
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ValueError(f"--cache {self.folder}: cannot be created ({e.strerror or e})") from None
        # Autocommit: every entry is on disk as soon as it is written, so an interrupted run keeps it.
        db = None
        existed = self.path.exists()
        if existed and not os.access(self.path, os.W_OK):  # read-only: each call it misses would fail
            raise ValueError(f"--cache {self.folder}: {self.path} is read-only (a run writes the calls it makes)")
        try:  # a damaged file, a folder in its place or another program's database: refused before the run
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            db.execute("SELECT key, value FROM entries LIMIT 0")
        except sqlite3.Error as e:
            if db is not None:
                db.close()
            what = "is not a flarebench cache" if existed else "cannot be created"  # a new file: a full disk
            raise ValueError(f"--cache {self.folder}: {self.path} {what} ({e})") from None
        return db

    def get(self, key: str, build: Callable[[dict], T]) -> T | None:
        """The entry under ``key`` built by ``build``, or None when there is none, or when it cannot
        be read back (damaged, or written by another program): a miss, made again and replaced."""
        with self._lock:
            if self._db is None:
                return None
            row = self._db.execute("SELECT value FROM entries WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            return build(json.loads(row[0]))
        except (ValueError, TypeError, KeyError, AttributeError):
            return None

    def put(self, key: str, value: dict) -> None:
        """Store ``value`` under ``key``; a cache that cannot take it (a full disk, a read-only file)
        stops the run (StorageFailed) rather than fail each probe left the same way."""
        with self._lock:
            try:
                if self._db is None:
                    self._db = self._open()
                self._db.execute("INSERT OR REPLACE INTO entries VALUES (?, ?)", (key, json.dumps(value)))
            except sqlite3.Error as e:
                raise StorageFailed.writing(self.path, e) from None
            except ValueError as e:  # made at its first entry (see __init__), mid-run
                raise StorageFailed(str(e)) from None

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()


class CachedLM(WrappedLM):
    """An LM whose calls are looked up in a :class:`DiskCache` first. A hit returns the stored call
    marked ``cached``, with 0 evaluated tokens (nothing ran) and the lookup's wall time. Warm-up
    calls always reach the model: they ready it (a static prefix's state) for the calls after them,
    and served from the cache, the first call the cache misses would evaluate that prefix inside a
    probe's latency."""

    def __init__(self, inner: LM, cache: DiskCache):
        super().__init__(inner)
        self.cache = cache
        # The model and its decoding settings, and the version of the code that shapes its requests.
        self._identity = json.dumps({"lm": inner.describe(), "flarebench": version()}, sort_keys=True)

    def _complete(self, request: GenerationRequest) -> LMCall:
        if request.purpose == WARM_UP:
            return self.forward(request)
        fields = dataclasses.asdict(request)
        fields.pop("purpose")  # what the call is for changes nothing in what comes back
        fields["prompt"] = request.prompt.text
        for name, default in (("top_logprobs", 0), ("entropy", False)):
            if fields[name] == default:  # keys made before these fields existed stay valid
                del fields[name]
        key = _key("lm", self._identity, fields)
        stored = self.cache.get(key, call_from_dict)
        if stored is not None:
            return _hit(stored, request.purpose)
        call = self.forward(request)
        self.cache.put(key, dataclasses.asdict(call))
        return call

    def _chat(self, request: ChatRequest) -> LMCall:
        """A chat turn (tool_search), keyed by its messages, tools and cap as a call by its prompt."""
        if request.purpose == WARM_UP:
            return super()._chat(request)
        fields = {"messages": request.messages, "tools": request.tools, "max_tokens": request.max_tokens}
        key = _key("chat", self._identity, fields)
        stored = self.cache.get(key, call_from_dict)
        if stored is not None:
            return _hit(stored, request.purpose)
        call = super()._chat(request)
        self.cache.put(key, dataclasses.asdict(call))
        return call


class CachedRetriever(Retriever):
    """A retriever whose searches are looked up in a :class:`DiskCache` first; a hit is marked
    ``cached`` and timed as the lookup it was."""

    def __init__(self, inner: Retriever, cache: DiskCache):
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self._identity = json.dumps(inner.describe(), sort_keys=True)

    def lookup(self, query: str, k: int) -> Lookup:
        start = time.perf_counter()
        key = _key("retrieval", self._identity, {"query": query, "k": k})
        passages = self.cache.get(key, lambda d: [Passage(**p) for p in d["passages"]])
        if passages is not None:
            return Lookup(passages, time.perf_counter() - start, cached=True)
        found = self.inner.lookup(query, k)
        self.cache.put(key, {"passages": [dataclasses.asdict(p) for p in found.passages]})
        return found

    def _search(self, query: str, k: int) -> list[Passage]:
        return self.lookup(query, k).passages

    def describe(self) -> dict:
        return self.inner.describe()
