"""Which answer is scored, and how: normalisation, the answer rules and the scores of one answer.

Pure functions of text, a Trace and a probe; the answer scorer (:mod:`flarebench.bench.scorers.answer`)
turns them into the ``em``/``f1`` columns, and faithfulness reuses :func:`split_items`. Probes are
used by duck typing (``answers``, ``answer_type``, ``id``), so this module does not import ``probes``.
"""

from __future__ import annotations

import functools
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from flarebench.strategies.flare_instruct import SEARCH_CALL_RE
from flarebench.strategies.records import Trace
from flarebench.strategies.sentences import split_sentences

__all__ = [
    "ABSTAINED",
    "LAST_CLAUSE",
    "NO_ANSWER",
    "STATEMENT",
    "echoes_question",
    "exact_match",
    "fact_check",
    "final_answer",
    "last_clause",
    "echo_of",
    "long_answer_text",
    "normalize_answer",
    "normalize_value",
    "score_answer",
    "score_final",
    "set_exact_match",
    "set_f1",
    "split_items",
    "states_value",
    "to_yes_no",
    "token_f1",
]

# --------------------------------------------------------------------------------------------
# Answer normalisation and scoring
# --------------------------------------------------------------------------------------------

#: Deletes ASCII punctuation in one C-level pass, not one Python step per character.
_NO_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")


def normalize_answer(s: str | None) -> str:
    """SQuAD normalisation: lowercase, drop punctuation, drop articles (a/an/the), collapse whitespace.

    ``None`` normalises to ``""``. Punctuation is removed before articles, so ``"The  Cat!"`` and
    ``"cat"`` both give ``"cat"``. Text that is not ASCII is first made comparable as it reads
    (:func:`_as_read`): ASCII text is normalised exactly as SQuAD's official script does.
    """
    if not s:
        return ""
    if not s.isascii():
        s = _as_read(s)
    s = s.lower()
    s = s.translate(_NO_PUNCTUATION)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


#: Unicode's word breaks that are no white space: a zero-width space reads as a space.
_ZERO_WIDTH_SPACE = "\u200b"
#: The minus sign, a math symbol that reads as the hyphen SQuAD drops: "\u22125" is "-5".
_MINUS = "\u2212"


def _as_read(s: str) -> str:
    """``s`` with what does not change how it reads taken out, so that text that looks the same
    compares the same: composed and decomposed accents, full-width letters, ligatures and a
    no-break space made one form (NFKC), case folded (``"Straße"`` is ``"STRASSE"``), Unicode's
    punctuation (curly quotes, guillemets, ``"。"``, dashes, the minus sign) and invisible format characters
    dropped, as SQuAD drops ASCII punctuation. The middle dot :func:`normalize_value` joins version
    numbers with is kept."""
    out = []
    for ch in unicodedata.normalize("NFKC", s).casefold():
        kind = unicodedata.category(ch)
        if ch == _ZERO_WIDTH_SPACE:
            out.append(" ")
        elif ch == _JOINER or not (kind.startswith("P") or kind == "Cf" or ch == _MINUS):
            out.append(ch)
    return "".join(out)


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
# The ideographic comma (full and half width), the full-width comma and semicolon and the Arabic
# comma and semicolon separate as theirs do ("東京、大阪").
_ITEM_SEP = re.compile(
    r"(\s*[,;\n\u3001\uff64\uff0c\uff1b\u060c\u061b]\s*(?:(?:and|&)\s+)?|\s+and\s+|\s*&\s*)", re.IGNORECASE
)


