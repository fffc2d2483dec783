"""Faithfulness: the share of an answer's claims supported by the contexts the strategy retrieved.

Computed from traces alone (plus the probe set's corpus, to turn retrieved doc ids back into text),
so ``python -m flarebench score RUN_DIR`` recomputes it. Two methods, named in every row so that no one
mistakes one for the other:

* ``lexical-slots`` (offline, the default): :func:`flarebench.bench.support.claim_supported`: the
  claim's numbers, versions, ids and names must all be in one passage sentence (or a few adjacent
  ones), attached as the claim attaches them (no swapped relation, environment or overridden
  default, no flipped negation), with most of its other words; its agreement with hand-labelled
  claims is measured by ``flarebench agreement`` (:mod:`flarebench.bench.agreement`).
* ``ragas-faithfulness:openai:MODEL`` (when a judge LM is configured): ragas 0.4.3's faithfulness
  metric (``ragas.metrics.collections.Faithfulness``): the judge breaks the answer into statements,
  then gives a verdict per statement against the joined contexts.

Contract (the harness wires this in; nothing here touches files, options or the summary table)
------------------------------------------------------------------------------------------------

Claims. The answer's claims are the sentences of ``trace.output`` (``flarebench.strategies.sentences.
split_sentences``), stripped, with ``[Search(...)]`` calls removed (one left open runs to the end of
its line) and sentences without a content word dropped, and so are sentences that only echo the
question (:func:`flarebench.bench.answers.echo_of`, as fact_recall drops them: an answer restating
the question is no faithful answer); a final-answer statement ("So the answer is
X.") counts through its answer part: each item of ``X`` (split at commas, semicolons and "and"), as
written, is a claim, so a final answer the passages do not hold lowers the score even when the
sentences before it are supported. A yes/no verdict is no claim. A claim made more than once (an
answer repeating itself) counts once. The judged method sends the whole output (search calls and
question echoes removed) and lets ragas extract its own statements.

Contexts. The union, in first-retrieved order, of the doc ids of every retrieval of the trace (first
hop included), each looked up in ``passages_by_id`` (``title`` and ``text``).

:func:`faithfulness_rows` ``(traces, passages_by_id, judge=None) -> dict[(strategy, probe_id), row]``
where each row is::

    {"faithfulness": float | None,   # supported claims / claims, 0-1
     "faithfulness_method": str,     # "lexical-slots", "ragas-faithfulness:openai:MODEL", or "n/a: ..."
     "judge_parse_failures": int,    # judge replies that did not parse (0 for the offline method)
     "claims": int}                  # claims scored (the judge's statements with a judge)

Policies (never a crash, never a silent 0):

* no retrieval made at all (``no_retrieval``, or FLARE that never fired): ``faithfulness`` None,
  method ``"n/a: no context"``;
* retrievals made but every one returned no document: the contexts are empty and every claim is
  unsupported: 0.0 with the method's own name (the strategy looked and found nothing);
* a trace with ``error`` set: None, ``"n/a: error"``; an output without a claim: None,
  ``"n/a: no claims"`` (with a judge: ragas extracted no statement);
* a service under test (``http``) that listed no retrievals: None, ``"n/a: retrievals not
  reported"``; a trace that retrieved a doc id the probe set's corpus does not hold (a service, or a
  plugin's retriever): None, ``"n/a: doc ids not in the corpus"`` (its passages cannot be read);
* a judge reply that does not parse (ragas/instructor could not validate it after its retries):
  None for that probe, ``judge_parse_failures`` counts it (one per failed probe); the probe is left
  out of the mean, and the count is reported next to it. Transport errors (connection refused, HTTP
  401/404/5xx) are not parse failures: they raise :class:`JudgeError`.

:func:`summarize_faithfulness` ``(rows) -> dict[strategy, {"faithfulness", "faithfulness_n",
"faithfulness_method", "judge_parse_failures"}]``: ``faithfulness`` is the mean over the strategy's
probes that have a score (macro average: each answer weighs the same; None when none has);
``faithfulness_n`` is how many those are; ``faithfulness_method`` is the method of the scored
probes (``"n/a: no context"`` when no probe had context, else the first ``n/a`` reason);
``judge_parse_failures`` is the sum.

Judge configuration: :func:`parse_judge` ``(spec, base_url=None, env=os.environ) -> Judge | None``
from ``--judge openai:MODEL``, ``--judge-base-url`` / ``$JUDGE_BASE_URL``, ``$JUDGE_API_KEY`` (else
``$OPENAI_API_KEY``) and ``$JUDGE_JSON_MODE`` (``json``: ragas's own setting; ``json_schema``: the
schema is sent in ``response_format`` too, which llama.cpp servers enforce with a grammar); it raises
:class:`JudgeError` on a bad spec or a missing key. :meth:`Judge.describe` is what a run config may
record. Scoring with a judge runs ``asyncio.run`` (call it from synchronous code).

The judge's API key lives only in :class:`Judge` (``repr`` hides it, :meth:`Judge.describe` leaves it
out) and in the client built from it; it never reaches a row, a summary, a run config or a log line
(error messages are passed through :meth:`Judge.redact`).
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import sys
import types
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from flarebench.bench.answers import echo_of, long_answer_text, split_items
from flarebench.bench.support import METHOD as LEXICAL_METHOD
from flarebench.bench.support import claim_supported, content_tokens
from flarebench.strategies.flare_instruct import SEARCH_CALL_RE
from flarebench.strategies.http_client import base_url_problem, redact_url
from flarebench.strategies.lm import DEFAULT_TIMEOUT
from flarebench.strategies.records import Trace
from flarebench.strategies.sentences import split_sentences

__all__ = [
    "LEXICAL_METHOD",
    "NO_CLAIMS",
    "NO_CONTEXT",
    "ERROR",
    "FOREIGN_DOCS",
    "UNREPORTED",
    "Judge",
    "JudgeError",
    "answer_claims",
    "content_tokens",
    "faithfulness_rows",
    "parse_judge",
    "summarize_faithfulness",
]

NO_CONTEXT = "n/a: no context"
NO_CLAIMS = "n/a: no claims"
ERROR = "n/a: error"
UNREPORTED = "n/a: retrievals not reported"
FOREIGN_DOCS = "n/a: doc ids not in the corpus"
#: Answers a run did not get judged: the judge failed (a run goes on without it), or the run was
#: stopped (Ctrl-C waits for no judge); `flarebench score RUN_DIR` judges them.
NOT_JUDGED = "n/a: not judged"
JUDGE_FAILED = f"{NOT_JUDGED} (the judge failed)"
RUN_STOPPED = f"{NOT_JUDGED} (the run was stopped)"

# --------------------------------------------------------------------------------------------
# Claims
# --------------------------------------------------------------------------------------------

_FINAL_RE = re.compile(r"^\W*(?:so\s+|thus\s+|therefore\s+)?(?:the\s+)?(?:final\s+)?answer is:?\s*(.*)$", re.I | re.S)


def answer_claims(output: str, question: str | None = None) -> list[str]:
    """The claims of an answer's output (see the module docstring): its sentences other than the
    final-answer statements and the echoes of ``question``, then each item of the stated answers
    ("So the answer is C": C must be supported too; a yes/no verdict is no claim about the
    passages); each claim once."""
    text = SEARCH_CALL_RE.sub(" ", output or "")
    echoes = echo_of(question)
    claims, finals = [], []
    for piece in split_sentences(text):
        for line in piece.split("\n"):
            s = line.strip()
            if not s:
                continue
            m = _FINAL_RE.match(s)
            if m:
                finals.append(m.group(1).strip())
            elif content_tokens(s) and not echoes(s):
                claims.append(s)
    for final in finals:
        # The items of a list answer ("nurse, actor") one by one, as written: normalising would
        # strip what the support check reads (the hyphens of a date, a name's capitals).
        for item in split_items(final, normalized=False):
            words = content_tokens(item)
            if words and not words <= content_tokens("yes no true false"):
                claims.append(item)
    # A claim repeated (a small model looping on its answer) is one claim, not a heavier one.
    once: dict[str, str] = {}
    for claim in claims:
        once.setdefault(" ".join(claim.lower().split()), claim)
    return list(once.values())


def _judge_text(output: str, question: str | None) -> str:
    """What the judge reads: the whole output, search calls and echoes of the question removed, as
    a long answer's facts are looked for (the final answer is a claim too)."""
    return " ".join(long_answer_text(output, question).split())


