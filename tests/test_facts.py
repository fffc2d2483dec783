"""Long answers (``answer_type`` ``long``): the required facts a whole output states, the columns
fact_recall, incomplete_facts_rate, wrong_version_rate and incomplete_or_wrong_rate, and the loader's
long probes. Hand-made probes and scripted outputs, the values worked out by hand."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from flarebench.bench.answers import fact_check, normalize_value, score_answer, states_value
from flarebench.bench.gate import with_ratios
from flarebench.bench.metrics import column_docs, optional_columns, probe_row, summarize, summary_columns
from flarebench.probes import Probe, RequiredFact, load_probe_set
from flarebench.strategies.prompts import LONG_CLOSED_BOOK
from flarebench.strategies.records import Trace

FACT_COLUMNS = ["fact_recall", "incomplete_facts_rate", "wrong_version_rate", "incomplete_or_wrong_rate"]

UPGRADE = Probe(
    id="up",
    question="How do I upgrade the production cluster? Give the steps.",
    answers=[],
    answer_type="long",
    gold_doc_ids=["d1", "d2"],
    required_facts=[
        RequiredFact("ver", "Production runs release 4.12.0.", ["4.12.0", "v4.12.0"], ["d1"], ["4.11.2", "4.1"]),
        RequiredFact("nodes", "Production has 12 nodes.", ["12", "twelve"], ["d2"], ["3"]),
        RequiredFact("owner", "Rosa Tull owns the upgrade.", ["Rosa Tull"], ["d2"]),
    ],
)
SHORT = Probe(id="s1", question="Who owns the upgrade?", answers=["Rosa Tull"], gold_doc_ids=["d2"])


def long_trace(output: str, probe_id: str = "up", strategy: str = "s", error: str | None = None) -> Trace:
    return Trace(
        question="q?",
        output=output,
        answer=None,
        stop_reason="error" if error else "eos",
        steps=[],
        probe_id=probe_id,
        strategy=strategy,
        seconds=1.0,
        error=error,
    )


# ---------------------------------------------------------------- value matching


@pytest.mark.parametrize(
    "text, value, stated",
    [
        ("Upgrade to 4.12.0 first.", "4.12.0", True),
        ("Upgrade to 4.12.0.", "4.12.0", True),  # the sentence's full stop is not part of the value
        ("Upgrade to 4.12.0 first.", "4.1", False),  # not a whole value inside a longer version
        ("Upgrade to 4.12.0 first.", "4.12", False),
        ("Pin 4.1.3, not 4.1.", "4.1", True),
        ("Pin 4.1.3 first.", "4.1", False),
        ("Pin 4.10 first.", "4.1.0", False),  # without the kept dot both would be "410"
        ("v4.12.0 is live", "4.12.0", False),  # list "v4.12.0" as an alias where it may be written so
        ("v4.12.0 is live", "v4.12.0", True),
        ("It has 12 nodes", "2", False),
        ("It has 12 nodes", "12", True),
        ("THE owner is rosa  tull!", "Rosa Tull", True),  # normalised as em normalises
        ("Rosa Tullmann owns it", "Rosa Tull", False),
        ("anything", "...", False),  # a value that normalises to nothing is never stated
        ("", "12", False),
        (None, "12", False),
    ],
)
def test_states_value_matches_whole_normalised_values(text, value, stated):
    assert states_value(text, value) is stated


def test_normalize_value_keeps_dots_between_digits_only():
    assert normalize_value("Version 4.12.0.") == "version 4\u00b712\u00b70"
    assert normalize_value("The U.S.A.") == "usa"


def test_fact_check_reads_aliases_and_wrong_values_together():
    found, wrong = fact_check("Twelve nodes move from 4.11.2 to 4.12.0; Rosa Tull signs off.", UPGRADE)
    assert found == [True, True, True] and wrong == [True, False, False]


# ---------------------------------------------------------------- per probe and summary

ALL = "Rosa Tull upgrades the 12 nodes to 4.12.0, one at a time."
ONE_MISSING = "Upgrade the 12 nodes to 4.12.0, one at a time."
WRONG_TOO = "Rosa Tull upgrades the 12 nodes from 4.11.2 to 4.12.0."
WRONG_ONLY = "Rosa Tull upgrades the twelve nodes to 4.1."


@pytest.mark.parametrize(
    "output, em, f1, missing, wrong",
    [
        (ALL, 1.0, 1.0, "", ""),
        (ONE_MISSING, 0.0, 2 / 3, "owner", ""),
        (WRONG_TOO, 0.0, 1.0, "", "ver"),  # the right value is there too: still a wrong answer
        (WRONG_ONLY, 0.0, 2 / 3, "ver", "ver"),  # "twelve" is an alias
        ("", 0.0, 0.0, "ver,nodes,owner", ""),
    ],
)
def test_a_long_probe_is_scored_on_its_whole_output(output, em, f1, missing, wrong):
    row = probe_row(long_trace(output), UPGRADE)
    assert (row["em"], row["em_lenient"]) == (em, em)
    assert row["f1"] == pytest.approx(f1) and row["f1_lenient"] == pytest.approx(f1)
    assert row["facts_total"] == 3 and row["facts_missing"] == missing and row["facts_wrong"] == wrong
    assert row["facts_found"] == 3 - len([m for m in missing.split(",") if m])
    assert row["incomplete"] == ("missing_facts" if missing else None)  # never a format reason
    assert row["echo"] is False


def test_score_answer_long():
    assert score_answer(ALL, UPGRADE) == (1.0, 1.0)
    assert score_answer(WRONG_TOO, UPGRADE) == (0.0, 1.0)


def test_a_long_answer_the_token_cap_cut_is_incomplete_for_the_cap():
    cut = dataclasses.replace(long_trace(ONE_MISSING), stop_reason="token_cap")
    assert probe_row(cut, UPGRADE)["incomplete"] == "token_cap"
    assert probe_row(dataclasses.replace(long_trace(ALL), stop_reason="token_cap"), UPGRADE)["incomplete"] is None
    other = Probe(**{**UPGRADE.__dict__, "id": "up2"})
    row = _summary([(cut, UPGRADE), (long_trace(ONE_MISSING, probe_id="up2"), other)]).iloc[0]
    assert (row["incomplete_token_cap"], row["incomplete_rate"], row["incomplete_facts_rate"]) == (0.5, 1.0, 1.0)


def test_a_short_probe_gets_no_fact_values():
    row = probe_row(long_trace("So the answer is Rosa Tull.", probe_id="s1"), SHORT)
    assert not any(k.startswith("facts_") for k in row)


def _summary(pairs):
    return summarize(pd.DataFrame([probe_row(t, p) for t, p in pairs]))


def test_fact_columns_over_the_long_probes():
    probes = [UPGRADE] + [Probe(**{**UPGRADE.__dict__, "id": f"up{i}"}) for i in range(1, 4)]
    outputs = [ALL, ONE_MISSING, WRONG_TOO, WRONG_ONLY]
    pairs = [(long_trace(o, probe_id=p.id), p) for o, p in zip(outputs, probes, strict=True)]
    pairs.append((long_trace("So the answer is Rosa Tull.", probe_id="s1"), SHORT))
    row = _summary(pairs).iloc[0]
    assert row["fact_recall"] == pytest.approx((1 + 2 / 3 + 1 + 2 / 3) / 4)  # the short probe is left out
    assert row["incomplete_facts_rate"] == pytest.approx(2 / 4)
    assert row["wrong_version_rate"] == pytest.approx(2 / 4)
    assert row["incomplete_or_wrong_rate"] == pytest.approx(3 / 4)
    # incomplete_rate: 2 long answers missing a fact, of 5 probes; the short one is complete
    assert row["incomplete_rate"] == pytest.approx(2 / 5) and row["incomplete_no_answer"] == 0.0
    assert row["em"] == pytest.approx(2 / 5) and row["n"] == 5


def test_the_gate_of_long_answers_none_complete_is_judged_by_their_share_of_facts():
    from flarebench.strategies.records import Step

    # No answer is right (em 0): ONE_MISSING and WRONG_ONLY state 2 of 3 facts, the last one 1.
    # The gate was least sure (0.2) of the answer stating least: it tells the answers apart.
    outputs = [(ONE_MISSING, 0.6), (WRONG_ONLY, 0.7), ("Rosa Tull does it.", 0.2)]
    pairs = []
    for i, (output, score) in enumerate(outputs):
        trace = long_trace(output, probe_id=f"up{i}", strategy="flare_direct")
        trace.steps = [
            Step(output, gate={"trigger": "min_prob", "score": score, "threshold": 0.5, "fired": score <= 0.5})
        ]
        pairs.append((trace, Probe(**{**UPGRADE.__dict__, "id": f"up{i}"})))
    row = _summary(pairs).iloc[0]
    assert row["em"] == 0.0 and row["gate_auroc"] == 1.0
    alike = _summary(pairs[:2])  # both state 2 of 3: nothing to tell apart
    assert (
        "gate_auroc of flare_direct: undefined: its answers with drafts all state the same share of facts"
        in (alike.attrs["notes"])
    )


def test_an_errored_long_probe_recalls_nothing_and_is_not_incomplete():
    pairs = [
        (long_trace(ALL), UPGRADE),
        (long_trace("", probe_id="up2", error="boom"), Probe(**{**UPGRADE.__dict__, "id": "up2"})),
    ]
    frame = _summary(pairs)
    row = frame.iloc[0]
    assert row["fact_recall"] == pytest.approx(0.5) and row["incomplete_facts_rate"] == 0.0
    assert row["wrong_version_rate"] == 0.0 and row["incomplete_rate"] == 0.0 and row["errors"] == 1
    # Every long probe raised: no output to judge, so the rates are empty (as incomplete_rate is), not
    # 0, the best value a strategy that answered nothing would otherwise show.
    raised = _summary(pairs[1:])
    (only,) = raised.to_dict("records")
    assert only["fact_recall"] == 0.0 and pd.isna(only["incomplete_rate"])
    from flarebench.bench.findings import findings  # and the findings (report.html) read it so, not crash

    line = "Long answers: every probe of every strategy raised an error, so no answer was judged (see errors)."
    assert line in findings(raised, {})
    assert all(
        pd.isna(only.get(c)) for c in ("incomplete_facts_rate", "wrong_version_rate", "incomplete_or_wrong_rate")
    )


def test_the_notes_say_which_incomplete_rate_a_run_uses():
    long_run = _summary(
        [(long_trace(ONE_MISSING), UPGRADE), (long_trace("So the answer is Rosa Tull.", probe_id="s1"), SHORT)]
    )
    assert any(n.startswith("incomplete_rate: 1 of 2 probes are long answers") for n in long_run.attrs["notes"])
    short_run = _summary([(long_trace("So the answer is Rosa Tull.", probe_id="s1"), SHORT)])
    assert not any("long answers" in n for n in short_run.attrs["notes"])


def test_a_run_without_long_probes_has_no_fact_columns():
    frame = _summary([(long_trace("So the answer is Rosa Tull.", probe_id="s1"), SHORT)])
    assert list(frame.columns) == summary_columns()
    baseline = with_ratios(frame.iloc[0].to_dict(), None)
    assert not set(FACT_COLUMNS) & set(baseline)


def test_fact_columns_are_optional_documented_and_kept_in_baselines():
    assert [c for c in optional_columns() if c in FACT_COLUMNS] == FACT_COLUMNS
    assert not set(FACT_COLUMNS) & set(summary_columns())
    assert all(column_docs()[c].startswith("Long probes only") for c in FACT_COLUMNS)
    frame = _summary([(long_trace(ALL), UPGRADE)])
    assert [c for c in frame.columns if c in FACT_COLUMNS] == FACT_COLUMNS
    baseline = with_ratios(frame.iloc[0].to_dict(), None)
    assert baseline["fact_recall"] == 1.0 and baseline["wrong_version_rate"] == 0.0


# ---------------------------------------------------------------- loading


def test_a_long_probe_loads_with_its_facts_and_derived_gold(tmp_path):
    docs = [{"id": d, "title": d, "text": "x"} for d in ("d1", "d2", "d3")]
    probes = [
        {
            "id": "l",
            "question": "Summarise the upgrade.",
            "answer_type": "long",
            "required_facts": [
                {"id": "a", "fact": "It runs 4.12.0.", "answers": ["4.12.0"], "doc_ids": ["d2", "d1"]},
                {"id": "b", "fact": "It has 12 nodes.", "answers": ["12"], "doc_ids": ["d1"], "wrong_values": ["3"]},
            ],
        },
    ]
    (tmp_path / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    (tmp_path / "probes.jsonl").write_text("\n".join(json.dumps(p) for p in probes) + "\n")
    ps = load_probe_set(str(tmp_path))
    (long,) = ps.probes
    assert ps.answer_form == "long"
    assert long.answers == [] and long.answer_type == "long" and long.gold_doc_ids == ["d2", "d1"]
    assert long.required_facts == [
        RequiredFact("a", "It runs 4.12.0.", ["4.12.0"], ["d2", "d1"], []),
        RequiredFact("b", "It has 12 nodes.", ["12"], ["d1"], ["3"]),
    ]


# ---------------------------------------------------------------- a run, rescored


def test_a_run_with_long_probes_is_rescored_from_its_traces(tmp_path, monkeypatch):
    from tests.scripted import ScriptedLM, run_cli

    lm = ScriptedLM([ALL])  # every answer, whatever the question
    monkeypatch.setattr("flarebench.bench.recipe.make_lm", lambda *args, **kwargs: lm)
    folder = tmp_path / "set"
    folder.mkdir()
    docs = [{"id": "d1", "title": "Release", "text": "Production runs 4.12.0."}]
    docs.append({"id": "d2", "title": "Cluster", "text": "Production has 12 nodes; Rosa Tull owns upgrades."})
    docs += [{"id": f"x{i}", "title": f"Other {i}", "text": "Staging runs 4.11.2."} for i in range(3)]
    facts = [{**f.__dict__} for f in UPGRADE.required_facts]
    approver = {"id": "appr", "fact": "Ada Moss approves upgrades.", "answers": ["Ada Moss"], "doc_ids": ["d2"]}
    probes = [
        {"id": "up", "question": UPGRADE.question, "answer_type": "long", "required_facts": facts},
        {"id": "l2", "question": "Who approves upgrades?", "answer_type": "long", "required_facts": [approver]},
    ]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    (folder / "probes.jsonl").write_text("\n".join(json.dumps(p) for p in probes) + "\n")
    run_dir = tmp_path / "run"
    code, out, err = run_cli("run", "--probes", str(folder), "--strategy", "no_retrieval", "--report-dir", str(run_dir))
    assert code == 0, out + err
    # the terminal table of a long run: what the answers state, when retrieval fired, the streaming waits
    header = next(line for line in out.splitlines() if line.startswith("| strategy"))
    for column in ("fact_recall", "incomplete_rate", "wrong_version_rate", "triggered_share", "ttfs_p95_s"):
        assert f" {column} " in header, header
    assert " em " not in header
    csv_run, md_run = (run_dir / "summary.csv").read_text(), (run_dir / "summary.md").read_text()
    # a set of long probes asks for long answers: the long-form prompt, 256 tokens
    answering = [r for r in lm.requests if r.purpose != "warm_up"]  # the prefix, evaluated before timing
    assert {(r.prompt.static, r.max_tokens) for r in answering} == {(LONG_CLOSED_BOOK.static, 256)}
    run_json = json.loads((run_dir / "run.json").read_text())
    assert run_json["config"]["strategies"]["no_retrieval"]["answer_form"] == "long"
    s = pd.read_csv(run_dir / "summary.csv").iloc[0]
    assert s["fact_recall"] == 0.5 and s["incomplete_facts_rate"] == 0.5 and s["incomplete_or_wrong_rate"] == 0.5
    # long answers never state "So the answer is": none is incomplete for want of it
    assert s["incomplete_rate"] == pytest.approx(0.5) and s["incomplete_no_answer"] == 0.0
    assert "- `fact_recall`: Long probes only" in md_run and "incomplete_rate: 2 of 2 probes are long" in md_run
    code, out, err = run_cli("score", str(run_dir))
    assert code == 0, out + err
    assert (run_dir / "summary.csv").read_text() == csv_run and (run_dir / "summary.md").read_text() == md_run


@pytest.mark.parametrize(
    "output, found",
    [
        # asked for in a search call, never stated: not a fact of the answer
        ("[Search(upgrade to 4.12.0 with Rosa Tull)] Upgrade the 12 nodes one at a time.", "nodes"),
        ("[Search(release 4.12.0 owner Rosa Tull", ""),  # a call cut short runs to the end of its line
        # the question echoed (its words only, or the whole of it behind a label) states nothing
        ("How do I upgrade the production cluster of 12 nodes? Rosa Tull owns it.", "owner"),
        ("Question: how do I upgrade the production cluster of 12 nodes? Give the steps.", ""),
        # the whole question with a value after it is no echo: the sentence counts, the question's "12" too
        ("The answer to how do I upgrade the production cluster of 12 nodes is to ask Rosa Tull.", "nodes,owner"),
        # an alias counts as the value
        ("Move the twelve nodes to v4.12.0. Rosa Tull signs off.", "ver,nodes,owner"),
    ],
)
def test_a_long_answer_is_scored_on_what_it_states(output, found):
    probe = Probe(**{**UPGRADE.__dict__, "question": "How do I upgrade the production cluster of 12 nodes?"})
    row = probe_row(long_trace(output), probe)
    stated = [f.id for f in probe.required_facts if f.id not in row["facts_missing"].split(",")]
    assert ",".join(stated) == found


def test_the_findings_say_plainly_when_the_model_cannot_write_the_long_answers():
    from flarebench.bench.findings import _long_answers

    summary = pd.DataFrame(
        {
            "strategy": ["single_time", "flare_direct"],
            "fact_recall": [0.03, 0.05],
            "incomplete_or_wrong_rate": [1.0, 0.9],
        }
    )
    line = _long_answers(summary)
    assert line.startswith(
        "Long answers: the best strategy, flare_direct, states 0.050 of the required facts; at best (flare_direct), "
        "0.900 of answers miss"
    )
    assert "this model does not write these answers" in line
    summary["fact_recall"] = [0.4, 0.7]
    assert "does not write" not in _long_answers(summary)
    # A tie names no one strategy as the best; a rate lowered by errors (counted in no rate) is not the best one.
    tied = pd.DataFrame(
        {
            "strategy": ["no_retrieval", "single_time", "flaky"],
            "fact_recall": [0.3, 0.3, 0.3],
            "incomplete_or_wrong_rate": [0.8, 0.8, 0.7],
            "errors": [0, 0, 2],
            "n": [10, 10, 10],
        }
    )
    assert _long_answers(tied).startswith(
        "Long answers: every strategy states 0.300 of the required facts; at best (no_retrieval), 0.800 of answers"
    )
    tied.loc[2, "fact_recall"] = 0.1
    assert _long_answers(tied).startswith("Long answers: the best strategies, no_retrieval, single_time, state 0.300")
    assert _long_answers(summary.drop(columns=["fact_recall", "incomplete_or_wrong_rate"])) is None


def test_a_long_answer_the_strategy_abstained_on_counts_as_abstain():
    # flare_direct:abstain=true ends an answer it is unsure of with its abstention, long ones too.
    abstained = long_trace(ONE_MISSING)
    abstained.stop_reason = "abstain"
    row = _summary([(abstained, UPGRADE)]).iloc[0]
    assert row["incomplete_abstain"] == 1.0 and row["incomplete_rate"] == 1.0 and row["incomplete_facts_rate"] == 1.0
