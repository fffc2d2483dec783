"""JSON over HTTP POST with the timeouts, retries and errors of ``--lm openai``: the one transport of
the ``http`` strategy (:mod:`flarebench.strategies.http_service`) and the ``http`` retriever
(:mod:`flarebench.strategies.http_retriever`).

:meth:`JSONEndpoint.post` sends a JSON body and decodes the JSON reply. It waits ``timeout`` seconds
per request and tries up to ``retries`` more times, with exponential backoff and jitter, after a
connection error, a timeout or HTTP 408, 409, 429 or 5xx. Another 4xx, a 5xx other than
502/503/504 after the retries, and a reply that is not JSON raise :class:`ServiceError` (the runner
records it as that probe's error); a service still unreachable, timing out or answering
429/502/503/504 after the retries raises :class:`ServiceUnavailable`, which stops the run as an
unreachable LM does (the same command resumes it).

Every message names the endpoint by :func:`redact_url`: credentials in the URL and the values of
query parameters that look like keys (``api_key=``, ``token=``, ...) are replaced by ``***``, in the
URL and wherever else they appear in the message (a reply that echoes the request, say).
"""

from __future__ import annotations

import json
import os
import random
import re
import threading
import time
import urllib.parse
from typing import TYPE_CHECKING, Any

from flarebench.strategies.lm import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, UNAVAILABLE_STATUS, LMUnavailable

if TYPE_CHECKING:
    import httpx

#: Statuses tried again (with 5xx), as the openai client does.
RETRY_STATUS = frozenset({408, 409, 429})
#: Backoff before the n-th retry: BACKOFF_S * 2**(n-1), at most BACKOFF_MAX_S, less up to a quarter
#: (jitter): 0.5, 1, 2, 4 s, as the openai client waits.
BACKOFF_S = 0.5
BACKOFF_MAX_S = 8.0
#: Query parameter names whose values are redacted: any name containing one of these.
SECRET_PARAM = re.compile(r"key|token|secret|passw|auth|sig|credential", re.IGNORECASE)
REDACTED = "***"
#: A URL inside a text (:func:`redact_urls`): it ends at whitespace, a quote or a comma, and not on
#: a colon (``SPEC: message``: the colon is the message's).
URL = re.compile(r"https?://[^\s'\",]*[^\s'\",:]")
#: A query parameter inside a text, also of a URL whose scheme is mistyped (``https//h/x?api_key=...``).
PARAM = re.compile(r"([?&])([^=&\s'\",?#]+)=((?:[^&\s'\",#]*[^&\s'\",#:])?)")
#: Secrets shorter than this are redacted in the URL only: replacing them everywhere in a message
#: would mangle it.
MIN_SECRET = 4
#: The shortest value of a key-like environment variable that is redacted in error texts (shorter
#: ones, a "1" or "yes", would blank out unrelated words).
MIN_ENV_SECRET = 8


class ServiceError(RuntimeError):
    """The service's reply to one request is unusable (an HTTP error, or not the JSON expected):
    that probe's error, naming the URL and the field."""


class ServiceUnavailable(LMUnavailable):
    """The service cannot be reached, keeps timing out, or stays overloaded after the retries: the
    run stops (a kind of :class:`LMUnavailable`, which the runner and the entry points stop on)."""


