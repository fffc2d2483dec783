"""--cache: LM calls and retrievals served from disk, keyed by everything that determines them; a
hit is marked, and a run served from the cache reports warm latency apart from cold."""

from __future__ import annotations

import contextlib
import json
import os
import re

import pandas as pd
import pytest

import flarebench.bench.cache
import flarebench.bench.config
import flarebench.bench.session
from flarebench.bench.cache import CachedLM, CachedRetriever, DiskCache
from flarebench.bench.paths import StorageFailed
from flarebench.strategies.base import retrieve
from flarebench.strategies.bm25 import BM25Retriever
from flarebench.strategies.lm import WARM_UP, GenerationRequest, Prompt
from flarebench.strategies.records import Passage
from tests.scripted import ScriptedLM, run_cli

PROMPT = Prompt("Static part. ", "Question: who? Answer:")


class Described(ScriptedLM):
    """A scripted LM whose describe() names a model, so two of them can differ."""

    def __init__(self, script, model="m1"):
        super().__init__(script)
        self.model = model

    def describe(self) -> dict:
        return {"name": "scripted", "model": self.model}


def test_a_repeated_call_is_served_from_the_cache(tmp_path):
    inner = Described([([" Ann", "."], [0.4, 0.9])])
    lm = CachedLM(inner, DiskCache(tmp_path))
    cold = lm.generate(PROMPT, 16, stop=("\n",), logprobs=True, purpose="draft")
    warm = lm.generate(PROMPT, 16, stop=("\n",), logprobs=True, purpose="regenerate")
    assert len(inner.requests) == 1  # the second call never reached the model
    assert not cold.cached and warm.cached
    assert (warm.text, warm.tokens, warm.logprobs) == (cold.text, cold.tokens, cold.logprobs)
    assert warm.purpose == "regenerate" and warm.evaluated_tokens == 0
    assert warm.prompt_tokens == cold.prompt_tokens and warm.completion_tokens == cold.completion_tokens


def test_a_damaged_entry_is_a_miss_made_again_and_replaced(tmp_path):
    # An entry that no longer reads back (edited by hand, another program's) was every probe's error.
    import sqlite3

    inner = Described([([" Ann", "."], [0.4, 0.9])])
    cache = DiskCache(tmp_path)
    CachedLM(inner, cache).generate(PROMPT, 16)
    with sqlite3.connect(cache.path) as db:
        db.execute("UPDATE entries SET value = 'not json'")
    again = CachedLM(inner, DiskCache(tmp_path))
    assert not again.generate(PROMPT, 16).cached and len(inner.requests) == 2
    assert again.generate(PROMPT, 16).cached  # replaced by the call made again
    with sqlite3.connect(cache.path) as db:
        db.execute("""UPDATE entries SET value = '{"unknown": 1}'""")
    assert not CachedLM(inner, DiskCache(tmp_path)).generate(PROMPT, 16).cached


def test_warm_up_calls_always_reach_the_model(tmp_path):
    # A warm-up readies the model for the probes (a static prefix's state): served from the cache,
    # the first call the cache misses would evaluate the prefix inside a probe's latency.
    class Chatting(Described):
        def _chat(self, request):
            return self._complete(GenerationRequest(PROMPT, request.max_tokens, purpose=request.purpose))

    inner = Chatting([" ok"])
    lm = CachedLM(inner, DiskCache(tmp_path))
    calls = [lm.generate(PROMPT, 1, purpose=WARM_UP) for _ in range(2)]
    calls += [lm.chat([{"role": "system", "content": "Search."}], [], 1, purpose=WARM_UP) for _ in range(2)]
    assert len(inner.requests) == 4 and not any(call.cached for call in calls)
    assert lm.generate(PROMPT, 1).cached is False and lm.generate(PROMPT, 1).cached  # other calls are cached


