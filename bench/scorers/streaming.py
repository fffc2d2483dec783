"""Streaming: how long a reader watching the answer stream waits for its first sentence, and for the
longest pause between two sentences (whatever fills it: active retrieval, a regeneration, a slow
sentence).

**Streaming model.** A trace holds no clock times, only each LM call's and each retrieval's own
``seconds``; they ran one after another, so the answer's timeline is their running sum, in the
order :func:`events` gives: step by step, and within a step

* the retrievals first: each strategy retrieves before the call that uses the documents (the
  first hop before the first step; ``fixed_interval``, ``ircot``, ``self_ask`` and
  ``flare_instruct`` record a retrieval on the step whose call it served), then the step's calls in
  their recorded order;
* except FLARE direct's retrievals during a step (reason ``low_confidence``): the draft (and, with
  explicit queries, the question-generation calls, purpose ``query``) come first, then those
  retrievals, then the ``regenerate`` call; adaptive's retrieval (reason ``adaptive``) likewise
  runs after its closed-book draft and before its open-book answer (purpose ``regenerate``).
  Which retrieval comes between which calls is not recorded; it is read from the reasons and
  purposes as ``flare_direct`` and ``adaptive`` make them.

A retrieval takes its search's seconds and then those of the LM calls a reranker made to order its
results (``--rerank lm``, recorded on the retrieval, purpose ``rerank``): the reader waits for both.

A step's text is shown as the call that wrote it generates it: the step's last call that is not a
question-generation call (the draft when FLARE's gate did not fire, the regeneration when it did;
a drafted sentence that was regenerated is never shown; the step's text is matched to the call's
up to the whitespace a strategy tidies, as self_ask does). Its character ``c`` is reached at the
call's start + its prefill + (its seconds - its prefill) x (tokens through ``c`` / its completion
tokens): the prompt's evaluation (``prefill_seconds``, recorded by the in-process model) comes
before the first token, and no per-token time is recorded, so the rest is spread linearly over the
tokens. A call recorded without its prefill (a server answering whole, a cache hit, a trace made
before it was recorded) is spread whole over its tokens, its prompt's evaluation included (a
sentence ending early in such a call is reached earlier than it really was). A call recorded
without tokens is spread over its characters. Text the strategy wrote itself
rather than the call (an abstention, a closed search call) is shown when the step ends, and so is
a step's text when work of the same step followed its call (explicit FLARE queries that yielded no
usable query).

Only what reaches the output is shown: with IRCoT's ``reader`` on, the output is the reader call's
(purpose ``reader``), so the chain-of-thought steps are waiting time and the sentences are the
reader's. ``[Search(query)]`` calls (FLARE instruct) are removed before the shown text is split
into sentences by the project's splitter (:func:`flarebench.strategies.sentences.split_sentences`);
a sentence's time is that of its last non-space character, and the text after the last sentence
end (an answer cut by the token cap) counts as a sentence too.

Per answer, ``ttfs_s`` is its first sentence's time, and ``stall_s`` the longest wait between the
ends of two consecutive sentences (none with fewer than two). An answer without a sentence (an
empty output) and a probe that raised have neither: they are left out of the percentiles, never
counted 0, and a percentile with nothing to take it over is empty. Nor has the answer of a service
under test (``http``): it arrives whole, and how the service would stream it is not observed.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from flarebench.bench.scorers.registry import LOWER, Column, Group, Scoring, scorer, unreported
from flarebench.strategies.flare_instruct import SEARCH_CALL_RE
from flarebench.strategies.records import ADAPTIVE, LOW_CONFIDENCE, LMCall, Retrieval, Step, Trace
from flarebench.strategies.sentences import split_sentences

#: Retrieval reasons made inside a step, after its draft and before its regeneration (FLARE direct;
#: adaptive, whose open-book answer call has the purpose ``regenerate``).
MID_STEP_REASONS = frozenset({LOW_CONFIDENCE, ADAPTIVE})
#: The call purpose that follows a step's mid-step retrievals (FLARE direct's regeneration).
REGENERATE = "regenerate"
#: Call purposes whose text is never shown: FLARE direct's explicit question generation.
UNSHOWN_PURPOSES = frozenset({"query"})
#: The call purpose whose step alone is the output when present (IRCoT's reader).
READER = "reader"


def events(step: Step) -> list[LMCall | Retrieval]:
    """The step's calls and retrievals in the order they ran (see the module docstring)."""
    before = [r for r in step.retrievals if r.reason not in MID_STEP_REASONS]
    mid = [r for r in step.retrievals if r.reason in MID_STEP_REASONS]
    calls = list(step.lm_calls)
    at = next((i for i, c in enumerate(calls) if c.purpose == REGENERATE), len(calls))
    return [*before, *calls[:at], *mid, *calls[at:]]


def _shares(call: LMCall, n_chars: int) -> list[float]:
    """For each of the call's first ``n_chars`` characters, the share of the call's time spent
    when it was generated: tokens through that character / completion tokens (0-1)."""
    if call.tokens and call.completion_tokens > 0:
        ends, pos = [], 0
        for tok in call.tokens:
            pos += len(tok)
            ends.append(pos)
        through = [min(bisect.bisect_left(ends, i + 1) + 1, len(ends)) for i in range(n_chars)]
        return [min(1.0, k / call.completion_tokens) for k in through]
    length = len(call.text)
    return [min(1.0, (i + 1) / length) if length else 1.0 for i in range(n_chars)]


