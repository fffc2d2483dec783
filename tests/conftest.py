"""Shared fixtures: the real embedded LM and BM25 retriever over the default probe set, loaded
once per test session, with flarebench's cache kept in a temporary folder."""

from __future__ import annotations

import gc
import os
import shutil
from pathlib import Path

import pytest


def pytest_configure(config):
    """Under ``-n 2`` each worker's in-process model (and the models its runs and servers start)
    gets one thread: the two workers then share the two cores, where two models with llama.cpp's
    two spinning threads each slow each other 5-10x. The thread count changes no answer
    (tests/test_llamacpp.py); a count set in the environment is kept."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        from flarebench.strategies.llamacpp import THREADS_ENV

        os.environ.setdefault(THREADS_ENV, "1")


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    # Keep BM25 indexes and model copies out of the user's ~/.cache during tests.
    old = os.environ.get("FLAREBENCH_CACHE")
    os.environ["FLAREBENCH_CACHE"] = str(tmp_path_factory.mktemp("flarebench-cache"))
    yield
    if old is None:
        os.environ.pop("FLAREBENCH_CACHE", None)
    else:
        os.environ["FLAREBENCH_CACHE"] = old


@pytest.fixture(scope="session")
def phantom():
    from flarebench.probes.load import load_probe_set

    return load_probe_set("phantomwiki")


@pytest.fixture(scope="session")
def retriever(phantom, _isolated_cache):
    from flarebench.strategies.bm25 import BM25Retriever

    return BM25Retriever(phantom.corpus)


@pytest.fixture(scope="session")
def lm():
    from flarebench.strategies.backends import make_lm

    model = make_lm("llamacpp:smollm2")
    yield model
    model.close()


@pytest.fixture
def scripted_lm(monkeypatch):
    """Sessions made in this test answer with :class:`tests.scripted.ProbeAwareLM` instead of
    loading the model (for tests of the harness's control flow, never of what it measures)."""
    from tests.scripted import ProbeAwareLM

    lm = ProbeAwareLM()
    monkeypatch.setattr("flarebench.bench.recipe.make_lm", lambda *args, **kwargs: lm)
    return lm


@pytest.fixture(scope="session")
def _scripted_run_dir(tmp_path_factory):
    """A finished run folder made once per session with the scripted LM (copied by :func:`scripted_run`)."""
    from tests.scripted import ProbeAwareLM, run_cli

    run_dir = tmp_path_factory.mktemp("scripted-run") / "run"
    lm = ProbeAwareLM()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("flarebench.bench.recipe.make_lm", lambda *args, **kwargs: lm)
        code, out, err = run_cli("run", "--strategy", "no_retrieval", "--limit", "3", "--report-dir", str(run_dir))
    assert code == 0, out + err
    return run_dir


@pytest.fixture
def pytester(_scripted_run_dir, pytester):
    """pytest's own, after one run in this process: pytester drops every module imported while it
    is in use, so a module a run imports lazily (matplotlib's, for the report) would be imported
    in it, dropped, and imported again beside the classes the rest of the process still holds
    (``isinstance`` then fails inside matplotlib)."""
    return pytester


@pytest.fixture
def scripted_run(_scripted_run_dir, tmp_path):
    """This test's copy of a finished run folder (run.json, traces.jsonl, the summary files and
    report.html) of no_retrieval on the first 3 phantomwiki probes, answered by
    :class:`tests.scripted.ProbeAwareLM`: a run folder to damage or rescore without a model."""
    return Path(shutil.copytree(_scripted_run_dir, tmp_path / "run"))


@pytest.fixture
def fast_backoff(monkeypatch):
    """Retries of the HTTP client (the http strategy, the http retriever) wait 0.01 s, not 0.5 s and up."""
    from flarebench.strategies import http_client

    monkeypatch.setattr(http_client, "BACKOFF_S", 0.01)


@pytest.fixture
def isolated_registry(monkeypatch):
    """Strategies, LMs and retrievers a test registers are gone when it ends: later tests never
    meet a test's toy strategy or a name it took."""
    from flarebench.strategies import backends, registry

    registry.names()  # the built-ins are registered first, and stay
    for module, tables in ((registry, ("_REGISTRY", "_ORIGINS")), (backends, ("_LMS", "_RETRIEVERS", "_ORIGINS"))):
        for table in tables:
            monkeypatch.setattr(module, table, dict(getattr(module, table)))


#: A test marked neither ``slow`` nor ``model`` that runs longer than this (seconds) is named at the
#: end of the run: the inner loop (``-m "not model and not slow"``) stays under a minute only if
#: such tests get the ``slow`` marker (CONTRIBUTING.md).
UNMARKED_SLOW_S = 2.0


def pytest_terminal_summary(terminalreporter):
    reports = [r for key in ("passed", "failed") for r in terminalreporter.stats.get(key, [])]
    slow = sorted(
        (r.duration, r.nodeid)
        for r in reports
        if r.when == "call" and r.duration > UNMARKED_SLOW_S and not {"slow", "model"} & set(r.keywords)
    )
    if slow:
        terminalreporter.section("tests to mark slow")
        for seconds, nodeid in reversed(slow):
            terminalreporter.write_line(f"{seconds:.1f}s {nodeid}: over {UNMARKED_SLOW_S:g} s without the slow marker")


def pytest_collection_finish(session):
    """The objects made while importing and collecting live for the whole session: out of the garbage
    collector's way (gc.freeze), its full collections skip them (the inner loop takes about 15% less)."""
    gc.collect()
    gc.freeze()