def test_a_hit_has_no_prefill_of_its_own(tmp_path):
    # The streaming scorer starts a call's tokens after its prefill: a hit's lookup has none.
    class Prefilled(Described):
        def _complete(self, request):
            call = super()._complete(request)
            call.prefill_seconds = 0.25
            return call

    lm = CachedLM(Prefilled([([" Ann", "."], [0.4, 0.9])]), DiskCache(tmp_path))
    cold = lm.generate(PROMPT, 16)
    warm = lm.generate(PROMPT, 16)
    assert cold.prefill_seconds == 0.25 and warm.cached and warm.prefill_seconds is None


@pytest.mark.parametrize(
    "change",
    [
        {"max_tokens": 17},
        {"stop": (".",)},
        {"logprobs": False},
        {"logit_bias": {"[": 2.0}},
        {"stop_at_sentence": True},
        {"prompt": Prompt("Static part. ", "Question: who else? Answer:")},
        {"prompt": Prompt("Static part.", " Question: who? Answer:")},  # same text, other split: a hit
    ],
)
def test_the_key_holds_everything_that_determines_the_call(tmp_path, change):
    inner = Described(["x"])
    lm = CachedLM(inner, DiskCache(tmp_path))
    base = {"prompt": PROMPT, "max_tokens": 16, "stop": ("\n",), "logprobs": True, "logit_bias": {}}
    lm.generate(**base)
    second = lm.generate(**{**base, **change})
    same_text = "prompt" in change and change["prompt"].text == PROMPT.text
    assert second.cached is same_text
    assert len(inner.requests) == (1 if same_text else 2)


def test_a_run_refused_before_its_first_call_leaves_no_cache_behind(tmp_path, scripted_lm):
    # Another configuration's run folder is found once the backends are built, the cache with them.
    from tests.scripted import run_cli

    run = ("run", "--limit", "1", "--report-dir", str(tmp_path / "r"))
    assert run_cli(*run, "--strategy", "single_time")[0] == 0
    code, out, err = run_cli(*run, "--strategy", "no_retrieval", "--cache", str(tmp_path / "new"))
    assert code == 2 and "holds a run of a different configuration" in err
    assert not (tmp_path / "new").exists()


def test_the_cache_persists_and_is_per_model(tmp_path):
    CachedLM(Described(["x"]), DiskCache(tmp_path)).generate(PROMPT, 8)
    again = Described(["y"])
    assert CachedLM(again, DiskCache(tmp_path)).generate(PROMPT, 8).text == "x" and again.requests == []
    other = Described(["z"], model="m2")
    assert CachedLM(other, DiskCache(tmp_path)).generate(PROMPT, 8).text == "z" and len(other.requests) == 1


def test_a_cache_folder_that_cannot_be_made_is_one_line(tmp_path):
    # --cache is checked before the run; a place that still refuses (/proc as root) is one line too,
    # which stops the run: a new cache is made at its first entry, mid-run.
    (tmp_path / "afile").write_text("x")
    cache = DiskCache(tmp_path / "afile" / "calls")
    with pytest.raises(StorageFailed, match=r"^--cache .*afile/calls: cannot be created \("):
        cache.put("key", {})


@pytest.mark.parametrize("damage", ["garbage", "folder", "foreign"])
def test_a_damaged_cache_file_is_one_line(tmp_path, damage):
    path = tmp_path / flarebench.bench.cache.CACHE_FILE
    if damage == "garbage":
        path.write_text("garbage\n")
    elif damage == "folder":
        path.mkdir()
    else:  # another program's SQLite database, with a table of the same name
        import sqlite3

        with contextlib.closing(sqlite3.connect(path)) as db:
            db.execute("CREATE TABLE entries (a INTEGER)")
    with pytest.raises(ValueError, match=r"^--cache .*: .*calls\.sqlite is not a flarebench cache \(.+\)$"):
        DiskCache(tmp_path)


def test_a_damaged_cache_is_refused_before_the_run_folder(tmp_path, scripted_lm):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / flarebench.bench.cache.CACHE_FILE).write_text("garbage\n")
    run = tmp_path / "run"
    args = ("run", "--strategy", "single_time", "--limit", "1", "--report-dir", str(run))
    code, out, err = run_cli(*args, "--cache", str(tmp_path / "cache"))
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, out + err
    assert "calls.sqlite is not a flarebench cache (file is not a database)" in err
    assert not run.exists()


