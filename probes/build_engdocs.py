"""Write the shipped ``probes/engdocs/`` probe set: internal engineering docs of a fictional company.

Tarnwick Parcel Systems does not exist; neither do its services, teams, people, tools (Kettlemq,
Gravelbase, Cinderstore, Slipway, Bellhop, Vaultwick, Chirpwell) or base images (the ``tarn*``
family, the Tarnix OS layer).  The documents and questions were written by hand for flarebench and
live as data in ``probes/engdocs/source/`` (in the repository; a wheel ships only the built files):

- ``documents/*.md``: one Markdown file per kind of document.  Each ``## Title {#id}`` section is
  one document, its text the lines up to the next such heading; what stands before a file's first
  section (its ``# Heading``) is no document's.  Files in name order, sections in file order, give
  the order of ``corpus.jsonl``.
- ``probes.toml``: one ``[[probe]]`` table per probe, in the order of ``probes.jsonl``: ``id``,
  ``question``, ``answer_type``, ``answers``, ``kind``, ``hops`` and ``steps``, a list of
  ``{ doc = "document id", says = "text quoted from it" }``.
- ``README.template.md``: the set's README, with ``$name`` placeholders for its counts (``$$`` is
  a dollar sign).

Running this script writes ``corpus.jsonl``, ``probes.jsonl`` and ``README.md`` deterministically
(two runs give identical bytes)::

    python probes/build_engdocs.py            # rewrite probes/engdocs/
    python probes/build_engdocs.py --check    # exit 1 if the committed files differ

The gold documents of a probe are the documents of its steps, in order.  ``check()`` verifies that
every quoted step occurs verbatim in its document, plus: every document and probe id is unique,
every document has 80-300 words, every non-yes/no answer (each item of a set, the first alias of a
single answer) occurs in one of its gold documents, and a few facts that the chains rely on are
unambiguous (each queue has exactly one owner, each service exactly one production image tag).
Each problem is one line that starts ``FILE:LINE:``, where the source says what is wrong, and goes
on with the document or probe id and the field: ``probes.toml:12: eng-001: answers: ...``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import NamedTuple

OUT = Path(__file__).resolve().parent / "engdocs"
SOURCE = OUT / "source"
ANSWER_TYPES = ("single", "set", "yes_no")
KINDS = ("lookup", "multi-hop", "version-chain", "policy-exception", "incident", "aggregation")

# A document's heading, "## Title {#id}": the header-id syntax of Pandoc and kramdown.
HEADING = re.compile(r"## (?P<title>\S.*?) \{#(?P<id>[^\s{}]+)\}\s*")
# The fields of a [[probe]] table and their types (exact: a boolean is no hop count), named as TOML names them.
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


class Entry(NamedTuple):
    """A document or probe: where its source starts (``FILE:LINE``) and its row as shipped."""

    at: str
    row: dict


@dataclass
class Source:
    """The set as read from its source folder; entries that could not be read are left out."""

    corpus: list[Entry] = field(default_factory=list)
    probes: list[Entry] = field(default_factory=list)
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


def _field_problems(table: dict) -> list[str]:
    """What is wrong with the fields of one [[probe]] table, as 'FIELD: problem'."""
    problems = [f"{k}: unknown field (fields: {', '.join(PROBE_FIELDS)})" for k in table if k not in PROBE_FIELDS]
    problems += [
        f"{k}: missing or not a TOML {TOML_TYPES[t]}" for k, t in PROBE_FIELDS.items() if type(table.get(k)) is not t
    ]
    if problems:
        return problems
    if not table["answers"] or not all(type(a) is str for a in table["answers"]):
        problems.append("answers: want a non-empty list of strings")
    if not table["steps"] or not all(
        type(s) is dict and sorted(s) == sorted(STEP_FIELDS) and all(type(v) is str for v in s.values())
        for s in table["steps"]
    ):
        problems.append('steps: want a non-empty list of { doc = "...", says = "..." }')
    return problems


def read_probes(path: Path, problems: list[str]) -> list[Entry]:
    """The probes of a probes.toml, in order, as probes.jsonl rows; unreadable ones go to problems."""
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
    # Each probe's problems name the line of its [[probe]] header, so the tables must be written so.
    heads = [n for n, line in enumerate(text.split("\n"), 1) if re.match(r"\s*\[\[\s*probe\s*\]\]", line)]
    tables = data.get("probe")
    if sorted(data) != ["probe"] or type(tables) is not list or len(heads) != len(tables):
        problems.append(f"{path}:0: (file): want one or more [[probe]] tables and nothing else")
        return []
    entries = []
    for line, table in zip(heads, tables):
        at = f"{path}:{line}"
        found = _field_problems(table)
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


def read(source: Path = SOURCE) -> Source:
    """Read the set's source folder (documents/*.md, probes.toml)."""
    src = Source()
    src.corpus = read_documents(source / "documents", src.problems)
    src.probes = read_probes(source / "probes.toml", src.problems)
    return src


