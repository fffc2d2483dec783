"""The shipped engdocs probe set: regenerated identically, and its fact chains are consistent."""

from __future__ import annotations

import copy
import statistics
from collections import Counter

import pytest

from flarebench.probes import SHIPPED_DIR, load_probe_set, validate
from flarebench.probes import build_engdocs as build


@pytest.fixture(scope="module")
def engdocs():
    return load_probe_set("engdocs")


def test_committed_files_are_what_the_script_writes():
    for name, text in build.files().items():
        assert (SHIPPED_DIR / "engdocs" / name).read_text(encoding="utf-8") == text, name
    assert build.main(["--check"]) == 0


def test_valid_with_readme_and_licence(engdocs):
    assert validate(SHIPPED_DIR / "engdocs", require_readme=True) == []
    assert engdocs.licence == "CC0-1.0 (written for flarebench)"


def test_sizes(engdocs):
    assert 40 <= len(engdocs.corpus) <= 70
    assert len(engdocs.probes) >= 40
    for d in engdocs.corpus:
        assert 80 <= len(d.text.split()) <= 300, d.id
    types = Counter(p.answer_type for p in engdocs.probes)
    assert types["yes_no"] >= 5 and types["set"] >= 3 and types["single"] >= 20
    hops = Counter(p.metadata["hops"] for p in engdocs.probes)
    assert set(hops) == {1, 2, 3, 4}
    kinds = Counter(p.metadata["kind"] for p in engdocs.probes)
    assert set(kinds) == set(build.KINDS)
    assert any(p.answer_type == "yes_no" and p.metadata["kind"] == "policy-exception" for p in engdocs.probes)


def test_every_gold_doc_exists_and_every_answer_is_in_a_gold_doc(engdocs):
    docs = engdocs.docs_by_id
    for p in engdocs.probes:
        assert p.gold_doc_ids, p.id
        assert all(g in docs for g in p.gold_doc_ids), p.id
        gold_text = "\n".join(docs[g].text for g in p.gold_doc_ids)
        if p.answer_type == "set":
            for item in p.answers:
                assert item in gold_text, (p.id, item)
        elif p.answer_type == "single":
            assert p.answers[0] in gold_text, (p.id, p.answers[0])  # the other answers are spellings of it
        else:
            assert p.answers in (["yes"], ["no"]), p.id


def test_every_step_is_quoted_from_its_document(engdocs):
    docs = engdocs.docs_by_id
    for p in engdocs.probes:
        steps = p.metadata["steps"]
        assert steps and list(dict.fromkeys(s["doc"] for s in steps)) == p.gold_doc_ids, p.id
        for s in steps:
            assert s["says"] in docs[s["doc"]].text, (p.id, s)
        if p.metadata["hops"] >= 3:  # a long chain crosses at least three documents
            assert len(p.gold_doc_ids) >= 3, p.id


def test_readme_counts_match_the_files(engdocs):
    readme = engdocs.readme
    assert f"- documents: {len(engdocs.corpus)}\n" in readme
    assert f"- probes: {len(engdocs.probes)}\n" in readme
    by_hops = ", ".join(f"{k}: {v}" for k, v in sorted(Counter(p.metadata["hops"] for p in engdocs.probes).items()))
    assert f"- by hops: {by_hops}\n" in readme
    words = [len(d.text.split()) for d in engdocs.corpus]
    assert (
        f"- words per document: min {min(words)}, median {statistics.median_high(words)}, max {max(words)}\n" in readme
    )
    assert "python probes/build_engdocs.py" in readme


def test_check_finds_broken_chains():
    corpus, probes = build.corpus_rows(), build.probe_rows()
    assert build.check(corpus, probes) == []
    bad = copy.deepcopy(probes)
    bad[0]["answers"] = ["9.9.9"]
    bad[1]["gold_doc_ids"].append("svc-nonexistent")
    bad[1]["metadata"]["steps"].append({"doc": "svc-nonexistent", "says": "x"})
    bad[2]["metadata"]["steps"][0]["says"] = "a sentence no document has"
    problems = build.check(corpus, bad)
    assert any(p.startswith("eng-001: answer '9.9.9'") for p in problems), problems
    assert any(p.startswith("eng-002: gold document 'svc-nonexistent'") for p in problems), problems
    assert any(p.startswith("eng-003: 'rb-pay-settle-backlog' does not say") for p in problems), problems
    # an ambiguous chain: a second service card claiming the payments settlement queue
    two_owners = [dict(d) for d in corpus]
    card = next(d for d in two_owners if d["id"] == "svc-tallyvane")
    card["text"] += " pay-settle-q, the payments settlement queue, which tallyvane owns."
    assert any(p.startswith("queue pay-settle-q:") for p in build.check(two_owners, probes))


def test_first_hop_retrieval_figures_in_the_readme(engdocs):
    from flarebench.strategies.bm25 import BM25Retriever

    retriever = BM25Retriever(engdocs.corpus)
    found: dict[int, list] = {}
    for p in engdocs.probes:
        hits = {h.id for h in retriever.search(p.question, build.FIRST_HOP_K)[0]}
        row = found.setdefault(p.metadata["hops"], [0, 0, 0, 0.0])
        row[0] += 1
        row[1] += p.gold_doc_ids[0] in hits
        row[2] += set(p.gold_doc_ids) <= hits
        row[3] += len(hits & set(p.gold_doc_ids)) / len(p.gold_doc_ids)
    measured = {h: (n, first, every, round(recall / n, 2)) for h, (n, first, every, recall) in sorted(found.items())}
    assert measured == build.FIRST_HOP
