"""Both skeleton strategies on 3 probes with the real embedded LM and the real BM25 retriever."""

import pytest

from flarebench.bench.session import BenchSession
from flarebench.strategies import parse_spec
from flarebench.strategies.records import FIRST_HOP

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    session = BenchSession(
        strategy=["no_retrieval", "single_time"],
        limit=3,
        progress=False,
        report_dir=str(tmp_path_factory.mktemp("run")),
    )
    traces = {spec: session.run(spec) for spec in session.specs}
    yield session, traces
    session.close()


def test_retrievals_per_strategy(run):
    _, traces = run
    for t in traces["single_time"]:
        assert [r.reason for r in t.retrievals] == [FIRST_HOP]
        assert t.retrievals[0].query == t.question and len(t.retrievals[0].doc_ids) == 3
    assert all(t.retrievals == [] for t in traces["no_retrieval"])
    assert all(len(t.lm_calls) == 1 and not t.error for ts in traces.values() for t in ts)


def test_token_counts_add_up_to_what_the_lm_reported(run):
    session, traces = run
    lm = session.lm_backend
    summary = session.summary().set_index("strategy")
    for spec, ts in traces.items():
        for t in ts:
            for call in t.lm_calls:
                assert call.completion_tokens >= len(call.tokens) > 0
                assert call.evaluated_tokens <= call.prompt_tokens
        n = len(ts)
        assert summary.loc[spec, "prompt_tokens_per_q"] == pytest.approx(
            sum(c.prompt_tokens for t in ts for c in t.lm_calls) / n
        )
        assert summary.loc[spec, "completion_tokens_per_q"] == pytest.approx(
            sum(c.completion_tokens for t in ts for c in t.lm_calls) / n
        )
    # prompt_tokens is the real token count of the prompt the model saw
    strategy = parse_spec("single_time")
    probe = session.selected[0]
    docs = [session.probe_set.docs_by_id[i] for i in traces["single_time"][0].retrievals[0].doc_ids]
    from flarebench.strategies.prompts import OPEN_BOOK

    prompt = OPEN_BOOK.build(probe.question, docs)
    # the whole prompt tokenized as one text, as a server tokenizes it (not its two parts apart)
    expected = len(lm._tokenize(prompt.text, bos=True))
    assert traces["single_time"][0].lm_calls[0].prompt_tokens == expected
    assert strategy.k == 3


def test_static_prefix_evaluated_once_per_run(run):
    _, traces = run
    calls = [t.lm_calls[0] for t in traces["single_time"]]
    # Only the first call of the run pays for the static prefix; later ones evaluate their own part.
    assert calls[0].evaluated_tokens == calls[0].prompt_tokens
    static = calls[1].prompt_tokens - calls[1].evaluated_tokens
    assert static > 100
    assert all(c.prompt_tokens - c.evaluated_tokens == static for c in calls[1:])


def test_same_probe_twice_gives_the_same_answer(run):
    session, traces = run
    probe = session.selected[0]
    again = parse_spec("single_time").run(probe.question, session.lm_backend, session.retriever_backend)
    first = traces["single_time"][0]
    assert again.output == first.output
    assert [c.tokens for c in again.lm_calls] == [c.tokens for c in first.lm_calls]


def test_summary_files_are_written(run):
    session, _ = run
    for name in ("summary.csv", "summary.md", "run.json", "traces.jsonl"):
        assert (session.run_dir / name).is_file()
    csv = (session.run_dir / "summary.csv").read_text().splitlines()
    from flarebench.bench.metrics import summary_columns

    assert csv[0].split(",") == summary_columns() and csv[0].startswith("strategy,n,errors,bound,em,f1,")
    assert [line.split(",")[0] for line in csv[1:]] == ["no_retrieval", "single_time"]
