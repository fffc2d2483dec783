"""Offline claim support: do the retrieved passages state a claim? No model, about a millisecond.

The method, ``lexical-slots``, was designed on the dev half of ``probes/faithfulness/claims.jsonl``
(hand-labelled paraphrases and hard negatives); ``flarebench agreement`` measures it on the test
half, and docs/metrics.md quotes the figures.

* **Units.** Each passage is cut into sentences (each line split with pysbd). A unit is the
  passage's headings (its title line and ``#`` headings), the label of the block the sentence sits
  in ("production:" above indented lines, "Changes:" above a list) and one sentence, or two adjacent
  sentences (a claim often takes its subject from the sentence before).
* **Slots.** A claim's slot values are its numbers, versions, dates and ids (a token with a digit,
  an ``_`` or three hyphenated parts, kept whole; a ``#channel``) and its capitalised names. The
  claim is cut into clauses (commas, semicolons, brackets, "and", "but", "or", "while", ...); a
  clause without a value joins the next one that has one. Each such part must be stated by one
  unit, which must hold every value of the part: a swapped number, version, id or name fails here.
* **Paraphrase slack.** Of a part's other content words (lowercased, NLTK's English stop words out,
  as shipped by bm25s; Porter-stemmed; a stem matches a longer one it starts, "own" and "owner"),
  at most :data:`COVERAGE`'s complement plus :data:`SLACK` may be missing from the unit, and of
  those only the complement may be words the passages do use (a word the passages use elsewhere
  was moved, not paraphrased).
* **Attachment.** A unit can hold the values and still attach them to something else. A value's
  clause words that the claim does not use are its qualifiers; when every clause of a value has
  some, and a claim word missing from them sits, somewhere in the passages, in a clause with a
  value the claim does not name ("staging" beside 3 in "3 replicas in staging and 6 in
  production"), the claim moved that word to this value: not supported. That catches the swapped
  relation ("the sister of A is B" where the passage's sister sentence names C), the swapped role
  and the staging/production swap. In a two-sentence unit, a value found only in the second
  sentence may not stand for one of the same shape in the first (``tw-north-1`` for ``tw-east-2``).
* **Old values.** A value the unit holds only as the old one ("15 minutes instead of 30", "from
  200 to 250", "previously 30") supports no claim that states it as current.
* **Contrast and polarity.** A claim word from one pole of a closed contrast set (staging or
  production, mother or father, raised or lowered, before or after, minimum or maximum, enable or
  disable, ...) fails a unit whose clauses around the value hold another pole and not its own; a
  negated claim clause needs a negated unit clause, and an affirmative one a value's affirmative
  clause. "No more than 6" is "at most 6", not a negation.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import Stemmer
from bm25s.stopwords import STOPWORDS_EN_PLUS
from english_words import get_english_words_set

from flarebench.strategies.sentences import split_sentences

__all__ = ["COVERAGE", "METHOD", "SLACK", "STOPWORDS", "claim_supported", "content_tokens"]

METHOD = "lexical-slots"

# The share of a part's non-slot content words the unit must hold, and how many more a paraphrase
# may drop ("Aida Wang's mom is ..." drops one): chosen on the dev split (docs/metrics.md).
COVERAGE = 0.6
SLACK = 1
# How many adjacent sentences one unit may span (a record's "Field: value" lines, a subject taken
# from the sentence before).
WINDOW = 3

# "otherwise" and "unless" negate a condition: "acknowledge within 10 minutes; otherwise it
# escalates" is "if it does not acknowledge ..., it escalates".
_NEGATIONS = frozenset(
    "not no never none nobody nothing neither nor cannot without avoid prevent otherwise unless".split()
)
# NLTK's English list (the maintained list bm25s ships) less the negations, which carry meaning here,
# plus modal and auxiliary verbs that carry none.
STOPWORDS = (frozenset(STOPWORDS_EN_PLUS) - _NEGATIONS) | frozenset(
    "would could may might must shall also us per via within since however thus therefore hence every many".split()
)

# Closed sets whose members contradict each other; each inner tuple is one pole (with its synonyms).
_CONTRASTS: tuple[tuple[tuple[str, ...], ...], ...] = (
    (("staging", "stage", "sandbox", "test"), ("production", "prod", "live"), ("development", "dev")),
    (
        ("mother", "mom", "mum"),
        ("father", "dad"),
        ("sister",),
        ("brother",),
        ("daughter",),
        ("son",),
        ("husband", "wife", "spouse", "married", "marry"),
    ),
    (
        ("raise", "increase", "higher", "grow", "longer", "lengthen", "extend", "larger", "more"),
        ("lower", "decrease", "reduce", "shorter", "shorten", "cut", "smaller", "fewer", "less"),
    ),
    (("before", "earlier", "prior"), ("after", "later", "afterwards")),
    (("minimum", "min", "least"), ("maximum", "max", "most")),
    (("enable",), ("disable",)),
    (("add", "keep", "retain", "still"), ("remove", "drop", "delete")),
    (("allow", "permit", "accept"), ("forbid", "prohibit", "deny", "block", "refuse", "reject")),
    (("primary",), ("secondary", "backup")),
    (("first",), ("last", "final")),
    (("read",), ("write",)),
    tuple((d,) for d in "monday tuesday wednesday thursday friday saturday sunday".split()),
)

_TOKEN_RE = re.compile(r"#?[A-Za-z0-9]+(?:['’][A-Za-z]+)?(?:[.\-_/:][A-Za-z0-9]+)*")
_CLAUSE_RE = re.compile(r"[,;]|\s(?:and|but|or|while|whereas|although|though)\s", re.I)
_FROM_TO_RE = re.compile(r"\bfrom\s+(\S+?)(?:\s+[a-z]+){0,2}\s+to\s+(\S+?)[\s.,;]", re.I)
_OLD_RE = re.compile(
    r"\b(?:instead\s+of|rather\s+than|previously|formerly|down\s+from|up\s+from|replac(?:es|ed|ing))\s+(?:the\s+)?(\S+)",
    re.I,
)
_TIME_RANGE_RE = re.compile(r"\b(\d{1,2}:\d{2})-(\d{1,2}:\d{2})\b")
# Bounds worded with a negation are no negation: "no more than 6" is "at most 6".
_BOUNDS = (
    (re.compile(r"\b(?:no|not)\s+later\s+than\b", re.I), "by"),  # a deadline, not a bound on a quantity
    (re.compile(r"\b(?:no|not)\s+earlier\s+than\b", re.I), "from"),
    (re.compile(r"\b(?:no|not)\s+(?:more|longer|higher)\s+than\b", re.I), "at most"),
    (re.compile(r"\b(?:no|not)\s+(?:fewer|less|shorter|lower)\s+than\b", re.I), "at least"),
    (re.compile(r"\b(\d+)-([a-z]+)\b"), r"\1 \2"),  # "30-day" is 30 days
    (re.compile(r"(\d),(\d{3})\b"), r"\1\2"),  # 1,000 -> 1000
    (_TIME_RANGE_RE, r"\1 to \2"),
)


# Number words as digits, so that "two minutes" and "2 minutes" are one value ("one" is left alone:
# it is a pronoun as often as a number).
_NUMBERS = {
    w: str(n)
    for n, w in enumerate(
        "zero _ two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
    if w != "_"
} | {"thirty": "30", "forty": "40", "fifty": "50", "sixty": "60", "ninety": "90", "hundred": "100"}
_NUMBER_RE = re.compile(r"\b(" + "|".join(_NUMBERS) + r")\b", re.I)


def _norm(text: str) -> str:
    for pattern, replacement in _BOUNDS:
        text = pattern.sub(replacement, text)
    return _NUMBER_RE.sub(lambda m: _NUMBERS[m.group(1).lower()], text)


@functools.lru_cache(maxsize=1)
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("porter")


@functools.lru_cache(maxsize=1)
def _dictionary() -> frozenset[str]:
    """English words (the web2 and GCIDE lists of the english-words package), lowercased."""
    return frozenset(get_english_words_set(["web2", "gcide"], lower=True, alpha=True))


def _coined(low: str) -> bool:
    """A lowercase word no English word list holds, in any common inflection: a product or service
    name ("tallyvane", "kettlemq"), an entity like a capitalised name."""
    if len(low) < 5 or not low.isalpha():
        return False
    words = _dictionary()
    stems = {low, low[:-1], low[:-2], low[:-3], low[:-2] + "e", low[:-3] + "e", low[:-3] + "y"}
    return not any(s in words for s in stems if len(s) >= 3)


@functools.lru_cache(maxsize=1)
def _poles() -> dict[str, tuple[int, int]]:
    """Stem -> (contrast set, pole)."""
    stem = _stemmer().stemWord
    return {stem(w): (i, j) for i, group in enumerate(_CONTRASTS) for j, pole in enumerate(group) for w in pole}


@dataclass(frozen=True)
class _Words:
    """A piece of text as matching keys: ``words`` every content key, ``values`` the slot values
    among them, ``old`` the values it states as old ones, ``poles`` the contrast poles it names,
    ``negated`` whether it says not/no/never."""

    text: str
    words: frozenset[str]
    values: frozenset[str]
    old: frozenset[str]
    poles: frozenset[tuple[int, int]]
    negated: bool


def _opens(text: str, at: int) -> bool:
    """Whether position ``at`` of ``text`` opens a sentence, a line, a field value or a list item."""
    before = text[:at].rstrip()
    return not before or before[-1] in ".:;!?(\"'*#-\u2013\u2014"


def _is_id(low: str) -> bool:
    """A token kept whole as a value: a digit, an ``_``, a ``#channel``, or three hyphenated parts
    none of which is a stop word (``notify-fanout-q``, not ``end-of-life``)."""
    if any(ch.isdigit() for ch in low) or "_" in low or low.startswith("#"):
        return True
    parts = low.split("-")
    return len(parts) >= 3 and not any(p in STOPWORDS for p in parts)


@functools.lru_cache(maxsize=65536)
def _analyse(text: str) -> _Words:
    stem = _stemmer().stemWord
    poles = _poles()
    text = _norm(text or "")
    words, values, found_poles, negated = set(), set(), set(), False
    toks = list(_TOKEN_RE.finditer(text))
    for i, m in enumerate(toks):
        raw = m.group().rstrip(".")
        low = raw.lower().replace("\u2019", "'")
        if low.endswith("n't"):
            negated = True
            continue
        low = re.sub(r"'s$", "", low)
        if low in _NEGATIONS:
            negated = True
            continue
        if _is_id(low):
            words.add(low)
            values.add(low)
            continue
        pole = poles.get(stem(low))
        if pole:
            found_poles.add(pole)
        # A capitalised word is a name unless it only opens a sentence or a field ("Certificates
        # from ...", "Manager: ..."); an opening word is one when a name follows ("Ryan Wang").
        name = raw[:1].isupper() and low not in STOPWORDS
        if name and _opens(text, m.start()):
            nxt = toks[i + 1] if i + 1 < len(toks) else None
            name = bool(nxt) and text[m.end() : nxt.start()] == " " and nxt.group()[:1].isupper()
        name = name or (raw.isupper() and len(raw) > 1) or _coined(low)
        for part in re.split(r"[.\-_/:']", low):
            if len(part) > 1 and part not in STOPWORDS:
                key = stem(part)
                words.add(key)
                if name:
                    values.add(key)
    old = {a.lower().rstrip(".,;") for a, _ in _FROM_TO_RE.findall(text)}
    old |= {m.lower().rstrip(".,;:") for m in _OLD_RE.findall(text)}
    return _Words(text, frozenset(words), frozenset(values), frozenset(old & values), frozenset(found_poles), negated)


def content_tokens(text: str) -> set[str]:
    """Content keys of ``text``: lowercased, stop words out, Porter-stemmed (PyStemmer, as
    ``strategies/bm25.py``); a token with a digit (a date, a version, an id such as ``INC-2291``),
    an ``_`` or three hyphenated parts, and a ``#channel``, kept whole; other hyphenated words split."""
    return set(_analyse(text).words)


