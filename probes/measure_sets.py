"""How hard is retrieval on each probe set?  bm25s with the question as the query, top 5.

``python -m flarebench.probes.measure_sets`` prints one row per shipped probe set:

- ``answer@5``: share of probes where any gold answer string occurs in the title or text of the
  top-5 documents (case-insensitive, whole words: the same test the open-domain builders use to
  keep questions).  Left out, and counted in ``measured``: yes/no probes (the answer is not a
  string in any document) and PhantomWiki's "how many" probes (a count is never written out).
- ``recall@5``: mean share of a probe's gold documents among the top 5, over probes that have
  gold documents (``n/a`` when none has).
- ``facts@5``: for long probes (``answer_type`` ``long``, whose answer is their required facts, so
  they are left out of ``answer@5``): the share of their required facts some alias of which occurs
  in the top-5 documents (the same test), over all their facts (``-`` for a set without long probes).

A low answer@5 means one retrieval with the question rarely finds the answer: the set needs
multi-hop (or active) retrieval.  The retriever is the project's default, ``flarebench.strategies.bm25``.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .load import load_probe_set, shipped_names
from .model import Probe, ProbeSet

K = 5
_WORD = re.compile(r"\w")


def normalise(text: str) -> str:
    """Casefold and collapse whitespace, so matching ignores case and line breaks."""
    return " ".join(text.split()).casefold()


def answer_pattern(answer: str) -> re.Pattern | None:
    """A regex finding ``answer`` as whole words in normalised text; None if it has no word character.

    Whole words: the match may not be preceded or followed by a letter, digit or underscore, so
    "18" is not found in "1918" and "Paris" not in "Parisian".
    """
    norm = normalise(answer)
    if not _WORD.search(norm):
        return None  # e.g. an emoji alias: it cannot be matched reliably
    return re.compile(r"(?<!\w)" + re.escape(norm) + r"(?!\w)")


def mentions(text: str, answers: list[str]) -> bool:
    """True when any of ``answers`` occurs in ``text`` (case-insensitive, whole words)."""
    norm = normalise(text)
    return any(p.search(norm) for a in answers if (p := answer_pattern(a)))


def answer_is_textual(probe: Probe) -> bool:
    """Whether the answer can be looked for in documents: not yes/no, not a count."""
    if probe.answer_type == "yes_no" or probe.metadata.get("aggregation"):
        return False
    return any(answer_pattern(a) for a in probe.answers)


@dataclass
class Difficulty:
    """Retrieval difficulty of one probe set (see the module docstring)."""

    name: str
    probes: int
    docs: int
    answer_measured: int
    answer_at_k: float | None
    gold_measured: int
    recall_at_k: float | None
    k: int = K
    long_probes: int = 0
    facts_measured: int = 0  # required facts of the long probes
    facts_at_k: float | None = None  # share of them with an alias in the top k
    all_facts_at_k: float | None = None  # share of long probes with every fact in the top k
    fact_hits: dict[str, list[bool]] = field(default_factory=dict, repr=False)  # long probe id -> per fact


def measure(ps: ProbeSet, k: int = K, retriever=None) -> Difficulty:
    """Run ``retriever`` (default: bm25s over the set's own corpus) with each question and score the top k."""
    if retriever is None:
        from flarebench.strategies.bm25 import BM25Retriever  # bm25s: only needed when measuring

        retriever = BM25Retriever(ps.corpus)
    hits = measured = 0
    recalls: list[float] = []
    fact_hits: dict[str, list[bool]] = {}
    for probe in ps.probes:
        top, _ = retriever.search(probe.question, k)
        if probe.answer_type == "long":
            texts = [f"{p.title}\n{p.text}" for p in top]
            fact_hits[probe.id] = [any(mentions(t, f.answers) for t in texts) for f in probe.required_facts]
        elif answer_is_textual(probe):
            measured += 1
            hits += any(mentions(f"{p.title}\n{p.text}", probe.answers) for p in top)
        if probe.gold_doc_ids:
            found = {p.id for p in top} & set(probe.gold_doc_ids)
            recalls.append(len(found) / len(probe.gold_doc_ids))
    flat = [found for hits_of in fact_hits.values() for found in hits_of]
    return Difficulty(
        name=ps.name,
        probes=len(ps.probes),
        docs=len(ps.corpus),
        answer_measured=measured,
        answer_at_k=hits / measured if measured else None,
        gold_measured=len(recalls),
        recall_at_k=sum(recalls) / len(recalls) if recalls else None,
        k=k,
        long_probes=len(fact_hits),
        facts_measured=len(flat),
        facts_at_k=sum(flat) / len(flat) if flat else None,
        all_facts_at_k=sum(all(f) for f in fact_hits.values()) / len(fact_hits) if fact_hits else None,
        fact_hits=fact_hits,
    )


def measure_folder(path, k: int = K) -> Difficulty:
    """measure() on the probe folder (or shipped name) at ``path``."""
    return measure(load_probe_set(str(path)), k)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def readme_section(d: Difficulty, note: str = "") -> str:
    """A README section stating the measured difficulty, as the build scripts write it; ``note``
    (a paragraph on how to read the numbers for this kind of set) is appended."""
    left_out = d.probes - d.answer_measured - d.long_probes
    why = f'; {left_out} yes/no or "how many" probes left out: their answer is not a string' if left_out else ""
    if d.long_probes:
        why += f"; {d.long_probes} long probes left out: their answer is their required facts (below)"
    answer = (
        f"{_fmt(d.answer_at_k)}: the share of probes for which some answer string occurs (case-insensitive,\n"
        f"  whole words) in the title or text of a top-{d.k} document, over the {d.answer_measured} probes\n"
        f"  with a textual answer{why}"
        if d.answer_measured
        else "n/a (every probe is long: its answer is its required facts, below)"
        if d.long_probes == d.probes
        else f"n/a (no probe has an answer that is a string in the documents: {left_out} yes/no or counts, "
        f"{d.long_probes} long probes whose answer is their required facts, below)"
        if d.long_probes
        else "n/a (no probe has an answer that is a string in the documents: yes/no or counts)"
    )
    facts = (
        f"- required facts in top-{d.k}: {_fmt(d.facts_at_k)}: the share of the {d.facts_measured} required facts of\n"
        f"  the {d.long_probes} long probes for which some alias occurs (the same test) in a top-{d.k} document;\n"
        f"  long probes with every fact in the top {d.k}: {_fmt(d.all_facts_at_k)}\n"
        if d.long_probes
        else ""
    )
    recall = (
        f"{_fmt(d.recall_at_k)} (mean over the {d.gold_measured} probes with gold documents)"
        if d.gold_measured
        else "n/a (no probe has gold documents)"
    )
    return f"""## Retrieval difficulty

Measured with `python -m flarebench.probes.measure_sets`: the project's bm25s retriever (Lucene BM25, k1 0.9,
b 0.4, Porter stemmer) over this corpus, each question as the query, top {d.k}.

- answer-in-top-{d.k}: {answer}
{facts}- gold recall@{d.k}: {recall}
""" + (f"\n{note}\n" if note else "")


def folder_bytes(path: Path) -> int:
    """Size on disk of a probe folder's files (corpus, probes, README)."""
    return sum(f.stat().st_size for f in Path(path).iterdir() if f.is_file())


def table(rows: list[Difficulty], sizes: dict[str, int], k: int = K) -> str:
    """A Markdown table of measured sets."""
    lines = [
        f"| set | probes | docs | size KB | answer@{k} (measured) | facts@{k} (facts) | recall@{k} (with gold) |",
        "|---|---:|---:|---:|---|---|---|",
    ]
    for d in rows:
        facts = f"{_fmt(d.facts_at_k)} ({d.facts_measured})" if d.long_probes else "-"
        lines.append(
            f"| {d.name} | {d.probes} | {d.docs} | {sizes[d.name] / 1024:.0f} | {_fmt(d.answer_at_k)}"
            f" ({d.answer_measured}) | {facts} | {_fmt(d.recall_at_k)} ({d.gold_measured}) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the difficulty table for the named (default: all shipped) probe sets."""
    ap = argparse.ArgumentParser(prog="python -m flarebench.probes.measure_sets", description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="*", help="shipped names or folders (default: every shipped set)")
    ap.add_argument("--k", type=int, default=K, help=f"documents per search (default: {K})")
    ap.add_argument(
        "--retriever", default="bm25s", metavar="SPEC", help="as flarebench run's --retriever (default: bm25s)"
    )
    ap.add_argument("--embed", metavar="SPEC", help="as flarebench run's --embed, for --retriever dense or hybrid")
    ap.add_argument("--embed-base-url", metavar="URL", help="as flarebench run's --embed-base-url")
    ap.add_argument("--embed-api-key-env", metavar="VAR", help="as flarebench run's --embed-api-key-env")
    args = ap.parse_args(argv)
    if args.k < 1:  # 0 documents would measure every set at 0, a table of nothing
        ap.error(f"--k must be >= 1, got {args.k}")
    from flarebench.strategies.backends import make_retriever
    from flarebench.strategies.embeddings import make_embedder
    from flarebench.strategies.lm import LMError

    rows, sizes = [], {}
    try:
        embedder = make_embedder(args.embed, args.embed_base_url, args.embed_api_key_env) if args.embed else None
        for name in args.sets or shipped_names():
            ps = load_probe_set(name)
            rows.append(measure(ps, args.k, make_retriever(args.retriever, ps.corpus, embedder, progress=True)))
            sizes[ps.name] = folder_bytes(ps.path)
    except (ValueError, LMError) as e:  # a bad spec, an extra not installed, an endpoint that fails
        print(f"measure_sets: {e}", file=sys.stderr)
        return 2
    print(f"retriever: {args.retriever}" + (f", embeddings {args.embed}" if args.embed else ""))
    print(table(rows, sizes, args.k))
    return 0


if __name__ == "__main__":
    sys.exit(main())
