"""Metrics: every number is computed from a Trace and its Probe alone.

Two levels:

* :func:`probe_row` turns one (trace, probe) pair into one flat dict: scores, counts, tokens, times.
* :func:`summarize` turns a DataFrame of those rows into one row per strategy, with the columns
  named in :data:`SUMMARY_COLUMNS` and defined in :data:`COLUMN_DOCS`.

Nothing is rounded here: reports round for display. Scores, rates and recall are on a 0-1 scale and
times are in seconds (see the contract in docs/design.md).

Probes are used by duck typing: only ``id``, ``question`` (for the echo rule; the trace's question
when absent), ``answers``, ``answer_type``, ``gold_doc_ids`` and ``metadata`` are read, so this
module does not import ``probes``. The price table, the paired bootstrap and the confidence-gate
measures live in :mod:`flarebench.bench.prices`, :mod:`flarebench.bench.uncertainty` and
:mod:`flarebench.bench.confidence`.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from flarebench.strategies.records import Trace

__all__ = [
    "COLUMN_DOCS",
    "INCOMPLETE_REASONS",
    "SUMMARY_COLUMNS",
    "echoes_question",
    "final_answer",
    "incomplete_reason",
    "last_clause",
    "score_final",
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
    """Map an answer to ``"yes"``/``"no"`` by its first yes/no word (yes/true, no/false), else None.

    The first such word of the (normalised) final answer decides: "Yes, because ..." is yes, "I
    think yes" is yes, "No, yes" is no; "Nope" and "maybe" are None (no verdict).
    """
    for word in normalize_answer(pred).split():
        if word in _YES:
            return "yes"
        if word in _NO:
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
# Which answer is scored
# --------------------------------------------------------------------------------------------

#: How the scored answer was read from the output (row column ``answer_rule``).
STATEMENT = "statement"  # the final-answer statement "So the answer is X" (Trace.answer)
LAST_CLAUSE = "last_clause"  # fallback: the last clause of the output's last sentence
NO_ANSWER = "none"  # nothing to score (empty output, error)
ABSTAINED = "abstain"  # the strategy abstained, or the stated answer says there is none

# The last clause of a sentence starts after its last colon, semicolon or copula ("X is Y" -> Y,
# "it might be Y" -> Y).
_CLAUSE_SEP = re.compile(r"[:;]|\b(?:is|are|was|were|be)\b", re.IGNORECASE)


def last_clause(output: str | None) -> str | None:
    """The fallback answer of an output without a final-answer statement: the last sentence that
    has any words, cut after its last colon, semicolon or copula (is/are/was/were/be), trailing
    punctuation dropped. ``"The mother of Bea Tull is Rosa Tull."`` gives ``"Rosa Tull"``; a list
    ("... are Ada Moss, Bo Fink.") keeps its commas. None when nothing is left."""
    from flarebench.strategies.sentences import split_sentences

    text = (output or "").strip()
    if not normalize_answer(text):
        return None
    sentences = [s for s in split_sentences(text) if normalize_answer(s)] or [text]
    clause = _CLAUSE_SEP.split(sentences[-1])[-1]
    clause = re.sub(r"[\s.!?]+$", "", clause.strip())
    return clause if normalize_answer(clause) else None


def final_answer(trace: Trace) -> tuple[str | None, str]:
    """``(answer, rule)``: the answer to score and the rule that read it (:data:`STATEMENT`,
    :data:`LAST_CLAUSE`, :data:`ABSTAINED` or :data:`NO_ANSWER`). Never the whole output.

    The answer is read again from the output at scoring time ("So the answer is X", by
    :func:`flarebench.strategies.prompts.extract_answer`), so a fix to extraction reaches old runs; without a
    statement, the last clause of the output (:func:`last_clause`). An error has no answer; an
    abstention (the strategy abstained, or the answer says there is none: "not in the documents")
    has none either."""
    from flarebench.strategies.prompts import extract_answer, is_abstention

    if trace.error or trace.stop_reason == "error":
        return None, NO_ANSWER
    if trace.stop_reason == "abstain":
        return None, ABSTAINED
    stated = extract_answer(trace.output or "")
    if stated is not None and normalize_answer(stated):
        return (None, ABSTAINED) if is_abstention(stated) else (stated, STATEMENT)
    clause = last_clause(trace.output)
    if clause is not None and is_abstention(clause):
        return None, ABSTAINED
    return (clause, LAST_CLAUSE) if clause is not None else (None, NO_ANSWER)


def echoes_question(pred: str | None, question: str | None, probe: Any) -> bool:
    """Whether an answer only repeats the question: every word of the normalised answer is a word
    of the normalised question, and the answer is not an exact match of the gold answer (an alias,
    or the whole gold set). Such an answer earns no credit: "a cat or a dog" to "Which is bigger, a
    cat or a dog?" would otherwise get F1 0.5 against "dog". yes/no answers are never echoes (their
    verdict is scored, not their words)."""
    kind = getattr(probe, "answer_type", None) or "single"
    words = normalize_answer(pred).split()
    if kind == "yes_no" or not words:
        return False
    asked = set(normalize_answer(question).split())
    if not all(w in asked for w in words):
        return False
    return score_answer(pred, probe)[0] < 1.0


def score_final(pred: str | None, question: str | None, probe: Any) -> tuple[float, float, bool]:
    """``(em, f1, echo)``: :func:`score_answer`, except that an answer echoing the question scores 0."""
    if echoes_question(pred, question, probe):
        return 0.0, 0.0, True
    em, f1 = score_answer(pred, probe)
    return em, f1, False


# Why an answer is incomplete (row column ``incomplete``; summary columns ``incomplete_<reason>``).
INCOMPLETE_REASONS = ("token_cap", "step_cap", "no_answer", "abstain", "empty")


def incomplete_reason(trace: Trace, rule: str) -> str | None:
    """Why the answer never reached a final answer, or None when it did (or the probe errored).

    One reason per answer, the first that applies: ``empty`` (no output at all), ``abstain`` (the
    strategy abstained, or the answer says there is none: ``rule`` :data:`ABSTAINED`), ``token_cap`` /
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


