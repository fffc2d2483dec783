"""FLARE's confidence triggers: what decides, from a drafted sentence, whether to retrieve.

A trigger is registered by name (``@trigger("NAME")``, as strategies are by
:func:`flarebench.strategies.registry.register`) and built with a threshold and the ignore options.
It sees the drafted :class:`~flarebench.strategies.steps.Sentence` (its tokens and logprobs, and the
per-token alternatives or entropies it asked for) with its :class:`Context`, and returns a
:class:`Judgement`: the record the step stores (``Step.gate``: ``trigger``, ``score``,
``threshold``, ``fired``, plus what else it wants recorded) and what the strategy needs to act on it.

The probability triggers judge each token of the draft and aggregate:

* ``min_prob`` (the default, FLARE's): the lowest token probability; fires at score <= threshold.
* ``mean_logprob``: the mean token logprob; fires at score <= threshold.
* ``entropy``: the highest entropy (nats) of a token's next-token distribution; fires at score >=
  threshold. In-process over the whole vocabulary; on a server bounded from its top logprobs
  (:func:`flarebench.strategies.lm.topk_entropy`, a lower bound).
* ``margin``: the smallest gap between the probabilities of the two most likely tokens (under
  greedy decoding, the chosen token and the runner-up); fires at score <= threshold.

Their ``ignore_terms`` (terms given one per line) and ``ignore_known`` (words of the question and of
the documents in context) options take tokens out of the judgement: such tokens never fire.

``self_check`` needs no logprobs: one extra LM call asks whether the draft needs a fact it cannot
get from the documents, as JSON ``{"needs_fact": bool, "missing": "..."}``; it fires when
``needs_fact`` is true and proposes ``missing`` as the query. An unparseable reply is recorded
(``unparsed``) and retrieves nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from flarebench.strategies import plugins
from flarebench.strategies.base import Knob
from flarebench.strategies.capabilities import LOGPROBS, TOP_LOGPROBS
from flarebench.strategies.lm import LM, LMError, Prompt, topk_entropy
from flarebench.strategies.prompts import format_docs
from flarebench.strategies.records import SELF_CHECK, LMCall, Passage
from flarebench.strategies.steps import Sentence, first_sentence_of

_TRIGGERS: dict[str, type[Trigger]] = {}
_ORIGINS: dict[str, str] = {}  # name -> where it was registered from, for the "already registered" error

#: The trigger flare_direct uses unless told otherwise.
DEFAULT = "min_prob"


def trigger(name: str) -> Callable[[type[Trigger]], type[Trigger]]:
    """Class decorator: make a Trigger available under ``name``, one a spec can spell
    (``flare_direct:trigger=NAME``) that nothing has taken: a PluginError otherwise, said as a
    strategy's or a backend's is."""

    def deco(cls: type[Trigger]) -> type[Trigger]:
        plugins.check_name("trigger", name)
        if why := _misdeclared(cls):  # said now, naming the class, not when a spec first builds it
            what = cls if isinstance(cls, type) else type(cls)  # an instance given by mistake: its class
            raise plugins.PluginError(f"trigger {name!r} ({what.__module__}.{what.__qualname__}): {why}")
        plugins.add(_TRIGGERS, _ORIGINS, "trigger", name, cls)
        cls.name = name
        return cls

    return deco


def _misdeclared(cls: Any) -> str | None:
    """What contradicts the Trigger contract in ``cls``'s declaration, or None: not a Trigger, a
    default threshold outside its valid range, a grid out of order or outside that range."""
    if not (isinstance(cls, type) and issubclass(cls, Trigger)):
        return "not a subclass of Trigger (flarebench.strategies.triggers.Trigger)"
    if cls.valid_range is None:
        return "a grid, but valid_range is None (no threshold)" if cls.grid else None
    lo, hi = cls.valid_range
    default = cls.default_threshold
    if not _within(default, lo, hi):
        return f"default_threshold {default!r} is not a number within valid_range {_range(lo, hi)}"
    grid = tuple(cls.grid)
    if not all(_within(t, lo, hi) for t in grid) or list(grid) != sorted(set(grid)):
        return f"grid {grid} must be increasing numbers within valid_range {_range(lo, hi)}"
    return None


def _within(value: Any, lo: float, hi: float) -> bool:
    """Whether ``value`` is a finite number from ``lo`` to ``hi`` (inf is outside [0, inf))."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and lo <= value <= hi