class JSONEndpoint:
    """One URL that JSON bodies are POSTed to, named ``what`` ("the service", "the search service")
    in every error message; failures as the module docstring says. One HTTP client, made at the
    first request and shared by every thread: a connection kept alive between requests, as a
    deployed client keeps it."""

    def __init__(
        self, url: str, timeout: float = DEFAULT_TIMEOUT, retries: int = DEFAULT_MAX_RETRIES, what: str = "the service"
    ):
        self.url = url
        self.timeout = timeout
        self.retries = retries
        self.label = f"{what} at {redact_url(url)}"
        self._secrets = _secrets(url)
        self._http: httpx.Client | None = None
        self._lock = threading.Lock()

    def post(self, body: Any) -> Any:
        """POST ``body`` and decode the reply's JSON, trying again on a transient failure."""
        import httpx  # here, not at the top: every spec lookup imports the modules that use this one

        status, why, cause = None, "", ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(BACKOFF_S * 2 ** (attempt - 1), BACKOFF_MAX_S) * (1 - 0.25 * random.random()))
            try:
                response = self._post(body)
            except httpx.TimeoutException:
                status, why, cause = None, f"did not answer within {self.timeout:g} s", ""
                continue
            except httpx.TransportError as e:  # refused, reset, closed mid-reply, no such host
                status, why, cause = None, "is unreachable", f"{type(e).__name__}: {e}; "
                continue
            if response.status_code not in RETRY_STATUS and response.status_code < 500:
                return self._decode(response)
            status, why, cause = response.status_code, f"answered HTTP {status_text(response)}", ""
        # Worded as --lm openai words it: "is unreachable (ConnectError: ...; 5 attempts)".
        message = f"{why} ({cause}{self.retries + 1} attempt{'s' if self.retries else ''})"
        if status is None or status in UNAVAILABLE_STATUS:
            raise ServiceUnavailable(self.redact(f"{self.label} {message}"))
        raise self.error(message)

    def _post(self, body: Any) -> httpx.Response:
        """One POST, its reply read whole within ``timeout`` seconds: httpx's timeout bounds each
        read only, so a service trickling its reply a byte at a time would never be cut off."""
        import httpx

        deadline = time.monotonic() + self.timeout
        with self._client().stream("POST", self.url, json=body) as response:
            content = bytearray()
            for chunk in response.iter_bytes():
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout("the whole reply took longer than the timeout", request=response.request)
                content += chunk
        # iter_bytes decoded any content-encoding: the reply is rebuilt as it reads, without it.
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() != "content-encoding"]
        return httpx.Response(response.status_code, headers=headers, content=bytes(content), request=response.request)

    def error(self, problem: str) -> ServiceError:
        """``the service at URL <problem>``, redacted."""
        return ServiceError(self.redact(f"{self.label} {problem}"))

    def malformed(self, field: str, expected: str, value: Any = None) -> ServiceError:
        """``... returned a malformed reply: FIELD: expected EXPECTED, got VALUE`` (no field: the
        whole reply)."""
        where = f"{field}: " if field else ""
        got = f", got {short(json.dumps(value))}" if field or value is not None else ""
        return self.error(f"returned a malformed reply: {where}expected {expected}{got}")

    def redact(self, text: str) -> str:
        """``text`` with every secret of the URL replaced by ``***``."""
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text

    def _decode(self, response: httpx.Response) -> Any:
        if not response.is_success:
            # Redirects are not followed (a POST's body would be resent elsewhere): say where to.
            moved = ""
            if response.has_redirect_location:
                moved = f" (Location: {redact_urls(response.headers['location'])})"
            raise self.error(f"answered HTTP {status_text(response)}{moved}")
        try:
            # RFC 8259 lets a reader ignore a byte-order mark; some services send one.
            return json.loads(response.text.removeprefix("\ufeff"))
        except (ValueError, RecursionError) as e:  # RecursionError: nested too deeply to read
            why = "nested too deeply to read" if isinstance(e, RecursionError) else str(e)
            raise self.error(f"returned malformed JSON ({why}): {short(response.text)!r}") from None

    def _client(self) -> httpx.Client:
        import httpx

        with self._lock:
            if self._http is None:
                self._http = httpx.Client(timeout=self.timeout)
            return self._http


def is_http_url(url: str) -> bool:
    """Whether ``url`` is an ``http://`` or ``https://`` URL with a host."""
    try:
        parts = urllib.parse.urlsplit(url)
        return parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # no URL at all: an unclosed [ of an IPv6 host, a port that is no number
        return False


def port_problem(url: str) -> str | None:
    """Why the port of ``url`` (an http URL) is none, else None: read now, a port beyond 65535 would
    be "connection refused" after the retries, and a run folder opened for nothing."""
    try:
        urllib.parse.urlsplit(url).port  # noqa: B018 (read to check)
    except ValueError:
        return f"{redact_url(url)}: the port is not one of 0 to 65535"
    return None


