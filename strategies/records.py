"""Typed records that flow out of a strategy: a Trace of Steps, LM calls and retrievals.

Everything the metrics and reports need is in these records, so they can be recomputed from
``traces.jsonl`` alone (``python -m flarebench score RUN_DIR``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
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
    out of the trace, when no tools were offered).
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


#: The purpose of a drafted sentence (or answer) that a confidence trigger judges (flare_direct,
#: adaptive); --record-topk widens these calls and post-hoc trigger scoring reads them.
DRAFT = "draft"
#: The purpose of a self_check trigger's call (it judges a draft; it writes none of the answer).
SELF_CHECK = "self_check"

#: LMCall fields left out of a trace when None (asked for by some triggers only).
OPTIONAL_CALL_FIELDS = ("top_logprobs", "entropies", "tool_calls")

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
        steps = [
            Step(
                text=s["text"],
                lm_calls=[call_from_dict(c) for c in s["lm_calls"]],
                retrievals=[retrieval_from_dict(r) for r in s["retrievals"]],
                gate=s.get("gate"),
            )
            for s in d.get("steps", [])
        ]
        service = ServiceReport(**d["service"]) if d.get("service") is not None else None
        return cls(**{**d, "steps": steps, "service": service})


def retrieval_from_dict(d: dict[str, Any]) -> Retrieval:
    """A Retrieval from its dict (a trace line), its rerank calls typed again."""
    return Retrieval(**{**d, "lm_calls": [call_from_dict(c) for c in d.get("lm_calls", [])]})


def call_from_dict(d: dict[str, Any]) -> LMCall:
    """An LMCall from its dict (a trace line or a cache entry), its tool calls typed again."""
    calls = d.get("tool_calls")
    return LMCall(**{**d, "tool_calls": None if calls is None else [ToolCall(**c) for c in calls]})
