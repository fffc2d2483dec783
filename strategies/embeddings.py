"""Text embeddings from any OpenAI-compatible ``/embeddings`` endpoint (``--embed openai:MODEL``).

Vectors come back L2-normalised, so that a dot product is a cosine. Some servers return one vector
per token instead of one per text (``python -m llama_cpp.server --embedding true`` does, for a model
without a pooling layer such as SmolLM2): those are mean-pooled here, and :meth:`describe` says so.
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np

from flarebench.strategies.lm import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    UNAVAILABLE_STATUS,
    EndpointError,
    KeyRefused,
    LMUnavailable,
)

#: The option that names the embeddings server, said when it cannot be reached.
ADDRESS = "--embed-base-url"
#: The option that names its key's variable, said when the key is refused.
KEY_OPTION = "--embed-api-key-env"

EMBED_SPECS = "openai:MODEL"
#: A fixed text embedded once at start: its vector identifies the model that serves the name (a local
#: server answers to any model name), so cached corpus vectors are never reused across models.
CANARY = "flarebench embedding fingerprint: the quick brown fox jumps over the lazy dog."


class OpenAIEmbedder:
    """``model`` on the endpoint at ``base_url`` (else ``$OPENAI_BASE_URL``), the key in ``api_key``
    (a local server needs none). :attr:`fingerprint` identifies the served model by its vectors."""

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ):
        from flarebench.strategies.openai_lm import endpoint_client

        self.model = model
        self.name = f"openai:{model}"
        self._client, url = endpoint_client(base_url, api_key, timeout, max_retries, ADDRESS)
        self.base_url = url.rstrip("/")
        self.pooling = "server"
        self.dim: int | None = None  # set from the canary's vector: every later one must match it
        canary = self.embed([CANARY])[0]
        self.dim = int(canary.shape[0])
        self.fingerprint = hashlib.sha256(np.round(canary, 3).tobytes()).hexdigest()[:16]

    def embed(self, texts: list[str]) -> np.ndarray:
        """One request: a (len(texts), dim) float32 array of unit vectors, in the order given. A reply
        that is not one vector of finite numbers per text, all as long as the canary's and none all
        zeros, raises :class:`EndpointError` naming the endpoint, as a malformed LM reply does."""
        import openai

        try:
            reply = self._client.embeddings.with_raw_response.create(
                model=self.model, input=texts, encoding_format="float"
            )
        except (openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError) as e:
            raise LMUnavailable(f"--embed {self.name}: {self.base_url} cannot be reached: {e}", ADDRESS) from None
        except openai.APIStatusError as e:
            from flarebench.strategies.openai_lm import status_message

            message = f"--embed {self.name}: {self.base_url}/embeddings answered {e.status_code}: {status_message(e)}"
            if e.status_code in UNAVAILABLE_STATUS:  # overloaded or down after the retries, as an LM server
                raise LMUnavailable(message, ADDRESS) from None
            if e.status_code == 401:
                raise KeyRefused.answered(message, KEY_OPTION) from None
            raise EndpointError(message) from None
        from flarebench.strategies.openai_lm import _short

        try:
            data = json.loads(reply.text)
        except ValueError:
            raise self._bad(f"is not JSON: {_short(reply.text)!r}") from None
        rows = data.get("data") if isinstance(data, dict) else None
        if not isinstance(rows, list):
            raise self._bad(f'is not an object holding a "data" list: {_short(reply.text)!r}')
        if len(rows) != len(texts):
            raise self._bad(f"holds {len(rows)} vectors for {len(texts)} texts")
        vectors: list[np.ndarray | None] = [None] * len(texts)
        for i, row in enumerate(rows):
            index = row.get("index") if isinstance(row, dict) else None
            if not isinstance(index, int) or not 0 <= index < len(texts) or vectors[index] is not None:
                raise self._bad(f"has data[{i}] without an index of its own in 0..{len(texts) - 1}")
            vectors[index] = self._one(row.get("embedding"), i)
        dims = {v.shape[0] for v in vectors}
        if len(dims) > 1:
            raise self._bad(f"has vectors of different lengths ({min(dims)} to {max(dims)} numbers)")
        if self.dim is not None and dims != {self.dim}:
            raise self._bad(f"has vectors of {dims.pop()} numbers, where the first reply's had {self.dim}")
        return np.stack(vectors)

    def _one(self, embedding, i: int) -> np.ndarray:
        """The unit vector of ``data[i]``'s embedding."""
        try:
            vec = np.asarray(embedding, dtype=np.float32)
        except (TypeError, ValueError):  # text, or lists of different lengths
            vec = np.empty(0, dtype=np.float32)
        if vec.ndim not in (1, 2) or vec.size == 0:
            raise self._bad(f'has data[{i}] without an "embedding" list of numbers')
        if vec.ndim == 2:  # one vector per token: mean-pool them
            self.pooling = "mean of the per-token vectors the server returned"
            vec = vec.mean(axis=0)
        if not np.isfinite(vec).all():
            raise self._bad(f"has a number that is not finite in data[{i}]")
        norm = float(np.linalg.norm(vec.astype(np.float64)))  # float32 could overflow the sum of squares
        if norm == 0:
            # Every passage would score 0 against it, and the ranking be the corpus's order.
            raise self._bad(f"has an all-zero vector in data[{i}], which ranks nothing")
        return (vec / norm).astype(np.float32)

    def _bad(self, problem: str) -> EndpointError:
        """The one line refusing a reply that is no embeddings reply, naming the option that set the endpoint."""
        return EndpointError(
            f"--embed {self.name}: the reply of --embed-base-url {self.base_url} to /embeddings {problem}"
        )

    def describe(self) -> dict:
        """What identifies the embeddings in run.json (never the key)."""
        return {
            "name": self.name,
            "base_url": self.base_url,
            "dim": self.dim,
            "pooling": self.pooling,
            "fingerprint": self.fingerprint,
        }


def make_embedder(spec: str, base_url: str | None = None, api_key_env: str | None = None) -> OpenAIEmbedder:
    """``openai:MODEL`` on ``base_url``, the key in the environment variable ``api_key_env``."""
    kind, _, model = spec.partition(":")
    if kind != "openai" or not model:
        raise ValueError(f"unknown --embed spec {spec!r}; known: {EMBED_SPECS}")
    return OpenAIEmbedder(model, base_url=base_url, api_key=endpoint_key(api_key_env))


def endpoint_key(api_key_env: str | None) -> str | None:
    """The key of the --embed/--rerank endpoint, from the variable ``api_key_env`` names (None:
    the client's default); a ValueError when that variable is not set."""
    if not api_key_env:
        return None
    key = os.environ.get(api_key_env)
    if not key:
        raise ValueError(f"--embed-api-key-env {api_key_env}: the environment variable {api_key_env} is not set")
    return key