def test_a_cache_that_stops_taking_entries_stops_the_run_and_it_resumes(tmp_path, scripted_lm, monkeypatch):
    # A full disk under the cache failed every probe left, each recorded as an error a resume kept.
    cache = str(tmp_path / "cache")
    assert (
        run_cli(
            "run", "--strategy", "no_retrieval", "--limit", "2", "--report-dir", str(tmp_path / "a"), "--cache", cache
        )[0]
        == 0
    )
    real_open = DiskCache._open

    def refusing_writes(self):
        db = real_open(self)
        db.execute("PRAGMA query_only=ON")  # every write fails as on a full disk, with sqlite3's error
        return db

    monkeypatch.setattr(DiskCache, "_open", refusing_writes)
    run = ("run", "--strategy", "no_retrieval", "--limit", "4", "--report-dir", str(tmp_path / "b"), "--cache", cache)
    code, out, err = run_cli(*run)
    assert code == 3, err
    assert re.search(
        r"flarebench: cannot write \S+/calls.sqlite \(attempt to write a readonly database\); finished probes are kept",
        err,
    )
    traces = [json.loads(line) for line in (tmp_path / "b" / "traces.jsonl").read_text().splitlines()]
    assert len(traces) == 2 and not any(t["error"] for t in traces)  # the two hits; no probe recorded failing
    monkeypatch.setattr(DiskCache, "_open", real_open)
    assert run_cli(*run)[0] == 0 and len((tmp_path / "b" / "traces.jsonl").read_text().splitlines()) == 4


def test_a_read_only_cache_file_is_refused_before_the_run(tmp_path, scripted_lm, monkeypatch):
    DiskCache(tmp_path / "cache").put("k", {})
    real = os.access
    monkeypatch.setattr(
        flarebench.bench.cache.os, "access", lambda p, mode: not str(p).endswith("calls.sqlite") and real(p, mode)
    )
    code, out, err = run_cli(
        "run", "--limit", "1", "--report-dir", str(tmp_path / "r"), "--cache", str(tmp_path / "cache")
    )
    assert code == 2 and err.strip().endswith("calls.sqlite is read-only (a run writes the calls it makes)"), err
    assert not (tmp_path / "r").exists()


def test_the_cache_is_per_flarebench_version(tmp_path, monkeypatch):
    # A code change that alters answers comes with a new version: old entries are not served.
    CachedLM(Described(["x"]), DiskCache(tmp_path)).generate(PROMPT, 8)
    monkeypatch.setattr(flarebench.bench.cache, "version", lambda: "9.9.9")
    newer = Described(["y"])
    assert CachedLM(newer, DiskCache(tmp_path)).generate(PROMPT, 8).text == "y" and len(newer.requests) == 1


def test_a_repeated_retrieval_is_served_from_the_cache(tmp_path):
    docs = [Passage("a", "Ann", "Ann wrote the book."), Passage("b", "Bob", "Bob lives in Rome.")]
    cache = DiskCache(tmp_path)
    retriever = CachedRetriever(BM25Retriever(docs), cache)
    passages, cold = retrieve(retriever, "who wrote the book", 1, "first_hop")
    again, warm = retrieve(retriever, "who wrote the book", 1, "first_hop")
    assert [p.id for p in passages] == [p.id for p in again] == ["a"]
    assert not cold.cached and warm.cached and warm.doc_ids == ["a"]
    assert not retrieve(retriever, "who wrote the book", 2, "first_hop")[1].cached  # another k
    # Another corpus is another retriever: no hit.
    other = CachedRetriever(BM25Retriever(docs[:1]), cache)
    assert not retrieve(other, "who wrote the book", 1, "first_hop")[1].cached


