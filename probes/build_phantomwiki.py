"""Rebuild the shipped ``probes/phantomwiki/`` probe set from phantom-wiki, deterministically.

PhantomWiki (PyPI ``phantom-wiki``, MIT) generates a fictional world (family trees, friendships,
jobs, hobbies, dates of birth) as Prolog facts, one article per person, and multi-hop questions
whose answers Prolog computes.  This script runs its CLI once with fixed parameters, then converts
the output to our probe format (``corpus.jsonl``, ``probes.jsonl``, ``README.md``).

How to run it (phantom-wiki needs Debian's ``swi-prolog-nox``; its metadata asks for Python 3.12
but it runs on 3.11)::

    python3 -m venv /tmp/pwvenv
    /tmp/pwvenv/bin/pip install --only-binary=:all: --ignore-requires-python phantom-wiki==1.0.3
    python probes/build_phantomwiki.py --pw-python /tmp/pwvenv/bin/python

This script itself needs only the standard library; ``--pw-python`` names the interpreter that
has phantom-wiki installed (default: the one running this script).  ``--world NAME`` picks one of
the shipped worlds in ``WORLDS`` (default ``phantomwiki``; ``--all`` builds every one); ``--out
DIR`` writes elsewhere (default: ``probes/<world>`` next to this file).  Two runs give identical
files.  The worlds other than the default also get a measured retrieval difficulty in their
README (``flarebench.probes.measure_sets``), which needs flarebench installed (bm25s); the default set's
README is kept byte for byte as first shipped, so it has none.

    python probes/build_phantomwiki.py --pw-python /tmp/pwvenv/bin/python --all

Gold documents: PhantomWiki's solution traces bind only the people its Prolog query names
(``Y_i``), not the people a derived relation passes through (a cousin is a child of a sibling of
a parent).  So this script re-derives every hop from the base facts (parent, gender, friend_,
job, hobby, dob) as a path of relations that articles state directly, checks that this
re-derivation gives exactly PhantomWiki's answers for every question, and takes the articles of
everyone on those paths as gold documents (see ``README_TEMPLATE``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

PW_VERSION = "1.0.3"


@dataclass(frozen=True)
class WorldSpec:
    """One shipped PhantomWiki world: generator options, how many probes to keep, README wording.

    Question depth 10 yields 20 templates of one to four hops; ``questions_per_type`` candidates
    per template are generated to choose ``n_probes`` from.  ``measure``: put the bm25s
    retrieval-difficulty numbers in the README (off only for the default set, whose files are
    kept exactly as first shipped).
    """

    name: str
    seed: int
    family_trees: int
    n_probes: int
    questions_per_type: int = 10
    max_tree_size: int = 25
    headline: str = ""
    size_word: str = "small"
    measure: bool = True

    def gen_options(self) -> dict[str, int]:
        """phantom-wiki CLI options, in the order they are passed and documented."""
        return {
            "--seed": self.seed,
            "--num-family-trees": self.family_trees,
            "--max-family-tree-size": self.max_tree_size,
            "--question-depth": 10,
            "--num-questions-per-type": self.questions_per_type,
        }


# Family trees of at most 25 people: 2 trees give a ~50-article world, 4 ~100, 8 ~200.
WORLDS = {
    w.name: w
    for w in (
        WorldSpec("phantomwiki", 1, 2, 50, headline="the default probe set", measure=False),
        WorldSpec("phantomwiki_s2", 2, 4, 50, headline="a ~100-person world (seed 2)", size_word="medium-sized"),
        WorldSpec(
            "phantomwiki_s3",
            3,
            8,
            100,
            questions_per_type=15,
            headline="a ~200-person world (seed 3)",
            size_word="larger",
        ),
    )
}
DEFAULT_WORLD = "phantomwiki"
MAX_ANSWERS = 4  # larger answer sets make set-EM meaningless for small models
ATTRIBUTES = ("dob", "job", "hobby")

# Relations an article states directly ("The mother of X is ...", "The friends of X are ...").
# Articles name mothers/fathers, sons/daughters, brothers/sisters, wives/husbands and friends;
# with only male/female genders these cover parent, child, sibling, married and friend.
# Each derived relation R(X, Y) ("Y is the R of X") = a path of such steps from X to Y, an
# optional gender of Y, and pairs of path positions that must differ (the rules' X \= Y),
# transcribed from phantom_wiki/facts/family/rules_*.pl.
_F, _M = "female", "male"
RELATIONS: dict[str, tuple[tuple[str, ...], str | None, tuple[tuple[int, int], ...]]] = {
    "parent": (("parent",), None, ()),
    "child": (("child",), None, ()),
    "sibling": (("sibling",), None, ()),
    "friend": (("friend",), None, ()),
    "mother": (("parent",), _F, ()),
    "father": (("parent",), _M, ()),
    "son": (("child",), _M, ()),
    "daughter": (("child",), _F, ()),
    "sister": (("sibling",), _F, ()),
    "brother": (("sibling",), _M, ()),
    "wife": (("married",), _F, ()),
    "husband": (("married",), _M, ()),
    "aunt": (("parent", "sibling"), _F, ()),
    "uncle": (("parent", "sibling"), _M, ()),
    "niece": (("sibling", "child"), _F, ()),
    "nephew": (("sibling", "child"), _M, ()),
    "grandparent": (("parent", "parent"), None, ()),
    "grandmother": (("parent", "parent"), _F, ()),
    "grandfather": (("parent", "parent"), _M, ()),
    "grandchild": (("child", "child"), None, ()),
    "granddaughter": (("child", "child"), _F, ()),
    "grandson": (("child", "child"), _M, ()),
    "mother_in_law": (("married", "parent"), _F, ()),
    "father_in_law": (("married", "parent"), _M, ()),
    "son_in_law": (("child", "married"), _M, ()),
    "daughter_in_law": (("child", "married"), _F, ()),
    "sister_in_law": (("married", "sibling"), _F, ()),
    "brother_in_law": (("married", "sibling"), _M, ()),
    "great_aunt": (("parent", "parent", "sibling"), _F, ()),
    "great_uncle": (("parent", "parent", "sibling"), _M, ()),
    "great_grandparent": (("parent",) * 3, None, ()),
    "great_grandmother": (("parent",) * 3, _F, ()),
    "great_grandfather": (("parent",) * 3, _M, ()),
    "great_grandchild": (("child",) * 3, None, ()),
    "great_granddaughter": (("child",) * 3, _F, ()),
    "great_grandson": (("child",) * 3, _M, ()),
    "cousin": (("parent", "sibling", "child"), None, ((0, 3),)),
    "female_cousin": (("parent", "sibling", "child"), _F, ((0, 3),)),
    "male_cousin": (("parent", "sibling", "child"), _M, ((0, 3),)),
    "second_aunt": (("parent",) * 3 + ("sibling",), _F, ()),
    "second_uncle": (("parent",) * 3 + ("sibling",), _M, ()),
    "female_first_cousin_once_removed": (("parent", "sibling", "child", "child"), _F, ((0, 3), (0, 4))),
    "male_first_cousin_once_removed": (("parent", "sibling", "child", "child"), _M, ((0, 3), (0, 4))),
    "female_second_cousin": (("parent", "parent", "sibling", "child", "child"), _F, ((1, 4), (0, 5))),
    "male_second_cousin": (("parent", "parent", "sibling", "child", "child"), _M, ((1, 4), (0, 5))),
}

_FACT = re.compile(r'^(parent|friend_|gender|dob|job|hobby)\("([^"]*)", "([^"]*)"\)\.$')
_ARG = r'(Y_\d+|"[^"]*")'
_CLAUSE = re.compile(rf"^(\w+)\({_ARG}, {_ARG}\)$")
_AGG = re.compile(rf"^aggregate_all\(count, distinct\((\w+)\({_ARG}, {_ARG}\)\), (Count_\d+)\)$")


class World:
    """The base facts of one PhantomWiki world, with one-hop article relations."""

    def __init__(self, facts_pl: str):
        self.parents: dict[str, set[str]] = defaultdict(set)
        self.children: dict[str, set[str]] = defaultdict(set)
        self.friends: dict[str, set[str]] = defaultdict(set)
        self.gender: dict[str, str] = {}
        self.attrs: dict[str, dict[str, str]] = defaultdict(dict)
        for line in facts_pl.splitlines():
            m = _FACT.match(line.strip())
            if not m:
                continue
            pred, a, b = m.groups()
            if pred == "parent":  # parent(X, Y): Y is a parent of X
                self.parents[a].add(b)
                self.children[b].add(a)
            elif pred == "friend_":
                self.friends[a].add(b)
                self.friends[b].add(a)
            elif pred == "gender":
                self.gender[a] = b
            else:
                self.attrs[a][pred] = b
        if set(self.gender.values()) - {_F, _M}:
            # Articles name parents only as mother/father; another gender breaks RELATIONS.
            raise SystemExit(f"unexpected genders: {sorted(set(self.gender.values()))}")

    def step(self, x: str, kind: str) -> set[str]:
        """People one article-stated hop away from x."""
        if kind == "parent":
            return set(self.parents[x])
        if kind == "child":
            return set(self.children[x])
        if kind == "friend":
            return set(self.friends[x])
        if kind == "sibling":
            return {s for p in self.parents[x] for s in self.children[p]} - {x}
        if kind == "married":
            return {s for c in self.children[x] for s in self.parents[c]} - {x}
        raise KeyError(kind)

    def paths(self, x: str, relation: str) -> list[list[str]]:
        """Every path [x, ..., y] realising relation(x, y), sorted."""
        steps, gender, distinct = RELATIONS[relation]
        paths = [[x]]
        for kind in steps:
            paths = [p + [n] for p in paths for n in sorted(self.step(p[-1], kind))]
        return sorted(
            p
            for p in paths
            if (gender is None or self.gender.get(p[-1]) == gender) and all(p[i] != p[j] for i, j in distinct)
        )


def _const(arg: str) -> str | None:
    return arg[1:-1] if arg.startswith('"') else None


def solve(world: World, query: list[str], answer_var: str) -> tuple[list[str], list[str]]:
    """Evaluate a PhantomWiki query; return (sorted answers, gold people in chain order).

    The query lists clauses from the answer back to the start, as PhantomWiki writes it.
    Each partial solution carries the people whose articles it read so far.
    """
    states: list[tuple[dict[str, str], list[str]]] = [({}, [])]
    for clause in reversed(query):
        new: list[tuple[dict[str, str], list[str]]] = []
        if m := _AGG.match(clause):
            rel, a, _, count_var = m.groups()
            for env, people in states:
                x = _const(a) or env[a]
                paths = world.paths(x, rel)
                # The count is read off the articles on each path up to the counted people;
                # the counted people's own articles are not needed, so they are not gold.
                via = [n for p in paths for n in p[:-1]] or [x]
                new.append(({**env, count_var: str(len({p[-1] for p in paths}))}, people + via))
        elif (m := _CLAUSE.match(clause)) and m.group(1) in ATTRIBUTES:
            attr, a, b = m.groups()
            for env, people in states:
                if _const(b) is not None:  # "the person whose job is X": a start point
                    for person in sorted(world.attrs):
                        if world.attrs[person].get(attr) == _const(b):
                            new.append(({**env, a: person}, people + [person]))
                elif attr in world.attrs[env[a]]:  # "the job of ...": an end point
                    new.append(({**env, b: world.attrs[env[a]][attr]}, people + [env[a]]))
        elif m := _CLAUSE.match(clause):
            rel, a, b = m.groups()
            for env, people in states:
                x = _const(a) or env[a]
                for p in world.paths(x, rel):
                    new.append(({**env, b: p[-1]}, people + p))
        else:
            raise SystemExit(f"unrecognised query clause: {clause}")
        states = new
    answers = sorted({env[answer_var] for env, _ in states})
    gold = list(dict.fromkeys(n for _, people in states for n in people))
    return answers, gold


def slug(name: str) -> str:
    """Stable document id from a person's name: 'Ben Halliday' -> 'ben-halliday'."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def seeded_rank(seed: int, text: str) -> str:
    """Sort key for a seeded, version-independent order: sha256 of "<seed>:<text>".

    Used instead of random.shuffle, whose results may change across Python versions.
    """
    return hashlib.sha256(f"{seed}:{text}".encode()).hexdigest()