def names() -> list[str]:
    """Registered trigger names, in registration order."""
    return list(_TRIGGERS)


def get(name: str) -> type[Trigger]:
    """The Trigger class registered under ``name``; a ValueError listing the known ones otherwise."""
    try:
        return _TRIGGERS[name]
    except KeyError:
        raise ValueError(
            f"unknown trigger {name!r}; known: {', '.join(_TRIGGERS)} "
            "(a plugin's trigger needs --plugin MODULE|FILE.py, or its package installed)"
        ) from None


def fires_high(name: str | None) -> bool:
    """Whether a higher score of trigger ``name`` means less confident (it fires at score >=
    threshold); False for names not registered (records of older runs are ``min_prob``'s)."""
    cls = _TRIGGERS.get(name or "")
    return bool(cls and cls.fires_high)


def read_terms(path: str | Path) -> tuple[str, ...]:
    """The terms of an ignore file: one per line, blank lines and lines starting with ``#`` left out,
    each once, in file order. A ValueError names a file that cannot be read or lists no term."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"ignore_terms: cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    terms = [" ".join(line.split()) for line in text.splitlines()]
    terms = list(dict.fromkeys(t for t in terms if t and not t.startswith("#")))
    if not terms:
        raise ValueError(f"ignore_terms: {path} lists no terms")
    return tuple(terms)


def terms_sha256(terms: Sequence[str]) -> str:
    """The hash of an ignore list, recorded in the request shape (a changed file is another config)."""
    return hashlib.sha256("\n".join(terms).encode()).hexdigest()


@dataclass(frozen=True)
class Context:
    """What a trigger may look at besides the draft: the question, the answer so far (before the
    draft), the documents in context, and the LM (for a trigger that asks it)."""

    question: str
    answer: str
    docs: Sequence[Passage]
    lm: LM


@dataclass
class Judgement:
    """What a trigger judged on one draft.

    ``record`` is what the step stores (``trigger``, ``score``, ``threshold``, ``fired`` and any
    extra); ``flagged`` the tokens that made it fire with their per-token values (recorded with the
    retrieval); ``ignored`` the indexes of the tokens it was told to ignore (kept in the query as
    if confident); ``calls`` the LM calls it made; ``query`` a query it proposes (else the strategy
    forms one from the draft)."""

    record: dict[str, Any]
    flagged: list[tuple[str, float]] = field(default_factory=list)
    ignored: frozenset[int] = frozenset()
    calls: list[LMCall] = field(default_factory=list)
    query: str | None = None

    @property
    def fired(self) -> bool:
        return bool(self.record["fired"])


class Trigger:
    """The base of every trigger: a threshold in its valid range (its default when None)."""

    name: ClassVar[str] = "trigger"
    #: Whether the draft needs per-token logprobs.
    needs_logprobs: ClassVar[bool] = True
    #: Alternatives per token the draft must carry (``GenerationRequest.top_logprobs``).
    top_logprobs: ClassVar[int] = 0
    #: Whether the draft must carry per-token entropies (``GenerationRequest.entropy``).
    entropy: ClassVar[bool] = False
    #: True when a higher score means less confident: the trigger fires at score >= threshold.
    fires_high: ClassVar[bool] = False
    #: The default threshold, and the range a threshold must lie in (None: no threshold at all).
    default_threshold: ClassVar[float | None] = None
    valid_range: ClassVar[tuple[float, float] | None] = None
    #: What the score is, for messages and docs.
    score_doc: ClassVar[str] = ""
    #: Thresholds to try, in increasing order, when the threshold is calibrated to a retrieval
    #: budget, and at which ``flarebench score`` reports the share of a run's drafts that would
    #: fire (empty: a trigger without a threshold).
    grid: ClassVar[tuple[float, ...]] = ()

    def __init__(self, threshold: float | None = None, ignore_terms: Sequence[str] = (), ignore_known: bool = False):
        if self.valid_range is None:
            if threshold is not None:
                raise ValueError(f"trigger {self.name} takes no threshold, got {threshold}")
        else:
            threshold = self.default_threshold if threshold is None else threshold
            lo, hi = self.valid_range
            if not _within(threshold, lo, hi):
                raise ValueError(
                    f"threshold of trigger {self.name} ({self.score_doc}) must be within {_range(lo, hi)}, "
                    f"got {threshold}"
                )
        self.threshold = threshold
        self.ignore_terms = tuple(ignore_terms)
        self.ignore_known = ignore_known

    def judge(self, draft: Sentence, ctx: Context) -> Judgement | None:
        """The judgement on one drafted sentence; None for an empty draft, which is never judged."""
        raise NotImplementedError


def _range(lo: float, hi: float) -> str:
    left = "(-inf" if lo == -math.inf else f"[{lo:g}"
    right = "inf)" if hi == math.inf else f"{hi:g}]"
    return f"{left}, {right}"


# -- the probability triggers ----------------------------------------------------------------------


class TokenTrigger(Trigger):
    """A trigger over per-token values: :meth:`values` gives one per token, :meth:`aggregate`
    makes the score of the tokens not ignored, and the trigger fires when the score is at or
    below the threshold (at or above for :attr:`fires_high`).

    ``flarebench score`` scores every probability trigger again from a run's recorded drafts
    (:mod:`flarebench.bench.trigger_scores`) with these same methods, at each threshold of
    :attr:`grid`."""

    def values(self, draft: Sentence) -> list[float]:
        raise NotImplementedError

    def aggregate(self, values: list[float]) -> float:
        raise NotImplementedError

    @classmethod
    def fires_at(cls, value: float, threshold: float) -> bool:
        """Whether a score (or a token's value) fires at ``threshold``."""
        return value >= threshold if cls.fires_high else value <= threshold

    def _fires(self, value: float) -> bool:
        return self.fires_at(value, self.threshold)

    @staticmethod
    def judged(draft: Sentence) -> bool:
        """Whether a draft is judged at all: an empty one, or one without logprobs, is not."""
        return bool(draft.text.strip() and draft.probs)

    def score(self, values: list[float], ignored: Collection[int] = frozenset()) -> float | None:
        """The score of a draft's per-token ``values`` over the tokens not ``ignored`` (None when
        every token is)."""
        judged = [v for i, v in enumerate(values) if i not in ignored]
        return self.aggregate(judged) if judged else None

    def judge(self, draft: Sentence, ctx: Context) -> Judgement | None:
        if not self.judged(draft):
            return None
        values = self.values(draft)
        ignored = ignored_tokens(draft.tokens, ctx, self.ignore_terms, self.ignore_known)
        score = self.score(values, ignored)
        record: dict[str, Any] = {
            "trigger": self.name,
            "score": score,
            "threshold": self.threshold,
            "fired": score is not None and self._fires(score),
        }
        if self.ignore_terms or self.ignore_known:
            record["ignored"] = len(ignored)
        flagged = [(t, v) for i, (t, v) in enumerate(zip(draft.tokens, values)) if i not in ignored and self._fires(v)]
        return Judgement(record, flagged, frozenset(ignored))


@trigger("min_prob")
class MinProb(TokenTrigger):
    """FLARE's: any token with p <= threshold (the score is the lowest token probability)."""

    default_threshold = 0.8  # flare_direct passes its theta
    valid_range = (0.0, 1.0)
    grid = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    score_doc = "the lowest token probability"

    def values(self, draft: Sentence) -> list[float]:
        return draft.probs

    def aggregate(self, values: list[float]) -> float:
        return min(values)


@trigger("mean_logprob")
class MeanLogprob(TokenTrigger):
    """The draft's mean token logprob <= threshold."""

    default_threshold = -1.4
    valid_range = (-math.inf, 0.0)
    grid = (-3.0, -2.0, -1.5, -1.0, -0.8, -0.6, -0.5, -0.4, -0.3, -0.2, -0.1, 0.0)
    score_doc = "the mean token logprob"

    def values(self, draft: Sentence) -> list[float]:
        return list(draft.logprobs or [])

    def aggregate(self, values: list[float]) -> float:
        return sum(values) / len(values)


@trigger("entropy")
class Entropy(TokenTrigger):
    """The highest per-token entropy (nats) >= threshold."""

    entropy = True
    fires_high = True
    default_threshold = 2.0
    valid_range = (0.0, math.inf)
    grid = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0)
    score_doc = "the highest token entropy in nats"

    def values(self, draft: Sentence) -> list[float]:
        if draft.entropies is None:
            if draft.top_logprobs is None:
                raise LMError("the LM returned no per-token entropies for the entropy trigger")
            return [topk_entropy([lp for _, lp in top]) for top in draft.top_logprobs]
        return draft.entropies

    def aggregate(self, values: list[float]) -> float:
        return max(values)


