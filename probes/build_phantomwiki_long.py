"""Write the shipped ``probes/phantomwiki_long/`` probe set: long-answer questions about the
``phantomwiki`` world, deterministically, from the files already committed.

Every probe is ``long``: it asks for a few sentences about one relative (or friends) of a named
person, and its gold is 3-5 ``required_facts`` (the relative's name, then their occupation, date of
birth or hobby), each derived by code from the world, with ``wrong_values`` taken from the right
person's own relatives.  See ``README_TEMPLATE`` for the rules.

The world is the ``phantomwiki`` set's (PhantomWiki 1.0.3, seed 1).  Its Prolog facts are not
shipped, and phantom-wiki is not needed: every base fact (mother, father, friend, gender, date of
birth, occupation, hobby) is stated by the person's own article, so this script reads the world
back from ``probes/phantomwiki/corpus.jsonl``.  It refuses a line of an article it does not
understand, and checks that the relations the articles state besides (sons, daughters, brothers,
sisters, husband, wife, the friends of each side) are exactly what the base facts give, through the
same relation rules ``build_phantomwiki.py`` uses.  The corpus is copied byte for byte, so the set
is self-contained and retrieves over the same documents.  Standard library plus flarebench
(bm25s, for the measured retrieval difficulty in the README)::

    python probes/build_phantomwiki_long.py            # rewrite probes/phantomwiki_long/
    python probes/build_phantomwiki_long.py --check    # exit 1 if the committed files differ
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from flarebench.bench.answers import fact_check, states_value
from flarebench.probes.build_phantomwiki import PW_VERSION, WORLDS, World, seeded_rank, slug

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "phantomwiki"  # the world's articles
OUT = HERE / "phantomwiki_long"
NAME = "phantomwiki_long"
SEED = WORLDS["phantomwiki"].seed
N_PROBES = 50
MAX_WRONG = 4  # wrong values per fact, the closest relatives first
# Hobbies that are also everyday words of an answer ("reading the article", "my research"): stated
# in passing, they would count as a fact or a wrong value that the answer does not give.
PROSE_WORDS = frozenset({"learning", "reading", "research"})
ATTR_WORDS = {"job": "occupation", "dob": "date of birth", "hobby": "hobby"}

# An article's lines: "# Name", section headings, and "The <relation or attribute> of <Name> is/are
# <value(s)>." (lists comma-separated).  Relations map to build_phantomwiki.RELATIONS' names.
_LINE = r"^The (?P<what>[a-z ]+) of {name} (?:is|are) (?P<value>[^\n]*)\.$"  # {name}: the article's person
_SECTIONS = {"## Family", "## Friends", "## Attributes"}
_LISTED = {
    "mother": "mother",
    "father": "father",
    "son": "son",
    "sons": "son",
    "daughter": "daughter",
    "daughters": "daughter",
    "brother": "brother",
    "brothers": "brother",
    "sister": "sister",
    "sisters": "sister",
    "husband": "husband",
    "wife": "wife",
    "friend": "friend",
    "friends": "friend",
}
_ATTRS = {"date of birth": "dob", "occupation": "job", "hobby": "hobby", "gender": "gender"}


# --- the world, read back from the articles ---------------------------------------------------


def read_world(corpus: list[dict]) -> World:
    """The base facts stated by the articles, as a :class:`World`; SystemExit on a line it does not
    understand or a stated relation the base facts do not give."""
    stated: dict[tuple[str, str], set[str]] = {}
    facts: list[str] = []
    titles = {d["title"] for d in corpus}
    if len(titles) != len(corpus) or len({slug(t) for t in titles}) != len(corpus):
        raise SystemExit("person names (or their slugs) are not unique")
    for doc in corpus:
        name = doc["title"]
        line_re = re.compile(_LINE.format(name=re.escape(name)))
        for line in doc["text"].split("\n"):
            if not line or line == f"# {name}" or line in _SECTIONS:
                continue
            m = line_re.match(line)
            if not m:
                raise SystemExit(f"{doc['id']}: line not understood: {line!r}")
            what, value = m["what"], m["value"]
            if what in _ATTRS:
                facts.append(f'{_ATTRS[what]}("{name}", "{value}").')
            elif what in _LISTED:
                people = set(value.split(", "))
                if not people <= titles or (_LISTED[what], name) in stated:
                    raise SystemExit(f"{doc['id']}: unknown person or repeated relation: {line!r}")
                stated[_LISTED[what], name] = people
                if what in ("mother", "father"):
                    facts += [f'parent("{name}", "{p}").' for p in sorted(people)]
                elif what in ("friend", "friends"):
                    facts += [f'friend_("{name}", "{p}").' for p in sorted(people)]
            else:
                raise SystemExit(f"{doc['id']}: unknown relation or attribute: {line!r}")
    world = World("\n".join(facts))
    for name in sorted(titles):
        for rel in sorted(set(_LISTED.values())):
            derived = {p[-1] for p in world.paths(name, rel)}
            if derived != stated.get((rel, name), set()):
                said = sorted(stated.get((rel, name), []))
                raise SystemExit(f"{name}: the articles' {rel} {said} != the base facts' {sorted(derived)}")
        for attr in ("dob", "job", "hobby"):
            if not world.attrs[name].get(attr):
                raise SystemExit(f"{name}: no {attr}")
    return world


# --- facts and probes -------------------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    """One required fact before it becomes a row: its value and the people whose values are wrong."""

    id: str
    sentence: str
    value: str
    doc_ids: tuple[str, ...]
    confusers: tuple[str, ...]  # candidate wrong values, closest relatives first
    attribute: bool = False  # an occupation, date of birth or hobby (else a person's name)
    unique: bool = True  # no other article states the value


class Builder:
    """Derives the facts of the world's people; every list is sorted, so builds are identical."""

    def __init__(self, world: World, corpus: list[dict]):
        self.w = world
        # Which articles state each attribute value, as the long-answer scorer would find it in an
        # answer: fact_check over one pseudo-probe whose facts are all the values (a text normalised once).
        values = sorted({v for attrs in world.attrs.values() for v in attrs.values()})
        probe = SimpleNamespace(required_facts=[SimpleNamespace(answers=[v], wrong_values=[]) for v in values])
        self.stated_by: dict[str, list[str]] = {v: [] for v in values}
        for d in corpus:
            for v, found in zip(values, fact_check(d["text"], probe)[0], strict=True):
                if found:
                    self.stated_by[v].append(d["id"])

    def one(self, x: str, rel: str) -> list[str]:
        """The people y with rel(x, y), sorted and deduplicated."""
        return sorted({p[-1] for p in self.w.paths(x, rel)})

    def relatives(self, p: str) -> list[str]:
        """p's spouse, siblings, children and parents: the people whose values one confuses with p's."""
        out = [q for rel in ("married", "sibling", "child", "parent") for q in sorted(self.w.step(p, rel))]
        return list(dict.fromkeys(q for q in out if q != p))

    def name_fact(self, fid: str, sentence: str, person: str, via: list[str], confusers: list[str]) -> Fact:
        """A person's name (the sentence states it), supported by the articles along the chain (via)."""
        return Fact(fid, sentence, person, tuple(slug(q) for q in via), tuple(confusers))

    def role_fact(self, fid: str, label: str, x: str, person: str, via: list[str], confusers: list[str]) -> Fact:
        """The fact "The <label> of X is P."."""
        return self.name_fact(fid, f"The {label} of {x} is {person}.", person, via, confusers)

    def attr_fact(self, fid: str, person: str, attr: str) -> Fact:
        """The fact "The <attribute> of P is V.", supported by P's article; its candidate wrong values are
        the same attribute of P's relatives."""
        others = [self.w.attrs[q][attr] for q in self.relatives(person)]
        value = self.w.attrs[person][attr]
        sentence = f"The {ATTR_WORDS[attr]} of {person} is {value}."
        unique = self.stated_by[value] == [slug(person)]
        return Fact(fid, sentence, value, (slug(person),), tuple(others), attribute=True, unique=unique)