def generate(pw_python: str, out_dir: str, spec: WorldSpec) -> None:
    """Run phantom-wiki's CLI into out_dir with the world's generator options."""
    check = [pw_python, "-c", "import importlib.metadata as m; print(m.version('phantom-wiki'))"]
    version = subprocess.run(check, check=False, capture_output=True, text=True).stdout.strip()
    if version != PW_VERSION:
        raise SystemExit(f"{pw_python} has phantom-wiki {version or 'not installed'}, need {PW_VERSION}")
    cmd = [pw_python, "-m", "phantom_wiki", "-od", out_dir, "--quiet"]
    cmd += [str(x) for kv in spec.gen_options().items() for x in kv]
    cmd += ["--article-format", "json", "--question-format", "json"]
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # phantom-wiki iterates sets in places
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def convert(raw: Path, spec: WorldSpec) -> tuple[list[dict], list[dict], dict[str, int]]:
    """Turn phantom-wiki output into (corpus rows, probe rows, generation stats).

    The stats are ``generated`` (questions PhantomWiki wrote) and ``templates`` (distinct types).
    """
    world = World((raw / "facts.pl").read_text())
    articles = json.loads((raw / "articles.json").read_text())
    corpus = [{"id": slug(a["title"]), "title": a["title"], "text": a["article"].strip()} for a in articles]
    ids = {a["title"]: row["id"] for a, row in zip(articles, corpus)}
    if len(set(ids.values())) != len(corpus):
        raise SystemExit("document ids are not unique")

    candidates: dict[int, list[dict]] = defaultdict(list)
    seen = set()
    questions = json.loads((raw / "questions.json").read_text())
    for q in questions:
        answers, gold = solve(world, q["prolog"]["query"], q["prolog"]["answer"])
        if answers != sorted(q["answer"]):  # our path derivation must agree with Prolog
            raise SystemExit(f"re-derived answers differ for {q['question']!r}: {answers} != {q['answer']}")
        agg = bool(q["is_aggregation_question"])
        if q["question"] in seen or len(answers) > MAX_ANSWERS or (agg and len(answers) > 1):
            continue  # duplicate, too many answers, or a count that depends on who is meant
        seen.add(q["question"])
        template = " ".join(q["template"][:-1]) + q["template"][-1]
        candidates[q["type"]].append(
            {
                "question": q["question"],
                "answers": answers,
                "answer_type": "single" if len(answers) == 1 else "set",
                "gold_doc_ids": [ids[p] for p in gold],
                "metadata": {
                    "difficulty": q["difficulty"],
                    "type": q["type"],
                    "aggregation": agg,
                    "hops": len(q["prolog"]["query"]),
                    "template": template,
                    "prolog_query": q["prolog"]["query"],
                },
            }
        )

    # Round-robin over templates (each in hash order) so every prefix of the set is a spread.
    queues = {t: sorted(c, key=lambda r: seeded_rank(spec.seed, r["question"])) for t, c in candidates.items()}
    order = sorted(queues, key=lambda t: seeded_rank(spec.seed, str(t)))
    probes: list[dict] = []
    while len(probes) < spec.n_probes and any(queues.values()):
        for t in order:
            if queues[t] and len(probes) < spec.n_probes:
                probes.append(queues[t].pop(0))
    if len(probes) < spec.n_probes:
        raise SystemExit(f"{spec.name}: only {len(probes)} usable questions, need {spec.n_probes}")
    stats = {"generated": len(questions), "templates": len({q["type"] for q in questions})}
    return corpus, [{"id": f"pw-{i:04d}", **p} for i, p in enumerate(probes, 1)], stats