@trigger("margin")
class Margin(TokenTrigger):
    """The smallest gap between the two most likely tokens' probabilities <= threshold."""

    top_logprobs = 2
    default_threshold = 0.2
    valid_range = (0.0, 1.0)
    grid = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    score_doc = "the smallest gap between the top two token probabilities"

    def values(self, draft: Sentence) -> list[float]:
        if draft.top_logprobs is None:
            raise LMError("the LM returned no per-token top logprobs for the margin trigger")
        return [top_margin(top) for top in draft.top_logprobs]

    def aggregate(self, values: list[float]) -> float:
        return min(values)


def top_margin(top: Sequence[Sequence]) -> float:
    """p(most likely) - p(runner-up) from ``[text, logprob]`` pairs, most likely first. With one
    pair only, the runner-up is taken to hold all the remaining mass (a lower bound of the margin)."""
    probs = sorted((math.exp(lp) for _, lp in top), reverse=True)
    if not probs:
        return 0.0
    runner_up = probs[1] if len(probs) > 1 else max(0.0, 1.0 - probs[0])
    return max(0.0, probs[0] - runner_up)


_WORD = re.compile(r"\w+")


def ignored_tokens(tokens: Sequence[str], ctx: Context, terms: Sequence[str], known: bool) -> set[int]:
    """Indexes of the tokens that belong to a listed term (case-insensitive, whole words) or, with
    ``known``, to a word of the question or of the documents in context (case-insensitive).

    A token belongs to them when some of its non-space characters lie within such an occurrence and
    all its word characters do: a sub-word piece of a listed name does, a period after it does not
    (it has no character inside), nor a token that also holds the start of another word."""
    if not terms and not known:
        return set()
    text = "".join(tokens)
    inside = [False] * len(text)
    for term in terms:
        for m in re.finditer(rf"(?<!\w){re.escape(term)}(?!\w)", text, flags=re.IGNORECASE):
            inside[m.start() : m.end()] = [True] * (m.end() - m.start())
    if known:
        seen = {
            w.casefold() for w in _WORD.findall(" ".join([ctx.question, *(f"{d.title} {d.text}" for d in ctx.docs)]))
        }
        for m in _WORD.finditer(text):
            if m.group().casefold() in seen:
                inside[m.start() : m.end()] = [True] * (m.end() - m.start())
    out, pos = set(), 0
    for i, tok in enumerate(tokens):
        chars = range(pos, pos + len(tok))
        pos += len(tok)
        some = any(inside[c] for c in chars if not text[c].isspace())
        if some and all(inside[c] for c in chars if _WORD.match(text[c])):
            out.add(i)
    return out


