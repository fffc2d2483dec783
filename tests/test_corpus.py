"""``python -m flarebench.probes corpus``: a probe set from a folder of documents.

The fixture folder (tests/fixtures/corpus_folder) holds a small runbook of an invented company in
Markdown, its release notes in HTML, its on-call handbook in PDF (made by
tests/fixtures/make_corpus_pdf.py), a glossary in plain text, an SVG the command skips, and
questions.jsonl. Chunk sizes are counted with the embedded model's vocabulary, loaded without its
weights (a fraction of a second): no test here loads the model.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from flarebench.bench.config import fingerprint
from flarebench.probes import load_probe_set, validate
from flarebench.probes.__main__ import main
from flarebench.probes.corpus import BUILT_FILES, TokenCounter
from tests.scripted import run_cli

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "corpus_folder"
PROBLEM_LINE = re.compile(r"^.+:\d+: \S+: .+$")


def _build(capsys, folder: Path, out: Path, *options: str) -> tuple[int, str]:
    code = main(["corpus", str(folder), "--out", str(out), *options])
    return code, capsys.readouterr().out


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _one_problem(capsys, folder: Path, out: Path, *options: str) -> str:
    """The one line a bad input prints (exit 2, no traceback, nothing written)."""
    existed = out.exists()
    code, out_text = _build(capsys, folder, out, *options)
    problems = [line for line in out_text.splitlines() if not line.startswith("skipped ")]
    assert code == 2 and len(problems) == 1, out_text
    assert PROBLEM_LINE.match(problems[0]), problems[0]
    assert out.exists() == existed
    return problems[0]


@pytest.fixture
def folder(tmp_path) -> Path:
    """A copy of the fixture folder, to break."""
    return Path(shutil.copytree(FIXTURE, tmp_path / "docs"))


@pytest.fixture(scope="module")
def count() -> TokenCounter:
    return TokenCounter()


def test_the_fixture_builds_a_valid_set_of_titled_chunks(capsys, tmp_path):
    out = tmp_path / "set"
    code, printed = _build(capsys, FIXTURE, out, "--licence", "CC0-1.0 (invented for flarebench's tests)")
    assert code == 0, printed
    assert "skipped architecture.svg: not a supported format" in printed
    assert printed.splitlines()[-1] == f"{out}: 10 chunks from 4 files (1 html, 1 markdown, 1 pdf, 1 text), 4 probes"
    assert validate(out, require_readme=True) == []
    docs = {d["id"]: d for d in _rows(out / "corpus.jsonl")}
    assert list(docs) == [
        "glossary.txt#1",
        "oncall-handbook.pdf#1",
        "release-notes.html#1",
        "release-notes.html#2",
        *(f"runbooks/rollback.md#{n}" for n in range(1, 7)),
    ]
    # Titles: the file name (text), the PDF's metadata title, the HTML <title> and the Markdown H1,
    # each with the headings above the chunk (the H1 that is the title is not repeated).
    assert docs["glossary.txt#1"]["title"] == "glossary.txt"
    assert docs["oncall-handbook.pdf#1"]["title"] == "Brackwater on-call handbook"
    assert "Mira Holloway" in docs["oncall-handbook.pdf#1"]["text"]  # both pages
    assert docs["release-notes.html#1"]["title"] == "Turnstile release notes > 3.8.0"
    assert docs["runbooks/rollback.md#1"]["title"] == "Turnstile rollback runbook"
    step2 = docs["runbooks/rollback.md#4"]
    assert step2["title"] == "Turnstile rollback runbook > Rollback > Step 2: pick the previous release"
    assert step2["text"].startswith("List the releases that ran cleanly")
    # HTML: the visible text, one line per block; no script, style or navigation.
    notes = docs["release-notes.html#1"]["text"]
    assert notes.splitlines()[1:] == ["Checkout retries a declined card once.", "Needs QuarryDB 5.2 or newer."]
    assert "12 minutes before it returns to sale" in notes
    everything = json.dumps(list(docs.values()))
    assert "analytics" not in everything and "font-family" not in everything and "Status" not in everything
    # The set loads as --probes loads it, with its chunking and licence.
    ps = load_probe_set(str(out))
    assert [p.id for p in ps.probes] == ["seat-hold", "good-releases", "escalation", "q4"]
    assert ps.licence == "CC0-1.0 (invented for flarebench's tests)"
    build = json.loads((out / "build.json").read_text())
    assert ps.chunking == build["chunking"]
    assert ps.chunking["chunk_tokens"] == 256 and ps.chunking["chunk_overlap"] == 32
    assert ps.chunking["splitter"].endswith("RecursiveCharacterTextSplitter") and ps.chunking["splitter_version"]
    assert ps.chunking["tokenizer"].startswith("SmolLM2-135M-Instruct")
    assert build["files"] == {"html": 1, "markdown": 1, "pdf": 1, "text": 1}
    assert build["skipped"] == ["architecture.svg"]
    readme = (out / "README.md").read_text()
    for line in ("- chunk size: at most 256 tokens", "- overlap: up to 32 tokens", "html: 1, markdown: 1, pdf: 1"):
        assert line in readme


def test_gold_sources_by_file_and_by_chunk_id(capsys, tmp_path):
    out = tmp_path / "set"
    assert _build(capsys, FIXTURE, out)[0] == 0
    gold = {p["id"]: p["gold_doc_ids"] for p in _rows(out / "probes.jsonl")}
    assert gold == {
        "seat-hold": ["release-notes.html#1", "release-notes.html#2"],  # a file: all its chunks
        "good-releases": ["runbooks/rollback.md#4"],  # a chunk id
        "escalation": ["oncall-handbook.pdf#1"],
        "q4": [],  # no gold given; the id is its line
    }
    answers = {p["id"]: p["answers"] for p in _rows(out / "probes.jsonl")}
    assert answers["seat-hold"] == ["12 minutes", "twelve minutes"] and answers["escalation"] == ["Mira Holloway"]


def test_every_chunk_fits_and_a_split_paragraph_overlaps(capsys, tmp_path, count):
    out = tmp_path / "set"
    assert _build(capsys, FIXTURE, out, "--chunk-tokens", "40", "--chunk-overlap", "8")[0] == 0
    docs = _rows(out / "corpus.jsonl")
    assert max(count(d["text"]) for d in docs) <= 40
    step2 = [d["text"] for d in docs if d["title"].endswith("Step 2: pick the previous release")]
    assert len(step2) >= 4
    for before, after in zip(step2, step2[1:]):
        shared = next((after[:n] for n in range(len(after), 0, -1) if before.endswith(after[:n])), "")
        assert shared.strip() and count(shared) <= 8, (before, after)
    assert validate(out) == []


def test_a_rebuild_is_byte_identical_and_needs_overwrite(capsys, tmp_path):
    out = tmp_path / "set"
    assert _build(capsys, FIXTURE, out)[0] == 0
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert _one_problem(capsys, FIXTURE, out) == f"{out}:0: (out): holds a built set; pass --overwrite to replace it"
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first  # refused: untouched
    assert _build(capsys, FIXTURE, out, "--overwrite")[0] == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["set"]  # no temporary folder left


def test_an_interrupted_build_leaves_the_set_as_it_was(capsys, tmp_path, monkeypatch):
    import flarebench.probes.corpus as corpus

    out = tmp_path / "set"
    out.mkdir()
    (out / "corpus.jsonl").write_text("old\n")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(corpus, "check_folder", interrupted)  # after the files are written, before the rename
    code = main(["corpus", str(FIXTURE), "--out", str(out), "--overwrite"])
    assert code == 130 and capsys.readouterr().err == f"interrupted; {out} is as it was\n"  # one line, no traceback
    assert [p.name for p in out.iterdir()] == ["corpus.jsonl"] and (out / "corpus.jsonl").read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["set"]


def test_a_failed_swap_puts_the_old_set_back(capsys, tmp_path, monkeypatch):
    out = tmp_path / "set"
    out.mkdir()
    (out / "corpus.jsonl").write_text("old\n")
    rename = Path.rename

    def refused(self, target):  # the new set cannot take the old one's place (a full disk, say)
        if self.name.startswith(".set.partial-"):
            raise OSError(28, "No space left on device")
        return rename(self, target)

    monkeypatch.setattr(Path, "rename", refused)
    code, printed = _build(capsys, FIXTURE, out, "--overwrite")
    assert code == 2 and printed.endswith(f"\n--out {out}: cannot be written (No space left on device)\n")
    assert [p.name for p in out.iterdir()] == ["corpus.jsonl"] and (out / "corpus.jsonl").read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["set"]


def test_questions_from_csv(capsys, folder, tmp_path):
    (folder / "questions.jsonl").unlink()
    (folder / "questions.csv").write_text(
        "id,question,answers,gold,metadata.team\n"
        'hold,"How long is a seat held?",12 minutes|twelve minutes,release-notes.html#1,booking\n'
        "page,Who is paged after the secondary?,Mira Holloway,oncall-handbook.pdf|runbooks/rollback.md#2,\n"
    )
    out = tmp_path / "set"
    assert _build(capsys, folder, out)[0] == 0
    probes = _rows(out / "probes.jsonl")
    assert [(p["id"], p["answers"], p["gold_doc_ids"], p.get("metadata")) for p in probes] == [
        ("hold", ["12 minutes", "twelve minutes"], ["release-notes.html#1"], {"team": "booking"}),
        ("page", ["Mira Holloway"], ["oncall-handbook.pdf#1", "runbooks/rollback.md#2"], None),
    ]


def test_question_metadata_is_the_probes_and_checked(capsys, folder, tmp_path):
    _edit_question(folder, 1, metadata={"team": "booking", "hops": 2})
    assert _build(capsys, folder, tmp_path / "set")[0] == 0
    assert _rows(tmp_path / "set" / "probes.jsonl")[0]["metadata"] == {"team": "booking", "hops": 2}
    _edit_question(folder, 1, metadata={"team": ["booking"]})
    _edit_question(folder, 2, metadata="booking")
    where = folder / "questions.jsonl"
    assert _build(capsys, folder, tmp_path / "bad")[1].splitlines() == [
        f"{where}:1: metadata.team: expected a non-empty string, a number or true/false",
        f'{where}:2: metadata: expected an object of fields, e.g. {{"team": "payments"}}',
    ]


def _edit_question(folder: Path, line: int, **changes) -> None:
    path = folder / "questions.jsonl"
    rows = _rows(path)
    rows[line - 1] = {k: v for k, v in {**rows[line - 1], **changes}.items() if v is not None}
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_question_without_an_answer(capsys, folder, tmp_path):
    _edit_question(folder, 2, answer=None)
    line = _one_problem(capsys, folder, tmp_path / "set")
    assert line == f"{folder / 'questions.jsonl'}:2: answer: missing (give answer, or answers as a list)"


def test_a_question_with_an_empty_list_of_answers_is_named_in_its_file(capsys, folder, tmp_path):
    _edit_question(folder, 1, answers=[])
    line = _one_problem(capsys, folder, tmp_path / "set")
    assert line == f"{folder / 'questions.jsonl'}:1: answers: must not be empty"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs"]  # no temporary folder left


def test_windows_line_ends_build_the_same_chunks(capsys, folder, tmp_path):
    # A .txt or .md file saved with CRLF kept a carriage return in every chunk's text.
    assert _build(capsys, folder, tmp_path / "lf")[0] == 0
    for name in ("glossary.txt", "runbooks/rollback.md"):
        path = folder / name
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert _build(capsys, folder, tmp_path / "crlf")[0] == 0
    assert _rows(tmp_path / "crlf" / "corpus.jsonl") == _rows(tmp_path / "lf" / "corpus.jsonl")


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
def test_a_questions_file_that_is_not_utf8_names_the_line_and_the_byte_in_it(capsys, folder, tmp_path, bom):
    # It said line 0 and the byte's offset in the whole file.
    lines = (folder / "questions.jsonl").read_bytes().splitlines(keepends=True)
    bad = b'{"question": "Who is M\xfcller?", "answer": "x"}\n'
    (folder / "questions.jsonl").write_bytes(bom + lines[0] + bad + b"".join(lines[1:]))
    line = _one_problem(capsys, folder, tmp_path / "set")
    assert line == f"{folder / 'questions.jsonl'}:2: (encoding): not UTF-8 (invalid start byte at byte 22)"


def test_a_gold_source_that_matches_nothing(capsys, folder, tmp_path):
    _edit_question(folder, 1, gold="release-notes.htm")
    line = _one_problem(capsys, folder, tmp_path / "set")
    assert line == (
        f"{folder / 'questions.jsonl'}:1: gold[0]: 'release-notes.htm' matches no file or chunk id; "
        "did you mean 'release-notes.html'?"
    )


def test_a_bad_question_and_a_bad_gold_source_are_said_in_one_round(capsys, folder, tmp_path):
    _edit_question(folder, 1, gold="release-notes.htm")
    _edit_question(folder, 2, answer="the")
    code, out = _build(capsys, folder, tmp_path / "set")
    problems = [line for line in out.splitlines() if not line.startswith("skipped ")]
    assert code == 2 and [p.split(": ")[0:2] for p in problems] == [
        [f"{folder / 'questions.jsonl'}:2", "answer"],
        [f"{folder / 'questions.jsonl'}:1", "gold[0]"],
    ]
    assert not (tmp_path / "set").exists()


def test_a_gold_source_in_another_unicode_form_is_the_same_file(capsys, folder, tmp_path):
    # A file named on macOS (decomposed: "e" and an accent) and a name typed elsewhere (composed).
    import unicodedata

    (folder / "glossary.txt").rename(folder / unicodedata.normalize("NFD", "glossaire-café.txt"))
    _edit_question(folder, 1, gold=unicodedata.normalize("NFC", "glossaire-café.txt"))
    code, out = _build(capsys, folder, tmp_path / "set")
    assert code == 0, out
    gold = _rows(tmp_path / "set" / "probes.jsonl")[0]["gold_doc_ids"]
    assert gold and all(unicodedata.normalize("NFC", g).startswith("glossaire-café.txt#") for g in gold)


def test_duplicate_question_ids(capsys, folder, tmp_path):
    _edit_question(folder, 3, id="seat-hold")
    line = _one_problem(capsys, folder, tmp_path / "set")
    assert line == f"{folder / 'questions.jsonl'}:3: id: duplicate id 'seat-hold' (first on line 1)"


def test_a_question_whose_default_id_is_taken_is_told_it_is_its_default(capsys, folder, tmp_path):
    _edit_question(folder, 1, id="q3")
    _edit_question(folder, 3, id=None)  # no id: q3, its line, which line 1 took
    line = _one_problem(capsys, folder, tmp_path / "set")
    assert (
        line == f"{folder / 'questions.jsonl'}:3: id: its default id 'q3' (q and its line) is taken (first on line 1)"
    )


def test_a_misspelt_question_field_is_named(capsys, folder, tmp_path):
    _edit_question(folder, 4, answer=None, anwser="24 hours")
    code, printed = _build(capsys, folder, tmp_path / "set")
    at = f"{folder / 'questions.jsonl'}:4"
    assert code == 2
    assert printed.splitlines() == [
        f"{at}: anwser: unknown field; did you mean 'answer'?",
        f"{at}: answer: missing (give answer, or answers as a list)",
    ]


def test_a_broken_pdf(capsys, folder, tmp_path):
    pdf = folder / "oncall-handbook.pdf"
    pdf.write_bytes(pdf.read_bytes()[:3000])  # cut off mid-file
    line = _one_problem(capsys, folder, tmp_path / "set")
    assert line.startswith(f"{pdf}:0: (file): cannot parse as pdf: ")
    assert capsys.readouterr().err == ""  # pypdf's repair warnings are not printed either


def test_a_file_without_text_is_skipped_with_a_note(capsys, folder, tmp_path):
    (folder / "empty.md").write_text("# Only a heading\n")
    code, printed = _build(capsys, folder, tmp_path / "set")
    assert code == 0 and "skipped empty.md: no text" in printed
    # Listed as skipped, not counted among the files read.
    build = json.loads((tmp_path / "set" / "build.json").read_text())
    assert "empty.md" in build["skipped"]
    before = build["files"]
    (folder / "empty.md").unlink()
    assert _build(capsys, folder, tmp_path / "again")[0] == 0
    assert json.loads((tmp_path / "again" / "build.json").read_text())["files"] == before


def test_a_markdown_file_that_is_not_utf8(capsys, folder, tmp_path):
    (folder / "notes.md").write_bytes("# Caf\xe9\n".encode("latin-1"))
    line = _one_problem(capsys, folder, tmp_path / "set")
    assert line.startswith(f"{folder / 'notes.md'}:0: (file): not UTF-8")


def test_a_link_to_nothing_stops_the_build(capsys, folder, tmp_path):
    (folder / "notes.md").symlink_to(tmp_path / "gone.md")
    line = _one_problem(capsys, folder, tmp_path / "set")
    assert line == f"{folder / 'notes.md'}:0: (file): cannot read (No such file or directory)"


def test_an_out_folder_that_cannot_be_created_is_one_line(capsys, tmp_path):
    (tmp_path / "afile").write_text("")
    out = tmp_path / "afile" / "sub"
    code, printed = _build(capsys, FIXTURE, out)
    assert (code, printed) == (2, f"--out {out}: cannot be created: {tmp_path / 'afile'} is a file, not a folder\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_an_empty_folder(capsys, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    line = _one_problem(capsys, empty, tmp_path / "set")
    assert line == f"{empty}:0: (folder): no Markdown, text, HTML or PDF files"


def test_a_folder_without_questions(capsys, folder, tmp_path):
    (folder / "questions.jsonl").unlink()
    line = _one_problem(capsys, folder, tmp_path / "set")
    assert line.startswith(f"{folder}:0: (questions): no questions: give --questions FILE")


def test_an_out_folder_inside_the_source(capsys, folder):
    line = _one_problem(capsys, folder, folder / "set")
    assert line.startswith(f"{folder / 'set'}:0: (out): inside the source folder")


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        (("--chunk-tokens", "4"), "--chunk-tokens: must be at least 8, got 4"),
        (("--chunk-overlap", "256"), "--chunk-overlap: must be at least 0 and less than --chunk-tokens (256), got 256"),
        (("--chunk-overlap", "-1"), "--chunk-overlap: must be at least 0 and less than --chunk-tokens (256), got -1"),
    ],
)
def test_chunk_options_are_checked_in_one_line(capsys, tmp_path, options, problem):
    code, printed = _build(capsys, FIXTURE, tmp_path / "set", *options)
    assert (code, printed) == (2, problem + "\n")


def test_without_the_corpus_extra_one_line_names_it(capsys, tmp_path, monkeypatch):
    for name in ("flarebench.probes.corpus", "flarebench.probes.documents"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, "pypdf", None)  # an import of it fails as if it were not installed
    code, printed = _build(capsys, FIXTURE, tmp_path / "set")
    assert (code, printed) == (2, "python -m flarebench.probes corpus needs pypdf: pip install 'flarebench[corpus]'\n")


@pytest.mark.slow
def test_a_run_on_the_set_records_its_chunking(capsys, tmp_path, scripted_lm):
    out = tmp_path / "set"
    assert _build(capsys, FIXTURE, out)[0] == 0
    run_dir = tmp_path / "run"
    code, printed, err = run_cli(
        "run", "--probes", str(out), "--strategy", "single_time", "--limit", "2", "--report-dir", str(run_dir)
    )
    assert code == 0, printed + err
    config = json.loads((run_dir / "run.json").read_text())["config"]
    assert config["probes"]["chunking"] == json.loads((out / "build.json").read_text())["chunking"]
    # Comparable with a baseline by content: the chunking is not part of the fingerprint.
    assert "chunking" not in fingerprint(config, {}, 2)["probes"]


def test_a_damaged_build_json_is_one_line(capsys, tmp_path):
    out = tmp_path / "set"
    assert _build(capsys, FIXTURE, out)[0] == 0
    (out / "build.json").write_text('{"chunking": [256, 32]}\n')
    assert validate(out) == [f"{out / 'build.json'}:0: chunking: expected an object, got list"]
    (out / "build.json").write_text("{\n")
    assert validate(out) == [
        f"{out / 'build.json'}:2: (json): invalid JSON: Expecting property name enclosed in double quotes (column 1)"
    ]


# -- long questions ------------------------------------------------------------------------------

LONG_QUESTIONS = [
    {
        "id": "rollback",
        "question": "Walk me through rolling back a broken Turnstile release.",
        "answer_type": "long",
        "required_facts": [
            {"id": "freeze", "fact": "Freeze deploys first.", "answers": ["brack freeze turnstile"],
             "doc_ids": ["runbooks/rollback.md#3"]},
            {"id": "pick", "fact": "List the clean releases.", "answers": ["brack releases turnstile --good"],
             "doc_ids": ["runbooks/rollback.md#4"], "wrong_values": ["brack releases turnstile --all"]},
            {"id": "hold", "fact": "A seat is held for 12 minutes.", "answers": ["12 minutes"],
             "doc_ids": ["release-notes.html"]},
        ],
    },
    {
        "question": "Write a short note on who approves a rollback and who is paged after the secondary.",
        "answer_type": "long",
        "gold": ["runbooks/rollback.md#2"],
        "required_facts": [
            {"id": "f1", "fact": "Mira Holloway is paged.", "answers": ["Mira Holloway"],
             "doc_ids": ["oncall-handbook.pdf"]},
        ],
    },
]  # fmt: skip


def _long_folder(folder: Path, questions: list[dict] = LONG_QUESTIONS) -> Path:
    (folder / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    return folder


def test_long_questions_build_a_set_of_long_probes_whose_facts_name_chunks(capsys, folder, tmp_path):
    out = tmp_path / "set"
    code, printed = _build(capsys, _long_folder(folder), out)
    assert code == 0, printed
    assert validate(out, require_readme=True) == []
    first, second = _rows(out / "probes.jsonl")
    assert first["answer_type"] == "long" and first["answers"] == []
    # A fact's source is resolved as a gold source is: a chunk id is that chunk, a file all its chunks.
    assert [f["doc_ids"] for f in first["required_facts"]] == [
        ["runbooks/rollback.md#3"],
        ["runbooks/rollback.md#4"],
        ["release-notes.html#1", "release-notes.html#2"],
    ]
    assert first["required_facts"][1]["wrong_values"] == ["brack releases turnstile --all"]
    assert first["gold_doc_ids"] == [
        "runbooks/rollback.md#3", "runbooks/rollback.md#4", "release-notes.html#1", "release-notes.html#2"
    ]  # fmt: skip
    assert second["id"] == "q2" and second["gold_doc_ids"] == ["runbooks/rollback.md#2", "oncall-handbook.pdf#1"]
    probe_set = load_probe_set(str(out))
    assert probe_set.answer_form == "long"
    assert [f.answers for f in probe_set.probes[0].required_facts][0] == ["brack freeze turnstile"]


def _fact(**changes) -> Callable[[list[dict]], list[dict]]:
    """The first long question alone, its first fact changed."""
    return lambda qs: [{**qs[0], "required_facts": [{**qs[0]["required_facts"][0], **changes}]}]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda qs: [{"question": "How long is a seat held?", "answer": "12 minutes"}, *qs],
            "2: answer_type: a long probe in a set of short probes (line 1); a set is all long or all short, since "
            "it chooses the prompt form: split it in two",
        ),
        (
            _fact(doc_ids=["runbook/rollback.md"]),
            "1: required_facts[0].doc_ids[0]: 'runbook/rollback.md' matches no file or chunk id; did you mean "
            "'runbooks/rollback.md'?",
        ),
        (
            lambda qs: [{**qs[0], "answer": "freeze"}],
            "1: answer: a long question's answers are its required_facts' answers; leave it out",
        ),
        (
            lambda qs: [{**qs[0], "answer_type": "essay"}],
            "1: answer_type: expected 'long' (or leave it out for a short question), got 'essay'",
        ),
        (
            lambda qs: [{k: v for k, v in qs[0].items() if k != "answer_type"}],
            '1: required_facts: only a long question has them: add "answer_type": "long"',
        ),
        (_fact(answers="brack freeze"), "1: required_facts[0].answers: expected a list of strings, got string"),
    ],
)
def test_a_bad_long_question_is_one_line_naming_its_field(capsys, folder, tmp_path, change, problem):
    line = _one_problem(capsys, _long_folder(folder, change(LONG_QUESTIONS)), tmp_path / "set")
    assert line == f"{folder / 'questions.jsonl'}:{problem}"


@pytest.mark.parametrize("header", ["question,answer,answer", "question,answer,metadata.team,metadata.team"])
def test_a_csv_column_given_twice_is_refused_not_read_as_its_last_cell(capsys, folder, tmp_path, header):
    (folder / "questions.jsonl").unlink()
    (folder / "questions.csv").write_text(f"{header}\nHow long does the upgrade take?,12 minutes,payments,search\n")
    twice = header.rpartition(",")[2]
    assert (
        _one_problem(capsys, folder, tmp_path / "set")
        == f"{folder / 'questions.csv'}:1: {twice}: a column given twice in the header"
    )


def test_an_unknown_csv_column_is_said_once_on_the_header_line(capsys, folder, tmp_path):
    (folder / "questions.jsonl").unlink()
    rows = "".join(f"Question {i}?,x,12 minutes\n" for i in range(3))
    (folder / "questions.csv").write_text(f"question,Answer,answer\n{rows}")
    line = _one_problem(capsys, folder, tmp_path / "set")  # not one line per row
    assert line == f"{folder / 'questions.csv'}:1: Answer: unknown column; did you mean 'answer'?"
    (folder / "questions.csv").write_text(f"question,Answer\n{rows.replace(',x', '')}")  # no answer column left
    assert _build(capsys, folder, tmp_path / "set")[1].splitlines() == [
        f"{folder / 'questions.csv'}:1: Answer: unknown column; did you mean 'answer'?",
        f"{folder / 'questions.csv'}:1: (csv): the header has no 'answer' or 'answers' column",
    ]


def test_long_questions_in_csv_are_refused_in_one_line(capsys, folder, tmp_path):
    (folder / "questions.jsonl").unlink()
    (folder / "questions.csv").write_text('question,answer_type,required_facts\n"Walk me through it.",long,"[]"\n')
    line = _one_problem(capsys, folder, tmp_path / "set")
    where = folder / "questions.csv"
    assert line == f"{where}:1: (csv): long questions (required_facts) are written as JSON lines (.jsonl)"
    # Without the column too, and a row missing its answer is told how CSV holds several.
    (folder / "questions.csv").write_text('question,answer_type\n"Walk me through it.",long\nWho is paged?,\n')
    assert _build(capsys, folder, tmp_path / "set")[1].splitlines() == [
        f"{where}:2: answer_type: long questions (required_facts) are written as JSON lines (.jsonl)",
        f"{where}:3: answer: missing (give answer, or an answers column, values separated by |)",
    ]


@pytest.mark.slow
def test_a_run_on_a_long_set_built_from_documents_scores_its_facts(capsys, folder, tmp_path, scripted_lm):
    out = tmp_path / "set"
    assert _build(capsys, _long_folder(folder), out)[0] == 0
    run_dir = tmp_path / "run"
    code, printed, err = run_cli("run", "--probes", str(out), "--strategy", "single_time", "--report-dir", str(run_dir))
    assert code == 0, printed + err
    row = pd.read_csv(run_dir / "summary.csv").iloc[0]
    assert row["n"] == 2 and 0 <= row["fact_recall"] <= 1 and 0 <= row["wrong_version_rate"] <= 1
    config = json.loads((run_dir / "run.json").read_text())["config"]
    assert config["strategies"]["single_time"]["answer_form"] == "long"  # the long-form prompt


# -- what --out may be ---------------------------------------------------------------------------


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_an_out_folder_that_is_or_holds_the_source_is_refused_even_with_overwrite(capsys, tmp_path, monkeypatch):
    # Run from a folder holding the documents: --out naming that folder would swap it, documents and
    # all, for the set.
    here = tmp_path / "here"
    shutil.copytree(FIXTURE, here / "docs")
    (here / "keep.txt").write_text("important\n")
    before = _tree(here)
    monkeypatch.chdir(here)
    holds = ":0: (out): holds the source folder docs; give the set a folder of its own"
    for out, problem in [
        (str(here), f"{here}{holds}"),
        (".", f".{holds}"),
        ("docs", "docs:0: (out): is the source folder; give the set a folder of its own"),
    ]:
        code = main(["corpus", "docs", "--out", out, "--overwrite"])
        assert (code, capsys.readouterr().out) == (2, f"{problem}\n")
    assert _tree(here) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["here"]  # no temporary folder left


def test_the_current_folder_is_refused_as_out(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(["corpus", str(FIXTURE), "--out", ".", "--overwrite"])
    assert (code, capsys.readouterr().out) == (
        2,
        ".:0: (out): is or holds the current folder; give the set a folder of its own\n",
    )
    with pytest.raises(SystemExit):  # '' is refused as every empty value is (tests/test_usage.py)
        main(["corpus", str(FIXTURE), "--out", "", "--overwrite"])
    assert list(tmp_path.iterdir()) == []


def test_overwrite_replaces_a_built_set_never_other_files(capsys, tmp_path):
    out = tmp_path / "set"
    assert _build(capsys, FIXTURE, out)[0] == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(BUILT_FILES)  # what --overwrite may replace
    (out / "notes.txt").write_text("ours\n")
    before = _tree(out)
    for options in [(), ("--overwrite",)]:
        assert _one_problem(capsys, FIXTURE, out, *options) == (
            f"{out}:0: (out): holds 'notes.txt', which no build writes; give a new or empty folder "
            "(--overwrite replaces a built set, never other files)"
        )
    assert _tree(out) == before
    (out / "notes.txt").unlink()
    (out / "corpus.jsonl").unlink()
    (out / "corpus.jsonl").mkdir()  # a folder by a set's file name is not the set's
    (out / "corpus.jsonl" / "mine.md").write_text("ours\n")
    line = _one_problem(capsys, FIXTURE, out, "--overwrite")
    assert line.startswith(f"{out}:0: (out): holds 'corpus.jsonl', which no build writes")
    assert (out / "corpus.jsonl" / "mine.md").read_text() == "ours\n"


def test_overwrite_through_a_link_replaces_the_set_it_names_and_keeps_the_link(capsys, tmp_path):
    (tmp_path / "sets" / "v1").mkdir(parents=True)
    (tmp_path / "current").symlink_to(tmp_path / "sets" / "v1")
    out = tmp_path / "current"
    assert _build(capsys, FIXTURE, out)[0] == 0
    before = _tree(tmp_path / "sets" / "v1")
    assert _build(capsys, FIXTURE, out, "--overwrite")[0] == 0
    assert out.is_symlink() and out.resolve() == tmp_path / "sets" / "v1"
    assert _tree(tmp_path / "sets" / "v1") == before  # the rebuild is the same set
    assert sorted(p.name for p in tmp_path.iterdir()) == ["current", "sets"]  # no swap left beside them
    assert sorted(p.name for p in (tmp_path / "sets").iterdir()) == ["v1"]


def test_an_answer_that_normalises_to_nothing_is_named_in_its_file(capsys, folder, tmp_path):
    _edit_question(folder, 1, answers=["12 minutes", "the"])
    line = _one_problem(capsys, folder, tmp_path / "set")
    assert line == (
        f"{folder / 'questions.jsonl'}:1: answers[1]: 'the' normalises to nothing (scoring drops articles and "
        "punctuation): it can never be matched"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs"]  # no temporary folder left


def test_one_answer_that_normalises_to_nothing_is_named_as_written(capsys, folder, tmp_path):
    _edit_question(folder, 1, answer="the", answers=None)
    line = _one_problem(capsys, folder, tmp_path / "set")
    assert line == (
        f"{folder / 'questions.jsonl'}:1: answer: 'the' normalises to nothing (scoring drops articles and "
        "punctuation): it can never be matched"
    )
