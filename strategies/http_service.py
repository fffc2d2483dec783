"""``http``: a deployed pipeline behind an HTTP endpoint, benchmarked as one more strategy.

``--strategy http:url=URL`` POSTs each question to URL as the JSON object ``{"question": ...}`` and
reads a JSON object back (every field optional, but one of ``answer`` and ``output`` is needed)::

    {"answer": "Rosa Tull",                               # the final answer
     "output": "... So the answer is Rosa Tull.",         # the whole answer text
     "retrievals": [{"query": "...", "doc_ids": ["d1"]}],  # every retrieval, in order
     "usage": {"lm_calls": 2, "prompt_tokens": 812, "completion_tokens": 40}}

The trace holds what the service reported and nothing made up: its answer (read from its output,
as for every strategy, when it states none), its retrievals (reason ``service``, untimed), and
its usage in :class:`~flarebench.strategies.records.ServiceReport`. What it does not report is
missing in the summary, never 0 (docs/strategies.md, http). Latency is the runner's end-to-end
time of the probe: the request, the service's whole work and the reply.

The service is the system under test, so this strategy does network I/O by nature; it prints
nothing, times nothing, and calls neither the run's LM nor its retriever. Failures are handled as
``--lm openai`` handles them, by the client it shares with the ``http`` retriever
(:mod:`flarebench.strategies.http_client`): ``timeout`` seconds per request and up to ``retries``
more tries, with exponential backoff, after a connection error, a timeout or HTTP 408, 409, 429 or
5xx. Another 4xx, a 5xx other than 502/503/504 after the retries, and a reply that is not the
JSON above raise :class:`ServiceError` (the runner records it as that probe's error); a service
still unreachable, timing out or answering 429/502/503/504 after the retries raises
:class:`ServiceUnavailable`, which stops the run as an unreachable LM does (the same command
resumes it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from flarebench.strategies.base import Strategy
from flarebench.strategies.http_client import JSONEndpoint, is_http_url, port_problem, redact_url
from flarebench.strategies.http_client import ServiceError as ServiceError  # re-exported: this strategy's errors
from flarebench.strategies.http_client import ServiceUnavailable as ServiceUnavailable
from flarebench.strategies.lm import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, LM
from flarebench.strategies.prompts import extract_answer
from flarebench.strategies.records import SERVICE, USAGE_KEYS, Retrieval, ServiceReport, Step, Trace
from flarebench.strategies.registry import register
from flarebench.strategies.retriever import Retriever


@register("http")
@dataclass
class HTTPService(Strategy):
    """POST ``{"question": ...}`` to ``url`` and record the reply (module docstring). ``k``,
    ``max_tokens`` and ``answer_form`` are accepted, as by every strategy, and not sent: the
    service answers as it is deployed."""

    #: The endpoint each question is POSTed to (required).
    url: str = ""
    #: Seconds per request.
    timeout: float = DEFAULT_TIMEOUT
    #: Tries after the first, on a transient failure.
    retries: int = DEFAULT_MAX_RETRIES

    def __post_init__(self) -> None:
        super().__post_init__()
        self._endpoint = JSONEndpoint(self.url, self.timeout, self.retries)

    def validate(self) -> None:
        super().validate()
        if not self.url:
            raise ValueError("needs url=URL, the endpoint each question is POSTed to (http:url=http://HOST:PORT/PATH)")
        if not is_http_url(self.url):
            raise ValueError(f"url must be an http:// or https:// URL, got {redact_url(self.url)!r}")
        if problem := port_problem(self.url):
            raise ValueError(f"url {problem}")
        if redact_url(self.url) != self.url:
            raise ValueError(
                "url holds credentials, a key-like query parameter or a fragment, which run.json and every trace "
                "would record; remove them (the service can read its key from its own environment)"
            )
        if not 0 < self.timeout < math.inf:
            raise ValueError(f"timeout must be a finite number > 0 seconds, got {self.timeout}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, got {self.retries}")

    def static_prompts(self) -> tuple[str, ...]:
        return ()  # no prompt: the service builds its own

    def request_shape(self) -> dict[str, Any]:
        return {"post": {"question": "<question>"}}

    def run(self, question: str, lm: LM, retriever: Retriever) -> Trace:
        return read_reply(question, self._endpoint.post({"question": question}), self._endpoint)


def read_reply(question: str, data: Any, endpoint: JSONEndpoint) -> Trace:
    """The trace of the service's reply ``data`` (decoded JSON); a ServiceError naming the field
    that is not as the module docstring says."""
    fields = _Fields(data, endpoint)
    answer = fields.get("answer", str)
    output = fields.get("output", str)
    if answer is None and output is None:
        raise fields.error("", "an object with answer or output")
    text = output if output is not None else answer
    stated = answer.strip() if answer is not None and answer.strip() else None
    final = stated if stated is not None else extract_answer(text)
    listed = fields.get("retrievals", list)
    retrievals = [fields.retrieval(i, item) for i, item in enumerate(listed or [])]
    usage = fields.get("usage", dict)
    report = ServiceReport(
        stated_answer=stated is not None,
        listed_retrievals=listed is not None,
        usage=None if usage is None else fields.usage(usage),
    )
    stop = "answer" if final else "eos"
    return Trace(question, text, final, stop, steps=[Step(text, [], retrievals)], service=report)


class _Fields:
    """Reads the reply's fields, each checked; absent and null are the same: not reported."""

    def __init__(self, data: Any, endpoint: JSONEndpoint):
        self.data, self.error = data, endpoint.malformed
        if not isinstance(data, dict):
            raise self.error("", "a JSON object", data)

    def get(self, key: str, kind: type) -> Any:
        value = self.data.get(key)
        if value is not None and not isinstance(value, kind):
            raise self.error(key, {str: "a string", list: "a list", dict: "an object"}[kind] + " or null", value)
        return value

    def retrieval(self, i: int, item: Any) -> Retrieval:
        field = f"retrievals[{i}]"
        if not isinstance(item, dict):
            raise self.error(field, 'an object {"query", "doc_ids"}', item)
        query, ids = item.get("query"), item.get("doc_ids")
        if not isinstance(query, str):
            raise self.error(f"{field}.query", "a string", query)
        if not isinstance(ids, list) or not all(isinstance(d, str) for d in ids):
            raise self.error(f"{field}.doc_ids", "a list of strings (ids of the probe set's corpus)", ids)
        return Retrieval(query=query, reason=SERVICE, doc_ids=ids, seconds=None)

    def usage(self, usage: dict) -> dict[str, int]:
        out = {}
        for key in USAGE_KEYS:
            value = usage.get(key)
            if value is None:
                continue  # not reported: missing in the summary
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise self.error(f"usage.{key}", "an integer >= 0 or null", value)
            out[key] = value
        return out