# --------------------------------------------------------------------------------------------
# Per-probe rows
# --------------------------------------------------------------------------------------------


def probe_row(trace: Trace, probe: Any) -> dict[str, Any]:
    """One flat row for one (strategy, probe): scores, counts, tokens, times, recall, metadata.

    The scored answer is the final-answer statement, else the output's last clause (``answer``,
    with ``answer_rule`` saying which; see :func:`final_answer`). ``em``/``f1`` credit statement
    answers only; ``em_lenient``/``f1_lenient`` credit a last-clause answer too. An answer that
    echoes the question scores 0 in both (``echo``). A trace with an ``error`` scores 0 whatever
    answer it holds. ``recall`` (= ``recall_at_k``) is the share of the probe's gold doc ids found
    in the union of every retrieval's doc ids (first hop included); it is ``None`` when the probe
    has no gold docs and 0.0 when it has some but nothing was retrieved. ``incomplete`` names why
    the answer is incomplete (see :func:`incomplete_reason`); ``gate_score``, ``gate_fired`` and
    ``gate_threshold`` what the confidence gate judged (:func:`flarebench.bench.confidence.gate_record`; None
    for strategies without a gate). ``probe.metadata`` keys are
    added with the prefix ``meta_``.
    """
    if trace.probe_id and trace.probe_id != probe.id:
        raise ValueError(f"trace is for probe {trace.probe_id!r}, not {probe.id!r}")
    from flarebench.bench.confidence import gate_record

    error = trace.error or None  # "" is no error
    answer, rule = final_answer(trace)
    question = getattr(probe, "question", None) or trace.question
    if error is None:
        em_any, f1_any, echo = score_final(answer, question, probe)
    else:
        em_any, f1_any, echo = 0.0, 0.0, False  # a failed probe is a wrong answer, not a missing one
    em, f1 = (em_any, f1_any) if rule == STATEMENT else (0.0, 0.0)

    calls = trace.lm_calls
    retrievals = trace.retrievals
    gate = gate_record(trace)
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
        "em_lenient": em_any,
        "f1_lenient": f1_any,
        "answer": answer,
        "answer_rule": rule,
        "echo": echo,
        "stop_reason": trace.stop_reason,
        "incomplete": incomplete_reason(trace, rule),
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
        "gate_score": gate.score if gate else None,
        "gate_fired": gate.fired if gate else None,
        "gate_threshold": gate.threshold if gate else None,
        # --cache: LM calls and retrievals served from the cache; a probe is warm when all of them were.
        "cache_hits": sum(1 for c in calls if c.cached) + sum(1 for r in retrievals if r.cached),
        "cacheable": len(calls) + len(retrievals),
    }
    for key, value in (getattr(probe, "metadata", None) or {}).items():
        row[f"meta_{key}"] = value
    return row