# --------------------------------------------------------------------------------------------
# Judge configuration
# --------------------------------------------------------------------------------------------


JSON_MODES = ("json", "json_schema")


class JudgeError(RuntimeError):
    """The judge cannot be configured or reached (never a parse failure: those are counted)."""


class OffSchema(ValueError):
    """A judge reply that parsed but breaks the verdict format (a verdict other than 0 or 1, or not
    one per statement): a parse failure, counted as one, never a score."""


#: The key a local judge endpoint given without one is sent (the openai client needs some key).
NO_KEY = "no-key"


@dataclass(frozen=True)
class Judge:
    """A judge LM behind an OpenAI-compatible endpoint (``--judge openai:MODEL``)."""

    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    max_tokens: int = 512
    max_retries: int | None = None  # instructor's re-asks after a reply that does not validate (None: its default, 3)
    # "json": ragas's own setting for OpenAI (instructor's JSON mode: response_format json_object, the
    # schema in the prompt). "json_schema": the schema is also sent in response_format, which
    # llama.cpp's servers turn into a grammar, so a small local judge's replies have the right shape.
    json_mode: str = "json"
    spec: str = ""

    @property
    def method(self) -> str:
        return f"ragas-faithfulness:openai:{self.model}"

    def describe(self) -> dict[str, Any]:
        """What a run config may record: never the key (only whether one is set), nor the
        credentials of its URL."""
        return {
            "spec": self.spec or f"openai:{self.model}",
            "model": self.model,
            "base_url": redact_url(self.base_url) if self.base_url else self.base_url,
            "api_key_set": bool(self.api_key) and self.api_key != NO_KEY,
            "max_tokens": self.max_tokens,
            "max_retries": self.max_retries,
            "json_mode": self.json_mode,
            "method": self.method,
            "ragas": _dist_version("ragas"),
        }

    def redact(self, text: str) -> str:
        """``text`` with the API key (if any) replaced by ``***``."""
        text = str(text)
        if self.api_key and len(self.api_key) >= 4:
            text = text.replace(self.api_key, "***")
        return text