# -- self_check ------------------------------------------------------------------------------------

SELF_CHECK_PROMPT = (
    "Read the documents, the question and the answer so far, then decide whether the next sentence "
    "states a fact that the documents do not give. Reply with JSON on one line: "
    '{"needs_fact": true or false, "missing": "a search query for the missing fact, or empty"}.\n\n'
    "Documents:\n[1] Ivo Lanark: The friend of Ivo Lanark is Bea Tull.\n"
    "Question: Who is the mother of the friend of Ivo Lanark?\n"
    "Answer so far: The friend of Ivo Lanark is Bea Tull.\n"
    "Next sentence: The mother of Bea Tull is Rosa Tull.\n"
    'JSON: {"needs_fact": true, "missing": "mother of Bea Tull"}\n\n'
    "Documents:\n[1] Nell Oster: The father of Nell Oster is Tam Oster.\n"
    "Question: Who is the father of Nell Oster?\n"
    "Answer so far:\n"
    "Next sentence: The father of Nell Oster is Tam Oster.\n"
    'JSON: {"needs_fact": false, "missing": ""}\n\n'
)
SELF_CHECK_QUERY = "{docs}Question: {question}\nAnswer so far:{answer}\nNext sentence:{draft}\nJSON:"
SELF_CHECK_STOP = ("\n\n", "\nDocuments:")
SELF_CHECK_TOKENS = 64
#: Characters of an unparseable reply kept in the record.
REPLY_CHARS = 200