# --------------------------------------------------------------------------------------------
# Per-strategy summary
# --------------------------------------------------------------------------------------------

_DELTA_METRICS = ("em", "f1")
DELTA_COLUMNS: list[str] = ["delta_reference"] + [
    f"{m}_delta{suffix}" for m in _DELTA_METRICS for suffix in ("", "_lo", "_hi", "_sig")
]

SUMMARY_COLUMNS: list[str] = [
    "strategy",
    "n",
    "errors",
    "em",
    "f1",
    "em_lenient",
    "f1_lenient",
    "recall",
    "recall_at_k",
    "faithfulness",
    "faithfulness_n",
    "faithfulness_method",
    "judge_parse_failures",
    "incomplete_rate",
    *(f"incomplete_{r}" for r in INCOMPLETE_REASONS),
    "retrieval_rate",
    "retrievals_per_q",
    "lm_calls_per_q",
    "prompt_tokens_per_q",
    "evaluated_tokens_per_q",
    "completion_tokens_per_q",
    "cost_per_q",
    "latency_p50_s",
    "latency_p95_s",
    "cached_share",
    *(f"latency_{p}_{w}_s" for w in ("cold", "warm") for p in ("p50", "p95")),
    "lm_s_per_q",
    "retrieval_s_per_q",
    "harness_s_per_q",
    "harness_share",
    "gate_auroc",
    "gate_fire_right",
    "gate_fire_wrong",
    *DELTA_COLUMNS,
]

_RECALL_DOC = (
    "Mean share of a probe's gold documents found among all documents retrieved while answering "
    "it (the union of every retrieval, first hop included; each retrieval returns k documents), 0-1; "
    "probes without gold documents are left out (empty if none has any)."
)
_DELTA_DOC = (
    "{m} of this strategy minus {m} of the reference strategy (`delta_reference`), over the probes both answered"
)

