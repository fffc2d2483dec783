"""The shipped engdocs probe set: regenerated identically from its source, and its fact chains are consistent."""

from __future__ import annotations

import copy
import shutil
import statistics
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from flarebench.probes import SHIPPED_DIR, load_probe_set, shipped_names, validate
from flarebench.probes import build_engdocs as build

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def engdocs():
    return load_probe_set("engdocs")


@pytest.mark.slow
def test_the_build_writes_the_committed_files_byte_for_byte(tmp_path):
    # one build writes both sets of the source (engdocs and engdocs_long, tests/test_engdocs_long.py)
    assert build.main(["--out", str(tmp_path)]) == 0
    written = sorted(str(f.relative_to(tmp_path)) for f in tmp_path.rglob("*") if f.is_file())
    assert written == [
        f"{s}/{n}" for s in ("engdocs", "engdocs_long") for n in ("README.md", "corpus.jsonl", "probes.jsonl")
    ]
    for name in written:
        assert (tmp_path / name).read_bytes() == (SHIPPED_DIR / name).read_bytes(), name
    assert build.main(["--check"]) == 0


def test_the_source_is_neither_shipped_nor_a_probe_set():
    # the loader takes a folder holding a probes.jsonl for a set; the source holds no JSON lines at all
    assert "engdocs" in shipped_names() and not list(build.SOURCE.rglob("*.jsonl"))
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    shipped = {f for pattern in package_data["package-data"]["flarebench.probes"] for f in SHIPPED_DIR.glob(pattern)}
    assert SHIPPED_DIR / "engdocs" / "corpus.jsonl" in shipped
    assert not [f for f in shipped if f.is_relative_to(build.SOURCE)]


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


@pytest.mark.slow
def test_check_finds_broken_chains():
    src = build.read()
    assert build.check(src) == []
    at = {e.row["id"]: e.at for e in src.probes}
    bad = copy.deepcopy(src)
    bad.probes[0].row["answers"] = ["9.9.9"]
    bad.probes[1].row["gold_doc_ids"].append("svc-nonexistent")
    bad.probes[1].row["metadata"]["steps"].append({"doc": "svc-nonexistent", "says": "x"})
    bad.probes[2].row["metadata"]["steps"][0]["says"] = "a sentence no document has"
    problems = build.check(bad)
    assert f"{at['eng-001']}: eng-001: answers: '9.9.9' is in none of its gold documents" in problems
    assert f"{at['eng-002']}: eng-002: steps[1].doc: gold document 'svc-nonexistent' does not exist" in problems
    assert any(
        p.startswith(f"{at['eng-003']}: eng-003: steps[0].says: 'rb-pay-settle-backlog' does not say") for p in problems
    )
    # an ambiguous chain: a second service card claiming the payments settlement queue
    two_owners = copy.deepcopy(src)
    card = next(e for e in two_owners.corpus if e.row["id"] == "svc-tallyvane")
    card.row["text"] += " pay-settle-q, the payments settlement queue, which tallyvane owns."
    ledgerbird = next(e.at for e in src.corpus if e.row["id"] == "svc-ledgerbird")
    found = [p for p in build.check(two_owners) if p.startswith(f"{ledgerbird}: queue pay-settle-q:")]
    assert len(found) == 1 and f"svc-tallyvane ({card.at}) says tallyvane" in found[0], found


def _edit(path: Path, old: str, new: str) -> int:
    """Replace the one occurrence of old in the file; return the line it starts on."""
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")
    return text[: text.index(old)].count("\n") + 1


def test_problems_name_the_source_file_and_line(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(build.SOURCE, source)
    probes, teams = source / "probes.toml", source / "documents" / "01-teams.md"
    heron = _edit(teams, "## Team Heron {#team-heron}", "## Team Heron")
    eng001 = _edit(probes, '[[probe]]\nid = "eng-001"', '[[probe]]\nid = "eng-001"\nanswer = "4.12.0"')
    eng003 = _edit(probes, '[[probe]]\nid = "eng-003"', '[[probe]]\nid = "eng-003"')
    _edit(probes, 'answers = ["12", "twelve", "12 replicas"]', 'answers = ["13"]')
    with pytest.raises(ValueError) as e:
        build.files(source)
    problems = str(e.value).splitlines()[1:]
    assert f"{teams}:{heron}: (heading): '## Team Heron' is not '## Title {{#id}}'" in problems
    assert any(p.startswith(f"{probes}:{eng001}: eng-001: answer: unknown field") for p in problems), problems
    assert f"{probes}:{eng003}: eng-003: answers: '13' is in none of its gold documents" in problems
    # the probes whose chains visit the document with the broken heading
    assert any(p.endswith("gold document 'team-heron' does not exist") for p in problems), problems


def test_a_toml_syntax_error_names_its_line(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(build.SOURCE, source)
    line = _edit(source / "probes.toml", 'id = "eng-005"', "id = eng-005")
    with pytest.raises(ValueError) as e:
        build.files(source)
    assert str(e.value).splitlines()[1].startswith(f"{source / 'probes.toml'}:{line}: (toml): "), str(e.value)


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
