"""Loading the official files of HotpotQA, 2WikiMultihopQA, ASQA and StrategyQA (flarebench.probes.formats)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flarebench.probes import PROBE_FORMATS, ProbeError, load_probe_set
from flarebench.probes.formats import MAX_PROBLEMS, check_file

REPO = Path(__file__).resolve().parents[1]
PROBLEM_LINE = re.compile(r"^.+:\d+: \S+: .+$")

# --- small files in each official layout (field names as the datasets publish them) ------------

HOTPOT = [
    {
        "_id": "5a8b57f25542995d1e6f1371",
        "answer": "Delhi",
        "question": "In which city was the composer of Ruvarnathi born?",
        "supporting_facts": [["Ruvarnathi", 0], ["Ilo Varrand", 1], ["Ruvarnathi", 1]],
        "context": [
            ["Ruvarnathi", ["Ruvarnathi is a 1961 opera.", " It was composed by Ilo Varrand."]],
            ["Ilo Varrand", ["Ilo Varrand was a composer.", " He was born in Delhi."]],
            ["Marsh Tern", ["The marsh tern is a bird."]],
        ],
        "type": "bridge",
        "level": "hard",
    },
    {
        "_id": "5ab3b0bf5542992ade7c6e39",
        "answer": "yes",
        "question": "Are Ruvarnathi and Olmsgard both operas?",
        "supporting_facts": [["Ruvarnathi", 0], ["Olmsgard", 0]],
        "context": [
            ["Olmsgard", ["Olmsgard is an opera of 1974."]],
            ["Ruvarnathi", ["A different text for the same title, dropped by the dedup."]],
            ["Marsh Tern", ["The marsh tern is a bird."]],
        ],
        "type": "comparison",
        "level": "medium",
    },
]

TWOWIKI = [
    {
        "_id": "8813f87c0bdd11eba7f7acde48001122",
        "type": "compositional",
        "question": "Who is the mother of the director of Quiet Lantern?",
        "context": [
            ["Quiet Lantern", ["Quiet Lantern is a 1950 film directed by Tove Arnell."]],
            ["Tove Arnell", ["Tove Arnell was a film director.", "Her mother was Signe Arnell."]],
        ],
        "supporting_facts": [["Quiet Lantern", 0], ["Tove Arnell", 1]],
        "evidences": [["Quiet Lantern", "director", "Tove Arnell"], ["Tove Arnell", "mother", "Signe Arnell"]],
        "answer": "Signe Arnell",
    },
    {
        "_id": "a1b2c3d40bdd11eba7f7acde48001122",
        "type": "comparison",
        "question": "Which film came out first, Quiet Lantern or Grey Harbour?",
        "context": [
            ["Grey Harbour", ["Grey Harbour is a 1962 film."]],
            ["Quiet Lantern", ["Quiet Lantern is a 1950 film directed by Tove Arnell."]],
        ],
        "supporting_facts": [["Grey Harbour", 0], ["Quiet Lantern", 0]],
        "evidences": [["Grey Harbour", "publication date", "1962"], ["Quiet Lantern", "publication date", "1950"]],
        "answer": "Quiet Lantern",
    },
]

ASQA = {
    "dev": {
        "-7013890438520559398": {
            "ambiguous_question": "Who holds the record for most goals?",
            "qa_pairs": [
                {
                    "question": "Who holds the record for most goals in men's play?",
                    "short_answers": ["Arno Vesk", "Vesk"],
                    "context": "No context provided",
                    "wikipage": None,
                },
                {
                    "question": "Who holds the record for most goals in women's play?",
                    "short_answers": ["Ilse Marra", "vesk"],
                    "context": "Ilse Marra scored 190 goals.",
                    "wikipage": "Ilse Marra",
                },
            ],
            "wikipages": {"0": {"title": "Ilse Marra", "url": "https://example.org/wiki/Ilse_Marra"}},
            "annotations": [
                {
                    "long_answer": "Arno Vesk holds the men's record and Ilse Marra the women's.",
                    "knowledge": [
                        {"content": "Arno Vesk scored 109 goals.", "wikipage": "Arno Vesk"},
                        {"content": None, "wikipage": "Goal records"},
                    ],
                }
            ],
        }
    },
    "train": {
        "-5742327688291876861": {
            "ambiguous_question": "When did the new season of Harbour Lights come out?",
            "qa_pairs": [
                {
                    "question": "When did season 2 of Harbour Lights come out?",
                    "short_answers": ["May 24, 2017"],
                    "context": "No context provided",
                    "wikipage": None,
                }
            ],
            "wikipages": {},
            "annotations": [
                {
                    "long_answer": "Season 2 came out on May 24, 2017.",
                    "knowledge": [{"content": "Arno Vesk scored 109 goals.", "wikipage": "Arno Vesk"}],
                }
            ],
        }
    },
}

STRATEGYQA = [
    {
        "qid": "0a1e7ec0b11d5d4a4d4a",
        "term": "Marsh tern",
        "description": "Species of bird",
        "question": "Could a marsh tern fly across the Quiet Sea in a day?",
        "answer": True,
        "facts": ["Marsh terns fly 300 km a day.", "The Quiet Sea is 200 km wide."],
        "decomposition": ["How far does a marsh tern fly in a day?", "How wide is the Quiet Sea?", "Is #1 > #2?"],
        "evidence": [[[["Marsh tern-3"]], [["Quiet Sea-1"]], ["operation"]]],
    },
    {
        "qid": "b2c3d4e5f6a7b8c9d0e1",
        "term": "Quiet Sea",
        "description": "A sea",
        "question": "Is the Quiet Sea wider than 500 km?",
        "answer": False,
        "facts": ["The Quiet Sea is 200 km wide."],
        "decomposition": ["How wide is the Quiet Sea?", "Is #1 > 500 km?"],
        "evidence": [[[["Quiet Sea-1"]], ["no_evidence"]]],
    },
]


def write(tmp_path: Path, name: str, data, *, jsonl: bool = False) -> Path:
    path = tmp_path / name
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    elif jsonl:
        path.write_text("".join(json.dumps(r) + "\n" for r in data), encoding="utf-8")
    else:
        path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


def problems_of(path: Path, fmt: str = "auto") -> list[str]:
    ps, problems = check_file(path, fmt)
    assert ps is None and problems, "expected problems"
    for line in problems:
        assert PROBLEM_LINE.match(line), line
        assert line.startswith(f"{path}:"), line
    return problems


@pytest.fixture
def files(tmp_path):
    return {
        "hotpotqa": write(tmp_path, "hotpot_dev_distractor_v1.json", HOTPOT),
        "2wiki": write(tmp_path, "dev.json", TWOWIKI),
        "asqa": write(tmp_path, "ASQA.json", ASQA),
        "strategyqa": write(tmp_path, "strategyqa_train.json", STRATEGYQA),
    }


# --- detection and loading ----------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["hotpotqa", "2wiki", "asqa", "strategyqa"])
def test_detected_by_shape(files, fmt):
    path = files[fmt]
    ps = load_probe_set(str(path))
    assert ps.format == fmt
    assert ps.name == path.stem and ps.path == path.resolve() and ps.readme is None
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert ps.corpus_hash == ps.probes_hash == digest
    ids = {d.id for d in ps.corpus}
    assert len(ids) == len(ps.corpus)
    for p in ps.probes:
        assert (p.answers or p.required_facts) and set(p.gold_doc_ids) <= ids
        assert p.metadata["source_format"] == fmt


def test_hotpot_corpus_is_pooled_and_deduplicated_by_title(files):
    ps = load_probe_set(str(files["hotpotqa"]))
    assert [d.id for d in ps.corpus] == ["Ruvarnathi", "Ilo Varrand", "Marsh Tern", "Olmsgard"]
    docs = ps.docs_by_id
    assert docs["Ruvarnathi"].title == "Ruvarnathi"
    assert docs["Ruvarnathi"].text == "Ruvarnathi is a 1961 opera. It was composed by Ilo Varrand."  # first wins
    first, second = ps.probes
    assert first.id == "5a8b57f25542995d1e6f1371" and first.answers == ["Delhi"] and first.answer_type == "single"
    assert first.gold_doc_ids == ["Ruvarnathi", "Ilo Varrand"]  # supporting titles, each once, in order
    assert first.metadata["supporting_facts"] == [["Ruvarnathi", 0], ["Ilo Varrand", 1], ["Ruvarnathi", 1]]
    assert first.metadata["type"] == "bridge" and first.metadata["level"] == "hard" and first.metadata["hops"] == 2
    assert second.answers == ["yes"] and second.answer_type == "yes_no"
    assert second.gold_doc_ids == ["Ruvarnathi", "Olmsgard"]


def test_hotpot_supporting_title_missing_from_every_context(tmp_path):
    rec = {**HOTPOT[0], "supporting_facts": [["Ilo Varrand", 1], ["Not Retrieved", 0]]}
    ps = load_probe_set(str(write(tmp_path, "hotpot_dev_fullwiki_v1.json", [rec])))
    p = ps.probes[0]
    assert p.gold_doc_ids == ["Ilo Varrand"]
    assert p.metadata["gold_titles_not_in_corpus"] == ["Not Retrieved"]


def test_hotpot_hugging_face_layout_and_json_lines(tmp_path, files):
    official = load_probe_set(str(files["hotpotqa"]))
    hf = []
    for rec in HOTPOT:
        hf.append(
            {
                **rec,
                "id": rec["_id"],
                "context": {"title": [t for t, _ in rec["context"]], "sentences": [s for _, s in rec["context"]]},
                "supporting_facts": {
                    "title": [t for t, _ in rec["supporting_facts"]],
                    "sent_id": [i for _, i in rec["supporting_facts"]],
                },
            }
        )
        del hf[-1]["_id"]
    ps = load_probe_set(str(write(tmp_path, "hotpot_hf.jsonl", hf, jsonl=True)))
    assert ps.format == "hotpotqa"
    assert ps.corpus == official.corpus
    assert [(p.id, p.answers, p.gold_doc_ids) for p in ps.probes] == [
        (p.id, p.answers, p.gold_doc_ids) for p in official.probes
    ]


def test_2wiki_keeps_type_and_evidences(files):
    ps = load_probe_set(str(files["2wiki"]))
    first = ps.probes[0]
    assert first.answers == ["Signe Arnell"] and first.gold_doc_ids == ["Quiet Lantern", "Tove Arnell"]
    assert first.metadata["type"] == "compositional"
    assert first.metadata["evidences"][1] == ["Tove Arnell", "mother", "Signe Arnell"]
    assert [d.id for d in ps.corpus] == ["Quiet Lantern", "Tove Arnell", "Grey Harbour"]
    # sentences without leading spaces are joined with one
    assert ps.docs_by_id["Tove Arnell"].text == "Tove Arnell was a film director. Her mother was Signe Arnell."


def test_asqa_official_layout(files):
    ps = load_probe_set(str(files["asqa"]))
    assert [p.id for p in ps.probes] == ["-7013890438520559398", "-5742327688291876861"]  # file order
    dev, train = ps.probes
    assert dev.question == "Who holds the record for most goals?"
    assert dev.answer_type == train.answer_type == "long" and dev.answers == train.answers == []
    assert dev.metadata["split"] == "dev" and train.metadata["split"] == "train"
    assert dev.metadata["qa_pairs"][1]["short_answers"] == ["Ilse Marra", "vesk"]
    assert dev.metadata["long_answers"] == ["Arno Vesk holds the men's record and Ilse Marra the women's."]
    assert dev.metadata["wikipages"] == ["Ilse Marra"]
    # corpus: the context paragraph and the knowledge passage; "No context provided" and null content are not
    texts = {d.text: d for d in ps.corpus}
    assert set(texts) == {"Ilse Marra scored 190 goals.", "Arno Vesk scored 109 goals."}
    assert texts["Ilse Marra scored 190 goals."].title == "Ilse Marra"
    ilse, arno = texts["Ilse Marra scored 190 goals."].id, texts["Arno Vesk scored 109 goals."].id
    assert dev.gold_doc_ids == [ilse, arno]
    assert train.gold_doc_ids == [arno]  # deduplicated across samples
    # one required fact per qa pair: the disambiguated question with its first short answer
    assert [(f.id, f.fact, f.answers, f.doc_ids, f.wrong_values) for f in dev.required_facts] == [
        ("qa1", "Who holds the record for most goals in men's play? Arno Vesk.", ["Arno Vesk", "Vesk"], [], []),
        ("qa2", "Who holds the record for most goals in women's play? Ilse Marra.", ["Ilse Marra", "vesk"], [ilse], []),
    ]
    (only,) = train.required_facts
    assert (only.id, only.fact, only.answers, only.doc_ids) == (
        "qa1",
        "When did season 2 of Harbour Lights come out? May 24, 2017.",
        ["May 24, 2017"],
        [],  # its pair has no wikipage
    )


def test_asqa_fact_recall_is_str_em(files):
    # STR-EM: the share of qa pairs one of whose short answers the long answer contains
    from flarebench.bench.answers import fact_check, score_answer

    dev, train = load_probe_set(str(files["asqa"])).probes
    assert fact_check(dev.metadata["long_answers"][0], dev) == ([True, True], [False, False])
    assert fact_check("Ilse Marra holds the women's record.", dev)[0] == [False, True]
    assert score_answer("Ilse Marra holds the women's record.", dev) == (0.0, 0.5)
    assert score_answer("Season 2 came out on May 24, 2017.", train) == (1.0, 1.0)


def test_a_run_on_asqa_reports_str_em_as_fact_recall(tmp_path, files, monkeypatch):
    import pandas as pd

    from tests.scripted import ScriptedLM, run_cli

    lm = ScriptedLM(["Ilse Marra holds the women's record."])  # a scripted LM, never the real model
    monkeypatch.setattr("flarebench.bench.recipe.make_lm", lambda *args, **kwargs: lm)
    run_dir = tmp_path / "run"
    args = ["run", "--probes", str(files["asqa"]), "--strategy", "no_retrieval", "--report-dir", str(run_dir)]
    code, out, err = run_cli(*args)
    assert code == 0, out + err
    s = pd.read_csv(run_dir / "summary.csv").iloc[0]
    # dev: 1 of its 2 pairs answered; train: 0 of 1. STR-EM per sample, averaged: (0.5 + 0) / 2
    assert s["fact_recall"] == pytest.approx(0.25) and s["incomplete_facts_rate"] == 1.0
    assert s["wrong_version_rate"] == 0.0


def test_asqa_facts_skip_pairs_without_answers_and_map_pages_to_passages(tmp_path):
    sample = {
        "ambiguous_question": "Who won the Tarn Cup?",
        "qa_pairs": [
            {"short_answers": ["Oda Lind", "oda lind", " "], "context": "No context provided", "wikipage": "Tarn Cup"},
            {"question": "Who won the Tarn Cup in 1990?", "short_answers": [], "wikipage": "Tarn Cup"},
            {"question": "Who won the Tarn Cup in 1991?", "short_answers": ["Per Ek."], "wikipage": "Nowhere"},
        ],
        "wikipages": {"0": {"title": "Tarn Cup", "url": "https://example.org/wiki/Tarn_Cup"}},
        "annotations": [
            {
                "long_answer": "Oda Lind won it in 1989 and Per Ek in 1991.",
                "knowledge": [
                    {"content": "The Tarn Cup 1989 went to Oda Lind.", "wikipage": "Tarn Cup"},
                    {"content": "Per Ek won in 1991.", "wikipage": "Per Ek"},
                    {"content": "The cup is made of tin.", "wikipage": "Tarn Cup"},
                ],
            }
        ],
    }
    ps = load_probe_set(str(write(tmp_path, "ASQA.json", {"dev": {"s1": sample}})))
    (p,) = ps.probes
    cup = [d.id for d in ps.corpus if d.title == "Tarn Cup"]
    assert len(cup) == 2 and p.gold_doc_ids[:1] == cup[:1]
    assert [(f.id, f.fact, f.answers, f.doc_ids) for f in p.required_facts] == [
        ("qa1", "Who won the Tarn Cup? Oda Lind.", ["Oda Lind"], cup),  # no question: the ambiguous one
        ("qa3", "Who won the Tarn Cup in 1991? Per Ek.", ["Per Ek."], []),  # its page is no passage's title
    ]
    assert len(p.metadata["qa_pairs"]) == 3


@pytest.mark.slow
def test_asqa_file_validates_from_the_command_line(files):
    r = run_cli("validate", str(files["asqa"]))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == f"{files['asqa']}: ok (2 probes, 2 docs, format asqa)\n"


def test_asqa_one_split_and_list_layouts(tmp_path, files):
    full = load_probe_set(str(files["asqa"]))
    one_split = load_probe_set(str(write(tmp_path, "asqa_dev.json", ASQA["dev"])))
    assert [p.id for p in one_split.probes] == ["-7013890438520559398"]
    assert one_split.probes[0].required_facts == full.probes[0].required_facts
    rows = [{**s, "sample_id": k, "wikipages": list(s["wikipages"].values())} for k, s in ASQA["dev"].items()]
    listed = load_probe_set(str(write(tmp_path, "asqa_dev.jsonl", rows, jsonl=True)))
    assert listed.format == "asqa"
    assert [(p.id, p.required_facts, p.gold_doc_ids) for p in listed.probes] == [
        (p.id, p.required_facts, p.gold_doc_ids) for p in one_split.probes
    ]


def test_strategyqa_facts_become_the_corpus(files):
    ps = load_probe_set(str(files["strategyqa"]))
    first, second = ps.probes
    assert first.answers == ["yes"] and second.answers == ["no"]
    assert first.answer_type == second.answer_type == "yes_no"
    assert [d.text for d in ps.corpus] == ["Marsh terns fly 300 km a day.", "The Quiet Sea is 200 km wide."]
    assert ps.corpus[0].title == "Marsh tern"
    assert first.gold_doc_ids == ["0a1e7ec0b11d5d4a4d4a-fact1", "0a1e7ec0b11d5d4a4d4a-fact2"]
    assert second.gold_doc_ids == ["0a1e7ec0b11d5d4a4d4a-fact2"]  # the same fact text is one document
    assert first.metadata["decomposition"][2] == "Is #1 > #2?" and first.metadata["hops"] == 3
    assert first.metadata["term"] == "Marsh tern"


# --- forcing a format -------------------------------------------------------------------------------


def test_forced_format(files):
    as_2wiki = load_probe_set(str(files["hotpotqa"]), "2wiki")  # HotpotQA's fields are 2Wiki's minus evidences
    assert as_2wiki.format == "2wiki" and len(as_2wiki.probes) == 2
    as_hotpot = load_probe_set(str(files["2wiki"]), "hotpotqa")
    assert as_hotpot.format == "hotpotqa" and "evidences" not in as_hotpot.probes[0].metadata
    lines = problems_of(files["hotpotqa"], "strategyqa")
    assert any(": qid: missing required field" in line for line in lines)
    assert any(": answer: expected true or false, got string" in line for line in lines)
    lines = problems_of(files["asqa"], "hotpotqa")
    assert len(lines) == 1 and ":0: (format): " in lines[0] and "ASQA" in lines[0]


def test_format_names_and_folders(tmp_path, files):
    assert PROBE_FORMATS == ("auto", "flarebench", "hotpotqa", "2wiki", "asqa", "strategyqa")
    with pytest.raises(ProbeError, match="unknown probe format 'hotpot'"):
        load_probe_set(str(files["hotpotqa"]), "hotpot")
    with pytest.raises(ProbeError, match="is a folder holding corpus.jsonl"):
        load_probe_set(str(files["hotpotqa"]), "flarebench")
    with pytest.raises(ProbeError, match=r"\(folder\): format 'asqa' reads one JSON file"):
        load_probe_set("phantomwiki", "asqa")
    assert load_probe_set("phantomwiki", "flarebench").format == "flarebench"


def test_unknown_shape_and_flarebench_probes_file(tmp_path):
    lines = problems_of(write(tmp_path, "other.json", [{"query": "q", "label": 1}]))
    assert len(lines) == 1 and ":1: (format): cannot tell the format" in lines[0] and "--probes-format" in lines[0]
    lines = problems_of(REPO / "probes" / "phantomwiki" / "probes.jsonl")
    assert len(lines) == 1 and "pass the folder" in lines[0]


# --- malformed files: one line per problem, naming file, record and field -----------------------------


def test_missing_field_names_file_record_and_field(tmp_path):
    bad = [HOTPOT[0], {k: v for k, v in HOTPOT[1].items() if k != "answer"}]
    path = write(tmp_path, "hp.json", bad)
    assert problems_of(path) == [
        f"{path}:2: answer: missing required field (a split without answers cannot be scored) "
        "[5ab3b0bf5542992ade7c6e39]"
    ]


def test_wrong_types(tmp_path):
    bad = [
        {**HOTPOT[0], "answer": 7, "supporting_facts": [["Ruvarnathi", "0"]]},
        {**HOTPOT[1], "context": [["Olmsgard", "not a list"]], "question": ""},
    ]
    path = write(tmp_path, "hp.json", bad)
    rid0, rid1 = HOTPOT[0]["_id"], HOTPOT[1]["_id"]
    assert problems_of(path) == [
        f"{path}:1: answer: expected a string, got number [{rid0}]",
        f'{path}:1: supporting_facts[0]: expected [title, sent_id], got ["Ruvarnathi", "0"] [{rid0}]',
        f"{path}:2: question: must not be empty [{rid1}]",
        f'{path}:2: context[0]: expected [title, sentences], got ["Olmsgard", "not a list"] [{rid1}]',
    ]
    sq = write(tmp_path, "sq.json", [{**STRATEGYQA[0], "answer": "yes", "facts": "one fact"}])
    assert problems_of(sq) == [
        f'{sq}:1: answer: expected true or false, got string "yes" [{STRATEGYQA[0]["qid"]}]',
        f"{sq}:1: facts: expected a list of strings, got string [{STRATEGYQA[0]['qid']}]",
    ]


def test_asqa_problems_name_split_and_sample(tmp_path):
    sample = json.loads(json.dumps(ASQA["dev"]["-7013890438520559398"]))
    sample["qa_pairs"][1]["short_answers"] = "Ilse Marra"
    path = write(tmp_path, "ASQA.json", {"dev": {"-70": sample}, "train": ASQA["train"]})
    assert problems_of(path) == [
        f"{path}:1: qa_pairs[1].short_answers: expected a list of strings, got string [dev/-70]"
    ]


def test_bad_json(tmp_path):
    path = write(tmp_path, "hp.json", json.dumps(HOTPOT, indent=1)[:-3])
    lines = problems_of(path)
    assert len(lines) == 1 and re.match(rf"^{re.escape(str(path))}:\d+: \(json\): invalid JSON: ", lines[0])
    jl = write(tmp_path, "hp.jsonl", json.dumps(HOTPOT[0]) + "\n\n{not json\n" + json.dumps(HOTPOT[1]) + "\n")
    assert problems_of(jl) == [
        f"{jl}:3: (json): invalid JSON: Expecting property name enclosed in double quotes (column 2)"
    ]
    # What json refuses beyond syntax is a problem line too, not a traceback.
    huge = json.dumps(HOTPOT[0])[:-1] + ', "n": ' + "9" * 5000 + "}"
    deep = json.dumps(HOTPOT[0])[:-1] + ', "n": ' + "[" * 100_000 + "}"
    for name, line, why in (
        ("huge.jsonl", huge, "Exceeds the limit (4300 digits) for integer string conversion"),
        ("deep.jsonl", deep, "nested too deeply to read"),
    ):
        path = write(tmp_path, name, json.dumps(HOTPOT[1]) + "\n" + line + "\n")
        assert problems_of(path) == [f"{path}:2: (json): invalid JSON: {why}"]
    lst = write(tmp_path, "list.json", [HOTPOT[0], "a string"])
    assert problems_of(lst) == [f"{lst}:2: (json): expected a JSON object for each record, got string"]
    assert problems_of(write(tmp_path, "empty.json", "  \n")) == [f"{tmp_path / 'empty.json'}:0: (file): empty file"]
    assert problems_of(write(tmp_path, "none.json", [])) == [f"{tmp_path / 'none.json'}:0: (file): no records"]
    raw = tmp_path / "latin1.json"
    raw.write_bytes(b'[{"question": "caf\xe9"}]')
    assert "(encoding): not UTF-8" in problems_of(raw)[0]


def test_duplicate_ids(tmp_path):
    path = write(tmp_path, "hp.json", [HOTPOT[0], HOTPOT[0]])
    assert problems_of(path) == [f"{path}:2: _id: duplicate id '{HOTPOT[0]['_id']}' (first in record 1)"]


def test_problem_lines_are_capped(tmp_path):
    path = write(tmp_path, "hp.json", [{**HOTPOT[0], "_id": f"x{i}", "answer": 1} for i in range(MAX_PROBLEMS + 7)])
    lines = problems_of(path)
    assert len(lines) == MAX_PROBLEMS + 1 and lines[-1] == f"{path}:0: (file): 7 more problems not shown"


def test_no_corpus(tmp_path):
    path = write(tmp_path, "strategyqa_test.json", [{**STRATEGYQA[0], "facts": []}])
    assert problems_of(path) == [
        f"{path}:0: (file): no record has facts to build a corpus from (StrategyQA's test split has none)"
    ]


def test_load_probe_set_raises_probe_error_with_the_lines(tmp_path):
    path = write(tmp_path, "hp.json", [{**HOTPOT[0], "answer": 7}])
    with pytest.raises(ProbeError) as e:
        load_probe_set(str(path))
    assert str(e.value) == f"{path}:1: answer: expected a string, got number [{HOTPOT[0]['_id']}]"


# --- the CLI --------------------------------------------------------------------------------------


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flarebench.probes", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.mark.slow
def test_cli_validate_file(files, tmp_path):
    r = run_cli("validate", str(files["hotpotqa"]))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == f"{files['hotpotqa']}: ok (2 probes, 4 docs, format hotpotqa)\n"
    r = run_cli("validate", str(files["hotpotqa"]), "--format", "2wiki")
    assert r.returncode == 0 and r.stdout.endswith("format 2wiki)\n")
    bad = write(tmp_path, "bad.json", [{**HOTPOT[0], "answer": 7}, {**HOTPOT[1], "question": None}])
    r = run_cli("validate", str(bad))
    assert r.returncode == 2
    assert r.stdout.splitlines() == [
        f"{bad}:1: answer: expected a string, got number [{HOTPOT[0]['_id']}]",
        f"{bad}:2: question: expected a string, got null [{HOTPOT[1]['_id']}]",
    ]
    assert "Traceback" not in r.stdout + r.stderr
    r = run_cli("validate", "probes/phantomwiki", "--format", "hotpotqa")
    assert r.returncode == 2 and len(r.stdout.splitlines()) == 1
    r = run_cli("validate", str(files["asqa"]), "--format", "nq")
    assert r.returncode == 2 and "invalid choice" in r.stderr


# --- `datasets`: offline, cache under flarebench's cache folder ----------------------------------------

OFFLINE_SCRIPT = textwrap.dedent(
    """
    import socket, sys

    def refuse(*args, **kwargs):
        raise OSError("network access attempted")

    socket.socket.connect = refuse
    socket.create_connection = refuse
    from flarebench.probes.load import load_probe_set

    ps = load_probe_set(sys.argv[1])
    print(ps.format, len(ps.probes), len(ps.corpus))
    """
)


@pytest.mark.slow
def test_datasets_loads_offline_into_the_flarebench_cache(tmp_path, files):
    home, cache = tmp_path / "home", tmp_path / "fbcache"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "XDG_"))}
    env.update(HOME=str(home), FLAREBENCH_CACHE=str(cache))
    for fmt, want in [("hotpotqa", "hotpotqa 2 4"), ("strategyqa", "strategyqa 2 2"), ("asqa", "asqa 2 2")]:
        r = subprocess.run(
            [sys.executable, "-c", OFFLINE_SCRIPT, str(files[fmt])],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == want
        assert "Generating" not in r.stderr  # datasets' progress bars are off
    assert list(home.iterdir()) == []  # nothing written to the user's home (no ~/.cache/huggingface)
    assert any((cache / "datasets").iterdir())


# --- the bench: --probes-format, config, errors before the LM -----------------------------------------


def test_probes_format_is_a_run_option():
    from flarebench.bench.options import RUN_OPTIONS

    opt = {o.flag: o for o in RUN_OPTIONS}["--probes-format"]
    assert opt.default == "auto" and opt.dest == "probes_format"


class _StubLM:
    def describe(self):
        return {"name": "stub"}

    def close(self):
        pass


class _StubRetriever:
    def __init__(self, corpus):
        self.n = len(corpus)

    def describe(self):
        return {"name": "stub", "docs": self.n}


def test_session_records_the_format(tmp_path, files, monkeypatch):
    import flarebench.bench.session as session_mod

    monkeypatch.setattr("flarebench.bench.recipe.make_lm", lambda *args, **kwargs: _StubLM())
    monkeypatch.setattr("flarebench.bench.recipe.make_retriever", lambda spec, corpus, *a, **kw: _StubRetriever(corpus))
    s = session_mod.BenchSession(
        strategy=["no_retrieval"],
        probes=str(files["2wiki"]),
        probes_format="hotpotqa",
        report_dir=str(tmp_path / "run"),
        progress=False,
    )
    try:
        assert s.config["probes"]["format"] == "hotpotqa"
        assert s.config["probes"]["source"] == str(files["2wiki"].resolve())
        run = json.loads((tmp_path / "run" / "run.json").read_text())
        assert run["config"]["probes"]["format"] == "hotpotqa"
    finally:
        s.close()


def test_session_refuses_a_bad_file_before_the_lm(tmp_path, monkeypatch):
    import flarebench.bench.session as session_mod

    def no_lm(spec):
        raise AssertionError("the LM must not be loaded")

    monkeypatch.setattr("flarebench.bench.recipe.make_lm", no_lm)
    bad = write(tmp_path, "hp.json", [{**HOTPOT[0], "answer": 7}])
    with pytest.raises(session_mod.ConfigError, match=r"hp\.json:1: answer: expected a string"):
        session_mod.BenchSession(strategy=["no_retrieval"], probes=str(bad), report_dir=str(tmp_path / "r"))
    with pytest.raises(session_mod.ConfigError, match="unknown probe format"):
        session_mod.BenchSession(probes="phantomwiki", probes_format="csv", report_dir=str(tmp_path / "r"))
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
@pytest.mark.parametrize("runner", [["-m", "pytest", "bench", "-p", "no:cacheprovider"], ["-m", "flarebench", "run"]])
def test_bench_stops_on_a_bad_file_before_the_lm(tmp_path, runner):
    bad = write(tmp_path, "hp.json", [{**HOTPOT[0], "answer": 7}])
    args = [*runner, "--strategy", "no_retrieval", "--probes", str(bad), "--report-dir", str(tmp_path / "run")]
    # a model path that does not exist: even a wrong order of checks could not load a model
    args += ["--lm", f"llamacpp:{tmp_path / 'none.gguf'}"]
    r = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    # A usage error: flarebench's status 2, pytest's 4.
    assert r.returncode == (4 if "pytest" in runner else 2), out
    assert f"{bad}:1: answer: expected a string, got number" in out
    assert "none.gguf" not in out and "Traceback" not in out
    assert not (tmp_path / "run").exists()


# --- what `datasets` is given -------------------------------------------------------------------------


def test_json_lines_with_blank_lines_load(tmp_path, files):
    official = load_probe_set(str(files["hotpotqa"]))
    lines = [json.dumps(r) for r in HOTPOT]
    path = write(tmp_path, "hotpot.jsonl", "\n" + lines[0] + "\n\n" + lines[1] + "\n\n")
    ps = load_probe_set(str(path))
    assert ps.format == "hotpotqa" and ps.corpus == official.corpus
    assert [(p.id, p.answers) for p in ps.probes] == [(p.id, p.answers) for p in official.probes]


def test_an_edit_that_keeps_ids_and_modification_time_is_loaded(tmp_path):
    # cp -p, rsync -a or two edits within the clock's resolution keep the time datasets' cache checks.
    path = write(tmp_path, "hp.json", HOTPOT)
    os.utime(path, (1_600_000_000, 1_600_000_000))
    assert load_probe_set(str(path)).probes[0].answers == ["Delhi"]
    write(tmp_path, "hp.json", [{**HOTPOT[0], "answer": "Mumbai"}, HOTPOT[1]])
    os.utime(path, (1_600_000_000, 1_600_000_000))
    ps = load_probe_set(str(path))
    assert ps.probes[0].answers == ["Mumbai"]
    assert ps.probes_hash == hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_validate_command_a_run_suggests_reads_the_file_as_the_run_did():
    from flarebench.bench.session import _probe_problem

    error = ProbeError("hp.json:1: sample_id: missing required field\nhp.json:1: qa_pairs: missing required field")
    assert _probe_problem("hp.json", "asqa", error).endswith(
        "(and 1 more; `python -m flarebench.probes validate hp.json --format asqa` lists them)"
    )
    quoted = "`python -m flarebench.probes validate 'my set'` lists them)"
    assert _probe_problem("my set", "auto", error).endswith(quoted)