COLUMN_DOCS: dict[str, str] = {
    "strategy": "The strategy spec as typed (name or name:key=value,...); two settings of one strategy are two rows.",
    "n": "Number of probes scored for this strategy.",
    "errors": "Number of probes whose run raised an error; they are scored 0 for EM and F1 and are not "
    "counted as incomplete answers.",
    "em": 'Mean exact match, 0-1, of the answer stated after "So the answer is" (an output without that '
    "statement scores 0 here): SQuAD-normalised answer equals a gold alias; exact set match for list "
    "answers; for yes/no questions accuracy of the first yes/no word of the answer. An answer whose words "
    "all come from the question and that is not an exact gold match scores 0.",
    "f1": "Mean F1, 0-1, of the stated answer (as for em): SQuAD token F1 (best alias) for single answers; "
    "set F1 over items for list answers; accuracy for yes/no questions; 0 for an answer echoing the question.",
    "em_lenient": "As em, but an output without a final-answer statement is scored on its last clause "
    "(the last sentence after its last colon, semicolon or is/are/was/were/be); such answers still count "
    "in incomplete_no_answer.",
    "f1_lenient": "As f1, with the same last-clause fallback as em_lenient.",
    "recall": _RECALL_DOC + " Same value as recall_at_k (kept for baselines that name it).",
    "recall_at_k": _RECALL_DOC,
    "faithfulness": "Mean share of an answer's claims (its sentences, and each item of its stated final answer) "
    "supported by the passages the strategy retrieved (union of all its retrievals), over probes that got a "
    "score, 0-1; empty for a strategy that retrieved nothing (see faithfulness_method).",
    "faithfulness_n": "Number of answers the faithfulness mean was taken over (those with context, claims and, "
    "with a judge, a parsed verdict); 0 when faithfulness is empty.",
    "faithfulness_method": "How faithfulness was scored: lexical-overlap (offline: a claim is supported when one "
    "sentence of one retrieved passage holds >= 90% of its content words and all its numbers), "
    "ragas-faithfulness:openai:MODEL (a judge LM), or n/a: no context.",
    "judge_parse_failures": "Judge replies that could not be parsed (those probes are left out of faithfulness, "
    "never scored 0); 0 for the offline method.",
    "incomplete_rate": "Share of probes, 0-1, whose answer never reached a final-answer statement: the sum "
    "of the five incomplete_ columns (each answer has at most one reason). Errored probes are not "
    "counted here (see errors).",
    "incomplete_token_cap": "Share of probes cut by the token cap before a final-answer statement.",
    "incomplete_step_cap": "Share of probes cut by an iteration cap (e.g. IRCoT's max_steps) before a "
    "final-answer statement.",
    "incomplete_no_answer": "Share of probes whose output ended (the model stopped) without a final-answer "
    "statement; an answer then read from the last clause (see em_lenient) still counts here.",
    "incomplete_abstain": "Share of probes where the strategy abstained (FLARE direct with abstain on) or the "
    'answer declined to give one ("the answer is not in the documents", "cannot be determined", "no '
    'information", "I don\'t know"): such an answer is not a stated answer and scores 0.',
    "incomplete_empty": "Share of probes with an empty output.",
    "retrieval_rate": "Generation steps that triggered a retrieval (the first-hop retrieval with the "
    "question not counted) divided by generation steps, summed over all probes; 0 when there are no steps.",
    "retrievals_per_q": "Mean number of retriever calls per question, the first hop included.",
    "lm_calls_per_q": "Mean number of LM calls per question.",
    "prompt_tokens_per_q": "Mean prompt tokens sent to the LM per question, summed over its calls.",
    "evaluated_tokens_per_q": "Mean prompt tokens the backend actually evaluated per question "
    "(prompt tokens minus those served from a reused KV prefix or cache).",
    "completion_tokens_per_q": "Mean tokens generated by the LM per question, summed over its calls.",
    "cost_per_q": "Mean USD per question from the price table (bench/prices.toml or --prices): prompt "
    "tokens SENT (a hosted API bills every token sent, cached prefix or not) x prompt price + completion "
    "tokens x completion price (per 1M tokens) + retriever calls x price per retrieval; errored probes "
    "included. Local models (llamacpp:*) are priced at 0; empty when the model has no price.",
    "latency_p50_s": "Median wall time per question in seconds, as measured by the runner "
    "(numpy percentile, linear interpolation).",
    "latency_p95_s": "95th percentile of wall time per question in seconds (numpy percentile, linear interpolation).",
    "cached_share": "Share of LM calls and retrievals served from the --cache (0 without it), 0-1.",
    "latency_p50_cold_s": "Median wall time per question over cold probes (none of their LM calls and "
    "retrievals came from the cache); empty when there are none.",
    "latency_p95_cold_s": "95th percentile of wall time per question over cold probes; empty when there are none.",
    "latency_p50_warm_s": "Median wall time per question over warm probes (every LM call and retrieval served "
    "from the cache: lookup time, not model time); empty when there are none.",
    "latency_p95_warm_s": "95th percentile of wall time per question over warm probes; empty when there are none.",
    "lm_s_per_q": "Mean seconds per question spent in LM calls.",
    "retrieval_s_per_q": "Mean seconds per question spent in retriever calls.",
    "harness_s_per_q": "Mean seconds per question spent outside LM and retriever calls "
    "(wall time minus LM time minus retrieval time, floored at 0).",
    "harness_share": "Harness seconds divided by wall seconds, summed over all probes, 0-1; "
    "0 when no time was recorded.",
    "gate_auroc": "Is the confidence gate informative? Over answers whose steps a confidence gate judged "
    "(FLARE direct), the AUROC of the answer's lowest gate score (the lowest token probability of its drafted "
    "sentences, as recorded in each step) for telling right answers (em 1) from wrong ones (em 0): the chance "
    "that a random right answer has a higher score than a random wrong one, ties 1/2. 1 = informative, 0.5 = "
    "chance, below 0.5 = inverted; empty for strategies without a gate and when all such answers are right or "
    "all wrong (undefined, not 0.5).",
    "gate_fire_right": "Share of right answers (em 1) on which the gate fired at least once (a step's recorded "
    "score at or below the threshold the step recorded); empty without a gate or right answers.",
    "gate_fire_wrong": "Share of wrong answers (em 0) on which the gate fired at least once; a useful gate fires "
    "far more often here than on right answers.",
    "delta_reference": "The reference strategy of the delta columns (--reference, default single_time); "
    "empty when it is not in the run (the delta columns are then empty too).",
    "em_delta": _DELTA_DOC.format(m="em") + " (the mean of the paired per-probe differences).",
    "em_delta_lo": "Lower end of the 95% paired-bootstrap interval of em_delta: probes resampled together "
    "for both strategies, 10,000 resamples, numpy default_rng(0), 2.5th percentile.",
    "em_delta_hi": "Upper end of that interval (97.5th percentile).",
    "em_delta_sig": "True where the 95% interval of em_delta excludes 0.",
    "f1_delta": _DELTA_DOC.format(m="f1") + ".",
    "f1_delta_lo": "Lower end of the 95% paired-bootstrap interval of f1_delta (as em_delta_lo).",
    "f1_delta_hi": "Upper end of that interval.",
    "f1_delta_sig": "True where the 95% interval of f1_delta excludes 0.",
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


def _failed(g: pd.DataFrame) -> pd.Series:
    return g["error"].notna() & (g["error"].astype(str) != "")


def _summary_row(strategy: str, g: pd.DataFrame, price: Any = None) -> dict[str, Any]:
    from flarebench.bench.confidence import gate_summary

    failed = _failed(g)
    recall = pd.to_numeric(g["recall"], errors="coerce")
    latency = g["latency_s"].astype(float).to_numpy()
    p50, p95 = np.percentile(latency, [50, 95])  # numpy's default method is linear interpolation
    hits = g["cache_hits"].astype(float) if "cache_hits" in g else pd.Series(0.0, index=g.index)
    cacheable = g["cacheable"].astype(float) if "cacheable" in g else pd.Series(0.0, index=g.index)
    apart = {}
    for warmth, probes in (("cold", hits == 0), ("warm", (hits == cacheable) & (cacheable > 0))):
        part = latency[probes.to_numpy()]
        pair = np.percentile(part, [50, 95]) if len(part) else (np.nan, np.nan)
        apart.update({f"latency_p50_{warmth}_s": float(pair[0]), f"latency_p95_{warmth}_s": float(pair[1])})
    n = len(g)
    em = g["em"].astype(float).where(~failed, 0.0)

    def lenient(col: str, main: str) -> float:
        values = g[col] if col in g else g[main]  # rows made before the lenient columns: the main score
        return float(values.astype(float).where(~failed, 0.0).mean())

    reasons = g["incomplete"] if "incomplete" in g else pd.Series([None] * n, index=g.index)
    reasons = reasons.where(reasons.notna() & ~failed, None)
    incomplete = {f"incomplete_{r}": float((reasons == r).sum()) / n for r in INCOMPLETE_REASONS}
    if price is not None:
        cost = float(
            price.cost(
                g["prompt_tokens"].astype(float).mean(),
                g["completion_tokens"].astype(float).mean(),
                g["retrievals"].astype(float).mean(),
            )
        )
    else:
        cost = float("nan")
    if "gate_score" in g:
        score = pd.to_numeric(g["gate_score"], errors="coerce")
    else:
        score = pd.Series(np.nan, index=g.index)
    usable = score.notna() & ~failed
    fired = g["gate_fired"] if "gate_fired" in g else pd.Series(None, index=g.index)
    gate = gate_summary(list(score[usable]), list(fired[usable]), list(em[usable]))
    recall_mean = float(recall.mean()) if recall.notna().any() else float("nan")
    return {
        "strategy": strategy,
        "n": n,
        "errors": int(failed.sum()),
        # Errors count as 0 even if a row carries a score (e.g. rows edited or loaded from elsewhere).
        "em": float(em.mean()),
        "f1": float(g["f1"].astype(float).where(~failed, 0.0).mean()),
        "em_lenient": lenient("em_lenient", "em"),
        "f1_lenient": lenient("f1_lenient", "f1"),
        "recall": recall_mean,
        "recall_at_k": recall_mean,
        "incomplete_rate": sum(incomplete.values()),
        **incomplete,
        # Ratio of sums, not mean of per-probe ratios: every generation step weighs the same.
        "retrieval_rate": _ratio(g["triggered_steps"].sum(), g["steps"].sum()),
        "retrievals_per_q": float(g["retrievals"].mean()),
        "lm_calls_per_q": float(g["lm_calls"].mean()),
        "prompt_tokens_per_q": float(g["prompt_tokens"].mean()),
        "evaluated_tokens_per_q": float(g["evaluated_tokens"].mean()),
        "completion_tokens_per_q": float(g["completion_tokens"].mean()),
        "cost_per_q": cost,
        "latency_p50_s": float(p50),
        "latency_p95_s": float(p95),
        "cached_share": _ratio(hits.sum(), cacheable.sum()),
        **apart,
        "lm_s_per_q": float(g["lm_s"].mean()),
        "retrieval_s_per_q": float(g["retrieval_s"].mean()),
        "harness_s_per_q": float(g["harness_s"].mean()),
        "harness_share": _ratio(g["harness_s"].sum(), g["latency_s"].sum()),
        **gate,
    }


def _per_probe(g: pd.DataFrame, metric: str) -> pd.Series:
    """A strategy's per-probe scores indexed by probe id (errors as 0)."""
    values = g[metric].astype(float).where(~_failed(g), 0.0)
    ids = g["probe_id"] if "probe_id" in g else pd.Series(range(len(g)), index=g.index)
    return pd.Series(values.to_numpy(), index=ids.astype(str).to_numpy()).groupby(level=0, sort=False).last()


def _deltas(groups: dict[str, pd.DataFrame], reference: str | None) -> dict[str, dict[str, Any]]:
    """Each strategy's delta columns against ``reference`` (paired bootstrap; see flarebench.bench.uncertainty)."""
    from flarebench.bench.uncertainty import paired_bootstrap

    empty = {c: None for c in DELTA_COLUMNS}
    if not reference or reference not in groups:
        return {s: dict(empty) for s in groups}
    out: dict[str, dict[str, Any]] = {}
    for strategy, g in groups.items():
        row: dict[str, Any] = {"delta_reference": reference}
        for metric in _DELTA_METRICS:
            ref = _per_probe(groups[reference], metric)
            mine = _per_probe(g, metric)
            common = [p for p in ref.index if p in mine.index]
            d = paired_bootstrap(mine[common].to_numpy(), ref[common].to_numpy())
            row.update(
                {
                    f"{metric}_delta": d.delta,
                    f"{metric}_delta_lo": d.lo,
                    f"{metric}_delta_hi": d.hi,
                    f"{metric}_delta_sig": d.significant if d.n else None,
                }
            )
        out[strategy] = row
    return out


def summarize(
    rows: pd.DataFrame,
    order: Sequence[str] | None = None,
    *,
    price: Any = None,
    reference: str | None = None,
) -> pd.DataFrame:
    """One row per strategy, with exactly the columns of :data:`SUMMARY_COLUMNS` (see :data:`COLUMN_DOCS`).

    ``rows`` holds :func:`probe_row` dicts. Strategies come in ``order`` when given (names in
    ``order`` without rows are skipped; strategies with rows but not in ``order`` follow, in
    first-appearance order, so no row is ever dropped), else in first-appearance order.
    ``recall`` is NaN for a strategy whose probes have no gold docs. ``price`` (a
    :class:`flarebench.bench.prices.Price`) prices ``cost_per_q`` (NaN without one). ``reference`` is the
    strategy the delta columns compare with (default :data:`flarebench.bench.uncertainty.DEFAULT_REFERENCE`;
    the delta columns are empty when it has no rows). Nothing is rounded. ``attrs["notes"]`` holds
    one line per thing a reader must know (how cost was priced, the delta reference, undefined
    gate AUROCs), which summary.md prints.
    """
    from flarebench.bench.uncertainty import DEFAULT_REFERENCE

    if reference is None:
        reference = DEFAULT_REFERENCE
    missing = [c for c in _REQUIRED_ROW_COLUMNS if c not in rows.columns]
    if missing:
        raise KeyError(f"rows lack column(s): {', '.join(missing)}")
    seen = list(dict.fromkeys(rows["strategy"]))
    if order is not None:
        present = set(seen)
        listed = [s for s in dict.fromkeys(order) if s in present]
        seen = listed + [s for s in seen if s not in set(listed)]
    groups = {s: rows[rows["strategy"] == s] for s in seen}
    deltas = _deltas(groups, reference)
    out = [{**_summary_row(s, g, price), **deltas[s]} for s, g in groups.items()]
    frame = pd.DataFrame(out, columns=SUMMARY_COLUMNS)
    frame.attrs["notes"] = _notes(frame, groups, price, reference)
    return frame


def _notes(frame: pd.DataFrame, groups: dict[str, pd.DataFrame], price: Any, reference: str) -> list[str]:
    notes = []
    if price is not None:
        notes.append(price.note())
    else:
        notes.append("cost_per_q: empty: the LM has no entry in the price table (add one, or pass --prices FILE)")
    if reference in groups:
        notes.append(
            f"delta columns: each strategy minus {reference}, paired bootstrap over the probes both answered, "
            "95% interval, 10,000 resamples, seed 0"
        )
    else:
        notes.append(f"delta columns: empty: the reference strategy {reference} is not in this run (--reference SPEC)")
    warm = frame[frame["cached_share"] > 0]
    if not warm.empty:
        notes.append(
            "warm run: "
            + ", ".join(f"{r['strategy']} {r['cached_share']:.0%}" for _, r in warm.iterrows())
            + " of LM calls and retrievals were served from --cache; latency_p50_s/p95_s mix lookup and model "
            "time: compare the cold and warm latency columns"
        )
    for _, row in frame.iterrows():
        g = groups[row["strategy"]]
        has_drafts = "gate_score" in g and pd.to_numeric(g["gate_score"], errors="coerce").notna().any()
        if has_drafts and pd.isna(row["gate_auroc"]):
            notes.append(
                f"gate_auroc of {row['strategy']}: undefined: its answers with drafts are all right or all wrong"
            )
        elif has_drafts and row["gate_auroc"] < 0.6:
            notes.append(
                f"gate of {row['strategy']}: AUROC {row['gate_auroc']:.2f}: a low draft probability barely "
                "(or inversely) marks wrong answers on this model and probe set"
            )
        if has_drafts and row["gate_fire_right"] >= 0.9 and row["gate_fire_wrong"] >= 0.9:
            notes.append(
                f"gate of {row['strategy']}: fired on {row['gate_fire_right']:.0%} of right and "
                f"{row['gate_fire_wrong']:.0%} of wrong answers: at this theta it retrieves for nearly everything"
            )
    return notes