# --- check ------------------------------------------------------------------------------------


def words(text: str) -> int:
    """Words of a document, as its 80-300 bound counts them."""
    return len(text.split())


def check(src: Source) -> list[str]:
    """Problems of the set, read ones first, one line each (an empty list means consistent)."""
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
    seen_ids, seen_questions = set(), set()
    for e in src.probes:
        p, meta = e.row, e.row["metadata"]
        where = f"{e.at}: {p['id']}"
        if p["id"] in seen_ids:
            problems.append(f"{where}: id: duplicate probe id")
        if p["question"] in seen_questions:
            problems.append(f"{where}: question: duplicate question")
        seen_ids.add(p["id"])
        seen_questions.add(p["question"])
        if p["answer_type"] not in ANSWER_TYPES:
            problems.append(f"{where}: answer_type: {p['answer_type']!r}, want one of {', '.join(ANSWER_TYPES)}")
        if meta["kind"] not in KINDS:
            problems.append(f"{where}: kind: {meta['kind']!r}, want one of {', '.join(KINDS)}")
        if not 1 <= meta["hops"] <= 4:
            problems.append(f"{where}: hops: {meta['hops']}, want 1-4")
        for k, step in enumerate(meta["steps"]):
            if step["doc"] not in docs:
                problems.append(f"{where}: steps[{k}].doc: gold document {step['doc']!r} does not exist")
            elif step["says"] not in docs[step["doc"]]:
                problems.append(f"{where}: steps[{k}].says: {step['doc']!r} does not say {step['says']!r}")
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


# --- write ------------------------------------------------------------------------------------


def _counts(values) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(Counter(values).items()))


def _median(xs: list[int]) -> int:
    xs = sorted(xs)
    return xs[len(xs) // 2]


def render_readme(template: str, corpus: list[dict], probes: list[dict]) -> str:
    """The set's README: the template with its counts filled in (KeyError for an unknown $name)."""
    w = [words(d["text"]) for d in corpus]
    g = [len(p["gold_doc_ids"]) for p in probes]
    return Template(template).substitute(
        n_docs=len(corpus),
        n_probes=len(probes),
        doc_kinds=_counts(d["id"].split("-", 1)[0] for d in corpus),
        w_min=min(w),
        w_med=_median(w),
        w_max=max(w),
        by_type=_counts(p["answer_type"] for p in probes),
        by_hops=_counts(p["metadata"]["hops"] for p in probes),
        by_kind=_counts(p["metadata"]["kind"] for p in probes),
        g_min=min(g),
        g_med=_median(g),
        g_max=max(g),
        k=FIRST_HOP_K,
        first_hop="\n".join(
            f"| {h} | {n} | {first} | {every} | {recall:.2f} |" for h, (n, first, every, recall) in FIRST_HOP.items()
        ),
    )


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def files(source: Path = SOURCE) -> dict[str, str]:
    """The three files of the set, name -> text; raises ValueError when the source has problems."""
    src = read(source)
    problems = check(src)
    if problems:
        raise ValueError("engdocs is inconsistent:\n" + "\n".join(problems))
    corpus, probes = [e.row for e in src.corpus], [e.row for e in src.probes]
    template = source / "README.template.md"
    try:
        readme = render_readme(template.read_text(encoding="utf-8"), corpus, probes)
    except (KeyError, ValueError) as e:  # an unknown $name, or a $ that starts none
        raise ValueError(f"engdocs is inconsistent:\n{template}:0: (template): {type(e).__name__}: {e}") from None
    return {"corpus.jsonl": _jsonl(corpus), "probes.jsonl": _jsonl(probes), "README.md": readme}


def main(argv: list[str] | None = None) -> int:
    """Write (or with --check compare) the set; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--out", type=Path, default=OUT, help="folder to write (default: probes/engdocs)")
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
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in wanted.items():
        with open(args.out / name, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    n_probes, n_docs = wanted["probes.jsonl"].count("\n"), wanted["corpus.jsonl"].count("\n")
    print(f"wrote {args.out}: {n_probes} probes, {n_docs} documents")
    return 0


if __name__ == "__main__":
    sys.exit(main())