def base_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be an OpenAI-compatible endpoint's base URL, else None: it must be an
    ``http://`` or ``https://`` URL without a query string or fragment (the openai client appends
    its paths to the URL's text, so ``/v1?key=K`` would become ``/v1?key=K/completions``)."""
    if not is_http_url(url):
        return f"{redact_url(url)!r} is not an http:// or https:// URL"
    if problem := port_problem(url):
        return problem
    parts = urllib.parse.urlsplit(url)
    if parts.query or parts.fragment:
        return f"{redact_url(url)}: a query string or fragment cannot be kept (give a key in a variable)"
    return None


def redact_url(url: str) -> str:
    """``url`` with its credentials (``user:password@``), the values of its key-like query
    parameters (``api_key``, ``token``, ``secret``, ...) and its fragment replaced by ``***``; a text that does not
    parse as a URL is quoted whole only when it holds no ``@``, ``?`` or ``#``."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return REDACTED if any(c in url for c in "@?#") else url
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    query = "&".join(_redact_param(p) for p in parts.query.split("&")) if parts.query else ""
    # A fragment is never sent: one in an endpoint's URL is there by mistake, and may be a pasted key.
    fragment = REDACTED if parts.fragment else ""
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query, fragment=fragment))


def redact_urls(text: str) -> str:
    """``text`` with every ``http://`` or ``https://`` URL in it redacted (:func:`redact_url`), and
    the value of every other key-like query parameter (a URL whose scheme is mistyped is none to
    parse); a comma ends a URL, as it ends a strategy parameter."""
    text = URL.sub(lambda m: redact_url(m.group()), text)
    return PARAM.sub(lambda m: f"{m[1]}{m[2]}={REDACTED}" if m[3] and _secret_name(m[2]) else m[0], text)


#: Variables named as holding a key (``--lm-api-key-env``, ``--embed-api-key-env``), whatever their name.
_KEY_VARIABLES: set[str] = set()


def key_variable(name: str | None) -> None:
    """Count the environment variable ``name`` (an ``--lm-api-key-env``'s) as holding a key, which
    :func:`redact_secrets` then redacts even when its name does not look like one (``MYEMB``)."""
    if name:
        _KEY_VARIABLES.add(name)


def redact_secrets(text: str) -> str:
    """:func:`redact_urls`, and the value of every environment variable with a key-like name
    (``OPENAI_API_KEY``, ``JUDGE_API_KEY``) or named as a key's (:func:`key_variable`) wherever it
    appears: an error a backend or a plugin raised may quote the key it was given."""
    for name, value in os.environ.items():
        if len(value) >= MIN_ENV_SECRET and (SECRET_PARAM.search(name) or name in _KEY_VARIABLES):
            text = text.replace(value, REDACTED)
    return redact_urls(text)


def _secret_name(name: str) -> bool:
    return bool(SECRET_PARAM.search(urllib.parse.unquote_plus(name)))


def _redact_param(param: str) -> str:
    name, eq, value = param.partition("=")
    return f"{name}={REDACTED}" if eq and value and _secret_name(name) else param


def _secrets(url: str) -> list[str]:
    """The secrets of ``url`` as they may appear in a message: raw and decoded, longest first (so
    that no shorter one leaves part of a longer one standing), none shorter than MIN_SECRET."""
    parts = urllib.parse.urlsplit(url)
    raw = [parts.netloc.rpartition("@")[0], parts.username, parts.password] if "@" in parts.netloc else []
    for param in parts.query.split("&") if parts.query else []:
        name, _, value = param.partition("=")
        if SECRET_PARAM.search(urllib.parse.unquote_plus(name)):
            raw.append(value)
    found = {s for r in raw if r for s in (r, urllib.parse.unquote_plus(r)) if len(s) >= MIN_SECRET}
    return sorted(found, key=len, reverse=True)


def status_text(response: httpx.Response) -> str:
    """``404: '{"detail": "Not Found"}'``: the status and the start of the body."""
    return f"{response.status_code}: {short(response.text)!r}"


def short(text: str, limit: int = 200) -> str:
    """``text`` on one line (whitespace runs made one space), cut to ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."
