"""``--rerank``: the retriever's top ``depth`` passages reordered by a reranker, and the best k kept.

``--rerank lm`` asks the run's own LM, once per passage, whether the passage answers the query, and
orders by its log-odds of "Yes" over "No" (read from the first token's top logprobs). Those calls are
the strategy's LM calls (purpose ``rerank``), counted in its calls, tokens and LM time like any other,
so what reranking costs shows in the comparison. ``--rerank openai:MODEL`` posts to the ``/rerank``
endpoint of an OpenAI-compatible server (Jina/Cohere shape, as llama.cpp's server, TEI, vLLM and
Infinity serve it); its time is retrieval time. Ties keep the retriever's order.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Protocol

from flarebench.strategies.embeddings import ADDRESS, KEY_OPTION
from flarebench.strategies.lm import LM, EndpointError, KeyRefused, LMError, LMUnavailable, Prompt
from flarebench.strategies.records import LMCall, Passage
from flarebench.strategies.retriever import Lookup, Retriever

RERANK_SPECS = "lm, openai:MODEL"
#: Passages the retriever returns for the reranker to order (the issue's and most stacks' default).
DEPTH = 20
#: The purpose of a reranking call (LMCall.purpose).
RERANK = "rerank"
#: Alternatives read at the reply's first token: "Yes" and "No" are among them for any model that
#: follows the instruction; one that is not scores as the least likely one listed (an upper bound).
TOP = 20
#: Characters of a passage shown to the LM reranker: a short scoring call, as the issue asks.
PASSAGE_CHARS = 1000

INSTRUCTION = (
    "Decide whether the passage answers the query. Reply with Yes or No.\n\n"
    "Passage: Mount Kerrow\nMount Kerrow is 2,114 metres high and lies in the Dunmore range.\n"
    "Query: How high is Mount Kerrow?\nAnswer: Yes\n\n"
    "Passage: River Alde\nThe River Alde flows east into the North Sea.\n"
    "Query: How high is Mount Kerrow?\nAnswer: No\n\n"
)


class Reranker(Protocol):
    """Scores passages for a query (higher is better), with the LM calls that cost."""

    def scores(self, query: str, passages: list[Passage]) -> tuple[list[float], list[LMCall]]: ...

    def describe(self) -> dict: ...


class LMReranker:
    """The run's LM judges each passage: the log-odds of "Yes" against "No" at its reply's first token."""

    def __init__(self, lm: LM):
        if not lm.supports_top_logprobs:
            raise ValueError(f"--rerank lm needs per-token top logprobs, which {lm.name} does not return")
        self.lm = lm

    def scores(self, query: str, passages: list[Passage]) -> tuple[list[float], list[LMCall]]:
        calls = [
            self.lm.generate(
                Prompt(INSTRUCTION, f"Passage: {p.title}\n{p.text[:PASSAGE_CHARS]}\nQuery: {query}\nAnswer:"),
                1,
                top_logprobs=TOP,
                purpose=RERANK,
            )
            for p in passages
        ]
        return [_yes_log_odds(c) for c in calls], calls

    def describe(self) -> dict:
        return {"name": "lm", "score": "log P(Yes) - log P(No) at the first token", "prompt": INSTRUCTION}


def _yes_log_odds(call: LMCall) -> float:
    top = call.top_logprobs[0] if call.top_logprobs else []
    floor = min((lp for _, lp in top), default=-100.0)

    def mass(word: str) -> float:
        found = [lp for text, lp in top if text.strip().lower() == word]
        return math.log(sum(math.exp(lp) for lp in found)) if found else floor

    return mass("yes") - mass("no")


class EndpointReranker:
    """``model`` behind ``POST {base_url}/rerank`` (``{"model", "query", "documents"}`` in,
    ``{"results": [{"index", "relevance_score"}]}`` out), probed once at start."""

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None):
        from flarebench.strategies.openai_lm import endpoint_client

        self.model = model
        self.name = f"openai:{model}"
        # The openai client's timeouts and retries, as for --lm openai.
        self._client, url = endpoint_client(base_url, api_key, option=ADDRESS)
        self.base_url = url.rstrip("/")
        try:
            self._post("capability probe", ["capability probe"])
        except LMUnavailable:  # down: the run stops as for an unreachable LM, naming the address
            raise
        except LMError as e:  # its message names the option already
            raise ValueError(str(e)) from None

    def _post(self, query: str, documents: list[str]) -> list[float]:
        import openai

        try:
            reply = self._client.post(
                "/rerank", cast_to=object, body={"model": self.model, "query": query, "documents": documents}
            )
        except (openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError) as e:
            raise LMUnavailable(f"--rerank {self.name}: {self.base_url} cannot be reached: {e}", ADDRESS) from None
        except openai.APIStatusError as e:
            message = f"--rerank {self.name}: {self.base_url}/rerank answered HTTP {e.status_code}"
            if e.status_code == 401:  # refused for every query to come: the run stops, as for the LM
                raise KeyRefused.answered(message, KEY_OPTION) from None
            # Only an endpoint without /rerank is one --rerank lm stands in for; a refused key is the key's.
            hint = {403: " (check --embed-api-key-env)"}.get(
                e.status_code, " (no /rerank there: use --rerank lm)" if e.status_code in (404, 405) else ""
            )
            raise EndpointError(f"{message}{hint}") from None
        try:
            scores = [0.0] * len(documents)
            for r in reply["results"]:
                scores[int(r["index"])] = float(r["relevance_score"])
        except (TypeError, KeyError, IndexError, ValueError):
            raise EndpointError(
                f"--rerank {self.name}: {self.base_url}/rerank: the reply is not "
                "{'results': [{'index', 'relevance_score'}]}"
            ) from None
        return scores

    def scores(self, query: str, passages: list[Passage]) -> tuple[list[float], list[LMCall]]:
        return self._post(query, [f"{p.title}\n{p.text}" for p in passages]), []

    def describe(self) -> dict:
        return {"name": self.name, "base_url": self.base_url}


def check_rerank(spec: str | None, depth: int | None) -> None:
    """Refuse, building nothing, an unknown ``--rerank`` spec, a ``--rerank-depth`` below 1, and a
    ``--rerank-depth`` without ``--rerank`` (a ValueError, one line)."""
    if spec is None:
        if depth is not None:
            raise ValueError("--rerank-depth only applies to --rerank SPEC")
        return
    if spec != "lm" and not (spec.startswith("openai:") and spec != "openai:"):
        raise ValueError(f"unknown --rerank spec {spec!r}; known: {RERANK_SPECS}")
    if depth is not None and depth < 1:
        raise ValueError(f"--rerank-depth must be >= 1, got {depth}")


class RerankedRetriever(Retriever):
    """``inner``'s top ``depth`` passages for a query, reordered by ``reranker``, best k kept."""

    def __init__(self, inner: Retriever, reranker: Reranker, depth: int = DEPTH):
        if depth < 1:
            raise ValueError(f"--rerank-depth must be >= 1, got {depth}")
        self.inner, self.reranker, self.depth = inner, reranker, depth
        self.name = inner.name

    def lookup(self, query: str, k: int) -> Lookup:
        found = self.inner.lookup(query, max(k, self.depth))
        start = time.perf_counter()
        scores, calls = self.reranker.scores(query, found.passages)
        # The LM reranker's time is its calls' (LM time); an endpoint's is retrieval time.
        seconds = found.seconds + (0.0 if calls else time.perf_counter() - start)
        order = sorted(range(len(scores)), key=lambda i: -scores[i])[:k]
        passages = [replace(found.passages[i], score=scores[i]) for i in order]
        return Lookup(passages, seconds, found.cached, calls)

    def _search(self, query: str, k: int) -> list[Passage]:
        return self.lookup(query, k).passages

    def describe(self) -> dict:
        return {**self.inner.describe(), "rerank": {**self.reranker.describe(), "depth": self.depth}}