def _has(word: str, words: Iterable[str]) -> bool:
    """``word``, or a word of the same root, is in ``words`` ("own" and "owner", "run" and "runtime":
    Porter stems keep those apart; values must match exactly)."""
    if word in words:
        return True
    for w in words:
        short, long = (w, word) if len(w) < len(word) else (word, w)
        if len(short) >= 3 and long.startswith(short) and not any(ch.isdigit() for ch in long):
            return True
    return False


def _shape(value: str) -> str:
    """What kind of value this is: ``tw-north-1`` and ``tw-east-2`` are both ``a-a-9``."""
    return re.sub(r"[a-z]+", "a", re.sub(r"[0-9]+", "9", value))


# --------------------------------------------------------------------------------------------
# Passages
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sentence:
    whole: _Words
    clauses: tuple[_Words, ...]
    block: _Words  # the label of the block it sits in ("production:"), else empty
    step: int | None = None  # its number in a numbered list ("2. Scale ...", "Step 2: ...")


@dataclass(frozen=True)
class _Passage:
    title: _Words
    heading: _Words
    sentences: tuple[_Sentence, ...]

    @functools.cached_property
    def last_step(self) -> int | None:
        return max((s.step for s in self.sentences if s.step), default=None)

    @functools.cached_property
    def vocabulary(self) -> frozenset[str]:
        return self.heading.words.union(*(s.whole.words | s.block.words for s in self.sentences))


