"""Typed records that flow out of a strategy: a Trace of Steps, LM calls and retrievals.

Everything the metrics and reports need is in these records, so they can be recomputed from
``traces.jsonl`` alone (``python -m flarebench score RUN_DIR``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any


@dataclass
class Passage:
    """One retrieved document."""

    id: str
    title: str
    text: str
    score: float = 0.0


@dataclass
class ToolCall:
    """One tool call the model made: its ``id`` (the endpoint's, or numbered in-process), the tool
    ``name``, the ``arguments`` it gave (None when they are not a JSON object), the ``raw`` text it
    wrote for them, and ``ok``: whether the call names an offered tool with every required argument
    (a call that is not ``ok`` is malformed: it is counted, not run)."""

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw: str
    ok: bool


@dataclass
class LMCall:
    """One call to the LM: what was sent, what was evaluated, what came back, how long it took.

    ``prompt_tokens`` is what the prompt holds; ``evaluated_tokens`` is how many of them the backend
    actually ran through the model (the rest came from a reused KV prefix or a server-side cache).
    ``logprobs`` holds one natural-log probability per completion token when asked for;
    ``top_logprobs`` (per token, the most likely tokens as ``[text, logprob]`` pairs, most likely
    first) and ``entropies`` (per token, the entropy of the next-token distribution in nats) only
    when a trigger asked for them: None otherwise, and then left out of the trace. ``tool_calls``
    holds the tool calls a chat turn offered tools made (empty when it made none; None, and left
    out of the trace, when no tools were offered). ``prefill_seconds`` is the part of ``seconds``
    before the first token could be generated (the prompt's evaluation), where the backend observes
    it (the in-process model); None, and left out of the trace, where it does not (a server that
    answers whole, a cache hit).
    """

    purpose: str
    prompt_tokens: int
    evaluated_tokens: int
    completion_tokens: int
    text: str
    # "stop" (a stop sequence or end of text), "length" (token cap), or "sentence" (a second sentence
    # began and the caller asked for one sentence only)
    finish_reason: str
    seconds: float
    tokens: list[str] = field(default_factory=list)
    logprobs: list[float] | None = None
    cached: bool = False
    top_logprobs: list[list[list]] | None = None
    entropies: list[float] | None = None
    tool_calls: list[ToolCall] | None = None
    prefill_seconds: float | None = None


#: The purpose of a drafted sentence (or answer) that a confidence trigger judges (flare_direct,
#: adaptive); --record-topk widens these calls and post-hoc trigger scoring reads them.
DRAFT = "draft"
#: The purpose of a self_check trigger's call (it judges a draft; it writes none of the answer).
SELF_CHECK = "self_check"

#: LMCall fields left out of a trace when None (asked for by some triggers only).
OPTIONAL_CALL_FIELDS = ("top_logprobs", "entropies", "tool_calls", "prefill_seconds")

#: Decimals the per-token alternatives' logprobs and the entropies keep in a trace (``traces.jsonl``):
#: 20 alternatives per drafted token stay compact, and 1e-4 in a logprob is a relative 1e-4 in a
#: probability. Rounded when written only: the strategies, their triggers and the cache see the values
#: as computed. The chosen tokens' own ``logprobs`` are kept as computed.
PER_TOKEN_DIGITS = 4


def compact_per_token(call: dict[str, Any]) -> None:
    """In an LMCall's dict: drop the per-token fields that are None and round the others (in place)."""
    for key in OPTIONAL_CALL_FIELDS:
        if call[key] is None:
            del call[key]
    if "top_logprobs" in call:
        call["top_logprobs"] = [
            [[text, round(lp, PER_TOKEN_DIGITS)] for text, lp in top] for top in call["top_logprobs"]
        ]
    if "entropies" in call:
        call["entropies"] = [round(h, PER_TOKEN_DIGITS) for h in call["entropies"]]


@dataclass
class Retrieval:
    """One call to the retriever and why it fired (``first_hop``, ``low_confidence``, ...).

    ``seconds`` is None for a retrieval flarebench did not see happen, one a service under test
    reported (reason ``service``): it was not timed, and no number stands in for its time. It is
    the search's own time: ``lm_calls`` are the LM calls a reranker made to order its results
    (purpose ``rerank``), timed and counted as the strategy's LM calls, and written only when made."""

    query: str
    reason: str
    doc_ids: list[str]
    seconds: float | None
    cached: bool = False
    detail: dict[str, Any] = field(default_factory=dict)
    lm_calls: list[LMCall] = field(default_factory=list)

    @property
    def first_hop(self) -> bool:
        return self.reason == FIRST_HOP


# Why a retrieval fired (Retrieval.reason).
FIRST_HOP = "first_hop"  # with the question, before generating (not counted in retrieval_rate)
LOW_CONFIDENCE = "low_confidence"  # FLARE direct: its trigger fired on the draft (default: a token had p <= theta)
FIXED_INTERVAL = "fixed_interval"  # every `interval` tokens or every sentence
SEARCH_CALL = "search_call"  # FLARE instruct: the model wrote [Search(query)]
IRCOT_STEP = "ircot_step"  # IRCoT: retrieve with the last chain-of-thought sentence
ADAPTIVE = "adaptive"  # adaptive: its trigger fired on the closed-book draft; retrieve once with the question
FOLLOW_UP = "follow_up"  # self_ask: the model asked a follow-up question; retrieve with it
TOOL_CALL = "tool_call"  # tool_search: the model called its search tool
SERVICE = "service"  # a retrieval a service under test reported (http): when it ran, and how long, is unknown

#: The counts a service under test may report in its ``usage`` (:attr:`ServiceReport.usage`).
USAGE_KEYS = ("lm_calls", "prompt_tokens", "completion_tokens", "evaluated_tokens")


@dataclass
class ServiceReport:
    """What a service under test said about its own work (the ``http`` strategy's traces).

    flarebench saw none of that work happen: the trace holds what the service reported, and a
    quantity it did not report is unknown, scored as missing, never as 0. Only a trace that came
    from a service carries one (:attr:`Trace.service`)."""

    #: Whether the reply stated the answer (``answer``); if not, the answer was read from its output.
    stated_answer: bool = False
    #: Whether the reply listed its retrievals (``retrievals``): they are then the trace's retrievals
    #: (reason ``service``), and an empty list means none was made. Unlisted: no retrieval is known.
    listed_retrievals: bool = False
    #: The counts of :data:`USAGE_KEYS` the reply's ``usage`` held; None when it held no usage.
    usage: dict[str, int] | None = None


@dataclass
class Step:
    """One generation step (a sentence, a window, or the whole answer) with what it cost."""

    text: str
    lm_calls: list[LMCall] = field(default_factory=list)
    retrievals: list[Retrieval] = field(default_factory=list)
    #: What a confidence trigger judged at this step (FLARE direct): ``trigger``, ``score``,
    #: ``threshold``, ``fired`` and, when it fired but retrieved nothing, ``skipped`` with why.
    #: The gate columns are computed from these records alone.
    gate: dict[str, Any] | None = None

    @property
    def triggered(self) -> bool:
        """True when retrieval fired during generation at this step (the first hop does not count)."""
        return any(not r.first_hop for r in self.retrievals)


@dataclass
class Trace:
    """Everything one strategy did for one probe.

    ``output`` is the full generated text, ``answer`` the final answer extracted from it (``None``
    when the output never states one). ``stop_reason`` says why generation ended: ``answer``
    (a final-answer statement), ``eos`` (the model stopped), ``token_cap``, ``step_cap``, ``abstain``
    or ``error``. The runner fills ``probe_id``, ``strategy``, ``seconds`` and ``error``.
    ``service`` is set only on the trace of a service under test (:class:`ServiceReport`), and
    written only where it is set.
    """

    question: str
    output: str
    answer: str | None
    stop_reason: str
    steps: list[Step] = field(default_factory=list)
    probe_id: str = ""
    strategy: str = ""
    seconds: float = 0.0
    error: str | None = None
    service: ServiceReport | None = None

    @property
    def lm_calls(self) -> list[LMCall]:
        """Every LM call, step by step: a step's rerank calls (made inside its retrievals), then its own."""
        return [c for s in self.steps for c in [*(c for r in s.retrievals for c in r.lm_calls), *s.lm_calls]]

    @property
    def retrievals(self) -> list[Retrieval]:
        return [r for s in self.steps for r in s.retrievals]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        # Per-token alternatives and entropies only where they were asked for (a trigger, or
        # --record-topk), rounded: a trace without them keeps the shape it had before they existed.
        for step in d["steps"]:
            for call in step["lm_calls"]:
                compact_per_token(call)
            for retrieval in step["retrievals"]:
                # Only a reranked retrieval holds calls: every other keeps the shape it always had.
                if not retrieval["lm_calls"]:
                    del retrieval["lm_calls"]
                for call in retrieval.get("lm_calls", []):
                    compact_per_token(call)
        if d["service"] is None:  # a strategy run in process: the shape traces always had
            del d["service"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trace:
        """A Trace from its dict (a line of traces.jsonl), every field checked (:func:`checked`)."""
        checked(d, cls)
        steps = [step_from_dict(s, f"steps[{i}]") for i, s in enumerate(d.get("steps", []))]
        service = d.get("service")
        if service is not None:
            service = ServiceReport(**checked(service, ServiceReport, "service"))
        return cls(**{**d, "steps": steps, "service": service})


def step_from_dict(d: dict[str, Any], where: str = "") -> Step:
    """A Step from its dict (in a trace line), its calls and retrievals typed again."""
    checked(d, Step, where)
    if d.get("gate") is not None:
        check_fields(d["gate"], GATE_FIELDS, _at(where, "gate"))
    return Step(
        text=d["text"],
        lm_calls=[call_from_dict(c, _at(where, f"lm_calls[{i}]")) for i, c in enumerate(d.get("lm_calls", []))],
        retrievals=[
            retrieval_from_dict(r, _at(where, f"retrievals[{i}]")) for i, r in enumerate(d.get("retrievals", []))
        ],
        gate=d.get("gate"),
    )


def retrieval_from_dict(d: dict[str, Any], where: str = "") -> Retrieval:
    """A Retrieval from its dict (a trace line), its rerank calls typed again."""
    checked(d, Retrieval, where)
    calls = [call_from_dict(c, _at(where, f"lm_calls[{i}]")) for i, c in enumerate(d.get("lm_calls", []))]
    return Retrieval(**{**d, "lm_calls": calls})


def call_from_dict(d: dict[str, Any], where: str = "") -> LMCall:
    """An LMCall from its dict (a trace line or a cache entry), its tool calls typed again."""
    checked(d, LMCall, where)
    calls = d.get("tool_calls")
    if calls is not None:
        calls = [ToolCall(**checked(c, ToolCall, _at(where, f"tool_calls[{i}]"))) for i, c in enumerate(calls)]
    return LMCall(**{**d, "tool_calls": calls})


# -- reading records back from JSON -------------------------------------------------------------
#
# A trace line is read back into these records once (bench/runner.py TraceLog), and every scorer,
# table and page trusts their types: a field of the wrong type is refused here, naming it, rather
# than failing later with a traceback in whichever consumer meets it first.


def shown(value: Any) -> str:
    """A JSON value as a one-line error names it: a list or an object by its kind, anything else
    as written (cut short)."""
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    text = "null" if value is None else str(value).lower() if isinstance(value, bool) else repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


@dataclass(frozen=True)
class Kind:
    """What a field read back from JSON must hold: ``name`` says it in an error, ``check`` tells."""

    name: str
    check: Callable[[Any], bool]

    def or_null(self) -> Kind:
        """This kind, or null."""
        return Kind(f"{self.name} or null", lambda v: v is None or self.check(v))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_list(value: Any) -> bool:
    return isinstance(value, list | tuple)  # a record's own dict (to_dict, not JSON) may hold tuples


def _is_alternatives(value: Any) -> bool:
    return _is_list(value) and all(
        _is_list(pair) and len(pair) == 2 and isinstance(pair[0], str) and _is_number(pair[1]) for pair in value
    )


TEXT = Kind("a string", lambda v: isinstance(v, str))
NUMBER = Kind("a number", _is_number)
#: A time or a count as a run measures it: a NaN, an infinity or a negative would score silently wrong.
SECONDS = Kind("a finite number >= 0", lambda v: _is_number(v) and math.isfinite(v) and v >= 0)
COUNT = Kind("a whole number >= 0", lambda v: _is_number(v) and math.isfinite(v) and v >= 0 and v == int(v))
FLAG = Kind("true or false", lambda v: isinstance(v, bool))
LIST = Kind("a list", _is_list)
OBJECT = Kind("an object", lambda v: isinstance(v, dict))
TEXTS = Kind("a list of strings", lambda v: _is_list(v) and all(isinstance(x, str) for x in v))
NUMBERS = Kind("a list of numbers", lambda v: _is_list(v) and all(_is_number(x) for x in v))
COUNTS = Kind("an object of numbers", lambda v: isinstance(v, dict) and all(_is_number(x) for x in v.values()))
TOP_LOGPROBS = Kind(
    "a list of [token, logprob] lists per token", lambda v: _is_list(v) and all(map(_is_alternatives, v))
)

#: The kind of every field of each record as a trace line holds it (a list of records is checked
#: record by record as it is read).
FIELDS: dict[type, dict[str, Kind]] = {
    Trace: {
        "question": TEXT, "output": TEXT, "answer": TEXT.or_null(), "stop_reason": TEXT, "steps": LIST,
        "probe_id": TEXT, "strategy": TEXT, "seconds": SECONDS, "error": TEXT.or_null(), "service": OBJECT.or_null(),
    },
    Step: {"text": TEXT, "lm_calls": LIST, "retrievals": LIST, "gate": OBJECT.or_null()},
    LMCall: {
        "purpose": TEXT, "prompt_tokens": COUNT, "evaluated_tokens": COUNT, "completion_tokens": COUNT,
        "text": TEXT, "finish_reason": TEXT, "seconds": SECONDS, "tokens": TEXTS, "logprobs": NUMBERS.or_null(),
        "cached": FLAG, "top_logprobs": TOP_LOGPROBS.or_null(), "entropies": NUMBERS.or_null(),
        "tool_calls": LIST.or_null(),
    },
    Retrieval: {
        "query": TEXT, "reason": TEXT, "doc_ids": TEXTS, "seconds": SECONDS.or_null(), "cached": FLAG,
        "detail": OBJECT, "lm_calls": LIST,
    },
    ToolCall: {"id": TEXT, "name": TEXT, "arguments": OBJECT.or_null(), "raw": TEXT, "ok": FLAG},
    ServiceReport: {"stated_answer": FLAG, "listed_retrievals": FLAG, "usage": COUNTS.or_null()},
}  # fmt: skip
#: The fields of a step's ``gate`` record that the gate columns read (a trigger may record more).
GATE_FIELDS = {"trigger": TEXT.or_null(), "score": NUMBER.or_null(), "threshold": NUMBER.or_null()}


def _at(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def check_fields(d: Any, kinds: dict[str, Kind], where: str = "", required: Iterable[str] = ()) -> dict[str, Any]:
    """``d`` when it is a JSON object that holds every field of ``required``, each field of ``kinds``
    it holds being of that kind; else ValueError naming the field by its path (``where`` is the
    path of ``d``): ``steps[0].lm_calls[1].seconds: expected a number, got 'x'``. Fields not in
    ``kinds`` are not looked at."""
    if not isinstance(d, dict):
        raise ValueError(f"{f'{where}: ' if where else ''}expected an object, got {shown(d)}")
    for name in required:
        if name not in d:
            raise ValueError(f"{_at(where, name)}: missing")
    for name, kind in kinds.items():
        if name in d and not kind.check(d[name]):
            raise ValueError(f"{_at(where, name)}: expected {kind.name}, got {shown(d[name])}")
    return d


def checked(d: Any, record: type, where: str = "") -> dict[str, Any]:
    """``d`` when it can be read back into ``record`` (:func:`check_fields` with the kinds of
    :data:`FIELDS`; the fields without a default are required). Fields the record does not have
    are left to its constructor to refuse."""
    required = [f.name for f in fields(record) if f.default is MISSING and f.default_factory is MISSING]
    return check_fields(d, FIELDS[record], where, required)