@dataclass(frozen=True)
class Template:
    """A kind of question: which people it applies to and the facts it asks for (None: not applicable)."""

    kind: str
    question: str  # with {x}, and any field that ``fields`` gives
    facts: Callable[[Builder, str], list[Fact] | None]
    fields: Callable[[Builder, str], dict[str, str]] = lambda b, x: {}


def _mother(b: Builder, x: str) -> list[Fact] | None:
    mothers = b.one(x, "mother")
    if len(mothers) != 1:
        return None
    m = mothers[0]
    return [
        b.role_fact("mother", "mother", x, m, [x], b.one(x, "father") + b.one(x, "aunt")),
        b.attr_fact("mother_job", m, "job"),
        b.attr_fact("mother_hobby", m, "hobby"),
    ]


def _father(b: Builder, x: str) -> list[Fact] | None:
    fathers = b.one(x, "father")
    if len(fathers) != 1:
        return None
    f = fathers[0]
    return [
        b.role_fact("father", "father", x, f, [x], b.one(x, "mother") + b.one(x, "uncle")),
        b.attr_fact("father_dob", f, "dob"),
        b.attr_fact("father_hobby", f, "hobby"),
    ]


def _parents(b: Builder, x: str) -> list[Fact] | None:
    mother, father = _mother(b, x), _father(b, x)
    if not mother or not father:
        return None
    m, f = mother[0].value, father[0].value
    return [
        mother[0],
        b.attr_fact("mother_job", m, "job"),
        b.role_fact("father", "father", x, f, [x], b.one(x, "uncle")),
        b.attr_fact("father_job", f, "job"),
    ]