def parse_self_check(reply: str) -> tuple[bool, str] | None:
    """``(needs_fact, missing)`` from the first JSON object in ``reply``; None when there is none,
    or ``needs_fact`` is not a boolean or ``missing`` (optional) not a string."""
    start = reply.find("{")
    if start < 0:
        return None
    try:
        obj, _ = json.JSONDecoder().raw_decode(reply[start:])
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("needs_fact"), bool):
        return None
    missing = obj.get("missing")
    if missing is None:
        missing = ""
    if not isinstance(missing, str):
        return None
    return obj["needs_fact"], " ".join(missing.split())


@trigger("self_check")
class SelfCheck(Trigger):
    """One LM call per draft: does it need a fact the documents do not give? Fires on
    ``needs_fact`` true; the score is 1 then, 0 otherwise; there is no threshold."""

    needs_logprobs = False
    fires_high = True
    score_doc = "1 when the LM says the draft needs a fact, else 0"

    def __init__(self, threshold: float | None = None, ignore_terms: Sequence[str] = (), ignore_known: bool = False):
        if ignore_terms or ignore_known:
            raise ValueError(
                "ignore_terms and ignore_known apply to the probability triggers "
                f"({', '.join(n for n in names() if n != self.name)}), not {self.name}"
            )
        super().__init__(threshold)

    @staticmethod
    def prompt(draft: Sentence, ctx: Context) -> Prompt:
        docs = format_docs(list(ctx.docs)) if ctx.docs else "Documents: none\n"
        dynamic = SELF_CHECK_QUERY.format(docs=docs, question=ctx.question, answer=ctx.answer, draft=draft.text)
        return Prompt(SELF_CHECK_PROMPT, dynamic)

    def judge(self, draft: Sentence, ctx: Context) -> Judgement | None:
        if not draft.text.strip():
            return None
        call = ctx.lm.generate(self.prompt(draft, ctx), SELF_CHECK_TOKENS, stop=SELF_CHECK_STOP, purpose=SELF_CHECK)
        parsed = parse_self_check(call.text)
        if parsed is None:
            record = {"trigger": self.name, "score": None, "threshold": None, "fired": False, "unparsed": True}
            record["reply"] = call.text[:REPLY_CHARS]
            return Judgement(record, calls=[call])
        needs, missing = parsed
        record = {"trigger": self.name, "score": 1.0 if needs else 0.0, "threshold": None, "fired": needs}
        record["missing"] = missing
        return Judgement(record, calls=[call], query=(missing or draft.text.strip()) if needs else None)


class Gated:
    """What a strategy with a confidence trigger asks of its LM, from the trigger its ``validate``
    built into ``_gate`` (flare_direct, adaptive)."""

    _gate: Trigger
    #: The parameter that holds the trigger's threshold.
    threshold_param: ClassVar[str] = "threshold"

    #: The draft its trigger judges, from the draft call's record (``purpose`` "draft"): flare_direct
    #: judges the call's first sentence, adaptive its whole output. ``flarebench score`` rebuilds
    #: the judged drafts of a recorded run with it (:mod:`flarebench.bench.trigger_scores`).
    judged_draft: ClassVar[Callable[[LMCall], Sentence]] = staticmethod(first_sentence_of)

    def budget_knob(self) -> Knob | None:
        """The trigger's threshold, over its grid; None for a trigger without one (self_check)."""
        cls = type(self._gate)
        return Knob(self.threshold_param, cls.grid, rate_rises=not cls.fires_high) if cls.grid else None

    @property
    def gate_trigger(self) -> Trigger:
        """The configured trigger (built by ``validate``)."""
        return self._gate

    def needs(self) -> frozenset[str]:
        """Every trigger but ``self_check`` judges per-token logprobs; ``entropy`` and ``margin``
        need per-token alternatives (or entropies) too."""
        gate, needs = self._gate, set()
        if gate.needs_logprobs:
            needs.add(LOGPROBS)
        if gate.top_logprobs or gate.entropy:
            needs.add(TOP_LOGPROBS)
        return frozenset(needs)