README_TEMPLATE = """\
# {name}: {headline}

A {size_word} fictional world generated by PhantomWiki (Gong et al. 2025, "PhantomWiki: On-Demand
Datasets for Reasoning and Retrieval Evaluation"; PyPI `phantom-wiki` {version}, MIT licence,
https://github.com/kilian-group/phantom-wiki): {n_docs} person articles (family, friends, date of
birth, occupation, hobby) and {n_probes} multi-hop questions whose answers a Prolog engine computed
from the world's facts.  The people are fictional, so a model cannot answer from memory: it has to
retrieve, and often chain several retrievals.

Licence: MIT (generated by phantom-wiki {version})

## Counts

- documents: {n_docs}
- probes: {n_probes}
- by answer_type: {by_type}
- by difficulty (PhantomWiki's score, summed over the query's relations and attributes):
  {by_difficulty}
- by hops (clauses in the Prolog query): {by_hops}
- aggregation ("How many ...", answer is a number written as a string; partly guessable without
  retrieval): {n_agg}
- gold documents per probe: min {gold_min}, median {gold_med}, max {gold_max}

## Format

`corpus.jsonl`: `{{"id": slug of the name, "title": name, "text": the article as generated}}`.
`probes.jsonl`: `id` (pw-0001 ...), `question`, `answers` (sorted), `answer_type` (`single`
when Prolog found one answer; `set` when it found several, all of which together are the
answer), `gold_doc_ids`, and `metadata`: `difficulty`, `type` (PhantomWiki's template index at
question depth 10), `aggregation`, `hops`, `template`, `prolog_query`.

## How it was made

Generator options (articles and questions written as JSON, `PYTHONHASHSEED=0`):
{options}.
{gen_count}  Questions were then dropped when they repeat an earlier
question, have more than {max_answers} answers, or are counts with more than one answer (the
named start matches several people who have different counts, so the question is ambiguous).
From what remained, {n_probes} were taken round-robin over the templates, each template's
questions in sha256("{seed}:" + question) order, so every prefix of `probes.jsonl` spreads over
templates.  PhantomWiki's random question ids are replaced by `pw-NNNN`.

Rebuild (identical files; the script checks its own derivation against PhantomWiki's answers):

```
python3 -m venv /tmp/pwvenv
/tmp/pwvenv/bin/pip install --only-binary=:all: --ignore-requires-python phantom-wiki=={version}
python probes/build_phantomwiki.py --pw-python /tmp/pwvenv/bin/python{world_flag}
```

(Debian's `swi-prolog-nox` must be installed; `--only-binary` stops pip from building a NumPy
sdist that refuses Python 3.11.)

## Gold documents

PhantomWiki's solution traces name the people bound by the query's variables, but not the people
that a derived relation passes through (a cousin is a child of a sibling of a parent; nobody's
article says "the cousin of ...").  The build script therefore re-derives each hop from the base
facts (parent, gender, friend, job, hobby, date of birth) as a path of relations that an article
states directly (mother/father, son/daughter, brother/sister, wife/husband, friends), following
PhantomWiki's Prolog rules, and checks that this gives exactly PhantomWiki's answers for all {generated}
generated questions.  `gold_doc_ids` are the articles of every person on every solution path,
in order of first appearance along the paths: the named person (or each person matching "the
person whose ... is ..." who leads to an answer), each intermediate person, and the answer
people.  For "What is the <attribute> of ..." the people whose attribute is read are gold.  For
"How many ... does X have" the gold documents are the people on the paths up to (not including)
the counted people, whose names the article before them already lists.

Caveats: an answer person's own article is gold although the previous article already names them
(it also states the inverse relation); when a question has several solutions (several answers,
or several people matching its start) the people of every solution are gold, so a probe can have
more gold documents than k and recall@k is a strict measure; and "the person whose <attribute>
is ..." questions need a search over all articles with that attribute, of which only those
leading to an answer are gold.
"""


