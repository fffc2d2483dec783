"""Write the shipped ``probes/engdocs/`` and ``probes/engdocs_long/`` probe sets: internal engineering
docs of a fictional company, with short questions (engdocs) and long-answer questions (engdocs_long).

Tarnwick Parcel Systems does not exist; neither do its services, teams, people, tools (Kettlemq,
Gravelbase, Cinderstore, Slipway, Bellhop, Vaultwick, Chirpwell) or base images (the ``tarn*``
family, the Tarnix OS layer).  The documents and questions were written by hand for flarebench and
live as data in ``probes/engdocs/source/`` (in the repository; a wheel ships only the built files):

- ``documents/*.md``: one Markdown file per kind of document.  Each ``## Title {#id}`` section is
  one document, its text the lines up to the next such heading; what stands before a file's first
  section (its ``# Heading``) is no document's.  Files in name order, sections in file order, give
  the order of ``corpus.jsonl``, which both sets ship identically.
- ``probes.toml`` (engdocs): one ``[[probe]]`` table per probe, in the order of ``probes.jsonl``:
  ``id``, ``question``, ``answer_type``, ``answers``, ``kind``, ``hops`` and ``steps``, a list of
  ``{ doc = "document id", says = "text quoted from it" }``.
- ``probes_long.toml`` (engdocs_long): one ``[[probe]]`` table per probe (``id``, ``question``,
  ``kind``), each followed by its ``[[probe.facts]]`` tables, the required facts in the order an
  answer unfolds them: ``id`` (f1, f2, ...), ``fact`` (a sentence), ``answers`` (the value, then
  other spellings of it), ``wrong_values`` (optional: the traps the corpus holds), ``doc`` and
  ``says`` (text quoted from that document).
- ``README.template.md``, ``README_long.template.md``: each set's README, with ``$name``
  placeholders for its counts (``$$`` is a dollar sign).

Running this script writes both sets' ``corpus.jsonl``, ``probes.jsonl`` and ``README.md``
deterministically (two runs give identical bytes; engdocs_long's README states retrieval figures that
bm25s measures during the build)::

    python probes/build_engdocs.py            # rewrite probes/engdocs/ and probes/engdocs_long/
    python probes/build_engdocs.py --check    # exit 1 if the committed files differ

``check()`` verifies that every quote (a step's or a fact's ``says``) occurs verbatim in its
document, and that every document and probe id is unique, every document has 80-300 words and a
few facts the chains rely on are unambiguous (each queue has exactly one owner, each service
exactly one production image tag).  engdocs: every non-yes/no answer (each item of a set, the first
alias of a single answer) occurs in one of its gold documents.  engdocs_long: 3-6 facts per probe
from at least two documents; a fact's first alias occurs in its quote, and some alias is stated in
its quote and its sentence as the scorer matches values (flarebench.bench.answers.states_value); a
wrong value is stated in some document (a trap the corpus holds, or spells one) but in no fact,
quote, alias or question of its probe; and the question states no fact's value (the answer has to
unfold).  Each problem is one line that starts ``FILE:LINE:``, where the source says what is wrong
(a long probe's fact: its ``[[probe.facts]]`` header), and goes on with the document or probe id
and the field: ``probes.toml:12: eng-001: answers: ...``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import NamedTuple

from flarebench.bench.answers import states_value

OUT = Path(__file__).resolve().parent  # the sets are written to OUT/engdocs and OUT/engdocs_long
SOURCE = OUT / "engdocs" / "source"
SETS = {
    "engdocs": ("probes.toml", "README.template.md"),
    "engdocs_long": ("probes_long.toml", "README_long.template.md"),
}
ANSWER_TYPES = ("single", "set", "yes_no")
KINDS = ("lookup", "multi-hop", "version-chain", "policy-exception", "incident", "aggregation")
LONG_KINDS = ("deploy", "version-chain", "policy", "incident", "on-call", "runbook", "explain")
FACTS_PER_PROBE = (3, 6)

# A document's heading, "## Title {#id}": the header-id syntax of Pandoc and kramdown.
HEADING = re.compile(r"## (?P<title>\S.*?) \{#(?P<id>[^\s{}]+)\}\s*")
# The fields of each table and their types (exact: a boolean is no hop count), named as TOML names them.
TOML_TYPES = {str: "string", int: "integer", list: "array"}
PROBE_FIELDS = {
    "id": str,
    "question": str,
    "answer_type": str,
    "answers": list,
    "kind": str,
    "hops": int,
    "steps": list,
}
STEP_FIELDS = ("doc", "says")
LONG_FIELDS = {"id": str, "question": str, "kind": str, "facts": list}
FACT_FIELDS = {"id": str, "fact": str, "answers": list, "wrong_values": list, "doc": str, "says": str}

# Facts the chains rely on, checked to be unambiguous across the corpus (see check()).
QUEUE_OWNERS = {
    "pay-settle-q": "ledgerbird",
    "pay-settle-dlq": "ledgerbird",
    "invoice-out-q": "tallyvane",
    "route-events-q": "parcelpath",
    "stock-sync-q": "hollowcrate",
    "label-jobs-q": "stampmill",
    "notify-fanout-q": "driftmark",
}
PRODUCTION_TAGS = {
    "ledgerbird": "4.12.0",
    "quillgate": "7.0.3",
    "parcelpath": "2.3.1",
    "hollowcrate": "1.9.4",
    "stampmill": "3.0.0",
    "driftmark": "5.6.2",
    "tallyvane": "8.1.0",
    "sablekey": "0.14.2",
}


# What the first retrieval (the question alone, BM25 top 3, the default bm25s retriever) finds, per
# hops: (probes, first document of the chain retrieved, every gold document retrieved, mean recall).
# Measured when the set was written; tests/test_engdocs.py recomputes it.
FIRST_HOP_K = 3
FIRST_HOP = {
    1: (19, 18, 16, 0.89),
    2: (24, 14, 9, 0.68),
    3: (9, 4, 0, 0.36),
    4: (5, 2, 0, 0.25),
}
# engdocs_long's README measures, when the set is built, how many required facts have their document
# in the question's top k of the default bm25s retriever (fact_coverage()), besides measure_sets's figures.
COVERAGE_K = (3, 5)


class Entry(NamedTuple):
    """A document or probe: where its source starts (``FILE:LINE``), its row as shipped and, for a
    long probe, where each of its facts starts."""

    at: str
    row: dict
    facts_at: tuple[str, ...] = ()


@dataclass
class Source:
    """Both sets as read from the source folder; entries that could not be read are left out."""

    corpus: list[Entry] = field(default_factory=list)
    probes: list[Entry] = field(default_factory=list)
    long: list[Entry] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


# --- read -------------------------------------------------------------------------------------


def read_documents(folder: Path, problems: list[str]) -> list[Entry]:
    """The documents of ``folder/*.md``, in corpus order; unreadable headings go to problems."""
    entries = []
    for path in sorted(folder.glob("*.md")):
        lines = path.read_text(encoding="utf-8").split("\n")
        starts = [n for n, line in enumerate(lines) if line.startswith("## ")]
        for n, end in zip(starts, [*starts[1:], len(lines)]):
            m = HEADING.fullmatch(lines[n])
            if m is None:
                problems.append(f"{path}:{n + 1}: (heading): {lines[n]!r} is not '## Title {{#id}}'")
                continue
            text = "\n".join(lines[n + 1 : end]).strip()
            entries.append(Entry(f"{path}:{n + 1}", {"id": m["id"], "title": m["title"], "text": text}))
    if not entries:
        problems.append(f"{folder}:0: (folder): no '## Title {{#id}}' documents in *.md")
    return entries


def _field_problems(table: dict, fields: dict[str, type], optional: tuple[str, ...] = ()) -> list[str]:
    """What is wrong with the fields of one table, as 'FIELD: problem'; lists of strings included."""
    problems = [f"{k}: unknown field (fields: {', '.join(fields)})" for k in table if k not in fields]
    problems += [
        f"{k}: missing or not a TOML {TOML_TYPES[t]}"
        for k, t in fields.items()
        if (k in table or k not in optional) and type(table.get(k)) is not t
    ]
    if not problems and type(table.get("answers")) is list:
        if not table["answers"] or not all(type(a) is str for a in table["answers"]):
            problems.append("answers: want a non-empty list of strings")
    if not problems and not all(type(w) is str for w in table.get("wrong_values", [])):
        problems.append("wrong_values: want a list of strings")
    return problems


def _read_tables(path: Path, problems: list[str]) -> list[tuple[str, dict, list[str]]]:
    """The [[probe]] tables of a TOML file, in order: (``FILE:LINE`` of the header, the table, the
    ``FILE:LINE`` of each of its [[probe.facts]] headers); an unreadable file goes to problems."""
    if not path.is_file():
        problems.append(f"{path}:0: (file): not found")
        return []
    text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        line = re.search(r"at line (\d+)", str(e))
        problems.append(f"{path}:{line[1] if line else 0}: (toml): {e}")
        return []
    # Problems name the line of a [[probe]] (or [[probe.facts]]) header, so the tables must be written so.
    heads: list[tuple[int, list[str]]] = []
    for n, line in enumerate(text.split("\n"), 1):
        if m := re.match(r"\s*\[\[\s*probe\s*(\.\s*facts\s*)?\]\]", line):
            if not m[1]:
                heads.append((n, []))
            elif heads:
                heads[-1][1].append(f"{path}:{n}")
    tables = data.get("probe")
    if sorted(data) != ["probe"] or type(tables) is not list or len(heads) != len(tables):
        problems.append(f"{path}:0: (file): want one or more [[probe]] tables and nothing else")
        return []
    return [(f"{path}:{line}", table, facts) for (line, facts), table in zip(heads, tables)]


def read_probes(path: Path, problems: list[str]) -> list[Entry]:
    """The probes of a probes.toml, in order, as probes.jsonl rows; unreadable ones go to problems."""
    entries = []
    for at, table, _ in _read_tables(path, problems):
        found = _field_problems(table, PROBE_FIELDS)
        if not found and not all(
            type(s) is dict and sorted(s) == sorted(STEP_FIELDS) and all(type(v) is str for v in s.values())
            for s in table["steps"] or [None]
        ):
            found.append('steps: want a non-empty list of { doc = "...", says = "..." }')
        if found:
            problems += [f"{at}: {table.get('id', '(no id)')}: {p}" for p in found]
            continue
        steps = [{"doc": s["doc"], "says": s["says"]} for s in table["steps"]]
        row = {
            "id": table["id"],
            "question": table["question"],
            "answers": table["answers"],
            "answer_type": table["answer_type"],
            "gold_doc_ids": list(dict.fromkeys(s["doc"] for s in steps)),
            "metadata": {"hops": table["hops"], "kind": table["kind"], "steps": steps},
        }
        entries.append(Entry(at, row))
    return entries


def read_long(path: Path, problems: list[str]) -> list[Entry]:
    """The long probes of a probes_long.toml, in order, as probes.jsonl rows with required_facts."""
    entries = []
    for at, table, facts_at in _read_tables(path, problems):
        name = f"{at}: {table.get('id', '(no id)')}"
        found = [f"{name}: {p}" for p in _field_problems(table, LONG_FIELDS)]
        facts = table.get("facts") if type(table.get("facts")) is list else []
        if not found and (len(facts_at) != len(facts) or not facts):
            found.append(f"{name}: facts: want one or more [[probe.facts]] tables after the [[probe]] table")
        for k, (fact, fat) in enumerate(zip(facts, facts_at)):
            if type(fact) is not dict:
                found.append(f"{fat}: {table.get('id')}: facts[{k}]: want a [[probe.facts]] table")
            else:
                found += [
                    f"{fat}: {table.get('id')}: facts[{k}].{p}"
                    for p in _field_problems(fact, FACT_FIELDS, ("wrong_values",))
                ]
        if found:
            problems += found
            continue
        required = [
            {
                "id": f["id"],
                "fact": f["fact"],
                "answers": f["answers"],
                "doc_ids": [f["doc"]],
                "wrong_values": f.get("wrong_values", []),
            }
            for f in facts
        ]
        row = {
            "id": table["id"],
            "question": table["question"],
            "answer_type": "long",
            "gold_doc_ids": list(dict.fromkeys(f["doc"] for f in facts)),
            "required_facts": required,
            "metadata": {
                "kind": table["kind"],
                "steps": [{"fact": f["id"], "doc": f["doc"], "says": f["says"]} for f in facts],
            },
        }
        entries.append(Entry(at, row, tuple(facts_at)))
    return entries


def read(source: Path = SOURCE) -> Source:
    """Read the source folder (documents/*.md, probes.toml, probes_long.toml)."""
    src = Source()
    src.corpus = read_documents(source / "documents", src.problems)
    src.probes = read_probes(source / SETS["engdocs"][0], src.problems)
    src.long = read_long(source / SETS["engdocs_long"][0], src.problems)
    return src


# --- check ------------------------------------------------------------------------------------


def words(text: str) -> int:
    """Words of a document, as its 80-300 bound counts them."""
    return len(text.split())


def _quote_problem(where: str, name: str, doc: str, says: str, docs: dict[str, str]) -> str | None:
    """Why a quote (a step's or a fact's ``says``) is not text of its document, or None."""
    if doc not in docs:
        return f"{where}: {name}.doc: gold document {doc!r} does not exist"
    if says not in docs[doc]:
        return f"{where}: {name}.says: {doc!r} does not say {says!r}"
    return None


def _unique(entries: list[Entry]) -> list[str]:
    """Duplicate probe ids and questions, reported at the later one."""
    problems, ids, questions = [], set(), set()
    for e in entries:
        if e.row["id"] in ids:
            problems.append(f"{e.at}: {e.row['id']}: id: duplicate probe id")
        if e.row["question"] in questions:
            problems.append(f"{e.at}: {e.row['id']}: question: duplicate question")
        ids.add(e.row["id"])
        questions.add(e.row["question"])
    return problems


def check_short(probes: list[Entry], docs: dict[str, str]) -> list[str]:
    """Problems of the engdocs probes."""
    problems = _unique(probes)
    for e in probes:
        p, meta = e.row, e.row["metadata"]
        where = f"{e.at}: {p['id']}"
        if p["answer_type"] not in ANSWER_TYPES:
            problems.append(f"{where}: answer_type: {p['answer_type']!r}, want one of {', '.join(ANSWER_TYPES)}")
        if meta["kind"] not in KINDS:
            problems.append(f"{where}: kind: {meta['kind']!r}, want one of {', '.join(KINDS)}")
        if not 1 <= meta["hops"] <= 4:
            problems.append(f"{where}: hops: {meta['hops']}, want 1-4")
        for k, step in enumerate(meta["steps"]):
            if bad := _quote_problem(where, f"steps[{k}]", step["doc"], step["says"], docs):
                problems.append(bad)
        gold_text = "\n".join(docs.get(g, "") for g in p["gold_doc_ids"])
        if p["answer_type"] == "yes_no":
            if p["answers"] not in (["yes"], ["no"]):
                problems.append(f"{where}: answers: {p['answers']}, want ['yes'] or ['no']")
        elif p["answer_type"] == "set":
            for item in p["answers"]:
                if item not in gold_text:
                    problems.append(f"{where}: answers: set item {item!r} is in none of its gold documents")
        elif p["answers"][0] not in gold_text:
            problems.append(f"{where}: answers: {p['answers'][0]!r} is in none of its gold documents")
    return problems


def check_long(probes: list[Entry], docs: dict[str, str]) -> list[str]:
    """Problems of the engdocs_long probes (see the module docstring)."""
    problems, (low, high) = _unique(probes), FACTS_PER_PROBE
    for e in probes:
        p, steps = e.row, e.row["metadata"]["steps"]
        where, facts = f"{e.at}: {p['id']}", p["required_facts"]
        if p["metadata"]["kind"] not in LONG_KINDS:
            problems.append(f"{where}: kind: {p['metadata']['kind']!r}, want one of {', '.join(LONG_KINDS)}")
        if not low <= len(facts) <= high:
            problems.append(f"{where}: facts: {len(facts)} facts, want {low}-{high}")
        if len(p["gold_doc_ids"]) < 2:
            problems.append(f"{where}: facts: all from {p['gold_doc_ids']}, want facts from two documents or more")
        # What a right answer may state: the question, every fact (its sentence, its aliases, its quote).
        right = [p["question"], *(f["fact"] for f in facts), *(a for f in facts for a in f["answers"])]
        right += [s["says"] for s in steps]
        for k, (f, step, at) in enumerate(zip(facts, steps, e.facts_at)):
            there = f"{at}: {p['id']}: facts[{k}]"
            if f["id"] != f"f{k + 1}":
                problems.append(f"{there}.id: {f['id']!r}, want 'f{k + 1}' (facts are numbered in order)")
            if bad := _quote_problem(f"{at}: {p['id']}", f"facts[{k}]", step["doc"], step["says"], docs):
                problems.append(bad)
            if f["answers"][0] not in step["says"]:
                problems.append(f"{there}.answers: {f['answers'][0]!r} is not in its quote")
            elif not any(states_value(step["says"], a) for a in f["answers"]):
                problems.append(
                    f"{there}.answers: the scorer finds no alias in its quote; add the value as the quote writes it"
                )
            if not any(states_value(f["fact"], a) for a in f["answers"]):
                problems.append(f"{there}.fact: states none of its answers")
            problems += [
                f"{there}.answers: the question states {a!r}" for a in f["answers"] if states_value(p["question"], a)
            ]
            # A wrong value is a trap the corpus holds, or a spelling of one ("ledgerbird:4.11.2").
            held = [w for w in f["wrong_values"] if any(states_value(t, w) for t in docs.values())]
            for w in f["wrong_values"]:
                if not any(h in w for h in held):
                    problems.append(f"{there}.wrong_values: {w!r} is in no document: not a trap the corpus holds")
                if hit := next((t for t in right if states_value(t, w)), None):
                    problems.append(f"{there}.wrong_values: {w!r} is stated by {hit!r}, which a right answer may state")
    return problems


def check(src: Source) -> list[str]:
    """Problems of both sets, read ones first, one line each (an empty list means consistent)."""
    problems = list(src.problems)
    docs: dict[str, str] = {}
    at: dict[str, str] = {}
    for e in src.corpus:
        d = e.row
        if d["id"] in docs:
            problems.append(f"{e.at}: {d['id']}: duplicate document id (first at {at[d['id']]})")
        at.setdefault(d["id"], e.at)
        docs[d["id"]] = d["text"]
        if not 80 <= words(d["text"]) <= 300:
            problems.append(f"{e.at}: {d['id']}: text: {words(d['text'])} words, want 80-300")
    problems += check_short(src.probes, docs)
    problems += check_long(src.long, docs)
    # Unambiguous chains: each queue is owned ("which X owns") by exactly one service card, and
    # each service's production image tag appears in exactly one deploy manifest.  A problem is
    # reported at the document that should say it (or, if that is missing, at the fact in this file).
    script = f"{Path(__file__).resolve()}:0"
    for queue, owner in QUEUE_OWNERS.items():
        q = re.escape(queue)
        owns = re.compile(rf"{q}, the [a-z -]+, which (\w+) owns|{q}, also owned by (\w+)")
        owners = [(i, "".join(m.groups(""))) for i, t in docs.items() for m in owns.finditer(t)]
        card = f"svc-{owner}"
        if owners != [(card, owner)]:
            claims = "; ".join(f"{i} ({at[i]}) says {o}" for i, o in owners) or "no document"
            problems.append(f"{at.get(card, script)}: queue {queue}: owned according to {claims}; expected {card}")
    for service, tag in PRODUCTION_TAGS.items():
        image, manifest = f"{service}:{tag}", f"deploy-{service}"
        holders = [i for i, t in docs.items() if i.startswith("deploy-") and image in t]
        if holders != [manifest]:
            problems.append(f"{at.get(manifest, script)}: image {image}: in manifests {holders}, expected {manifest}")
        rel = f"rel-{service}-{tag}"
        if rel not in docs:
            problems.append(f"{at.get(manifest, script)}: {service}: no release notes {rel} for the production tag")
    return problems


# --- measure ----------------------------------------------------------------------------------


def fact_coverage(corpus: list[dict], probes: list[dict]) -> dict[str, tuple[int, ...]]:
    """How many required facts of the long probes (probes.jsonl rows) have their document among the
    question's top k of the default bm25s retriever, for each k of COVERAGE_K: (facts, found at
    each k) per fact position ("f1", "f2", ...) and over "all facts", and (probes, probes with every
    fact's document found at each k) as "whole answers"."""
    from flarebench.probes.model import Document
    from flarebench.strategies.bm25 import BM25Retriever  # bm25s: only needed when measuring

    retriever = BM25Retriever([Document(d["id"], d["title"], d["text"]) for d in corpus])
    rows: dict[str, list[int]] = {}

    def count(name: str, hits: list[bool]) -> None:
        row = rows.setdefault(name, [0] * (1 + len(COVERAGE_K)))
        for i, hit in enumerate([True, *hits]):
            row[i] += hit

    for p in probes:
        tops = [{h.id for h in retriever.search(p["question"], k)[0]} for k in COVERAGE_K]
        found = [[bool(top & set(f["doc_ids"])) for top in tops] for f in p["required_facts"]]
        for n, hits in enumerate(found, 1):
            count(f"f{n}", hits)
            count("all facts", hits)
        count("whole answers", [all(col) for col in zip(*found)])
    return {name: tuple(rows[name]) for name in sorted(rows, key=lambda n: (not n.startswith("f"), n))}


# --- write ------------------------------------------------------------------------------------


def _counts(values) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(Counter(values).items()))


def _median(xs: list[int]) -> int:
    xs = sorted(xs)
    return xs[len(xs) // 2]


def _corpus_counts(corpus: list[dict], probes: list[dict]) -> dict:
    """The $names both READMEs use."""
    w = [words(d["text"]) for d in corpus]
    g = [len(p["gold_doc_ids"]) for p in probes]
    return {
        "n_docs": len(corpus),
        "n_probes": len(probes),
        "doc_kinds": _counts(d["id"].split("-", 1)[0] for d in corpus),
        "w_min": min(w),
        "w_med": _median(w),
        "w_max": max(w),
        "by_kind": _counts(p["metadata"]["kind"] for p in probes),
        "g_min": min(g),
        "g_med": _median(g),
        "g_max": max(g),
    }


def render_readme(template: str, corpus: list[dict], probes: list[dict]) -> str:
    """The engdocs README: the template with its counts filled in (KeyError for an unknown $name)."""
    return Template(template).substitute(
        _corpus_counts(corpus, probes),
        by_type=_counts(p["answer_type"] for p in probes),
        by_hops=_counts(p["metadata"]["hops"] for p in probes),
        k=FIRST_HOP_K,
        first_hop="\n".join(
            f"| {h} | {n} | {first} | {every} | {recall:.2f} |" for h, (n, first, every, recall) in FIRST_HOP.items()
        ),
    )


def render_long_readme(template: str, corpus: list[dict], probes: list[dict]) -> str:
    """The engdocs_long README: the template with its counts and its retrieval measurements filled in:
    measure_sets's section (a fact counts when an alias occurs in a top-5 document) and, by fact
    position, whether the fact's own document is in the top k (fact_coverage())."""
    from flarebench.probes.measure_sets import measure_folder, readme_section  # bm25s: only to measure

    with tempfile.TemporaryDirectory() as tmp:
        for name, rows in (("corpus.jsonl", corpus), ("probes.jsonl", probes)):
            (Path(tmp) / name).write_text(_jsonl(rows), encoding="utf-8")
        difficulty = readme_section(measure_folder(tmp)).rstrip("\n")
    facts = [f for p in probes for f in p["required_facts"]]
    per_probe = Counter(len(p["required_facts"]) for p in probes)
    return Template(template).substitute(
        _corpus_counts(corpus, probes),
        n_facts=len(facts),
        n_trapped=sum(bool(f["wrong_values"]) for f in facts),
        n_wrong=sum(len(f["wrong_values"]) for f in facts),
        trapped_probes=sum(any(f["wrong_values"] for f in p["required_facts"]) for p in probes),
        facts_hist="\n".join(f"| {n} | {per_probe[n]} | {'#' * per_probe[n]} |" for n in sorted(per_probe)),
        difficulty=difficulty,
        k_cols=" | ".join(f"in top {k}" for k in COVERAGE_K),
        k_rule="|---" * len(COVERAGE_K),
        coverage="\n".join(
            f"| {name} | {row[0]} | " + " | ".join(f"{hit / row[0]:.2f}" for hit in row[1:]) + " |"
            for name, row in fact_coverage(corpus, probes).items()
        ),
    )


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def files(source: Path = SOURCE) -> dict[str, str]:
    """The files of both sets, "SET/NAME" -> text; raises ValueError when the source has problems."""
    src = read(source)
    problems = check(src)
    if problems:
        raise ValueError("engdocs is inconsistent:\n" + "\n".join(problems))
    corpus = [e.row for e in src.corpus]
    out = {}
    for name, entries, render in (
        ("engdocs", src.probes, render_readme),
        ("engdocs_long", src.long, render_long_readme),
    ):
        template = source / SETS[name][1]
        probes = [e.row for e in entries]
        try:
            readme = render(template.read_text(encoding="utf-8"), corpus, probes)
        except (KeyError, ValueError) as e:  # an unknown $name, or a $ that starts none
            raise ValueError(f"engdocs is inconsistent:\n{template}:0: (template): {type(e).__name__}: {e}") from None
        out |= {
            f"{name}/corpus.jsonl": _jsonl(corpus),
            f"{name}/probes.jsonl": _jsonl(probes),
            f"{name}/README.md": readme,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    """Write (or with --check compare) both sets; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument(
        "--out", type=Path, default=OUT, help="folder to write engdocs/ and engdocs_long/ into (default: probes)"
    )
    ap.add_argument("--check", action="store_true", help="compare with the files in --out instead of writing")
    args = ap.parse_args(argv)
    try:
        wanted = files()
    except ValueError as e:
        print(e, file=sys.stderr)
        return 1
    if args.check:
        stale = [n for n, t in wanted.items() if not (args.out / n).is_file() or (args.out / n).read_text("utf-8") != t]
        for name in stale:
            print(f"{args.out / name}: differs from what build_engdocs.py writes", file=sys.stderr)
        return 1 if stale else 0
    for name, text in wanted.items():
        (args.out / name).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out / name, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    for name in SETS:
        n_probes, n_docs = (wanted[f"{name}/{f}"].count("\n") for f in ("probes.jsonl", "corpus.jsonl"))
        print(f"wrote {args.out / name}: {n_probes} probes, {n_docs} documents")
    return 0


if __name__ == "__main__":
    sys.exit(main())