_EMPTY = _Words("", frozenset(), frozenset(), frozenset(), frozenset(), False)
_ITEM_RE = re.compile(r"^(?:(?:step\s+)?(\d+)[.):]|[-*\u2022])\s+", re.I)
_LABEL_RE = re.compile(r"^[\w][\w \-/]{0,40}:$")


def _clauses(text: str) -> tuple[_Words, ...]:
    return tuple(_analyse(c) for c in _CLAUSE_RE.split(text) if c and c.strip())


@functools.lru_cache(maxsize=4096)
def _passage(text: str) -> _Passage:
    """A passage's title (its first line, when it has more), headings, and sentences with the label
    of their block, analysed once: the same passages come back for many claims."""
    lines = (text or "").split("\n")
    title = lines[0].strip() if len(lines) > 1 else ""
    heads, sentences, block = [title], [], _EMPTY
    for n, line in enumerate(lines):
        s = line.strip()
        if not s or (n == 0 and title):
            continue
        if s.startswith("#") and not re.match(r"#\w", s) or s == title:
            heads.append(s.lstrip("# "))
            continue
        if _LABEL_RE.match(s):  # "production:" or "Changes:" labels the lines below it
            block = _analyse(s)
            continue
        item = _ITEM_RE.match(s)
        if not (line[:1].isspace() or item):
            block = _EMPTY  # a plain line ends the labelled block
        step = int(item.group(1)) if item and item.group(1) else None
        s = s[item.end() :] if item else s  # "2. Scale ..." and "- Session ...": the marker is no value
        for piece in split_sentences(s):
            if piece.strip():
                sentences.append(_Sentence(_analyse(piece), _clauses(piece), block, step))
    return _Passage(_analyse(title), _analyse(" ".join(heads)), tuple(sentences))


