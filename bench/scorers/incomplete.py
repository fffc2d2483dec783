"""Incomplete answers: why an answer never reached a final-answer statement, one reason per answer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from flarebench.bench.answers import ABSTAINED, STATEMENT
from flarebench.bench.scorers.registry import LOWER, Column, Group, scorer
from flarebench.strategies.records import Trace

#: The reasons, in the order of their summary columns ``incomplete_<reason>`` (row column ``incomplete``).
INCOMPLETE_REASONS = ("token_cap", "step_cap", "no_answer", "abstain", "empty")
#: The reason of a long answer (``answer_type`` ``long``) that misses a required fact: long answers
#: are judged by their facts (:mod:`flarebench.bench.scorers.facts`), not by the format reasons
#: above, but one the token cap cut before it stated them all has ``token_cap``, so that a reader
#: can tell a cap too low from facts the model left out, and one the strategy ended with its
#: abstention has ``abstain``.
MISSING_FACTS = "missing_facts"


def incomplete_reason(trace: Trace, rule: str) -> str | None:
    """Why the answer never reached a final answer, or None when it did (or the probe errored).

    One reason per answer, the first that applies: ``empty`` (no output at all), ``abstain`` (the
    strategy abstained, or the answer says there is none: ``rule`` ``ABSTAINED``), ``token_cap`` /
    ``step_cap`` (generation was cut by that cap before any final-answer statement), ``no_answer``
    (the model stopped without one, stop_reason ``eos``, or any other ending without a statement; a
    last-clause fallback answer is still this). An error is not an incomplete answer: it is counted
    in ``errors`` only.
    """
    if trace.error or trace.stop_reason == "error":
        return None
    if not (trace.output or "").strip():
        return "empty"
    if trace.stop_reason == "abstain" or rule == ABSTAINED:
        return "abstain"
    if rule == STATEMENT:
        return None
    if trace.stop_reason in ("token_cap", "step_cap"):
        return trace.stop_reason
    return "no_answer"


def incomplete_row(trace: Trace, probe: Any, row: Mapping[str, Any]) -> dict[str, Any]:
    """``stop_reason`` as the trace recorded it, and ``incomplete``, the reason of
    :func:`incomplete_reason` for the rule the answer scorer applied (``answer_rule``). A long
    probe's reason is ``abstain`` when the strategy abstained, else :data:`MISSING_FACTS` when its
    output misses a required fact (the facts scorer's ``facts_missing``; ``token_cap`` when the token
    cap cut it), else none; an errored probe has none."""
    if getattr(probe, "answer_type", None) == "long":
        failed = bool(trace.error) or trace.stop_reason == "error"
        reason = None
        if not failed and trace.stop_reason == "abstain":  # the strategy ended it with its abstention
            reason = "abstain"
        elif not failed and row.get("facts_missing"):
            reason = "token_cap" if trace.stop_reason == "token_cap" else MISSING_FACTS
    else:
        reason = incomplete_reason(trace, row["answer_rule"])
    return {"stop_reason": trace.stop_reason, "incomplete": reason}


_DOCS = {
    "token_cap": "Share of probes, 0-1, cut by the token cap before a final-answer statement (a long answer: "
    "before it stated every required fact).",
    "step_cap": "Share of probes, 0-1, cut by an iteration cap (e.g. IRCoT's max_steps) before a final-answer "
    "statement.",
    "no_answer": "Share of probes, 0-1, whose output ended (the model stopped) without a final-answer "
    "statement; an answer then read from the last clause (see em_lenient) still counts here.",
    "abstain": "Share of probes, 0-1, where the strategy abstained (FLARE direct with abstain on) or the "
    'answer declined to give one ("the answer is not in the documents", "cannot be determined", "no '
    'information", "I don\'t know"): such an answer is not a stated answer and scores 0.',
    "empty": "Share of probes, 0-1, with an empty output.",
}


def _reasons(g: Group) -> pd.Series:
    """Each row's reason (:func:`incomplete_row`), None where it has none or its probe raised."""
    # Rows made before the incomplete column existed: no reasons.
    rows = g.rows
    reasons = rows["incomplete"] if "incomplete" in rows else pd.Series([None] * len(rows), index=rows.index)
    return reasons.where(reasons.notna() & ~g.failed, None)


def incomplete_flags(g: Group) -> pd.Series:
    """True on the rows whose answer is incomplete (any reason, a long answer missing a fact
    included): what incomplete_rate counts, per probe."""
    return _reasons(g).notna()


@scorer(
    Column(
        "incomplete_rate",
        "Share of probes, 0-1, whose answer never reached a final-answer statement: the sum "
        "of the five incomplete_ columns (each answer has at most one reason); on long probes, also those "
        "that miss a required fact the token cap did not cut (counted here only; the notes say so). An errored "
        "probe counts among the probes but never as incomplete (so incomplete_rate + errors / n is the share "
        "without a complete answer); empty when every probe raised.",
        better=LOWER,
    ),
    *(Column(f"incomplete_{r}", _DOCS[r], better=LOWER) for r in INCOMPLETE_REASONS),
    order=50,
    scores_errors=True,
    per_probe=incomplete_row,
)
def incomplete(g: Group) -> dict[str, float]:
    """Each reason's share of the probes; a probe that raised has none. Long probes missing a
    required fact that the token cap did not cut add their share to incomplete_rate only (the
    run's notes say so)."""
    n = len(g.rows)
    if not n or g.failed.all():
        return {}  # no answer to judge: empty, not a rate of 0 that reads as none incomplete
    reasons = _reasons(g)
    shares = {f"incomplete_{r}": float((reasons == r).sum()) / n for r in INCOMPLETE_REASONS}
    rate = sum(shares.values())
    missing = int((reasons == MISSING_FACTS).sum())
    if missing:  # added only when there are some, so that a run of short probes sums exactly as before
        rate += missing / n
    return {"incomplete_rate": rate, **shares}
