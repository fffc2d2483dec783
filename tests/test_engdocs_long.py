"""The shipped engdocs_long probe set: long-answer questions over the engdocs corpus, built from the same
source by probes/build_engdocs.py (tests/test_engdocs.py checks the build writes the committed files)."""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from flarebench.bench.answers import fact_check, states_value
from flarebench.probes import SHIPPED_DIR, load_probe_set, shipped_names, validate
from flarebench.probes import build_engdocs as build
from tests.test_engdocs import _edit

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def long_set():
    return load_probe_set("engdocs_long")


def test_shipped_valid_and_on_the_same_corpus_as_engdocs(long_set):
    assert "engdocs_long" in shipped_names()
    assert validate(SHIPPED_DIR / "engdocs_long", require_readme=True) == []
    assert long_set.licence == "CC0-1.0 (written for flarebench)"
    same = (SHIPPED_DIR / "engdocs" / "corpus.jsonl").read_bytes()
    assert (SHIPPED_DIR / "engdocs_long" / "corpus.jsonl").read_bytes() == same
    r = subprocess.run(
        [sys.executable, "-m", "flarebench.probes", "validate", "engdocs_long", "--require-readme"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and r.stdout == "engdocs_long: ok (49 probes, 67 docs)\n", r.stdout + r.stderr


def test_sizes_and_kinds(long_set):
    assert len(long_set.probes) >= 30
    assert {p.answer_type for p in long_set.probes} == {"long"}
    assert all(p.answers == [] for p in long_set.probes)
    low, high = build.FACTS_PER_PROBE
    assert (low, high) == (3, 6)
    per_probe = Counter(len(p.required_facts) for p in long_set.probes)
    assert set(per_probe) <= set(range(low, high + 1)) and len(per_probe) >= 3
    assert {p.metadata["kind"] for p in long_set.probes} == set(build.LONG_KINDS)
    assert len({p.question for p in long_set.probes}) == len(long_set.probes)


def test_every_fact_is_quoted_from_its_document(long_set):
    docs = long_set.docs_by_id
    for p in long_set.probes:
        steps = p.metadata["steps"]
        assert (
            [s["fact"] for s in steps]
            == [f.id for f in p.required_facts]
            == [f"f{n}" for n in range(1, len(steps) + 1)]
        )
        assert p.gold_doc_ids == list(dict.fromkeys(d for f in p.required_facts for d in f.doc_ids))
        assert len(p.gold_doc_ids) >= 2, p.id  # the answer unfolds over documents
        for fact, step in zip(p.required_facts, steps, strict=True):
            assert fact.doc_ids == [step["doc"]], (p.id, fact.id)
            assert step["says"] in docs[step["doc"]].text, (p.id, fact.id)
            assert fact.answers[0] in step["says"], (p.id, fact.id)
            assert any(states_value(step["says"], a) for a in fact.answers), (p.id, fact.id)
            assert any(states_value(fact.fact, a) for a in fact.answers), (p.id, fact.id)


def test_wrong_values_are_traps_of_the_corpus_and_absent_from_right_answers(long_set):
    corpus = [d.text for d in long_set.corpus]
    trapped = 0
    for p in long_set.probes:
        quotes = [s["says"] for s in p.metadata["steps"]]
        for fact, says in zip(p.required_facts, quotes, strict=True):
            trapped += bool(fact.wrong_values)
            assert not any(states_value(says, w) for w in fact.wrong_values), (p.id, fact.id)
            held = [w for w in fact.wrong_values if any(states_value(t, w) for t in corpus)]
            assert all(any(h in w for h in held) for w in fact.wrong_values), (p.id, fact.id)
        # An answer made of the probe's quotes, or of its facts' sentences, states every fact and no
        # wrong value, as the scorer reads it.
        for text in (" ".join(quotes), " ".join(f.fact for f in p.required_facts)):
            found, wrong = fact_check(text, p)
            assert all(found) and not any(wrong), (p.id, found, wrong)
    assert trapped >= 40


def test_the_question_names_no_fact_value(long_set):
    for p in long_set.probes:
        named = [a for f in p.required_facts for a in [*f.answers, *f.wrong_values] if states_value(p.question, a)]
        assert named == [], (p.id, named)


def test_readme_counts_match_the_files(long_set):
    readme = long_set.readme
    assert f"- documents: {len(long_set.corpus)}\n" in readme
    assert f"- probes: {len(long_set.probes)}\n" in readme
    assert f"- required facts: {sum(len(p.required_facts) for p in long_set.probes)}\n" in readme
    for n, count in Counter(len(p.required_facts) for p in long_set.probes).items():
        assert f"| {n} | {count} | {'#' * count} |\n" in readme
    assert "python probes/build_engdocs.py" in readme


def test_retrieval_figures_in_the_readme(long_set):
    from flarebench.probes.measure_sets import measure

    d = measure(long_set)
    assert f"- required facts in top-5: {d.facts_at_k:.2f}: the share of the {d.facts_measured} " in long_set.readme
    rows = [{"question": p.question, "required_facts": [vars(f) for f in p.required_facts]} for p in long_set.probes]
    coverage = build.fact_coverage([vars(d) for d in long_set.corpus], rows)
    assert coverage["all facts"][0] == d.facts_measured == sum(len(p.required_facts) for p in long_set.probes)
    assert coverage["whole answers"][0] == len(long_set.probes)
    for name, (n, *hits) in coverage.items():
        assert f"| {name} | {n} | " + " | ".join(f"{h / n:.2f}" for h in hits) + " |\n" in long_set.readme


# --- the build's checks ----------------------------------------------------------------------


def _long(src: build.Source, probe_id: str) -> build.Entry:
    return next(e for e in src.long if e.row["id"] == probe_id)


@pytest.mark.slow
def test_check_finds_broken_facts():
    src = build.read()
    assert build.check(src) == []
    bad = copy.deepcopy(src)
    e1, e2, e3 = _long(bad, "engl-001"), _long(bad, "engl-002"), _long(bad, "engl-003")
    e1.row["required_facts"][0]["wrong_values"].append("4.12.0.1")  # in no document
    e1.row["required_facts"][1]["wrong_values"].append("0042")  # f3's value
    e1.row["required_facts"][2]["wrong_values"] = ["gb-pay-03"]  # in its own quote
    e2.row["question"] += " Is it still 2.3.1?"  # names f1's value
    e2.row["metadata"]["steps"][1]["says"] = "Base image: tarnpy-3.11-r8."
    e3.row["required_facts"] = e3.row["required_facts"][:2]
    e3.row["metadata"]["steps"] = e3.row["metadata"]["steps"][:2]
    e3.row["gold_doc_ids"] = ["deploy-stampmill", "rel-stampmill-3.0.0"]
    problems = build.check(bad)
    (a, b), (c, d) = e1.facts_at[:2], e2.facts_at[:2]

    def found(prefix: str) -> bool:
        return any(p.startswith(prefix) for p in problems)

    assert found(f"{a}: engl-001: facts[0].wrong_values: '4.12.0.1' is in no document: not a trap the corpus holds")
    assert found(f"{b}: engl-001: facts[1].wrong_values: '0042' is stated by ")
    assert found(f"{e1.facts_at[2]}: engl-001: facts[2].wrong_values: 'gb-pay-03' is stated by ")
    assert found(f"{c}: engl-002: facts[0].answers: the question states '2.3.1'")
    assert found(f"{d}: engl-002: facts[1].says: 'rel-parcelpath-2.3.1' does not say")
    assert found(f"{e3.at}: engl-003: facts: 2 facts, want 3-6")
    # and nothing else: f1's spelled-out traps ("ledgerbird:4.11.2") spell one that a document holds
    assert len([p for p in problems if "engl-001" in p]) == 3, problems


def test_problems_name_the_fact_line(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(build.SOURCE, source)
    toml = source / "probes_long.toml"
    fact = 'fact = "ledgerbird 4.12.0 is built on the base image tarnjvm-21-r3."\n'
    head = _edit(toml, fact, f'{fact}say = "x"\n') - 2  # the [[probe.facts]] header of engl-001's f2
    assert toml.read_text(encoding="utf-8").split("\n")[head - 1] == "[[probe.facts]]"
    with pytest.raises(ValueError) as e:
        build.files(source)
    fields = "(fields: id, fact, answers, wrong_values, doc, says)"
    assert str(e.value).splitlines()[1:] == [f"{toml}:{head}: engl-001: facts[1].say: unknown field {fields}"]
    # facts written as an inline array instead of [[probe.facts]] tables cannot name their lines
    toml.write_text('[[probe]]\nid = "x"\nquestion = "q"\nkind = "deploy"\nfacts = [{ id = "f1" }]\n', encoding="utf-8")
    with pytest.raises(ValueError) as e:
        build.files(source)
    assert f"{toml}:1: x: facts: want one or more [[probe.facts]] tables after the [[probe]] table" in str(e.value)