def _dist_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def parse_judge(
    spec: str | None, base_url: str | None = None, env: Mapping[str, str] | None = None, json_mode: str | None = None
) -> Judge | None:
    """``--judge`` / ``--judge-base-url`` into a :class:`Judge` (None when no judge is asked for).

    ``spec`` is ``openai:MODEL``, or ``none`` (no judge: the offline score). The base URL is
    ``base_url``, else ``$JUDGE_BASE_URL``, else the openai client's own (``$OPENAI_BASE_URL`` or
    api.openai.com). The key is ``$JUDGE_API_KEY``, else ``$OPENAI_API_KEY``; a local endpoint given
    without any key gets the placeholder ``no-key``. ``$JUDGE_JSON_MODE`` (``json``, the default, or
    ``json_schema``) sets :attr:`Judge.json_mode`, else ``json_mode`` (a recorded judge's own).
    """
    if spec == "":
        raise JudgeError("--judge is empty: give openai:MODEL, or none for the offline lexical-slots score")
    if spec is None or spec == "none":  # none also drops a judge a run recorded (score, report)
        if base_url:
            raise JudgeError("--judge-base-url only applies to --judge openai:MODEL")
        return None
    env = os.environ if env is None else env
    kind, _, model = spec.partition(":")
    if kind != "openai" or not model.strip():
        raise JudgeError(f"unknown judge spec {spec!r}; expected openai:MODEL (any OpenAI-compatible endpoint)")
    json_mode = env.get("JUDGE_JSON_MODE") or json_mode or "json"
    if json_mode not in JSON_MODES:
        raise JudgeError(f"JUDGE_JSON_MODE={json_mode!r}; expected one of {', '.join(JSON_MODES)}")
    url = base_url or env.get("JUDGE_BASE_URL") or env.get("OPENAI_BASE_URL") or None
    if url and (why := base_url_problem(url)):
        source = "$JUDGE_BASE_URL" if env.get("JUDGE_BASE_URL") else "$OPENAI_BASE_URL"
        raise JudgeError(f"{'--judge-base-url' if base_url else source}: {why}")
    key = env.get("JUDGE_API_KEY") or env.get("OPENAI_API_KEY") or None
    if key is None:
        if not url:
            raise JudgeError(
                f"judge {spec}: no API key; set JUDGE_API_KEY (or OPENAI_API_KEY), or give --judge-base-url "
                "for a local endpoint that needs none"
            )
        key = NO_KEY
    return Judge(model=model.strip(), base_url=url, api_key=key, spec=spec, json_mode=json_mode)