@dataclass(frozen=True)
class _Unit:
    words: frozenset[str]
    sentences: tuple[_Sentence, ...]
    passage: _Passage


def _units(p: _Passage) -> Iterable[_Unit]:
    """The headings with each run of one to :data:`WINDOW` adjacent sentences."""
    n = len(p.sentences)
    for i in range(n):
        for j in range(i + 1, min(i + WINDOW, n) + 1):
            span = p.sentences[i:j]
            yield _Unit(p.heading.words.union(*(x.whole.words | x.block.words for x in span)), span, p)


# --------------------------------------------------------------------------------------------
# Claims
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Part:
    """A claim clause with a value, with the value-less clauses joined to it."""

    whole: _Words
    clauses: tuple[_Words, ...]


_RELATIVE_RE = re.compile(r"(?:who|whose|which)\b", re.I)


def _antecedent(clause: str) -> str:
    """The values that end ``clause`` ("Adolph Barbee's mom is Kelley Barbee" -> "Kelley Barbee")."""
    toks = clause.split()
    n = len(toks)
    while n and (toks[n - 1][:1].isupper() or _is_id(toks[n - 1].lower()) or _coined(toks[n - 1].lower())):
        n -= 1
    return " ".join(toks[n:])


def _parts(claim: str) -> list[_Part]:
    """The claim's clauses that name a value; a clause without one ("In production, ...", "Her
    husband, ...") joins the next clause that has one (the last one, at the end)."""
    parts: list[list[str]] = []
    pending: list[str] = []
    for piece in _CLAUSE_RE.split(_norm(claim)):
        if piece and piece.strip():
            piece = piece.strip()
            if _RELATIVE_RE.match(piece) and parts and not pending and not _analyse(piece).values:
                # ", who works as ...": a part about the antecedent, the names that end the clause before.
                antecedent = _antecedent(parts[-1][-1])
                if antecedent:
                    parts.append([f"{antecedent} {piece}"])
                    continue
            pending.append(piece)
            if _analyse(piece).values:
                parts.append(pending)
                pending = []
    if pending and parts:
        parts[-1] += pending
    return [_Part(_analyse(" ".join(p)), tuple(_analyse(x) for x in p)) for p in parts]