def _spouse_label(b: Builder, s: str) -> str:
    return "husband" if b.w.gender[s] == "male" else "wife"


def _spouse_fields(b: Builder, x: str) -> dict[str, str]:
    """The question's words for x's one spouse (asked only when _spouse found exactly one)."""
    label = _spouse_label(b, (b.one(x, "husband") + b.one(x, "wife"))[0])
    return {"spouse": label, "pronoun": "his" if label == "husband" else "her"}


def _spouse(b: Builder, x: str) -> list[Fact] | None:
    spouses = b.one(x, "husband") + b.one(x, "wife")
    if len(spouses) != 1:
        return None
    s = spouses[0]
    label = _spouse_label(b, s)
    return [
        b.role_fact("spouse", label, x, s, [x], b.one(s, "sibling") + b.one(s, "parent")),
        b.attr_fact("spouse_job", s, "job"),
        b.attr_fact("spouse_dob", s, "dob"),
        b.attr_fact("spouse_hobby", s, "hobby"),
    ]


def _grandparent(b: Builder, x: str, parent_rel: str, grand_rel: str, attrs: tuple[str, str]) -> list[Fact] | None:
    parents = b.one(x, parent_rel)
    if len(parents) != 1:
        return None
    p = parents[0]
    grands = b.one(p, parent_rel)
    if len(grands) != 1:
        return None
    g = grands[0]
    # the other grandparent of the same gender, g's spouse and g's siblings are who g is taken for
    other = "mother" if parent_rel == "father" else "father"
    confusers = [q for o in b.one(x, other) for q in b.one(o, parent_rel)] + b.one(g, "sibling")
    confusers += sorted(b.w.step(g, "married"))
    label = "maternal grandmother" if parent_rel == "mother" else "paternal grandfather"
    parent_confusers = b.one(x, other) + b.one(x, "aunt" if parent_rel == "mother" else "uncle")
    return [
        b.role_fact(parent_rel, parent_rel, x, p, [x], parent_confusers),
        b.role_fact(grand_rel, label, x, g, [x, p], confusers),
        b.attr_fact(f"{grand_rel}_{attrs[0]}", g, attrs[0]),
        b.attr_fact(f"{grand_rel}_{attrs[1]}", g, attrs[1]),
    ]


def _people_and_jobs(b: Builder, x: str, rel: str, label: str, confusers: Callable[[str], list[str]]):
    people = b.one(x, rel)
    if len(people) != 2:
        return None
    facts = []
    for i, p in enumerate(people, 1):
        facts.append(b.name_fact(f"{rel}{i}", f"{p} is {label} of {x}.", p, [x], confusers(p)))
        facts.append(b.attr_fact(f"{rel}{i}_job", p, "job"))
    return facts