def split_items(pred: str | None, keep: Iterable[str] = (), normalized: bool = True) -> list[str]:
    """Split a list answer into normalised items, in order, empty items dropped (with
    ``normalized=False``, each item as written, stripped of spaces and end punctuation).

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
    # A span that normalises to a kept item holds at most as many pieces with words of their own as
    # that item has characters (each keeps one at least): the spans tried stop there, so a long list
    # costs the items times that, not the cube of the items.
    widest = max((len(k.replace(" ", "")) for k in keep_norm), default=0)
    worded = [bool(normalize_answer(part)) for part in parts]

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
            last, seen = i, 0
            while last < len(parts) and seen + worded[last] <= widest:
                seen += worded[last]
                last += 1
            for end in range(last, i + 1, -1):
                if normalize_answer(span(i, end)) in keep_norm:
                    j = end
                    break
        raw = span(i, j)
        item = normalize_answer(raw)
        if item:
            items.append(item if normalized else raw.strip().rstrip(".!?").strip())
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


# --------------------------------------------------------------------------------------------
# Long answers: required facts stated in the text
# --------------------------------------------------------------------------------------------

# A dot between two digits is part of a value ("4.1", "4.12.0", "3.5"), not punctuation: it is kept
# as this joiner (not ASCII punctuation, so normalisation keeps it), so that "4.1.0" and "4.10" stay
# different and "4.1" is not a whole value inside "4.12.0".
_VALUE_DOT = re.compile(r"(?<=\d)\.(?=\d)")
_JOINER = "\u00b7"


@functools.lru_cache(maxsize=4096)
def normalize_value(s: str | None) -> str:
    """:func:`normalize_answer`, except that a dot between two digits is kept (as a middle dot):
    ``"Version 4.12.0."`` gives ``"version 4·12·0"``. Used on both the value and the text it is
    looked for in. Cached: scoring and the probe checks look for many values in the same texts."""
    return normalize_answer(_VALUE_DOT.sub(_JOINER, s or ""))


def states_value(text: str | None, value: str | None) -> bool:
    """Whether ``text`` states ``value``: the normalised value (:func:`normalize_value`) occurs in the
    normalised text as whole words, neither preceded nor followed by a letter, a digit or a kept dot.
    So "4.1" is stated by "upgrade to 4.1." but not by "4.12.0", "4.1.3" or "v4.1" (list "v4.1" as an
    alias where it may be written so), and "2" is not stated by "12". A value that normalises to
    nothing is never stated."""
    return _stated(normalize_value(text), value)


def _stated(normalized_text: str, value: str | None) -> bool:
    """:func:`states_value` on a text already normalised by :func:`normalize_value`."""
    v = normalize_value(value)
    if not v:
        return False
    edge = rf"\w{_JOINER}"
    return re.search(rf"(?<![{edge}]){re.escape(v)}(?![{edge}])", normalized_text) is not None


#: The most words a label before an echoed question may have ("Question:", "You asked:").
ECHO_LABEL_WORDS = 2


def echo_of(question: str | None) -> Callable[[str], bool]:
    """Whether a sentence only echoes ``question``: every word of it a word of the question, or the
    whole question behind a short label ("Question: ..."). Such a sentence states nothing the
    question did not; one that goes on past the question ("... is Jeana Clemons") is no echo."""
    asked = normalize_answer(question or "")
    asked_words = set(asked.split())

    def echoes(sentence: str) -> bool:
        norm = normalize_answer(sentence)
        if not asked:
            return False
        label = norm[: -len(asked)] if norm.endswith(asked) else None
        return all(w in asked_words for w in norm.split()) or (
            label is not None and len(label.split()) <= ECHO_LABEL_WORDS
        )

    return echoes


def long_answer_text(output: str | None, question: str | None) -> str:
    """What a long answer states, the text its facts are looked for in: the output without search
    calls (a value in a query is asked for, not stated) and without the sentences that only echo the
    question (:func:`echo_of`)."""
    echoes = echo_of(question)
    text = SEARCH_CALL_RE.sub(" ", output or "")
    return " ".join(s.strip() for s in split_sentences(text) if not echoes(s))


def fact_check(text: str | None, probe: Any) -> tuple[list[bool], list[bool]]:
    """For each of ``probe.required_facts`` (objects with ``answers`` and ``wrong_values``): whether
    ``text`` states one of its aliases, and whether it states one of its wrong values (both by
    :func:`states_value`). A text may state a fact's right and wrong values together."""
    facts = getattr(probe, "required_facts", None) or []
    norm = normalize_value(text)  # once, not once per value looked for
    found = [any(_stated(norm, a) for a in fact.answers) for fact in facts]
    wrong = [any(_stated(norm, w) for w in (getattr(fact, "wrong_values", None) or [])) for fact in facts]
    return found, wrong


def score_answer(pred: str | None, probe: Any) -> tuple[float, float]:
    """Return ``(em, f1)`` for a prediction, by ``probe.answer_type``.

    * ``single`` (also when the type is missing/empty): alias-aware EM and token F1.
    * ``set``: exact set match and set F1 over items (see :func:`split_items`).
    * ``yes_no``: accuracy, reported as both EM and F1.
    * ``long`` (``pred`` is then the whole output): EM is 1 when the text states every required
      fact and no wrong value (:func:`fact_check`); F1 is the share of required facts stated.
    """
    kind = getattr(probe, "answer_type", None) or "single"
    answers = probe.answers
    if kind == "long":
        found, wrong = fact_check(pred, probe)
        recall = sum(found) / len(found) if found else 0.0
        return float(bool(found) and all(found) and not any(wrong)), recall
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
    statement, the last clause of the output (:func:`last_clause`). A service under test that stated
    its answer (the ``http`` strategy's ``answer`` field) is taken at its word: that answer is the
    statement. An error has no answer; an abstention (the strategy abstained, or the answer says
    there is none: "not in the documents") has none either."""
    from flarebench.strategies.prompts import extract_answer, is_abstention

    if trace.error or trace.stop_reason == "error":
        return None, NO_ANSWER
    if trace.stop_reason == "abstain":
        return None, ABSTAINED
    if trace.service is not None and trace.service.stated_answer:
        stated = trace.answer
    else:
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
    cat or a dog?" would otherwise get F1 0.5 against "dog". yes/no and long answers are never
    echoes (a verdict, or facts, are scored, not words)."""
    kind = getattr(probe, "answer_type", None) or "single"
    words = normalize_answer(pred).split()
    if kind in ("yes_no", "long") or not words:
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