def _enough(
    want: frozenset[str], words: frozenset[str], context: _Context, coverage: float, slack: int = SLACK
) -> bool:
    """Whether ``words`` holds enough of ``want`` (see the module docstring, paraphrase slack)."""
    missing = [w for w in want if not _has(w, words)]
    if any(w in context.titles for w in missing):
        return False  # a word naming a passage (a service, a team) is an entity: no paraphrase
    allowed = (1 - coverage) * len(want)
    known = sum(w in context.vocabulary for w in missing)
    if len(want) >= 2 and len(missing) == len(want):
        return False  # a single word may be paraphrased away, not every word
    return known <= allowed and len(missing) <= allowed + slack


@dataclass(frozen=True)
class _Context:
    """What a claim is judged against: the passages, their units, every word they use and the words
    of their titles."""

    passages: tuple[_Passage, ...]
    units: tuple[_Unit, ...]
    vocabulary: frozenset[str]
    titles: frozenset[str]
    distinct: frozenset[str]  # title words of one passage only (what names it: "quillgate")


@dataclass(frozen=True)
class _Reading:
    """One part read against one unit: the unit's sentences (the one holding most of the part's
    values first), their clauses, and the part's values that the sentences (not only the headings) hold."""

    part: _Part
    unit: _Unit
    span: tuple[_Sentence, ...]
    clauses: tuple[_Words, ...]
    own: tuple[str, ...]

    @classmethod
    def of(cls, part: _Part, unit: _Unit) -> _Reading:
        values = part.whole.values
        span = tuple(sorted(unit.sentences, key=lambda s: -len(s.whole.words & values)))
        clauses = tuple(c for s in span for c in s.clauses)
        return cls(part, unit, span, clauses, tuple(v for v in values if any(v in c.words for c in clauses)))


def _same_polarity(r: _Reading) -> bool:
    """A negated claim clause needs a negated unit clause on its words. An affirmative one fails on
    a negated unit clause whose words it all says ("..., not when it is picked up"), and, with a
    value, needs an affirmative clause holding it."""
    for cc in r.part.clauses:
        if cc.negated:
            if not any(c.negated and c.words & cc.words for c in r.clauses):
                return False
            continue
        if any(c.negated and c.words and all(_has(w, cc.words) for w in c.words) for c in r.clauses):
            return False
        if cc.values & set(r.own) and all(c.negated for c in r.clauses if c.words & cc.values):
            return False
    return True


def _uncrossed(r: _Reading) -> bool:
    """The claim's clauses do not trade words with the unit's: a claim clause whose best-matching
    unit clause holds words of another claim clause, while its own missing words sit in another unit
    clause ("keeping longer needs approval, deleting earlier a reason" read against the reverse)."""
    claim = [cc for cc in r.part.clauses if len(cc.words) >= 2]
    if len(claim) < 2:
        return True
    for cc in claim:
        best = max(r.clauses, key=lambda c: len(c.words & cc.words))
        others = frozenset().union(*(o.words for o in claim if o is not cc)) - cc.words
        rest = frozenset().union(*(c.words for c in r.clauses if c is not best))
        if best.words & others and (cc.words - best.words) & rest - others:
            return False
    return True