def _counts(values) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(Counter(values).items()))


def render_readme(
    corpus: list[dict], probes: list[dict], spec: WorldSpec, stats: dict[str, int], extra: str = ""
) -> str:
    """Fill README_TEMPLATE with this build's numbers; ``extra`` is appended (a measured section)."""
    gold = sorted(len(p["gold_doc_ids"]) for p in probes)
    text = README_TEMPLATE.format(
        name=spec.name,
        headline=spec.headline,
        size_word=spec.size_word,
        version=PW_VERSION,
        seed=spec.seed,
        max_answers=MAX_ANSWERS,
        n_docs=len(corpus),
        n_probes=len(probes),
        by_type=_counts(p["answer_type"] for p in probes),
        by_difficulty=_counts(p["metadata"]["difficulty"] for p in probes),
        by_hops=_counts(p["metadata"]["hops"] for p in probes),
        n_agg=sum(p["metadata"]["aggregation"] for p in probes),
        gold_min=gold[0],
        gold_med=gold[len(gold) // 2],
        gold_max=gold[-1],
        options=" ".join(f"`{k} {v}`" for k, v in spec.gen_options().items()),
        gen_count=f"That gives {stats['templates']} question templates x {spec.questions_per_type} questions.",
        generated=stats["generated"],
        world_flag="" if spec.name == DEFAULT_WORLD else f" --world {spec.name}",
    )
    return text + (f"\n{extra}" if extra else "")


def write_jsonl(path: Path, rows: list[dict]) -> None:
    """One compact JSON object per line, UTF-8, trailing newline."""
    with path.open("w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


MEASURE_NOTE = """\
How to read these: every article lists the person's relatives and friends by name, so an answer
person's name often occurs in a retrieved article although the chain was not followed, and the
answer-in-top-5 rate overstates what one retrieval achieves; gold recall@5 (the articles on the
solution paths found by the question alone) is the better sign that the set needs multi-hop
retrieval."""


def build(spec: WorldSpec, pw_python: str, out: Path, keep_raw: Path | None = None) -> None:
    """Generate one world and write its probe folder (corpus, probes, README) to out."""
    with tempfile.TemporaryDirectory() as tmp:
        raw = keep_raw or Path(tmp) / "raw"
        generate(pw_python, str(raw), spec)
        corpus, probes, stats = convert(Path(raw), spec)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "corpus.jsonl", corpus)
    write_jsonl(out / "probes.jsonl", probes)
    extra = ""
    if spec.measure:
        # Imported here: it needs bm25s, and the default world builds with the standard library only.
        from flarebench.probes.measure_sets import measure_folder, readme_section

        extra = readme_section(measure_folder(out), MEASURE_NOTE)
    (out / "README.md").write_text(render_readme(corpus, probes, spec, stats, extra), encoding="utf-8")
    print(f"{out}: {len(probes)} probes, {len(corpus)} docs")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pw-python", default=sys.executable, help="Python with phantom-wiki installed")
    ap.add_argument("--world", choices=sorted(WORLDS), default=DEFAULT_WORLD, help="which world to build")
    ap.add_argument("--all", action="store_true", help="build every world into probes/<world>")
    ap.add_argument("--out", type=Path, help="output folder (default: probes/<world> next to this file)")
    ap.add_argument("--keep-raw", type=Path, help="also keep phantom-wiki's raw output here")
    args = ap.parse_args(argv)
    if args.all and (args.out or args.keep_raw):
        ap.error("--all writes every world to probes/<world>; --out and --keep-raw need one --world")
    here = Path(__file__).resolve().parent
    for name in sorted(WORLDS) if args.all else [args.world]:
        build(WORLDS[name], args.pw_python, args.out or here / name, args.keep_raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