def _friends(b: Builder, x: str) -> list[Fact] | None:
    return _people_and_jobs(b, x, "friend", "a friend", lambda f: sorted(b.w.step(f, "married")) + b.one(f, "sibling"))


def _children(b: Builder, x: str) -> list[Fact] | None:
    # a child is taken for a cousin (a child of x's siblings) or for the child's own spouse
    cousins = sorted({c for s in b.w.step(x, "sibling") for c in b.w.step(s, "child")})
    return _people_and_jobs(b, x, "child", "a child", lambda c: cousins + sorted(b.w.step(c, "married")))


def _friend(b: Builder, x: str) -> list[Fact] | None:
    friends = b.one(x, "friend")
    if len(friends) != 1:
        return None
    f = friends[0]
    return [
        b.role_fact("friend", "friend", x, f, [x], sorted(b.w.step(f, "married")) + b.one(f, "sibling")),
        b.attr_fact("friend_job", f, "job"),
        b.attr_fact("friend_hobby", f, "hobby"),
    ]


TEMPLATES = (
    Template(
        "mother",
        "Tell me about the mother of {x}: who she is, what she does for a living and what her hobby is.",
        _mother,
    ),
    Template("father", "Summarise the father of {x}: his name, his date of birth and his hobby.", _father),
    Template("parents", "Who are the parents of {x}, and what does each of them do for a living?", _parents),
    Template(
        "spouse",
        "Describe the {spouse} of {x}: {pronoun} name, occupation, date of birth and hobby.",
        _spouse,
        _spouse_fields,
    ),
    Template(
        "maternal_grandmother",
        "Who is the mother of {x}'s mother? Name {x}'s mother, then her mother, and give the "
        "grandmother's occupation and hobby.",
        lambda b, x: _grandparent(b, x, "mother", "grandmother", ("job", "hobby")),
    ),
    Template(
        "paternal_grandfather",
        "Who is the father of {x}'s father? Name {x}'s father, then his father, and give the "
        "grandfather's date of birth and occupation.",
        lambda b, x: _grandparent(b, x, "father", "grandfather", ("dob", "job")),
    ),
    Template(
        "friends",
        "Tell me about the friends of {x}: who they are and what each of them does for a living.",
        _friends,
    ),
    Template(
        "friend",
        "Tell me about the friend of {x}: who they are, what they do for a living and what their hobby is.",
        _friend,
    ),
    Template(
        "children",
        "Tell me about the children of {x}: who they are and what each of them does for a living.",
        _children,
    ),
)
KINDS = tuple(t.kind for t in TEMPLATES)


@functools.cache
def _overlap(a: str, b: str) -> bool:
    """Whether one value states the other (as the long-answer scorer matches: normalised, whole words)."""
    return states_value(a, b) or states_value(b, a)


def make_probe(t: Template, b: Builder, x: str) -> dict | None:
    """The probe row of template t about x, or None when x does not fit it or a fact is ambiguous.

    Ambiguous (the candidate is dropped): an occupation, date of birth or hobby that another
    article states too (a relative or anyone else shares it, so a confusion could not be told from
    the right answer) or that is an everyday word (PROSE_WORDS); two facts whose values state one
    another (one mention would count for both); a value the question already states.  A wrong value
    is kept when it states no right value of the probe and no right value states it, and the
    question does not state it (a right answer repeats the question's words).
    """
    facts = t.facts(b, x)
    if not facts:
        return None
    question = t.question.format(x=x, **t.fields(b, x))
    values = [f.value for f in facts]
    for i, f in enumerate(facts):
        if f.attribute and (not f.unique or f.value in PROSE_WORDS):
            return None
        if states_value(question, f.value) or any(_overlap(f.value, v) for v in values[:i]):
            return None
    rows = []
    for f in facts:
        wrong = [
            c
            for c in dict.fromkeys(f.confusers)
            if c not in PROSE_WORDS and not any(_overlap(c, v) for v in values) and not states_value(question, c)
        ]
        row = {"id": f.id, "fact": f.sentence, "answers": [f.value], "doc_ids": list(f.doc_ids)}
        if wrong:
            row["wrong_values"] = wrong[:MAX_WRONG]
        rows.append(row)
    gold = list(dict.fromkeys(d for r in rows for d in r["doc_ids"]))
    return {
        "question": question,
        "answers": [],
        "answer_type": "long",
        "gold_doc_ids": gold,
        "required_facts": rows,
        "metadata": {"kind": t.kind, "subject": x, "facts": len(rows), "hops": len(gold)},
    }