def _no_contrast(r: _Reading) -> bool:
    """No claim pole missing where the values sit (the sentences holding them and their block
    labels, else the headings) while another pole of its set is there."""
    plain_clauses = [cc.words for cc in r.part.clauses if not cc.values]
    values = r.part.whole.values
    # Where the values sit: the clauses holding its numbers and ids if it has any (a name recurs in
    # every clause about it), else those holding its names.
    exact = {v for v in values if any(ch.isdigit() for ch in v)} or values
    near = [c for c in r.clauses if c.words & exact]
    near += [s.whole for s in r.span if any(len(s.whole.words & w) >= 2 for w in plain_clauses)]
    near += [s.block for s in r.span if s.whole.words & values]
    local = frozenset().union(*(c.poles for c in near or [s.whole for s in r.span]))
    for group, pole in r.part.whole.poles:
        poles = local if any(g == group for g, _ in local) else r.unit.passage.heading.poles
        if (group, pole) not in poles and any(g == group for g, _ in poles):
            return False
    return True


def _current(r: _Reading) -> bool:
    """No value the claim states as current that the unit holds only as the one replaced."""
    return not any(
        v not in r.part.whole.old and all(v in s.whole.old for s in r.span if v in s.whole.words) for v in r.own
    )


def _moved(r: _Reading, clause: _Words, rival: frozenset[str]) -> bool:
    """``clause`` (holding a value of the claim) has a qualifier the claim lacks, and fewer of the
    claim's words than the clauses of ``rival`` values elsewhere hold."""
    if all(_has(q, r.part.whole.words) for q in clause.words - clause.values):
        return False
    plain = r.part.whole.words - r.part.whole.values - r.unit.passage.title.words
    here = sum(_has(w, clause.words) for w in plain)
    there = sum(w in rival and not _has(w, clause.words) for w in plain)
    return there > here


def _attached(r: _Reading, rivals: dict[str, frozenset[str]]) -> bool:
    """No value of the claim moved: every clause holding it in its sentence is :func:`_moved` from
    a rival value of its shape (module docstring, attachment)."""
    for v in r.own:
        main = next(s for s in r.span if v in s.whole.words)
        rival = rivals.get(_shape(v), frozenset())
        if all(_moved(r, c, rival) for c in main.clauses if v in c.words):
            return False
    return True


def _not_borrowed(r: _Reading) -> bool:
    """A value found in another sentence of the unit does not stand in for a value of the same shape
    that a sentence holding the others names (``tw-north-1`` taken for ``tw-east-2``; Aida Wang given
    the birth date of the Ryan Wang whose sentence holds it)."""
    for s in r.span:
        if not s.whole.words & set(r.own):
            continue
        # Names and ids only: a sentence's incidental count ("runs as 2 clusters") rivals nothing.
        taken = {_shape(x) for x in s.whole.values - r.part.whole.values if re.search("[a-z]", x)}
        if any(_shape(v) in taken for v in r.own if v not in s.whole.words):
            return False
    return True


_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "last": -1, "final": -1, "finally": -1}
_ORDINAL_RE = re.compile(
    r"^\W*(first|second|third|fourth|fifth|finally|lastly)\b|\b(first|second|third|fourth|fifth|last|final)\s+step\b"
    r"|\bstep\s+(\d+)\b",
    re.I,
)


def _ordinal(claim: str) -> int | None:
    """The step a claim says it is ("First, ...", "the last step", "step 3"); -1 for the last."""
    m = _ORDINAL_RE.search(claim)
    if not m:
        return None
    word = (m.group(1) or m.group(2) or "").lower().replace("lastly", "last")
    return int(m.group(3)) if m.group(3) else _ORDINALS[word]