# --------------------------------------------------------------------------------------------
# Judged method: ragas
# --------------------------------------------------------------------------------------------


def _import_ragas():
    """Import ragas offline: no telemetry, no Hub calls.

    ragas 0.4.3's ``ragas.llms.base`` imports ``langchain_community.chat_models.vertexai.ChatVertexAI``
    at module level, a module that langchain-community 0.4.x no longer has (and 0.4.2 is the release
    installable here). The faithfulness path never touches Vertex AI, so when that module is missing
    a stand-in class is registered under its name before importing ragas. Nothing else is patched.
    The faithfulness path does not tokenise with tiktoken (only testset generation does), so no BPE
    file is fetched; tests/test_faithfulness.py checks that.
    """
    os.environ["RAGAS_DO_NOT_TRACK"] = "true"  # ragas sends usage telemetry unless told not to
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    name = "langchain_community.chat_models.vertexai"
    try:
        __import__(name)
    except ImportError:
        stub = types.ModuleType(name)

        class ChatVertexAI:  # noqa: D401 - a stand-in, never instantiated on this path
            """Stand-in: langchain-community 0.4 removed this class; ragas only imports it."""

        stub.ChatVertexAI = ChatVertexAI
        sys.modules[name] = stub
    try:
        from ragas.llms.base import InstructorBaseRagasLLM, llm_factory
        from ragas.metrics.collections import Faithfulness
    except ImportError as e:
        raise JudgeError(f"the judged faithfulness needs ragas: pip install -e '.[judge]' ({e})") from e
    return InstructorBaseRagasLLM, llm_factory, Faithfulness


def _is_parse_failure(exc: BaseException) -> bool:
    """An exception that means "the judge answered, but not in the required shape"."""
    import json

    import pydantic

    seen: set[int] = set()
    e: BaseException | None = exc
    from_instructor = False
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        mod = type(e).__module__ or ""
        if mod.startswith("openai") and type(e).__name__ not in ("LengthFinishReasonError",):
            return False  # transport or HTTP status errors
        if isinstance(e, (pydantic.ValidationError, json.JSONDecodeError, OffSchema)):
            return True
        # InstructorRetryException wraps the last error (instructor 1.12 through tenacity's
        # RetryError): look all the way inside before deciding.
        from_instructor = from_instructor or mod.startswith("instructor")
        e = e.__cause__ or e.__context__
    return from_instructor


