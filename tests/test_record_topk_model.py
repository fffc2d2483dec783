"""``--record-topk`` with the real embedded model: a flare_direct run that records the top 5
alternatives of every drafted token gives the answers, gate records and retrievals of a run without
it, and `flarebench score` then judges every probability trigger from that one run. (What it costs
per token is measured in tests/test_decode_speed.py, group `draft-topk`.)"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from flarebench.bench.runner import TraceLog
from flarebench.bench.trigger_scores import TRIGGERS_CSV
from flarebench.strategies.records import PER_TOKEN_DIGITS
from tests.scripted import run_cli

pytestmark = pytest.mark.model


def test_a_run_with_record_topk_answers_as_one_without_and_scores_every_trigger(tmp_path):
    def run(name, *extra):
        run_dir = tmp_path / name
        code, out, err = run_cli(
            "run", "--strategy", "flare_direct", "--limit", "1", "--report-dir", str(run_dir), *extra
        )
        assert code == 0, out + err
        return run_dir

    plain, recorded = run("plain"), run("recorded", "--record-topk", "5")

    [without], [with_k] = (TraceLog(run_dir / "traces.jsonl", writer=False).read() for run_dir in (plain, recorded))
    assert without.probe_id == with_k.probe_id and without.error is None and with_k.error is None
    assert (with_k.output, with_k.answer) == (without.output, without.answer)
    assert [s.gate for s in with_k.steps] == [s.gate for s in without.steps]
    assert [r.query for r in with_k.retrievals] == [r.query for r in without.retrievals]
    drafts = [c for c in with_k.lm_calls if c.purpose == "draft"]
    assert drafts
    # The trace rounds the alternatives' logprobs (not the chosen tokens'): the bounds are those of the
    # values as computed (1e-6) widened by that rounding only.
    rounding = 0.5 * 10.0**-PER_TOKEN_DIGITS
    for call in drafts:
        assert len(call.top_logprobs) == len(call.entropies) == len(call.tokens)
        for lp, top, h in zip(call.logprobs, call.top_logprobs, call.entropies):
            assert len(top) == 5 and [a[1] for a in top] == sorted((a[1] for a in top), reverse=True)
            assert top[0][1] == pytest.approx(lp, abs=1e-6 + rounding)  # greedy: the chosen token is the most likely
            assert h >= 0.0 and sum(math.exp(a[1]) for a in top) <= (1.0 + 1e-6) * math.exp(rounding)
    assert all(c.top_logprobs is None for c in with_k.lm_calls if c.purpose != "draft")
    assert json.loads((recorded / "run.json").read_text())["config"]["record_topk"] == 5
    code, out, err = run_cli("score", str(recorded))
    assert code == 0, out + err
    frame = pd.read_csv(recorded / TRIGGERS_CSV)
    assert list(dict.fromkeys(frame["trigger"])) == ["min_prob", "mean_logprob", "entropy", "margin"]
    assert (frame["drafts"] > 0).all() and frame["retrieval_rate"].between(0, 1).all()
