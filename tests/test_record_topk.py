"""``--record-topk K`` with a scripted LM: the wrapper widens draft requests only, answers and gate
records stay those of a run without it, the trace rounds what it stores (and only the trace), the
option is part of the configuration only when given, and bad values are one line before any model."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from flarebench.bench.config import fingerprint, run_config
from flarebench.bench.topk import MAX_K, RecordTopK, widened
from flarebench.strategies.lm import GenerationRequest, Prompt
from flarebench.strategies.records import PER_TOKEN_DIGITS, LMCall, Step, Trace
from flarebench.strategies.registry import names, parse_spec
from tests.scripted import ScriptedLM, ScriptedRetriever, run_cli

names()

QUESTION = "Where did Joe Biden study?"
# Four alternatives per token, most likely first; the margins and entropies are not round numbers.
_TOP = [
    [[" A", 0.61], [" a", 0.2], [" b", 0.1], [" c", 0.05]],
    [[" b", 0.437], [" c", 0.31], [" d", 0.2], [" e", 0.01]],
    [[".", 0.97], ["!", 0.01], ["?", 0.01], [",", 0.005]],
]
DRAFT = ([" A", " b", "."], [0.61, 0.437, 0.97], "sentence", {"top": _TOP})
FINAL = (
    [" So", " the", " answer", " is", " Penn", "."],
    [0.95] * 6,
    "stop",
    {"top": [[["x", 0.95], ["y", 0.01], ["z", 0.01]]] * 6},
)


def _run(spec: str, lm) -> Trace:
    return parse_spec(spec).run(QUESTION, lm, ScriptedRetriever([["d1", "d2", "d3"]]))


def _request(purpose: str, **kw) -> GenerationRequest:
    return GenerationRequest(Prompt("S ", "d"), 8, ("\n",), purpose=purpose, **kw)


def test_only_draft_requests_are_widened():
    assert widened(_request("draft"), 5) == _request("draft", logprobs=True, top_logprobs=5, entropy=True)
    # a trigger that asked for more alternatives than K keeps them
    assert widened(_request("draft", top_logprobs=8), 5).top_logprobs == 8
    for purpose in ("regenerate", "generate", "query", "self_check"):
        request = _request(purpose, logprobs=True, top_logprobs=2)
        assert widened(request, 5) is request


@pytest.mark.parametrize(
    "given", ["flare_direct", "flare_direct:trigger=margin", "flare_direct:trigger=entropy,threshold=1"]
)
def test_the_wrapper_asks_draft_calls_for_k_alternatives_and_entropy_and_leaves_the_rest(given):
    lm = ScriptedLM([DRAFT, DRAFT, FINAL])
    trace = _run(given, RecordTopK(lm, 3))
    asked = [(r.purpose, r.logprobs, r.top_logprobs, r.entropy) for r in lm.requests]
    plain_lm = ScriptedLM([DRAFT, DRAFT, FINAL])
    _run(given, plain_lm)
    unwidened = [(r.purpose, r.logprobs, r.top_logprobs, r.entropy) for r in plain_lm.requests]
    assert [a[0] for a in asked] == [a[0] for a in unwidened] == ["draft", "regenerate", "draft"]
    for got, was in zip(asked, unwidened):
        if got[0] == "draft":
            assert got == ("draft", True, max(3, was[2]), True)
        else:
            assert got == was  # every other request exactly as the strategy made it
    for call in trace.lm_calls:
        if call.purpose == "draft":
            assert [len(t) for t in call.top_logprobs] == [3] * len(call.tokens)
            assert len(call.entropies) == len(call.tokens)


@pytest.mark.parametrize(
    "given",
    [
        "flare_direct",
        "flare_direct:trigger=mean_logprob,threshold=-0.5",
        "flare_direct:trigger=margin,threshold=0.127",
        "flare_direct:trigger=entropy,threshold=1.2",
        "adaptive:trigger=margin,threshold=0.41",
    ],
)
def test_answers_and_gate_records_are_those_of_a_run_without_it(given):
    script = [DRAFT, DRAFT, FINAL]
    plain = _run(given, ScriptedLM(script))
    recorded = _run(given, RecordTopK(ScriptedLM(script), 4))
    assert (recorded.output, recorded.answer, recorded.stop_reason) == (plain.output, plain.answer, plain.stop_reason)
    assert [s.gate for s in recorded.steps] == [s.gate for s in plain.steps]
    assert [(r.query, r.detail) for r in recorded.retrievals] == [(r.query, r.detail) for r in plain.retrievals]


def test_margin_reads_the_top_two_of_k_alternatives():
    # The smallest gap is the second token's: 0.437 - 0.31, whether 2 or 4 alternatives come back.
    spec = "flare_direct:trigger=margin,threshold=0.127"
    for lm in (ScriptedLM([DRAFT, DRAFT, FINAL]), RecordTopK(ScriptedLM([DRAFT, DRAFT, FINAL]), 4)):
        gate = _run(spec, lm).steps[0].gate
        assert gate["score"] == pytest.approx(0.437 - 0.31) and gate["fired"]


def test_the_wrapper_delegates_what_identifies_the_lm():
    inner = ScriptedLM(["x"], supports_logprobs=False)
    inner.thread_safe, inner.supports_logit_bias = True, True
    closed = []
    inner.close = lambda: closed.append(True)
    lm = RecordTopK(inner, 2)
    assert (lm.name, lm.supports_logprobs, lm.supports_top_logprobs, lm.supports_logit_bias, lm.thread_safe) == (
        "scripted",
        False,
        True,
        True,
        True,
    )
    assert lm.describe() == inner.describe()
    lm.close()
    assert closed == [True]
    for k in (0, MAX_K + 1, True):
        with pytest.raises(ValueError, match="--record-topk must be an integer from 1 to 20"):
            RecordTopK(inner, k)


# -- the trace -----------------------------------------------------------------------------------------


def test_the_trace_rounds_alternatives_and_entropies_and_round_trips():
    lp = [math.log(0.437), math.log(0.31)]
    call = LMCall(
        "draft", 5, 5, 1, " b", "stop", 0.1, [" b"], [lp[0]], top_logprobs=[[[" b", lp[0]], [" c", lp[1]]]],
        entropies=[1.234567891],
    )  # fmt: skip
    trace = Trace("q", " b", None, "eos", steps=[Step(" b", lm_calls=[call])])
    d = json.loads(json.dumps(trace.to_dict()))
    stored = d["steps"][0]["lm_calls"][0]
    assert PER_TOKEN_DIGITS == 4
    assert stored["top_logprobs"] == [[[" b", round(lp[0], 4)], [" c", round(lp[1], 4)]]]
    assert stored["entropies"] == [1.2346]
    assert stored["logprobs"] == [lp[0]]  # the chosen tokens' own logprobs are kept as computed
    again = Trace.from_dict(d)
    assert again.lm_calls[0].top_logprobs == [[[" b", round(lp[0], 4)], [" c", round(lp[1], 4)]]]
    assert Trace.from_dict(json.loads(json.dumps(again.to_dict()))) == again  # rounded once, stable
    # Serialising rounds a copy: the call the trigger judged keeps its values.
    assert call.top_logprobs[0][0][1] == lp[0] and call.entropies == [1.234567891]


def test_a_live_trigger_judges_unrounded_values():
    # p 0.43712345 against 0.31: a gap the rounding of 4 decimals would move
    top = [[[" A", 0.9], [" a", 0.05]], [[" b", 0.43712345], [" c", 0.31]], [[".", 0.97], ["!", 0.01]]]
    item = ([" A", " b", "."], [0.9, 0.43712345, 0.97], "sentence", {"top": top})
    gap = 0.43712345 - 0.31
    trace = _run(f"flare_direct:trigger=margin,threshold={gap!r}", RecordTopK(ScriptedLM([item, item, FINAL]), 3))
    assert trace.steps[0].gate["score"] == pytest.approx(gap, abs=1e-12) and trace.steps[0].gate["fired"]
    stored = Trace.from_dict(json.loads(json.dumps(trace.to_dict()))).lm_calls[0].top_logprobs[1]
    assert stored == [[" b", round(math.log(0.43712345), 4)], [" c", round(math.log(0.31), 4)]]


# -- the configuration ---------------------------------------------------------------------------------


@dataclasses.dataclass
class _Named:
    payload: dict

    def describe(self):
        return self.payload


def test_record_topk_is_in_the_configuration_and_fingerprint_only_when_given(phantom):
    strategies = {"flare_direct": parse_spec("flare_direct")}
    lm, retriever = _Named({"name": "scripted"}), _Named({"name": "bm25s"})
    without = run_config(phantom, "phantomwiki", lm, retriever, strategies)
    assert "record_topk" not in without
    assert run_config(phantom, "phantomwiki", lm, retriever, strategies, record_topk=None) == without
    with_k = run_config(phantom, "phantomwiki", lm, retriever, strategies, record_topk=5)
    assert with_k == {**without, "record_topk": 5}
    fp_without, fp_with = fingerprint(without, strategies, 3), fingerprint(with_k, strategies, 3)
    assert "record_topk" not in fp_without and fp_with == {**fp_without, "record_topk": 5}
    # The fingerprint of a run without it has exactly the parts it had before the option existed.
    assert list(fp_without) == [
        "probes",
        "lm",
        "retriever",
        "strategies",
        "flarebench",
        "requests_sha256",
        "prompts_sha256",
    ]


@pytest.fixture
def no_model(monkeypatch):
    def make_lm(*args, **kwargs):
        raise AssertionError("the model was loaded before the options were checked")

    monkeypatch.setattr("flarebench.bench.recipe.make_lm", make_lm)


@pytest.mark.parametrize("k", ["0", "21", "-3"])
def test_a_k_out_of_range_is_one_line_before_any_model(tmp_path, no_model, k):
    code, out, err = run_cli(
        "run", "--strategy", "flare_direct", "--limit", "1", "--record-topk", k, "--report-dir", str(tmp_path / "r")
    )
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err == (
        f"flarebench: --record-topk must be an integer from 1 to 20 (alternatives per drafted token), got {k}\n"
    )
    assert not (tmp_path / "r").exists()


def test_a_run_with_no_drafting_strategy_is_refused_before_any_model(tmp_path, no_model):
    # It widens draft calls only: single_time and ircot would record nothing, silently.
    code, out, err = run_cli(
        "run", *("--strategy", "single_time", "--strategy", "ircot"), "--record-topk", "5",
        "--report-dir", str(tmp_path / "r"),
    )  # fmt: skip
    assert code == 2 and err == (
        "flarebench: --record-topk records the drafts of a strategy with a trigger (flare_direct, adaptive); "
        "single_time, ircot draft nothing\n"
    )
    assert not (tmp_path / "r").exists()


def test_a_backend_without_top_logprobs_is_refused_in_one_line(tmp_path, scripted_lm):
    scripted_lm.supports_top_logprobs = False
    code, out, err = run_cli(
        "run", "--strategy", "flare_direct", "--limit", "1", "--record-topk", "5", "--report-dir", str(tmp_path / "r")
    )
    assert code == 2 and err.count("\n") == 1, err
    assert err == "flarebench: --record-topk needs per-token top logprobs, which scripted does not return\n"


@pytest.mark.slow
def test_a_folder_is_resumed_only_with_the_same_k(tmp_path, scripted_lm):
    run_dir = str(tmp_path / "run")
    base = ("run", "--strategy", "flare_direct", "--limit", "2", "--report-dir", run_dir)
    code, out, err = run_cli(*base, "--record-topk", "3")
    assert code == 0, out + err
    config = json.loads((tmp_path / "run" / "run.json").read_text())["config"]
    assert config["record_topk"] == 3
    assert run_cli(*base, "--record-topk", "3")[0] == 0  # the same K: resumed
    code, out, err = run_cli(*base, "--record-topk", "5")
    assert code == 2 and "holds a run of a different configuration: record_topk (was 3, now 5)" in err
    code, out, err = run_cli(*base)
    assert code == 2 and "record_topk (was 3, now '<absent>')" in err


def test_in_process_alternatives_are_the_k_most_likely_ties_to_the_lowest_token_id():
    """The in-process backend's top-k (no model loaded: its distribution code on chosen logits)."""
    import numpy as np

    from flarebench.strategies.llamacpp import LlamaCppLM

    class Logits(LlamaCppLM):
        def __init__(self):  # no model: only _distribution and the token texts
            self._piece_cache = {}

        def _piece(self, tok: int) -> bytes:
            return f"t{tok}".encode()

    lm = Logits()
    rng = np.random.default_rng(0)
    logits = (rng.standard_normal(1000) * 3).astype(np.float32)
    best = float(logits.max())
    logits[[7, 5]] = best + 1.0  # a tie at the top: the argmax is 5
    logits[[40, 30, 20]] = best  # a tie across the k-th place
    tok = int(np.argmax(logits))
    shifted = logits.astype(np.float64) - float(logits[tok])
    log_z = math.log(float(np.exp(shifted).sum()))
    order = sorted(range(len(logits)), key=lambda i: (-shifted[i], i))
    for k in (1, 2, 3, 4, 5, 20):
        top, entropy = lm._distribution(logits, tok, k)
        assert [t for t, _ in top] == [f"t{i}" for i in order[:k]]
        assert [lp for _, lp in top] == [float(shifted[i]) - log_z for i in order[:k]]
        assert top[0][0] == f"t{tok}"
        p = np.exp(shifted - log_z)
        assert entropy == pytest.approx(float(-(p * np.log(p)).sum()), rel=1e-9)