def _aligned(shown: str, written: str) -> list[int]:
    """For each leading character of ``shown`` that the call wrote, its index in the call's text
    ``written``. The two agree but for whitespace, which a strategy may tidy (self_ask joins a turn
    as one space-led line): a space in ``shown`` stands for a run of whitespace in ``written``, or
    for none. The first character that disagrees ends the match."""
    out: list[int] = []
    j = 0
    for ch in shown:
        if ch.isspace():
            k = j
            while k < len(written) and written[k].isspace():
                k += 1
            out.append(max(k - 1, 0) if k > j else max(j - 1, 0))
            j = k
        elif j < len(written) and written[j] == ch:
            out.append(j)
            j += 1
        else:
            break
    return out


def shown_text(trace: Trace) -> tuple[str, list[float]]:
    """The text a reader is shown (search calls removed) and, per character, the second of the
    answer's timeline at which it appears."""
    readers = [s for s in trace.steps if any(c.purpose == READER for c in s.lm_calls)]
    shown = {id(s) for s in (readers or trace.steps)}
    chars: list[str] = []
    times: list[float] = []
    t = 0.0
    for step in trace.steps:
        order = events(step)
        starts: dict[int, float] = {}
        for e in order:
            if isinstance(e, LMCall):
                starts[id(e)] = t
                t += float(e.seconds)
            else:  # the search, then the reranker's LM calls that ordered its results (--rerank lm)
                t += float(e.seconds) + sum(float(c.seconds) for c in e.lm_calls)
        if id(step) not in shown or not step.text:
            continue
        writers = [c for c in step.lm_calls if c.purpose not in UNSHOWN_PURPOSES]
        writer = writers[-1] if writers else None
        if writer is None:
            step_times = [t] * len(step.text)
        else:
            # Held to the step's end when work of the step followed the call that wrote its text.
            floor = t if order[-1] is not writer else 0.0
            at = _aligned(step.text, writer.text)
            shares = _shares(writer, at[-1] + 1 if at else 0)
            seconds = float(writer.seconds)
            # Generation starts once the prompt is evaluated, where the backend observed when.
            prefill = min(float(writer.prefill_seconds or 0.0), seconds)
            start = starts[id(writer)] + prefill
            step_times = [max(floor, start + (seconds - prefill) * shares[j]) for j in at]
            step_times += [t] * (len(step.text) - len(at))
        chars.append(step.text)
        times += step_times
    text = "".join(chars)
    kept_text, kept_times, pos = [], [], 0
    for m in SEARCH_CALL_RE.finditer(text):
        kept_text.append(text[pos : m.start()] + " ")
        kept_times += times[pos : m.start()] + [times[m.end() - 1]]
        pos = m.end()
    kept_text.append(text[pos:])
    kept_times += times[pos:]
    return "".join(kept_text), kept_times


def sentence_times(trace: Trace) -> list[float]:
    """The second at which each shown sentence is complete, in order; none for a probe that raised."""
    if trace.error:
        return []
    text, times = shown_text(trace)
    out, offset = [], 0
    for piece in split_sentences(text):
        body = piece.rstrip()
        if body.strip():
            out.append(times[offset + len(body) - 1])
        offset += len(piece)
    return out


def streaming_row(trace: Trace, probe: Any, row: Mapping[str, Any]) -> dict[str, float | None]:
    """``ttfs_s`` (seconds to the first shown sentence) and ``stall_s`` (the longest wait between
    two consecutive shown sentences); None when the answer has no sentence, or fewer than two, and
    for a service under test (its answer arrives whole: how it would stream is unknown)."""
    ends = sentence_times(trace) if trace.service is None else []
    return {
        "ttfs_s": ends[0] if ends else None,
        "stall_s": float(max(np.diff(ends))) if len(ends) >= 2 else None,
    }


def unreported_stream(summary: pd.DataFrame, scoring: Scoring) -> list[str]:
    """A service's answer arrives whole."""
    why = "a service's answer arrives whole: when its sentences would reach a reader is unknown"
    return unreported(summary, scoring, ("ttfs_p50_s", "ttfs_p95_s", "stall_p95_s"), lambda g: why)


_MODEL = "on the trace's timeline of LM calls and retrievals (see docs/metrics.md, Streaming)"


@scorer(
    Column(
        "ttfs_p50_s",
        "Median time to the first sentence, in seconds: from the start of the answer to the end of the first "
        f"sentence shown to a reader streaming it, {_MODEL}; over the answers with a sentence (numpy percentile, "
        "linear interpolation); empty when none has one.",
        better=LOWER,
    ),
    Column(
        "ttfs_p95_s",
        "95th percentile of the time to the first sentence, in seconds, over the answers with a sentence; "
        "empty when none has one.",
        better=LOWER,
    ),
    Column(
        "stall_p95_s",
        "95th percentile over answers of the longest wait between the ends of two consecutive shown sentences, "
        "in seconds (drafts, retrievals and regenerations between them included); answers with fewer than two "
        "sentences left out; empty (never 0) when none has two.",
        better=LOWER,
    ),
    order=85,
    per_probe=streaming_row,
    needs=("ttfs_s", "stall_s"),
    findings=unreported_stream,
)
def streaming(g: Group) -> dict[str, float | None]:
    """numpy's default percentile method over the answers that have the value, failed probes left out."""

    def values(column: str) -> np.ndarray:
        return pd.to_numeric(g.rows[column], errors="coerce")[~g.failed].dropna().to_numpy(dtype=float)

    ttfs, stall = values("ttfs_s"), values("stall_s")
    p50, p95 = np.percentile(ttfs, [50, 95]) if len(ttfs) else (None, None)
    return {
        "ttfs_p50_s": None if p50 is None else float(p50),
        "ttfs_p95_s": None if p95 is None else float(p95),
        "stall_p95_s": float(np.percentile(stall, 95)) if len(stall) else None,
    }
