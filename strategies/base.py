"""The one interface every strategy implements."""

from __future__ import annotations

import contextvars
import dataclasses
import hashlib
import json
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Literal

from flarebench.strategies.lm import LM
from flarebench.strategies.prompts import STOP, PromptTemplate, extract_answer, template
from flarebench.strategies.records import FIRST_HOP, SELF_CHECK, LMCall, Passage, Retrieval, Step, Trace
from flarebench.strategies.retriever import Retriever
from flarebench.strategies.steps import LOOKAHEAD_TOKENS


@dataclasses.dataclass(frozen=True)
class Knob:
    """The parameter that sets a strategy's retrieval budget (what ``flarebench calibrate`` and
    ``compare --budget`` tune): its name, the values to try in order, and whether the retrieval
    rate rises (True) or falls as the value grows."""

    param: str
    grid: tuple[float, ...]
    rate_rises: bool


#: The parameters the spec being parsed sets, while :func:`flarebench.strategies.registry.parse_spec`
#: builds its strategy: ``validate`` refuses one its configuration ignores even at its default value.
GIVEN: contextvars.ContextVar[frozenset[str] | None] = contextvars.ContextVar("given", default=None)


@dataclasses.dataclass
class Strategy(ABC):
    """A retrieval strategy: given a question, an LM and a retriever, produce a Trace.

    Subclasses are dataclasses whose fields are their parameters (typed, with defaults), validated
    in :meth:`validate`. A strategy reads no files, times nothing and prints nothing: the LM and the
    retriever time their own calls and the runner owns everything else. (``http`` does network I/O:
    the service it calls is the system under test.)
    """

    name: ClassVar[str] = "strategy"

    #: Documents per retrieval (the harness compares strategies at equal k).
    k: int = 3
    #: Cap on the answer's length in tokens, all steps together.
    max_tokens: int = 128
    #: ``short`` (reason, then "So the answer is X") or ``long`` (a few sentences, one fact each).
    #: The probe set chooses it: a set of long probes runs with :data:`LONG_ANSWER_DEFAULTS`.
    answer_form: Literal["short", "long"] = "short"

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the parameter when a value is out of range."""
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.answer_form not in ("short", "long"):
            raise ValueError(f"answer_form must be 'short' or 'long', got {self.answer_form!r}")

    def given(self, name: str) -> bool:
        """Whether this strategy's spec sets parameter ``name``; for a strategy built in Python, not
        from a spec, whether ``name`` differs from its default."""
        if (keys := GIVEN.get()) is not None:
            return name in keys
        field = next(f for f in dataclasses.fields(self) if f.name == name)
        default = field.default if field.default_factory is dataclasses.MISSING else field.default_factory()
        return getattr(self, name) != default

    @property
    def template(self) -> PromptTemplate:
        """The open-book prompt template for this strategy's answer form."""
        return template(self.answer_form)

    def static_prompts(self) -> tuple[str, ...]:
        """The static prompt prefixes this strategy sends (hashed into the run's configuration)."""
        return (self.template.static,)

    def plain_prefixes(self) -> tuple[str, ...]:
        """The static prefixes its completions begin with, each evaluated once by the warm-up before
        timing: its static prompts, unless it only chats (then :meth:`warm_up` evaluates its
        rendered system message, and the plain text begins no call)."""
        return self.static_prompts()

    def request_shape(self) -> dict[str, Any]:
        """What shapes this strategy's LM requests besides its parameters: every prompt it sends,
        rendered with placeholders, its stop sequences, the sentence look-ahead and any fixed text
        it writes. The run configuration records a hash of it, so a changed template is never
        resumed into an old run or served from an old cache entry. Override to add what a strategy
        sends beyond the default open-book prompt."""
        return {"prompts": [self.template.sample()], "stops": [list(STOP)], "lookahead_tokens": LOOKAHEAD_TOKENS}

    def request_sha256(self) -> str:
        """The hash of :meth:`request_shape` recorded in the run configuration."""
        return hashlib.sha256(json.dumps(self.request_shape(), sort_keys=True).encode()).hexdigest()

    def needs(self) -> frozenset[str]:
        """The capabilities this strategy needs of its LM (names of
        :mod:`flarebench.strategies.capabilities`); the run refuses a backend that does not offer
        them all. None by default: plain text completion."""
        return frozenset()

    def warm_up(self, lm: LM) -> LMCall | None:
        """Before a run is timed (its warm-up), evaluate what this strategy's calls share beyond its
        :meth:`plain_prefixes` (which the warm-up evaluates itself): nothing by default; a chat
        strategy's rendered system message (the backend keeps its state, as a static prefix's).
        Returns the call it made (run.json's ``warm_up`` counts its evaluated tokens), or None."""
        return None

    def budget_knob(self) -> Knob | None:
        """The parameter that sets how often this strategy retrieves, or None when none does."""
        return None

    def params(self) -> dict[str, Any]:
        """The parameters as recorded in run.json."""
        return dataclasses.asdict(self)

    @abstractmethod
    def run(self, question: str, lm: LM, retriever: Retriever) -> Trace:
        """Answer ``question``; the Trace records every step, LM call and retrieval."""


#: The parameters a set of long probes gives every strategy spec that does not set them itself.
LONG_ANSWER_DEFAULTS = {"answer_form": "long", "max_tokens": 256}


def finish(question: str, steps: list[Step], capped: str | None = None) -> Trace:
    """Assemble the Trace of a finished answer: the output is the steps' text, the answer is read
    from its final-answer statement, and ``stop_reason`` says why generation ended (``capped``
    names a cap the strategy hit, e.g. ``step_cap``)."""
    output = "".join(s.text for s in steps).strip()
    answer = extract_answer(output)
    if answer is not None:
        reason = "answer"
    elif capped:
        reason = capped
    elif (writer := _writer(steps)) is not None and writer.finish_reason == "length":
        reason = "token_cap"
    else:
        reason = "eos"
    return Trace(question=question, output=output, answer=answer, stop_reason=reason, steps=steps)


def _writer(steps: list[Step]) -> LMCall | None:
    """The call that wrote the last step's text: its last call that is not a trigger's own
    (a ``self_check`` call comes after the draft it judges)."""
    calls = steps[-1].lm_calls if steps else []
    return next((c for c in reversed(calls) if c.purpose != SELF_CHECK), None)


def retrieve(retriever: Retriever, query: str, k: int, reason: str, **detail: Any) -> tuple[list[Passage], Retrieval]:
    """Search and record the retrieval with the reason it fired."""
    found = retriever.lookup(query, k)
    return found.passages, Retrieval(
        query=query,
        reason=reason,
        doc_ids=[p.id for p in found.passages],
        seconds=found.seconds,
        cached=found.cached,
        detail=detail,
        lm_calls=found.lm_calls,
    )


def first_hop(
    retriever: Retriever, question: str, k: int, enabled: bool = True
) -> tuple[list[Passage], list[Retrieval]]:
    """The retrieval with the question before generating: its documents and its record (nothing
    when ``enabled`` is off)."""
    if not enabled:
        return [], []
    docs, record = retrieve(retriever, question, k, FIRST_HOP)
    return docs, [record]