def build_probes(world: World, corpus: list[dict]) -> tuple[list[dict], dict[str, int]]:
    """N_PROBES probes round-robin over the templates; returns (rows, candidates per kind).

    Each template's candidates (one per person it fits) are taken in sha256("<seed>:<question>")
    order, a person not yet asked about first, so the set spreads over people and kinds.
    """
    b = Builder(world, corpus)
    people = sorted(world.gender)
    queues: dict[str, list[dict]] = {}
    for t in TEMPLATES:
        rows = [p for x in people if (p := make_probe(t, b, x))]
        queues[t.kind] = sorted(rows, key=lambda r: seeded_rank(SEED, r["question"]))
    candidates = {k: len(q) for k, q in queues.items()}
    order = sorted(queues, key=lambda k: seeded_rank(SEED, k))
    probes: list[dict] = []
    asked: set[str] = set()
    while len(probes) < N_PROBES and any(queues.values()):
        for kind in order:
            queue = queues[kind]
            if not queue or len(probes) >= N_PROBES:
                continue
            pick = next((r for r in queue if r["metadata"]["subject"] not in asked), queue[0])
            queue.remove(pick)
            asked.add(pick["metadata"]["subject"])
            probes.append(pick)
    if len(probes) < N_PROBES:
        raise SystemExit(f"only {len(probes)} usable questions, need {N_PROBES}")
    return [{"id": f"pwl-{i:04d}", **p} for i, p in enumerate(probes, 1)], candidates


# --- README -----------------------------------------------------------------------------------