def _in_order(ordinal: int | None, unit: _Unit, words: frozenset[str]) -> bool:
    """A claim (of ``words``) that names its step matches a numbered step of that number (or the
    last one): the step of the unit's sentence that holds most of its words."""
    step = max(unit.sentences, key=lambda s: len(s.whole.words & words)).step
    if ordinal is None or step is None:
        return True
    return step == (unit.passage.last_step if ordinal == -1 else ordinal)


def _states(part: _Part, unit: _Unit, rivals: dict[str, frozenset[str]]) -> bool:
    """Whether ``unit`` (which holds every value of ``part``) states the part as the claim does."""
    r = _Reading.of(part, unit)
    return (
        _same_polarity(r)
        and _no_contrast(r)
        and _current(r)
        and _attached(r, rivals)
        and _not_borrowed(r)
        and _uncrossed(r)
    )


@functools.lru_cache(maxsize=256)
def _context(texts: tuple[str, ...]) -> _Context:
    """The passages one answer's claims are judged against, analysed once for all of its claims."""
    passages = tuple(_passage(t) for t in texts)
    named = Counter(w for p in passages for w in p.title.words)
    return _Context(
        passages,
        tuple(u for p in passages for u in _units(p)),
        frozenset().union(*(p.vocabulary for p in passages)),
        frozenset(named),
        frozenset(w for w, n in named.items() if n == 1) if len(passages) > 1 else frozenset(),
    )


def claim_supported(claim: str, contexts: Iterable[str], coverage: float = COVERAGE) -> bool:
    """Whether ``contexts`` (passage texts, the title on the first line) support ``claim`` by the
    rules in the module docstring."""
    whole = _analyse(claim)
    if not whole.words:
        return False
    context = _context(tuple(contexts))
    ordinal = _ordinal(claim)
    parts = _parts(claim)
    if not parts:  # no value at all: one sentence must hold the words, with the claim's polarity
        return any(
            len(u.sentences) == 1
            and _enough(whole.words, u.words, context, coverage, slack=0)
            and whole.negated == u.sentences[0].whole.negated
            and _in_order(ordinal, u, whole.words)
            for u in context.units
        )
    flips = {(b, a) for a, b in _FROM_TO_RE.findall(claim)}
    anchors: frozenset[str] = frozenset()
    for part in parts:
        # What the part is about: a word naming one of the passages ("quillgate"), else the last
        # part's ("... is given 1 CPU and 2Gi of memory": the 2Gi is quillgate's too).
        anchors = (part.whole.words & context.distinct) or anchors
        if not _part_supported(part, context, flips, coverage, anchors, ordinal):
            return False
    return True


def _part_supported(
    part: _Part, context: _Context, flips, coverage: float, anchors: frozenset[str], ordinal: int | None
) -> bool:
    values = part.whole.values
    # Per value shape, the words that sit, somewhere in the passages, in a clause naming a value of
    # that shape that this part does not name (the rivals its values could have been moved from).
    elsewhere: dict[str, set[str]] = {}
    for p in context.passages:
        for s in p.sentences:
            for c in s.clauses:
                for shape in {_shape(x) for x in c.values - values}:
                    elsewhere.setdefault(shape, set()).update(c.words - c.values)
    rivals = frozenset().union(*(elsewhere.get(_shape(v), ()) for v in values))
    plain = part.whole.words - values
    for unit in context.units:
        if not values <= unit.words or (anchors and not any(_has(a, unit.words) for a in anchors)):
            continue
        # Values only the headings hold locate nothing: one sentence must hold the words, without slack.
        located = any(v in s.whole.words for s in unit.sentences for v in values)
        if not located and len(unit.sentences) > 1:
            continue
        if not _enough(plain, unit.words, context, coverage, SLACK if located else 0):
            continue
        # A claim word the unit lacks, attached elsewhere to a rival of one of the values, was moved.
        if any(w in rivals and not _has(w, unit.words) for w in plain):
            continue
        if flips and any(
            (a.lower(), b.lower()) in flips for s in unit.sentences for a, b in _FROM_TO_RE.findall(s.whole.text)
        ):
            continue
        if _in_order(ordinal, unit, part.whole.words) and _states(part, unit, elsewhere):
            return True
    return False
