"""Metrics: every number is computed from a Trace and its Probe alone.

Two levels:

* :func:`probe_row` turns one (trace, probe) pair into one flat dict: scores, counts, tokens, times.
* :func:`summarize` turns a DataFrame of those rows into one row per strategy, with the columns
  named in :data:`SUMMARY_COLUMNS` and defined in :data:`COLUMN_DOCS`.

Nothing is rounded here: reports round for display. Scores, rates and recall are on a 0-1 scale and
times are in seconds (see the Contract in DESIGN.md).

Probes are used by duck typing: only ``id``, ``answers``, ``answer_type``, ``gold_doc_ids`` and
``metadata`` are read, so this module does not import ``probes``.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from strategies.records import Trace

__all__ = [
    "COLUMN_DOCS",
    "SUMMARY_COLUMNS",
    "exact_match",
    "normalize_answer",
    "probe_row",
    "score_answer",
    "set_exact_match",
    "set_f1",
    "split_items",
    "summarize",
    "to_yes_no",
    "token_f1",
]

# --------------------------------------------------------------------------------------------
# Answer normalisation and scoring
# --------------------------------------------------------------------------------------------

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")


def normalize_answer(s: str | None) -> str:
    """SQuAD normalisation: lowercase, drop punctuation, drop articles (a/an/the), collapse whitespace.

    ``None`` normalises to ``""``. Punctuation is removed before articles, so ``"The  Cat!"`` and
    ``"cat"`` both give ``"cat"``.
    """
    if not s:
        return ""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCTUATION)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _aliases(answers: Iterable[str] | str) -> list[str]:
    # A bare string is one alias, not a sequence of characters.
    if isinstance(answers, str):
        return [answers]
    return [a for a in answers if a is not None]


def exact_match(pred: str | None, answers: Iterable[str] | str) -> float:
    """1.0 when the normalised prediction equals the normalised form of any alias, else 0.0.

    A prediction that is ``None`` or normalises to nothing scores 0 (an answer made only of
    punctuation or articles is no answer, even against a degenerate gold alias).
    """
    p = normalize_answer(pred)
    if not p:
        return 0.0
    return float(any(p == normalize_answer(a) for a in _aliases(answers)))


def _f1_tokens(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    common = Counter(pred_tokens) & Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(pred: str | None, answers: Iterable[str] | str) -> float:
    """SQuAD token F1 (bag of normalised tokens, multiplicity counted), max over aliases.

    ``None`` or an empty (after normalisation) prediction scores 0.
    """
    pred_tokens = normalize_answer(pred).split()
    if not pred_tokens:
        return 0.0
    best = 0.0
    for alias in _aliases(answers):
        gold_tokens = normalize_answer(alias).split()
        if gold_tokens:
            best = max(best, _f1_tokens(pred_tokens, gold_tokens))
    return best


# Separators between items of a list answer. A comma / semicolon / newline may be followed by
# "and" or "&" (the Oxford comma: "A, B, and C"); a bare "and" or "&" also separates ("A and B").
_ITEM_SEP = re.compile(r"(\s*[,;\n]\s*(?:(?:and|&)\s+)?|\s+and\s+|\s*&\s*)", re.IGNORECASE)


def split_items(pred: str | None, keep: Iterable[str] = ()) -> list[str]:
    """Split a list answer into normalised items, in order, empty items dropped.

    ``"Alice, Bob and Carol"``, ``"Alice, Bob, and Carol"``, ``"Alice; Bob"`` and one item per line
    all split as expected. Because "and" and commas also occur inside names ("Tom and Jerry",
    "Washington, D.C."), ``keep`` may list known items (the gold items when scoring): adjacent
    pieces whose joined text normalises to a kept item stay one item (longest match wins).
    """
    if not pred:
        return []
    pieces = _ITEM_SEP.split(pred)
    parts, seps = pieces[0::2], pieces[1::2]
    keep_norm = {normalize_answer(k) for k in keep} - {""}

    def span(i: int, j: int) -> str:  # raw text of parts[i:j] with their separators
        out = parts[i]
        for k in range(i + 1, j):
            out += seps[k - 1] + parts[k]
        return out

    items: list[str] = []
    i = 0
    while i < len(parts):
        j = i + 1
        if keep_norm:
            for end in range(len(parts), i + 1, -1):
                if normalize_answer(span(i, end)) in keep_norm:
                    j = end
                    break
        item = normalize_answer(span(i, j))
        if item:
            items.append(item)
        i = j
    return items


def _gold_items(answers: Iterable[str] | str) -> set[str]:
    # Gold items are already a list: normalise them, never split them.
    return {normalize_answer(a) for a in _aliases(answers)} - {""}


def set_exact_match(pred: str | None, answers: Iterable[str] | str) -> float:
    """1.0 when the set of predicted items equals the set of gold items (both normalised), else 0.0.

    Order and repeats do not matter; an empty prediction scores 0.
    """
    gold = _gold_items(answers)
    items = set(split_items(pred, keep=gold))
    return float(bool(items) and items == gold)


def set_f1(pred: str | None, answers: Iterable[str] | str) -> float:
    """Set F1 over items: precision = correct items / predicted items, recall = correct / gold items."""
    gold = _gold_items(answers)
    items = set(split_items(pred, keep=gold))
    correct = len(items & gold)
    if correct == 0:
        return 0.0
    precision = correct / len(items)
    recall = correct / len(gold)
    return 2 * precision * recall / (precision + recall)


_YES = frozenset({"yes", "true"})
_NO = frozenset({"no", "false"})


def to_yes_no(pred: str | None) -> str | None:
    """Map an answer to ``"yes"``/``"no"`` by its first normalised word (yes/true, no/false), else None.

    Only the first word counts: "Yes, because ..." is yes; "I think yes" is None (no clear verdict).
    """
    words = normalize_answer(pred).split()
    if not words:
        return None
    if words[0] in _YES:
        return "yes"
    if words[0] in _NO:
        return "no"
    return None


def _gold_yes_no(answers: Iterable[str] | str) -> str:
    for a in _aliases(answers):
        yn = to_yes_no(a)
        if yn is not None:
            return yn
    raise ValueError(f"yes_no probe has no yes/no gold answer: {answers!r}")


def score_answer(pred: str | None, probe: Any) -> tuple[float, float]:
    """Return ``(em, f1)`` for a prediction, by ``probe.answer_type``.

    * ``single`` (also when the type is missing/empty): alias-aware EM and token F1.
    * ``set``: exact set match and set F1 over items (see :func:`split_items`).
    * ``yes_no``: accuracy, reported as both EM and F1.
    """
    kind = getattr(probe, "answer_type", None) or "single"
    answers = probe.answers
    if kind == "single":
        return exact_match(pred, answers), token_f1(pred, answers)
    if kind == "set":
        return set_exact_match(pred, answers), set_f1(pred, answers)
    if kind == "yes_no":
        acc = float(to_yes_no(pred) == _gold_yes_no(answers))
        return acc, acc
    raise ValueError(f"unknown answer_type {kind!r} for probe {getattr(probe, 'id', '?')!r}")


# --------------------------------------------------------------------------------------------
# Per-probe rows
# --------------------------------------------------------------------------------------------


def probe_row(trace: Trace, probe: Any) -> dict[str, Any]:
    """One flat row for one (strategy, probe): scores, counts, tokens, times, recall, metadata.

    A trace with an ``error`` scores 0 for em and f1 whatever answer it holds. ``recall`` is the share
    of the probe's gold doc ids found in the union of every retrieval's doc ids (first hop included);
    it is ``None`` when the probe has no gold docs and 0.0 when it has some but nothing was retrieved.
    ``probe.metadata`` keys are added with the prefix ``meta_``.
    """
    if trace.probe_id and trace.probe_id != probe.id:
        raise ValueError(f"trace is for probe {trace.probe_id!r}, not {probe.id!r}")

    error = trace.error or None  # "" is no error
    if error is None:
        em, f1 = score_answer(trace.answer, probe)
    else:
        em, f1 = 0.0, 0.0  # a failed probe is a wrong answer, not a missing one

    calls = trace.lm_calls
    retrievals = trace.retrievals
    lm_s = float(sum(c.seconds for c in calls))
    retrieval_s = float(sum(r.seconds for r in retrievals))
    latency_s = float(trace.seconds)

    gold = set(getattr(probe, "gold_doc_ids", None) or [])
    if gold:
        retrieved = {d for r in retrievals for d in r.doc_ids}
        recall: float | None = len(gold & retrieved) / len(gold)
    else:
        recall = None

    row: dict[str, Any] = {
        "strategy": trace.strategy,
        "probe_id": probe.id,
        "em": em,
        "f1": f1,
        "answer": trace.answer,
        "stop_reason": trace.stop_reason,
        "error": error,
        "steps": len(trace.steps),
        "triggered_steps": sum(1 for s in trace.steps if s.triggered),
        "retrievals": len(retrievals),
        "lm_calls": len(calls),
        "prompt_tokens": sum(c.prompt_tokens for c in calls),
        "evaluated_tokens": sum(c.evaluated_tokens for c in calls),
        "completion_tokens": sum(c.completion_tokens for c in calls),
        "lm_s": lm_s,
        "retrieval_s": retrieval_s,
        "latency_s": latency_s,
        # What the runner spent outside the LM and the retriever (prompting, parsing, caching).
        # Clamped at 0: timer granularity can make the parts sum slightly above the wall time.
        "harness_s": max(0.0, latency_s - lm_s - retrieval_s),
        "recall": recall,
    }
    for key, value in (getattr(probe, "metadata", None) or {}).items():
        row[f"meta_{key}"] = value
    return row


# --------------------------------------------------------------------------------------------
# Per-strategy summary
# --------------------------------------------------------------------------------------------

SUMMARY_COLUMNS: list[str] = [
    "strategy",
    "n",
    "errors",
    "em",
    "f1",
    "recall",
    "retrieval_rate",
    "retrievals_per_q",
    "lm_calls_per_q",
    "prompt_tokens_per_q",
    "evaluated_tokens_per_q",
    "completion_tokens_per_q",
    "latency_p50_s",
    "latency_p95_s",
    "lm_s_per_q",
    "retrieval_s_per_q",
    "harness_s_per_q",
    "harness_share",
]

COLUMN_DOCS: dict[str, str] = {
    "strategy": "The strategy spec as typed (name or name:key=value,...); two settings of one strategy are two rows.",
    "n": "Number of probes scored for this strategy.",
    "errors": "Number of probes whose run raised an error; they are scored 0 for EM and F1.",
    "em": "Mean exact match, 0-1: SQuAD-normalised answer equals a gold alias; exact set match for list "
    "answers; accuracy for yes/no questions.",
    "f1": "Mean F1, 0-1: SQuAD token F1 (best alias) for single answers; set F1 over items for list "
    "answers; accuracy for yes/no questions.",
    "recall": "Mean share of a probe's gold documents found among all documents retrieved while answering "
    "it (first hop included), 0-1; probes without gold documents are left out (empty if none has any).",
    "retrieval_rate": "Generation steps that triggered a retrieval (the first-hop retrieval with the "
    "question not counted) divided by generation steps, summed over all probes; 0 when there are no steps.",
    "retrievals_per_q": "Mean number of retriever calls per question, the first hop included.",
    "lm_calls_per_q": "Mean number of LM calls per question.",
    "prompt_tokens_per_q": "Mean prompt tokens sent to the LM per question, summed over its calls.",
    "evaluated_tokens_per_q": "Mean prompt tokens the backend actually evaluated per question "
    "(prompt tokens minus those served from a reused KV prefix or cache).",
    "completion_tokens_per_q": "Mean tokens generated by the LM per question, summed over its calls.",
    "latency_p50_s": "Median wall time per question in seconds, as measured by the runner "
    "(numpy percentile, linear interpolation).",
    "latency_p95_s": "95th percentile of wall time per question in seconds (numpy percentile, linear interpolation).",
    "lm_s_per_q": "Mean seconds per question spent in LM calls.",
    "retrieval_s_per_q": "Mean seconds per question spent in retriever calls.",
    "harness_s_per_q": "Mean seconds per question spent outside LM and retriever calls "
    "(wall time minus LM time minus retrieval time, floored at 0).",
    "harness_share": "Harness seconds divided by wall seconds, summed over all probes, 0-1; "
    "0 when no time was recorded.",
}

_REQUIRED_ROW_COLUMNS = [
    "strategy",
    "em",
    "f1",
    "error",
    "recall",
    "steps",
    "triggered_steps",
    "retrievals",
    "lm_calls",
    "prompt_tokens",
    "evaluated_tokens",
    "completion_tokens",
    "latency_s",
    "lm_s",
    "retrieval_s",
    "harness_s",
]


def _ratio(num: float, den: float) -> float:
    return float(num) / float(den) if den else 0.0


def _summary_row(strategy: str, g: pd.DataFrame) -> dict[str, Any]:
    failed = g["error"].notna() & (g["error"].astype(str) != "")
    recall = pd.to_numeric(g["recall"], errors="coerce")
    latency = g["latency_s"].astype(float).to_numpy()
    p50, p95 = np.percentile(latency, [50, 95])  # numpy's default method is linear interpolation
    return {
        "strategy": strategy,
        "n": len(g),
        "errors": int(failed.sum()),
        # Errors count as 0 even if a row carries a score (e.g. rows edited or loaded from elsewhere).
        "em": float(g["em"].astype(float).where(~failed, 0.0).mean()),
        "f1": float(g["f1"].astype(float).where(~failed, 0.0).mean()),
        "recall": float(recall.mean()) if recall.notna().any() else float("nan"),
        # Ratio of sums, not mean of per-probe ratios: every generation step weighs the same.
        "retrieval_rate": _ratio(g["triggered_steps"].sum(), g["steps"].sum()),
        "retrievals_per_q": float(g["retrievals"].mean()),
        "lm_calls_per_q": float(g["lm_calls"].mean()),
        "prompt_tokens_per_q": float(g["prompt_tokens"].mean()),
        "evaluated_tokens_per_q": float(g["evaluated_tokens"].mean()),
        "completion_tokens_per_q": float(g["completion_tokens"].mean()),
        "latency_p50_s": float(p50),
        "latency_p95_s": float(p95),
        "lm_s_per_q": float(g["lm_s"].mean()),
        "retrieval_s_per_q": float(g["retrieval_s"].mean()),
        "harness_s_per_q": float(g["harness_s"].mean()),
        "harness_share": _ratio(g["harness_s"].sum(), g["latency_s"].sum()),
    }


def summarize(rows: pd.DataFrame, order: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per strategy, with exactly the columns of :data:`SUMMARY_COLUMNS` (see :data:`COLUMN_DOCS`).

    ``rows`` holds :func:`probe_row` dicts. Strategies come in ``order`` when given (names in
    ``order`` without rows are skipped; strategies with rows but not in ``order`` follow, in
    first-appearance order, so no row is ever dropped), else in first-appearance order.
    ``recall`` is NaN for a strategy whose probes have no gold docs. Nothing is rounded.
    """
    missing = [c for c in _REQUIRED_ROW_COLUMNS if c not in rows.columns]
    if missing:
        raise KeyError(f"rows lack column(s): {', '.join(missing)}")
    seen = list(dict.fromkeys(rows["strategy"]))
    if order is not None:
        present = set(seen)
        listed = [s for s in dict.fromkeys(order) if s in present]
        seen = listed + [s for s in seen if s not in set(listed)]
    out = [_summary_row(s, rows[rows["strategy"] == s]) for s in seen]
    return pd.DataFrame(out, columns=SUMMARY_COLUMNS)
