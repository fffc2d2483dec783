"""How a run's LM and retriever are built, as a picklable value: the session builds its backends
from it, and every worker of ``--executor ray`` builds its own from the same recipe (a loaded
model or an open connection cannot be sent to another process; the recipe can)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from flarebench.strategies import plugins
from flarebench.strategies.backends import RETRIEVER_PARAMS, check_retriever, make_lm, make_retriever, retriever_params
from flarebench.strategies.lm import LM
from flarebench.strategies.retriever import CorpusDoc, Retriever


@dataclass
class Backends:
    """What a recipe builds: the LM and the retriever, wrapped as the options ask, the on-disk
    cache they share (or None), and what an LM endpoint offers (one line; None in-process)."""

    lm: LM
    retriever: Retriever
    cache: Any = None
    capabilities: str | None = None

    def close(self) -> None:
        """Close the LM and the cache (safe to call twice). A plugin LM whose close() raises is said
        in one line: the run it served is written and complete."""
        try:
            self.lm.close()
        except Exception as e:  # noqa: BLE001 (a plugin's bug, after every result was written)
            print(f"flarebench: warning: LM {self.lm.name}: close() raised {type(e).__name__}: {e}", file=sys.stderr)
        finally:
            if self.cache is not None:
                self.cache.close()


@dataclass(frozen=True)
class BackendRecipe:
    """The options that build the backends (their meaning is in :mod:`flarebench.bench.options`),
    the corpus the retriever indexes, and ``lm_threads``: the in-process model's threads (None:
    its default threads). Keys are named by their environment variable, never held."""

    lm: str
    retriever: str
    corpus: tuple[CorpusDoc, ...]
    lm_base_url: str | None = None
    lm_api_key_env: str | None = None
    lm_timeout: float | None = None
    lm_retries: int | None = None
    lm_threads: int | None = None
    retriever_timeout: float | None = None
    retriever_retries: int | None = None
    embed: str | None = None
    embed_base_url: str | None = None
    embed_api_key_env: str | None = None
    rerank: str | None = None
    rerank_depth: int | None = None
    cache: str | None = None
    record_topk: int | None = None
    plugins: tuple[str, ...] = ()

    def build(self, progress: bool = False, lm_weights: bool = True) -> Backends:
        """Load the LM, the retriever and the cache. A mistake in the options raises ValueError or
        LMError in one line; an unreachable endpoint raises LMUnavailable. ``progress`` shows the
        corpus's embedding run; ``lm_weights=False`` defers an in-process model's weights to its
        first call (see :class:`~flarebench.strategies.llamacpp.LlamaCppLM`)."""
        from flarebench.strategies.http_client import key_variable

        plugins.load_all(self.plugins)
        # In every process that builds backends (a Ray worker too): their errors never show these keys.
        key_variable(self.lm_api_key_env)
        key_variable(self.embed_api_key_env)
        self.check()
        lm = make_lm(
            self.lm, self.lm_base_url, self.lm_api_key_env, self.lm_timeout, self.lm_retries, self.lm_threads,
            weights=lm_weights,
        )  # fmt: skip
        backends = Backends(lm, None, capabilities=getattr(lm, "capabilities_line", lambda: None)())
        try:
            self._finish(backends, progress)
        except BaseException:
            backends.close()
            raise
        return backends

    def check(self) -> None:
        """The retriever and reranking options, refused in one line (a ValueError) before an LM
        endpoint is asked anything or a model is loaded."""
        from flarebench.strategies.rerank import check_rerank

        check_retriever(self.retriever, self.retriever_timeout, self.retriever_retries)
        check_rerank(self.rerank, self.rerank_depth)

    def _finish(self, backends: Backends, progress: bool) -> None:
        backends.retriever = make_retriever(
            self.retriever,
            list(self.corpus),
            self._embedder(),
            progress=progress,
            timeout=self.retriever_timeout,
            retries=self.retriever_retries,
        )
        if self.cache:
            from flarebench.bench.cache import CachedLM, CachedRetriever, DiskCache, default_dir

            backends.cache = DiskCache(default_dir() if self.cache == "default" else self.cache)
            backends.lm = CachedLM(backends.lm, backends.cache)
            backends.retriever = CachedRetriever(backends.retriever, backends.cache)
        if self.rerank:
            # Outside the cache: the reranker's LM calls are cached (and counted) as LM calls.
            backends.retriever = self._reranked(backends.retriever, backends.lm)
        if self.record_topk is not None:
            from flarebench.bench.topk import RecordTopK

            if not backends.lm.supports_top_logprobs:
                raise ValueError(
                    f"--record-topk needs per-token top logprobs, which {backends.lm.name} does not return"
                )
            # Outside the cache: a draft's cache key is that of the widened request.
            backends.lm = RecordTopK(backends.lm, self.record_topk)

    def _embedder(self):
        """The --embed model, for --retriever dense or hybrid (None without --embed)."""
        if self.retriever.partition(":")[0] in RETRIEVER_PARAMS:
            retriever_params(self.retriever)  # a bad parameter is refused before the endpoint is called
        if not self.embed:
            if self.embed_base_url or self.embed_api_key_env:
                if not (self.rerank or "").startswith("openai:"):
                    raise ValueError("--embed-base-url and --embed-api-key-env need --embed or --rerank openai:MODEL")
            return None
        if self.retriever.partition(":")[0] not in RETRIEVER_PARAMS:
            raise ValueError(f"--embed only applies to --retriever dense or hybrid, not {self.retriever}")
        from flarebench.strategies.embeddings import make_embedder

        return make_embedder(self.embed, self.embed_base_url, self.embed_api_key_env)

    def _reranked(self, inner: Retriever, lm: LM) -> Retriever:
        """``inner`` behind the --rerank reranker, probed (an endpoint's /rerank) before the run."""
        from flarebench.strategies.rerank import DEPTH, EndpointReranker, LMReranker, RerankedRetriever

        depth = DEPTH if self.rerank_depth is None else self.rerank_depth
        if self.rerank == "lm":
            reranker = LMReranker(lm)
        else:  # openai:MODEL (check() refused any other spec)
            from flarebench.strategies.embeddings import endpoint_key

            key = endpoint_key(self.embed_api_key_env)
            reranker = EndpointReranker(self.rerank.partition(":")[2], self.embed_base_url, key)
        return RerankedRetriever(inner, reranker, depth)
