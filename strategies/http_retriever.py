"""``--retriever http:URL``: searches served by a search service of your own over HTTP.

For each search, the JSON object ``{"query": ..., "k": ...}`` is POSTed to URL (an ``http://`` or
``https://`` URL: ``--retriever http:http://127.0.0.1:8080/search``), and a JSON list comes back,
best first::

    [{"id": "d1", "title": "Bea Tull", "text": "Bea Tull is ...", "score": 12.5}, ...]

``id`` (a non-empty string, each listed once) and ``text`` (a string) are required in each item; ``title`` (a string,
default "") and ``score`` (a number, default 0.0) may be absent or null. The first ``k`` items are
kept, in the service's order, and only they are read. The service holds its own index: of the probe
set's corpus only the ids are used, since recall compares the ids found with the probes' gold ids
and faithfulness reads the passages by id. An id that is not one of the corpus's is that probe's
error, so a service indexed under other ids fails loudly instead of scoring 0.

Timeouts, retries and errors are those of ``--lm openai`` and the ``http`` strategy
(:mod:`flarebench.strategies.http_client`): by default 300 s per request and 4 retries with
backoff, set by ``--retriever-timeout`` and ``--retriever-retries``. A
failed search (another 4xx, a reply that is not the list above) is that probe's error; a service
still unreachable after the retries stops the run, resumable. Credentials and key-like query
parameters of the URL (``?api_key=...``) are sent, and redacted in run.json and every message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from flarebench.strategies.http_client import JSONEndpoint, is_http_url, port_problem, redact_url, short
from flarebench.strategies.lm import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT
from flarebench.strategies.records import Passage
from flarebench.strategies.retriever import CorpusDoc, Retriever

ITEM = 'an object {"id", "text", "title", "score"}'


class HttpRetriever(Retriever):
    """POST ``{"query", "k"}`` to ``url`` and read the passages back (module docstring)."""

    name = "http"

    def __init__(
        self,
        url: str,
        corpus: Iterable[CorpusDoc],
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_MAX_RETRIES,
    ):
        self.url = url
        self._ids = frozenset(d.id for d in corpus)
        self._endpoint = JSONEndpoint(url, timeout, retries, what="the search service")

    @classmethod
    def from_spec(
        cls, spec: str, corpus: Iterable[CorpusDoc], timeout: float | None = None, retries: int | None = None
    ) -> HttpRetriever:
        """The retriever of ``--retriever http:URL`` (``timeout`` and ``retries``: else the defaults);
        a ValueError naming the option for another URL."""
        url = spec.partition(":")[2]
        if not is_http_url(url):
            raise ValueError(
                "--retriever http:URL needs an http:// or https:// URL "
                f"(http:http://HOST:PORT/PATH), got {redact_url(url)!r}"
            )
        if problem := port_problem(url):
            raise ValueError(f"--retriever http:URL: {problem}")
        return cls(
            url,
            corpus,
            DEFAULT_TIMEOUT if timeout is None else timeout,
            DEFAULT_MAX_RETRIES if retries is None else retries,
        )

    def _search(self, query: str, k: int) -> list[Passage]:
        data = self._endpoint.post({"query": query, "k": k})
        if not isinstance(data, list):
            raise self._endpoint.malformed("", f"a JSON list of {ITEM}", data)
        passages = [self._passage(i, item) for i, item in enumerate(data[:k])]
        seen: dict[str, int] = {}
        for i, p in enumerate(passages):
            if p.id in seen:  # a search lists each document once: a repeat would fill k with one passage
                raise self._endpoint.error(
                    f"returned [{i}].id {short(json.dumps(p.id))} twice (also [{seen[p.id]}]); "
                    "a document is listed once"
                )
            seen[p.id] = i
        return passages

    def _passage(self, i: int, item: Any) -> Passage:
        """Item ``i`` of the reply as a passage; a ServiceError naming the field that is not as the
        module docstring says."""
        malformed = self._endpoint.malformed
        if not isinstance(item, dict):
            raise malformed(f"[{i}]", ITEM, item)
        doc_id, text, title, score = (item.get(key) for key in ("id", "text", "title", "score"))
        if not isinstance(doc_id, str) or not doc_id:
            raise malformed(f"[{i}].id", "a non-empty string (a doc id of the probe set's corpus)", doc_id)
        if doc_id not in self._ids:
            raise self._endpoint.error(
                f"returned [{i}].id {short(json.dumps(doc_id))}, which is not a doc id of the probe set's corpus "
                "(the service must index the corpus under its ids)"
            )
        if not isinstance(text, str):
            raise malformed(f"[{i}].text", "a string", text)
        if title is not None and not isinstance(title, str):
            raise malformed(f"[{i}].title", "a string or null", title)
        if score is not None and (not isinstance(score, int | float) or isinstance(score, bool)):
            raise malformed(f"[{i}].score", "a number or null", score)
        return Passage(doc_id, title or "", text, 0.0 if score is None else float(score))

    def describe(self) -> dict:
        return {"name": self.name, "url": redact_url(self.url)}
