"""``--record-topk`` with the real embedded model: a flare_direct run that records the top 5
alternatives of every drafted token gives the answers, gate records and retrievals of a run without
it, and `flarebench score` then judges every probability trigger from that one run. (What it costs
per token is measured in tests/test_decode_speed.py, group `draft-topk`.)"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from flarebench.bench.runner import run_probe
from flarebench.bench.topk import RecordTopK
from flarebench.bench.trigger_scores import TRIGGERS_CSV
from flarebench.strategies import parse_spec
from tests.scripted import run_cli

pytestmark = pytest.mark.model


def test_recorded_drafts_keep_flare_directs_answers_and_carry_k_alternatives(lm, retriever, phantom):
    strategy = parse_spec("flare_direct")
    recording = RecordTopK(lm, 5)
    # One probe here and one below, end to end: each a whole flare_direct answer, drafts and all.
    for probe in phantom.probes[:1]:
        # As the runner does: each answer starts afresh, whatever an earlier test left in the model.
        plain = run_probe("flare_direct", strategy, probe, lm, retriever)
        recorded = run_probe("flare_direct", strategy, probe, recording, retriever)
        assert recorded.error is None and plain.error is None
        assert (recorded.output, recorded.answer) == (plain.output, plain.answer)
        assert [s.gate for s in recorded.steps] == [s.gate for s in plain.steps]
        assert [r.query for r in recorded.retrievals] == [r.query for r in plain.retrievals]
        drafts = [c for c in recorded.lm_calls if c.purpose == "draft"]
        assert drafts
        for call in drafts:
            assert len(call.top_logprobs) == len(call.entropies) == len(call.tokens)
            for lp, top, h in zip(call.logprobs, call.top_logprobs, call.entropies):
                assert len(top) == 5 and [a[1] for a in top] == sorted((a[1] for a in top), reverse=True)
                assert top[0][1] == pytest.approx(lp, abs=1e-6)  # greedy: the chosen token is the most likely
                assert h >= 0.0 and sum(math.exp(a[1]) for a in top) <= 1.0 + 1e-6
        assert all(c.top_logprobs is None for c in recorded.lm_calls if c.purpose != "draft")


def test_a_run_with_record_topk_answers_as_one_without_and_scores_every_trigger(tmp_path):
    def run(name, *extra):
        run_dir = tmp_path / name
        code, out, err = run_cli(
            "run", "--strategy", "flare_direct", "--limit", "1", "--report-dir", str(run_dir), *extra
        )
        assert code == 0, out + err
        return run_dir

    plain, recorded = run("plain"), run("recorded", "--record-topk", "5")

    def traces(run_dir):
        lines = (run_dir / "traces.jsonl").read_text(encoding="utf-8").splitlines()
        return {t["probe_id"]: t for t in map(json.loads, lines)}

    a, b = traces(plain), traces(recorded)
    assert list(a) == list(b) and len(a) == 1
    for pid in a:
        assert (b[pid]["output"], b[pid]["answer"]) == (a[pid]["output"], a[pid]["answer"])
        assert [s["gate"] for s in b[pid]["steps"]] == [s["gate"] for s in a[pid]["steps"]]
    assert json.loads((recorded / "run.json").read_text())["config"]["record_topk"] == 5
    code, out, err = run_cli("score", str(recorded))
    assert code == 0, out + err
    frame = pd.read_csv(recorded / TRIGGERS_CSV)
    assert list(dict.fromkeys(frame["trigger"])) == ["min_prob", "mean_logprob", "entropy", "margin"]
    assert (frame["drafts"] > 0).all() and frame["retrieval_rate"].between(0, 1).all()