README_TEMPLATE = """\
# phantomwiki_long: long answers about the phantomwiki world

{n_probes} questions that each ask for a few sentences about one person's relatives or friends in the
fictional world of the `phantomwiki` set (PhantomWiki, Gong et al. 2025, "PhantomWiki: On-Demand
Datasets for Reasoning and Retrieval Evaluation"; PyPI `phantom-wiki` {version}, MIT licence,
https://github.com/kilian-group/phantom-wiki; seed {seed}, {n_docs} person articles).  Every probe is
`long`: it is judged on its whole output by its required facts (the relative's name, then their
occupation, date of birth or hobby), and a statement of a relative's value in place of the right
one counts as a wrong value.  The question names only the person asked about: the relative's name
is in that person's article, the relative's values in the relative's own article, so the answer
unfolds over two or three articles.

Licence: MIT (generated by phantom-wiki {version}; questions and facts derived by flarebench)

## Counts

- documents: {n_docs}
- probes: {n_probes}
- by answer_type: {by_type}
- by kind: {by_kind}
- required facts per probe: {by_facts} (total {n_facts})
- facts with wrong values: {n_wrong_facts} of {n_facts}; wrong values per such fact: {by_wrong}
- gold documents per probe (the articles of the person asked about and of each relative whose
  values are asked): {by_gold}
- people asked about: {n_subjects}

## Format

`corpus.jsonl`: the `phantomwiki` set's, byte for byte (`{{"id": slug of the name, "title": name,
"text": the article}}`).  `probes.jsonl`: `id` (pwl-0001 ...), `question`, `answers` (`[]`: a long
probe's values are its facts'), `answer_type` `long`, `gold_doc_ids` (the union of the facts'
`doc_ids`, in order), `required_facts` (each `{{"id", "fact", "answers", "doc_ids",
"wrong_values"}}`, `wrong_values` left out when there is none) and `metadata`: `kind`, `subject`
(the person the question names), `facts` and `hops` (the number of gold documents).

Kinds of question ({n_kinds}), the facts each asks for, and the relatives whose values are its
wrong values:

{kinds_table}

## How it was made

`python probes/build_phantomwiki_long.py` (standard library plus flarebench; no download, and
phantom-wiki is not needed): the world's Prolog facts are not shipped, but each article states its
person's base facts (mother, father, friends, gender, date of birth, occupation, hobby), so the
script reads the world back from `probes/phantomwiki/corpus.jsonl`.  It refuses an article line it
does not understand, and checks that every other relation the articles state (sons, daughters,
brothers, sisters, husband, wife, and each friendship from both sides) is exactly what the base
facts give under `build_phantomwiki.py`'s relation rules (PhantomWiki's own).

For each kind and each person it fits (exactly one mother, exactly two friends, ...), the facts are
written from the world: the relation fact as "The mother of X is M." (its document: X's article;
for a grandparent, the articles of X and of the parent), an attribute as "The occupation of M is
V." (its document: M's article), the value as its one alias, as the article writes it.  A
candidate is dropped when a fact is ambiguous, values being matched as the scorer matches them
(normalised as em normalises, whole words): an occupation, date of birth or hobby that another
article states too (a shared hobby: a confusion with its other holder could not be told from the
right answer), or a hobby that is an everyday word of an answer ({prose}); two facts whose values
state one another (one mention would count for both); a value the question already states.
Wrong values are the right person's relatives' names or values (the table above), closest first,
at most {max_wrong} per fact, each kept only if it states no right value of the probe, no right
value states it, the question does not state it, and it is no everyday word.

Candidates that remained, by kind: {by_candidates}.

From these, {n_probes} were taken round-robin over the kinds, each kind's candidates in
sha256("{seed}:" + question) order, a person not yet asked about first.

Rebuild or check (identical files; `tests/test_phantomwiki_long.py` runs both):

```
python probes/build_phantomwiki_long.py
python probes/build_phantomwiki_long.py --check
```

Caveats: a wrong value counts whether or not the right value is stated too, so an answer that
volunteers a relative (the mother's husband when asked about the mother, the friend's spouse) is
counted as stating a wrong value; the values are the corpus's own spellings (dates as
`0295-05-30`), so an answer that rewrites a date ("30 May 295") misses the fact.
"""

KIND_ROWS = {
    "mother": ("the mother's name, occupation, hobby", "father, aunts; the mother's relatives' values"),
    "father": ("the father's name, date of birth, hobby", "mother, uncles; the father's relatives' values"),
    "parents": (
        "the mother's name and occupation, the father's name and occupation",
        "aunts, uncles; relatives' values",
    ),
    "spouse": (
        "the husband's or wife's name, occupation, date of birth, hobby",
        "the spouse's siblings and parents; the spouse's relatives' values",
    ),
    "maternal_grandmother": (
        "the mother's name, the grandmother's name, occupation, hobby",
        "father, aunts; the other grandmother, the grandmother's siblings and husband; her relatives' values",
    ),
    "paternal_grandfather": (
        "the father's name, the grandfather's name, date of birth, occupation",
        "mother, uncles; the other grandfather, the grandfather's siblings and wife; his relatives' values",
    ),
    "friends": (
        "two friends' names and occupations",
        "each friend's spouse and siblings; the friend's relatives' values",
    ),
    "friend": ("the one friend's name, occupation, hobby", "the friend's spouse and siblings; their relatives' values"),
    "children": (
        "two children's names and occupations",
        "the person's nieces and nephews, each child's spouse; the child's relatives' values",
    ),
}

MEASURE_NOTE = """\
How to read these: a relative's name is stated in the article of the person the question names,
which the question retrieves.  The relative's occupation, date of birth or hobby is stated only in
the relative's own article, which the question does not name; but that article names the person
asked about among the relative's own family or friends, so in a world of {n_docs} articles one
retrieval with the question often reaches it too.  Facts in the top 5, by the article that states
them:

{by_article}"""


