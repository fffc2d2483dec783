"""The labelled claims and `flarebench agreement` (bench/agreement.py): the data is what the docs say
it is, the recorded figures every report quotes are the live ones, the arithmetic, the command, and
one-line errors for a bad claims file. The judge path is tested in tests/test_faithfulness.py."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from flarebench.bench import agreement
from flarebench.bench.agreement import OFFLINE_TEST, AgreementError, LabelledClaim, load_claims, measure
from flarebench.bench.cli import main
from flarebench.bench.faithfulness import LEXICAL_METHOD


def test_the_labelled_claims_are_what_the_docs_say():
    claims = load_claims(split="all")
    assert len(claims) >= 150
    assert len({c.id for c in claims}) == len(claims)
    for split in ("dev", "test"):
        part = [c for c in claims if c.split == split]
        labels = Counter(c.supported for c in part)
        # half supported paraphrases, half hard negatives (the test split exactly)
        assert abs(labels[True] - labels[False]) <= (0 if split == "test" else 0.02 * len(part)), split
        assert all(c.kind in ("paraphrase", "verbatim") for c in part if c.supported)
        negatives = Counter(c.kind for c in part if not c.supported)
        assert {"swap-number", "swap-name", "swap-relation", "swap-env", "overridden-default", "negation"} <= set(
            negatives
        )
        assert all(c.note.strip() and c.contexts for c in part)
    test_sets = {c.set for c in claims if c.split == "test"}
    assert {"engdocs", "faithfulness"} <= test_sets  # shipped corpora and the folder's own unseen ones


@pytest.mark.slow
def test_the_recorded_offline_figures_are_the_live_ones():
    claims = load_claims(split="test")
    live = measure(LEXICAL_METHOD, "test", claims, agreement.offline_verdicts(claims))
    counts = ("supported_right", "supported_wrong", "unsupported_right", "unsupported_wrong")
    assert [getattr(live, c) for c in counts] == [getattr(OFFLINE_TEST, c) for c in counts]
    assert live.line() == OFFLINE_TEST.line()
    print(live.line(), live.by_kind)


def _claim(cid: str, supported: bool, kind: str = "paraphrase") -> LabelledClaim:
    return LabelledClaim(cid, "engdocs", "test", "c", supported, kind, "n", ("p",))


def test_measure_counts_rates_kinds_and_undecided():
    claims = [_claim("a", True), _claim("b", True), _claim("c", False, "swap-number"), _claim("d", False, "negation")]
    got = measure("m", "test", claims, [True, None, False, True])
    assert (got.supported_right, got.supported_wrong, got.unsupported_right, got.unsupported_wrong) == (1, 0, 1, 1)
    assert got.undecided == 1 and got.n == 3
    assert got.accuracy == pytest.approx(2 / 3)
    assert got.unsupported_recall == pytest.approx(0.5) and got.supported_recall == 1.0
    assert got.by_kind == {"negation": (0, 1), "paraphrase": (1, 1), "swap-number": (1, 1)}
    assert got.wrong == ("d",)
    assert measure("m", "test", claims, [None] * 4).line() == "m: no claim of the test split got a verdict"


def _write(tmp_path, lines: list[str]):
    (tmp_path / "corpus.jsonl").write_text(json.dumps({"id": "d1", "title": "T", "text": "Port 80 is open."}) + "\n")
    path = tmp_path / "claims.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


GOOD = {
    "id": "x1",
    "set": "faithfulness",
    "split": "test",
    "claim": "Port 80 is open.",
    "doc_ids": ["d1"],
    "supported": True,
    "kind": "paraphrase",
    "note": "n",
}


def test_a_claims_file_of_ones_own_with_its_own_corpus(tmp_path, capsys):
    path = _write(
        tmp_path, [json.dumps(GOOD), json.dumps(GOOD | {"id": "x2", "claim": "Port 81 is open.", "supported": False})]
    )
    claims = load_claims(path)
    assert [c.contexts for c in claims] == [("T\nPort 80 is open.",)] * 2
    assert main(["agreement", "--claims", str(path), "--errors"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{LEXICAL_METHOD} on the test split of the labelled claims (2): accuracy 1.00")
    assert "| paraphrase" in out and "share_right" in out


@pytest.mark.parametrize(
    ("record", "where"),
    [
        ("not json", ":1: (json): invalid JSON: Expecting value"),
        (json.dumps(GOOD | {"supported": "yes"}), ":1: supported: missing or not a bool"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "claim"}), ":1: claim: missing or not a str"),
        (json.dumps(GOOD | {"claim": " "}), ":1: claim: must not be empty"),
        (json.dumps(GOOD | {"split": "train"}), ":1: split: 'train' is neither dev nor test"),
        (json.dumps(GOOD | {"doc_ids": ["nope"]}), ":1: doc_ids: not in"),
        (json.dumps(GOOD | {"set": "no-such-set"}), ":1: set: no corpus for 'no-such-set'"),
        (json.dumps(GOOD | {"doc_ids": [5]}), ":1: doc_ids: expected a list of doc ids (strings)"),
    ],
)
def test_a_bad_claims_file_is_one_line_naming_file_line_and_field(tmp_path, capsys, record, where):
    path = _write(tmp_path, [record])
    with pytest.raises(AgreementError, match=where.replace("(", r"\(").replace(")", r"\)")):
        load_claims(path)
    assert main(["agreement", "--claims", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"flarebench: {path}:1: ") and "\n" not in err and "Traceback" not in err


def test_an_empty_selection_and_a_missing_file_are_user_errors(tmp_path, capsys):
    path = _write(tmp_path, [json.dumps(GOOD)])
    assert main(["agreement", "--claims", str(path), "--split", "dev"]) == 2
    assert "no labelled claim in the dev split" in capsys.readouterr().err
    assert main(["agreement", "--claims", str(tmp_path / "gone.jsonl")]) == 2
    assert "gone.jsonl:0: (file):" in capsys.readouterr().err


def test_bad_bytes_a_repeated_id_and_a_limit_below_one_are_one_line(tmp_path, capsys):
    path = _write(tmp_path, [json.dumps(GOOD), json.dumps(GOOD | {"claim": "Port 80 is shut."})])
    assert main(["agreement", "--claims", str(path)]) == 2
    assert capsys.readouterr().err == f"flarebench: {path}:2: id: duplicate id 'x1' (first on line 1)\n"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n\xff\n")
    assert main(["agreement", "--claims", str(path)]) == 2
    assert capsys.readouterr().err == f"flarebench: {path}:2: (encoding): not UTF-8 (invalid start byte at byte 0)\n"
    for limit in ("0", "-1"):
        assert main(["agreement", "--limit", limit]) == 2
        assert capsys.readouterr().err == f"flarebench: --limit must be >= 1, got {limit}\n"


@pytest.mark.slow
def test_a_reader_that_goes_away_gets_no_traceback():
    import subprocess
    import sys

    proc = subprocess.run(
        f"{sys.executable} -m flarebench agreement --split all --errors --limit 3 | true",
        shell=True,
        capture_output=True,
        text=True,
        check=False,
    )
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("corpus", "where"),
    [
        (b'{"title": "T", "text": "Port 80 is open."}\n', ":1: id: missing required field"),
        (b'{"id": "d1", "title": "T", "text": "x"}\n{"id": "d2",\n', ":2: (json): invalid JSON"),
        (b'{"id": "d1", "title": "T\xff", "text": "x"}\n', ":1: (encoding): not UTF-8"),
        (b'{"id": "d1", "title": "T", "text": "x", "txt": "y"}\n', ":1: txt: unknown field; did you mean 'text'?"),
    ],
)
def test_a_bad_corpus_is_one_line_naming_its_file_line_and_field(tmp_path, capsys, corpus, where):
    path = _write(tmp_path, [json.dumps(GOOD)])
    (tmp_path / "corpus.jsonl").write_bytes(corpus)
    with pytest.raises(AgreementError, match="^" + re.escape(f"{tmp_path / 'corpus.jsonl'}{where}")):
        load_claims(path)
    assert main(["agreement", "--claims", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"flarebench: {tmp_path / 'corpus.jsonl'}{where}") and err.count("\n") == 1


def test_a_claims_file_is_read_as_probes_jsonl_is_a_bom_allowed_and_a_misspelled_field_refused(tmp_path, capsys):
    path = _write(tmp_path, [json.dumps(GOOD)])
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert [c.id for c in load_claims(path)] == ["x1"]
    misspelled = {"supportd" if k == "supported" else k: v for k, v in GOOD.items()}
    path.write_text(json.dumps(GOOD | {"id": "x0"}) + "\n" + json.dumps(misspelled) + "\n")
    assert main(["agreement", "--claims", str(path)]) == 2
    assert capsys.readouterr().err == f"flarebench: {path}:2: supportd: unknown field; did you mean 'supported'?\n"