class _RagasScorer:
    """ragas's faithfulness metric over one AsyncOpenAI client, counting statements per answer."""

    def __init__(self, judge: Judge):
        base_llm_cls, llm_factory, faithfulness_cls = _import_ragas()
        from openai import AsyncOpenAI

        self.judge = judge
        # A request may take as long as an LM's (a judge that never answers stops the scoring then).
        self.client = AsyncOpenAI(
            base_url=judge.base_url, api_key=judge.api_key, max_retries=1, timeout=DEFAULT_TIMEOUT
        )
        extra = {} if judge.max_retries is None else {"max_retries": judge.max_retries}
        if judge.json_mode == "json_schema":
            import instructor
            from ragas.llms.base import InstructorLLM, InstructorModelArgs

            patched = instructor.from_openai(self.client, mode=instructor.Mode.JSON_SCHEMA)
            inner = InstructorLLM(
                client=patched,
                model=judge.model,
                provider="openai",
                model_args=InstructorModelArgs(),
                max_tokens=judge.max_tokens,
                **extra,
            )
        else:  # ragas's own construction (instructor JSON mode for OpenAI clients)
            inner = llm_factory(judge.model, client=self.client, max_tokens=judge.max_tokens, **extra)

        class CountingLLM(base_llm_cls):
            """Delegates to ragas's instructor LLM; remembers how many statements and verdicts came back."""

            def __init__(self, llm):
                self.llm = llm
                self.statements: int | None = None

            def generate(self, prompt, response_model):
                return self._seen(self.llm.generate(prompt, response_model))

            async def agenerate(self, prompt, response_model):
                return self._seen(await self.llm.agenerate(prompt, response_model))

            def _seen(self, result):
                items = getattr(result, "statements", None)
                if items is None:
                    return result
                if self.statements is None:  # the first reply: the answer's statements
                    self.statements = len(items)
                    return result
                # The second: a verdict per statement, 0 or 1. ragas would average whatever came back
                # (a verdict of -1 counted as supported, three made-up statements in the mean).
                verdicts = [getattr(item, "verdict", None) for item in items]
                if len(verdicts) != self.statements or any(v not in (0, 1) for v in verdicts):
                    raise OffSchema(f"{len(verdicts)} verdicts {verdicts} for {self.statements} statements")
                return result

            def __getattr__(self, name):  # attributes ragas may read (model, provider, ...)
                llm = self.__dict__.get("llm")
                if llm is None:
                    raise AttributeError(name)
                return getattr(llm, name)

        self.llm = CountingLLM(inner)
        self.metric = faithfulness_cls(llm=self.llm)

    async def score(self, question: str, response: str, contexts: list[str]) -> tuple[float | None, int, int]:
        """``(faithfulness or None, statements, parse_failures)`` for one answer."""
        self.llm.statements = None
        try:
            result = await self.metric.ascore(
                user_input=question or "?", response=response, retrieved_contexts=contexts
            )
        except Exception as e:  # noqa: BLE001 - sorted into parse failures and real errors
            if _is_parse_failure(e):
                return None, self.llm.statements or 0, 1
            who = self.judge.spec or self.judge.model
            at = f" at {redact_url(self.judge.base_url)}" if self.judge.base_url else ""
            # A reply the openai client could not read as a chat completion (an HTML page, no choices).
            what = "its reply is not a chat completion: " if isinstance(e, AttributeError | IndexError) else ""
            raise JudgeError(self.judge.redact(f"judge {who}{at}: {what}{type(e).__name__}: {e}")) from None
        value = getattr(result, "value", result)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return None, self.llm.statements or 0, 0
        return float(value), self.llm.statements or 0, 0

    async def aclose(self) -> None:
        await self.client.close()


# --------------------------------------------------------------------------------------------
# Rows and summary
# --------------------------------------------------------------------------------------------


def _passage_text(p: Any) -> str:
    if isinstance(p, str):
        return p
    if isinstance(p, Mapping):
        title, text = p.get("title", ""), p.get("text", "")
    else:
        title, text = getattr(p, "title", ""), getattr(p, "text", "")
    return f"{title}\n{text}" if title else str(text)


def _contexts(trace: Trace, passages_by_id: Mapping[str, Any]) -> list[str] | None:
    """The texts of every doc the trace retrieved (union, first-seen order); None when it made no retrieval."""
    retrievals = trace.retrievals
    if not retrievals:
        return None
    ids = list(dict.fromkeys(d for r in retrievals for d in r.doc_ids))
    return [_passage_text(passages_by_id[d]) for d in ids]


def _unusable(trace: Trace, passages_by_id: Mapping[str, Any]) -> str | None:
    """Why an answer cannot be checked against its passages (a service that listed none; a doc id
    the probe set's corpus does not hold, from a service or a plugin's retriever), or None when it can."""
    if trace.service is not None and not trace.service.listed_retrievals:
        return UNREPORTED
    if any(d not in passages_by_id for r in trace.retrievals for d in r.doc_ids):
        return FOREIGN_DOCS
    return None


def _row(value: float | None, method: str, parse_failures: int = 0, claims: int = 0) -> dict[str, Any]:
    return {
        "faithfulness": value,
        "faithfulness_method": method,
        "judge_parse_failures": parse_failures,
        "claims": claims,
    }