def by_article(probes: list[dict], fact_hits: dict[str, list[bool]]) -> str:
    """Facts found in the top k, split by whether the article of the question's person states them."""
    split: dict[bool, list[bool]] = {True: [], False: []}
    for p in probes:
        own = slug(p["metadata"]["subject"])
        for fact, found in zip(p["required_facts"], fact_hits[p["id"]], strict=True):
            split[fact["doc_ids"] == [own]].append(found)
    own, other = split[True], split[False]
    return (
        f"- the named person's article (a parent's, spouse's, friend's or child's name): {sum(own)} of {len(own)}\n"
        f"- a relative's article (their values; a grandparent's name, read in the parent's): {sum(other)} of "
        f"{len(other)}"
    )


def _counts(values) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(Counter(values).items()))


def render_readme(corpus: list[dict], probes: list[dict], candidates: dict[str, int], extra: str) -> str:
    """The README: the template with this build's counts, then the measured difficulty."""
    facts = [f for p in probes for f in p["required_facts"]]
    wrong = [len(f["wrong_values"]) for f in facts if f.get("wrong_values")]
    table = ["| kind | probes | facts asked | wrong values from |", "|---|---:|---|---|"]
    kinds = Counter(p["metadata"]["kind"] for p in probes)
    for kind in KINDS:
        asked, wrong_from = KIND_ROWS[kind]
        table.append(f"| `{kind}` | {kinds[kind]} | {asked} | {wrong_from} |")
    text = README_TEMPLATE.format(
        version=PW_VERSION,
        seed=SEED,
        n_docs=len(corpus),
        n_probes=len(probes),
        by_type=_counts(p["answer_type"] for p in probes),
        by_kind=_counts(p["metadata"]["kind"] for p in probes),
        by_facts=_counts(len(p["required_facts"]) for p in probes),
        n_facts=len(facts),
        n_wrong_facts=len(wrong),
        by_wrong=_counts(wrong),
        by_gold=_counts(len(p["gold_doc_ids"]) for p in probes),
        n_subjects=len({p["metadata"]["subject"] for p in probes}),
        n_kinds=len(KINDS),
        kinds_table="\n".join(table),
        max_wrong=MAX_WRONG,
        prose=", ".join(sorted(PROSE_WORDS)),
        by_candidates=", ".join(f"{k}: {v}" for k, v in sorted(candidates.items())),
    )
    return f"{text}\n{extra}"


# --- files --------------------------------------------------------------------------------------


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def files(source: Path = SOURCE) -> dict[str, str]:
    """The three files of the set, name -> text."""
    corpus_text = (source / "corpus.jsonl").read_text(encoding="utf-8")
    corpus = [json.loads(line) for line in corpus_text.splitlines() if line.strip()]
    probes, candidates = build_probes(read_world(corpus), corpus)
    out = {"corpus.jsonl": corpus_text, "probes.jsonl": _jsonl(probes)}
    # Imported here: measuring needs bm25s; reading the world does not.
    from flarebench.probes.measure_sets import measure_folder, readme_section

    with tempfile.TemporaryDirectory() as tmp:
        for name, text in out.items():
            (Path(tmp) / name).write_text(text, encoding="utf-8")
        measured = measure_folder(tmp)
    note = MEASURE_NOTE.format(n_docs=len(corpus), by_article=by_article(probes, measured.fact_hits))
    extra = readme_section(measured, note)
    out["README.md"] = render_readme(corpus, probes, candidates, extra)
    return out


def main(argv: list[str] | None = None) -> int:
    """Write (or with --check compare) the set; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--out", type=Path, default=OUT, help="folder to write (default: probes/phantomwiki_long)")
    ap.add_argument("--check", action="store_true", help="compare with the files in --out instead of writing")
    args = ap.parse_args(argv)
    wanted = files()
    if args.check:
        stale = [n for n, t in wanted.items() if not (args.out / n).is_file() or (args.out / n).read_text("utf-8") != t]
        for name in stale:
            print(f"{args.out / name}: differs from what build_phantomwiki_long.py writes", file=sys.stderr)
        return 1 if stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in wanted.items():
        with open(args.out / name, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    n_probes, n_docs = wanted["probes.jsonl"].count("\n"), wanted["corpus.jsonl"].count("\n")
    print(f"wrote {args.out}: {n_probes} probes, {n_docs} documents")
    return 0


if __name__ == "__main__":
    sys.exit(main())