@pytest.mark.slow
def test_a_second_run_is_warm_and_reports_latency_apart(tmp_path, scripted_lm):
    common = ["run", "--strategy", "single_time", "--strategy", "flare_direct", "--limit", "4"]
    cache = str(tmp_path / "cache")
    code, out, err = run_cli(*common, "--report-dir", str(tmp_path / "cold"), "--cache", cache)
    assert code == 0, out + err
    code, out, err = run_cli(*common, "--report-dir", str(tmp_path / "warm"), "--cache", cache)
    assert code == 0, out + err
    cold, warm = (pd.read_csv(tmp_path / name / "summary.csv") for name in ("cold", "warm"))
    # In the first run only single_time is cold throughout: flare_direct already finds its first-hop
    # retrievals (and drafts identical to earlier calls) in the cache.
    assert cold["cached_share"][0] == 0.0 and 0.0 < cold["cached_share"][1] < 1.0
    assert list(warm["cached_share"]) == [1.0, 1.0]
    assert pd.notna(cold["latency_p50_cold_s"][0]) and cold["latency_p50_warm_s"].isna().all()
    assert warm["latency_p50_warm_s"].notna().all() and warm["latency_p50_cold_s"].isna().all()
    for column in ("em", "f1", "lm_calls_per_q", "retrievals_per_q", "prompt_tokens_per_q"):
        assert list(cold[column]) == list(warm[column]), column  # same answers, same work recorded
    assert "warm run: single_time 100%, flare_direct 100%" in (tmp_path / "warm" / "summary.md").read_text()
    assert "Warm run</b>" in (tmp_path / "warm" / "report.html").read_text()
    run = json.loads((tmp_path / "warm" / "run.json").read_text())
    assert run["cache"].startswith(cache) and "cache" not in run["config"]  # resuming with or without it is allowed
    traces = [json.loads(line) for line in (tmp_path / "warm" / "traces.jsonl").read_text().splitlines()]
    assert all(c["cached"] for t in traces for s in t["steps"] for c in s["lm_calls"])
    assert all(r["cached"] for t in traces for s in t["steps"] for r in s["retrievals"])


def test_the_version_is_the_running_checkouts_not_the_installed_metadatas(monkeypatch):
    # Another worktree on PYTHONPATH beside an editable install of this one: its runs must carry its
    # own version, or a run of older code would be resumed and gated as today's.
    import tomllib
    from importlib import metadata
    from pathlib import Path

    from flarebench import bench

    root = Path(bench.__file__).resolve().parents[1]
    ours = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    monkeypatch.setattr(metadata, "version", lambda name: "9.9.9")
    bench.version.cache_clear()
    try:
        assert bench.version() == ours
    finally:
        bench.version.cache_clear()


def test_a_run_of_another_version_or_template_is_not_resumed(tmp_path, monkeypatch, scripted_lm):
    run = str(tmp_path / "run")
    assert run_cli("run", "--strategy", "single_time", "--limit", "1", "--report-dir", run)[0] == 0
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["config"]["flarebench"] == flarebench.bench.version() and set(info["config"]["requests_sha256"]) == {
        "single_time"
    }
    monkeypatch.setattr(flarebench.bench.config, "version", lambda: "9.9.9")
    code, _, err = run_cli("run", "--strategy", "single_time", "--limit", "1", "--report-dir", run)
    was = flarebench.bench.version()
    assert (
        code == 2
        and (
            f"flarebench (was '{was}', now '9.9.9') (another flarebench version, whose changes to answers and scores "
            "CHANGES.md lists); use --overwrite to replace it or another --report-dir"
        )
        in err
    )
    monkeypatch.setattr(flarebench.bench.config, "version", flarebench.bench.version)
    # A changed stop sequence (or template) changes the request fingerprint: refused as well.
    monkeypatch.setattr("flarebench.strategies.base.STOP", ("\n\n",))
    code, _, err = run_cli("run", "--strategy", "single_time", "--limit", "1", "--report-dir", run)
    assert code == 2 and "requests_sha256.single_time" in err and "what flarebench sends for that strategy" in err