def _lexical_row(trace: Trace, contexts: list[str]) -> dict[str, Any]:
    claims = answer_claims(trace.output, trace.question)
    if not claims:
        return _row(None, NO_CLAIMS)
    supported = sum(claim_supported(c, contexts) for c in claims)
    return _row(supported / len(claims), LEXICAL_METHOD, 0, len(claims))


def not_judged(traces: Iterable[Trace], why: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Rows for answers left unjudged (``why``: :data:`JUDGE_FAILED` or :data:`RUN_STOPPED`)."""
    return {(t.strategy, t.probe_id): _row(None, why) for t in traces}


def faithfulness_rows(
    traces: Iterable[Trace], passages_by_id: Mapping[str, Any], judge: Judge | None = None
) -> dict[tuple[str, str], dict[str, Any]]:
    """One faithfulness row per (strategy, probe_id); see the module docstring for the contract."""
    traces = list(traces)
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    pending: list[tuple[tuple[str, str], Trace, list[str]]] = []
    for t in traces:
        key = (t.strategy, t.probe_id)
        if t.error:
            rows[key] = _row(None, ERROR)
            continue
        if unusable := _unusable(t, passages_by_id):
            rows[key] = _row(None, unusable)
            continue
        contexts = _contexts(t, passages_by_id)
        if contexts is None:
            rows[key] = _row(None, NO_CONTEXT)
        elif judge is None:
            rows[key] = _lexical_row(t, contexts)
        elif not (claims := answer_claims(t.output, t.question)):
            rows[key] = _row(None, NO_CLAIMS)
        elif not contexts:
            # ragas refuses empty contexts; nothing retrieved supports any claim.
            rows[key] = _row(0.0, judge.method, 0, len(claims))
        else:
            rows[key] = _row(None, judge.method)  # placeholder, filled below in order
            pending.append((key, t, contexts))
    if pending:
        asyncio.run(_judge_all(judge, pending, rows))
    return rows


async def _judge_all(judge: Judge, pending, rows) -> None:
    scorer = _RagasScorer(judge)
    try:
        for key, t, contexts in pending:
            value, statements, failures = await scorer.score(t.question, _judge_text(t.output, t.question), contexts)
            method = judge.method if (value is not None or failures) else NO_CLAIMS
            rows[key] = _row(value, method, failures, statements)
    finally:
        await scorer.aclose()


def summarize_faithfulness(rows: Mapping[tuple[str, str], Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per strategy: ``faithfulness`` (mean over scored probes, None if none), ``faithfulness_n`` (how
    many probes that mean was taken over), ``faithfulness_method`` and ``judge_parse_failures`` (sum);
    strategies in first-appearance order. A strategy with an answer left unjudged (:data:`NOT_JUDGED`)
    has no faithfulness, and that reason as its method."""
    out: dict[str, dict[str, Any]] = {}
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for (strategy, _probe), row in rows.items():
        groups.setdefault(strategy, []).append(row)
    for strategy, rs in groups.items():
        scored = [r["faithfulness"] for r in rs if r["faithfulness"] is not None]
        methods = [r["faithfulness_method"] for r in rs if not r["faithfulness_method"].startswith("n/a")]
        # Why the answers that had passages got no score (no claims, doc ids not in the corpus):
        # "no context" would say the strategy never retrieved.
        looked = [r["faithfulness_method"] for r in rs if r["faithfulness_method"] not in (NO_CONTEXT, ERROR)]
        if methods:
            method = methods[0]
        elif looked:
            method = Counter(looked).most_common(1)[0][0]
        elif any(r["faithfulness_method"] == NO_CONTEXT for r in rs):
            method = NO_CONTEXT
        else:
            method = rs[0]["faithfulness_method"] if rs else NO_CONTEXT
        if unjudged := [r["faithfulness_method"] for r in rs if r["faithfulness_method"].startswith(NOT_JUDGED)]:
            # Answers the judge never saw: a mean over the others would pass for the strategy's.
            scored, method = [], unjudged[0]
        out[strategy] = {
            "faithfulness": (sum(scored) / len(scored)) if scored else None,
            "faithfulness_n": len(scored),
            "faithfulness_method": method,
            "judge_parse_failures": int(sum(r["judge_parse_failures"] for r in rs)),
        }
    return out
