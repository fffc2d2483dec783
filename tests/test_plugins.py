"""Plugins: strategies, LMs and retrievers from a --plugin file or an installed entry point."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flarebench.bench.runner import run_probe
from flarebench.probes.model import Document
from flarebench.strategies import expand, get, names, plugins
from flarebench.strategies.backends import make_lm, make_retriever
from flarebench.strategies.lm import LMError, Prompt
from flarebench.strategies.records import Passage
from flarebench.strategies.registry import SpecError
from flarebench.strategies.retriever import Lookup, Retriever, RetrieverError
from tests.scripted import ScriptedLM, run_cli

# A plugin file as a team would write one: a strategy, an LM and a retriever, importing only flarebench.
PLUGIN = '''
from dataclasses import dataclass

from flarebench.strategies import Strategy, register
from flarebench.strategies.backends import register_lm, register_retriever
from flarebench.strategies.base import finish, retrieve
from flarebench.strategies.lm import LM
from flarebench.strategies.records import LMCall, Passage, Step
from flarebench.strategies.retriever import Retriever


@register_lm("echo")
class EchoLM(LM):
    """Answers every prompt with the text after the colon of its spec."""

    supports_logprobs = False

    def __init__(self, arg):
        self.arg = arg

    def _complete(self, request):
        text = f" So the answer is {self.arg}."
        return LMCall(request.purpose, 7, 7, 1, text, "stop", 0.0, [text])


@register_retriever("first")
class FirstDocs(Retriever):
    """The corpus's first k documents, whatever the query."""

    name = "first"

    def __init__(self, corpus):
        self.docs = list(corpus)

    def _search(self, query, k):
        return [Passage(d.id, d.title, d.text) for d in self.docs[:k]]


@register("{name}")
@dataclass
class Toy(Strategy):
    """Retrieve once with the question and answer in one call."""

    def run(self, question, lm, retriever):
        docs, retrieval = retrieve(retriever, question, self.k, "toy")
        call = lm.generate(self.template.build(question, docs), self.max_tokens)
        return finish(question, [Step(call.text, [call], [retrieval])])
'''


PROMPT = Prompt("", "Question: q\nAnswer:")
DOC = Document(id="d1", title="T", text="x")


def _plugin_file(folder: Path, name: str = "plugin_toy", stem: str = "team_plugin") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}.py"
    path.write_text(PLUGIN.replace("{name}", name), encoding="utf-8")
    return path


def _flarebench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flarebench", *args], cwd=cwd, capture_output=True, text=True)


@pytest.mark.slow
def test_a_plugin_file_runs_its_strategy_lm_and_retriever_from_the_command_line(tmp_path):
    plugin, run_dir = _plugin_file(tmp_path), tmp_path / "run"
    backends = ("--lm", "echo:Paris", "--retriever", "first", "--limit", "2")
    r = _flarebench(
        "run",
        "--plugin",
        str(plugin),
        "--strategy",
        "plugin_toy",
        *backends,
        "--report-dir",
        str(run_dir),
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    traces = [json.loads(line) for line in (run_dir / "traces.jsonl").read_text().splitlines()]
    assert [t["answer"] for t in traces] == ["Paris", "Paris"]
    assert all(t["steps"][0]["retrievals"][0]["reason"] == "toy" for t in traces)
    run = json.loads((run_dir / "run.json").read_text())
    assert run["plugins"] == [str(plugin)] and run["config"]["lm"]["name"] == "echo:Paris"
    # Scoring again needs the plugin only where a command reads its strategies; it takes --plugin too.
    assert _flarebench("score", str(run_dir), "--plugin", str(plugin), cwd=tmp_path).returncode == 0
    # Without the plugin its names are unknown, said in one line with the way to load it.
    r = _flarebench(
        "run", "--strategy", "plugin_toy", "--limit", "1", "--report-dir", str(tmp_path / "x"), cwd=tmp_path
    )
    assert r.returncode == 2 and "unknown strategy 'plugin_toy'" in r.stderr and "--plugin" in r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


@pytest.mark.slow
def test_pytest_bench_takes_plugin(tmp_path):
    plugin = _plugin_file(tmp_path)
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "bench", "-p", "no:cacheprovider", "--plugin", str(plugin),
         "--strategy", "plugin_toy", "--lm", "echo:Oslo", "--retriever", "first", "--limit", "1",
         "--report-dir", str(tmp_path / "run")],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert json.loads((tmp_path / "run" / "traces.jsonl").read_text())["answer"] == "Oslo"


@pytest.mark.slow
def test_pytest_bench_stops_in_one_line_when_a_plugin_scorer_fails(tmp_path):
    plugin = tmp_path / "broken_scorer.py"
    plugin.write_text(
        "from flarebench.bench.scorers.registry import LOWER, Column, scorer\n\n\n"
        '@scorer(Column("broken", "doc", better=LOWER), order=996)\n'
        "def broken(g):\n"
        '    return {"broken": g.rows["no_such_column"].mean()}\n'
    )
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "bench", "-p", "no:cacheprovider", "--plugin", str(plugin),
         "--plugin", str(Path(__file__).parent / "fixtures" / "ray_lm.py"), "--lm", "probeaware:0",
         "--strategy", "no_retrieval", "--strategy", "single_time", "--limit", "1",
         "--report-dir", str(tmp_path / "run")],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 4 and "Traceback" not in r.stdout + r.stderr, r.stdout[-2000:] + r.stderr[-2000:]
    assert (
        f"Exit: flarebench: scorer broken ({plugin}): summarize raised KeyError: 'no_such_column' "
        "(broken_scorer.py:6); fix the scorer: finished probes are kept; run the same command to resume"
    ) in r.stdout + r.stderr
    # Stopped at the first strategy's summary: the second never ran.
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "interrupted"
    assert len((tmp_path / "run" / "traces.jsonl").read_text().splitlines()) == 1


@pytest.mark.slow
def test_a_run_stopped_by_a_scorer_resumes_once_its_file_is_fixed(tmp_path):
    # Fixing a scorer means editing its file: a plugin of scorers only is no part of the configuration.
    plugin = tmp_path / "chars.py"
    broken = (
        "from flarebench.bench.scorers.registry import LOWER, Column, scorer\n\n\n"
        '@scorer(Column("chars", "doc", better=LOWER), order=997)\n'
        "def chars(g):\n"
        '    return {"chars": g.rows["no_such_column"].mean()}\n'
    )
    plugin.write_text(broken)
    run = [sys.executable, "-m", "flarebench", "run", "--plugin", str(plugin),
           "--plugin", str(Path(__file__).parent / "fixtures" / "ray_lm.py"), "--lm", "probeaware:0",
           "--strategy", "no_retrieval", "--strategy", "single_time", "--limit", "2",
           "--report-dir", str(tmp_path / "run")]  # fmt: skip
    root = str(Path(__file__).resolve().parent.parent)  # the fixture LM imports tests.scripted
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    stopped = subprocess.run(run, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert stopped.returncode == 2 and "fix the scorer: finished probes are kept" in stopped.stderr, stopped.stderr
    first = (tmp_path / "run" / "traces.jsonl").read_text()
    assert len(first.splitlines()) == 2  # the first strategy's
    plugin.write_text(broken.replace('g.rows["no_such_column"].mean()', "1.0"))
    resumed = subprocess.run(run, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    traces = (tmp_path / "run" / "traces.jsonl").read_text()
    assert traces.startswith(first) and len(traces.splitlines()) == 4  # resumed, not run again
    recorded = json.loads((tmp_path / "run" / "run.json").read_text())
    assert str(plugin) not in recorded["config"]["plugins"] and str(plugin) in recorded["plugins"]  # loaded again


# Plugin files that load no strategy, each as a user might write it.
BAD_PLUGINS = {
    "broken.py": "x = 1 / 0\n",
    "exits.py": "import sys\nsys.exit(3)\n",
    "nodc.py": "from flarebench.strategies import register\n@register('mine')\nclass X:\n    pass\n",
    **{
        f"{stem}.py": "from dataclasses import dataclass\nfrom flarebench.strategies import Strategy, register\n"
        f"@register({name!r})\n@dataclass\nclass Toy(Strategy):\n    def run(self, q, lm, r): ...\n"
        for stem, name in (("dupreg", "single_time"), ("noname", ""))
    },
    # An LM or retriever under a built-in's name would never be built: the built-in wins.
    "duplm.py": "from flarebench.strategies.backends import LM, register_lm\n"
    "@register_lm('openai')\nclass Mine(LM):\n    pass\n",
    "badret.py": "from flarebench.strategies.backends import Retriever, register_retriever\n"
    "@register_retriever('my:index')\nclass Mine(Retriever):\n    pass\n",
    # A trigger under a built-in's name would replace the built-in for every flare_direct.
    **{
        f"{stem}.py": "from flarebench.strategies.triggers import TokenTrigger, trigger\n"
        f"@trigger({name!r})\nclass Mine(TokenTrigger):\n    pass\n"
        for stem, name in (("duptrig", "min_prob"), ("badtrig", "my trigger"))
    },
}


def _written(folder: Path) -> set[str]:
    """The names in folder, but for the bytecode cache an import may leave."""
    return {p.name for p in folder.iterdir()} - {"__pycache__"}


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("missing.py", "--plugin {tmp}/missing.py: no such file"),
        ("folder.py", "--plugin {tmp}/folder.py: is a folder, not a file"),
        ("no_such_plugin_module", "--plugin no_such_plugin_module: no module named 'no_such_plugin_module'"),
        ("broken.py", "--plugin {tmp}/broken.py: ZeroDivisionError: division by zero"),
        ("exits.py", "--plugin {tmp}/exits.py: exited while being imported (SystemExit 3)"),
        (
            "nodc.py",
            "--plugin {tmp}/nodc.py: strategy 'mine': X must be a subclass of Strategy",
        ),
        ("dupreg.py", "--plugin {tmp}/dupreg.py: strategy 'single_time' is already registered (built in)"),
        (
            "noname.py",
            "--plugin {tmp}/noname.py: strategy '': not a usable name (not empty, without spaces, ':', ',' or '='; "
            "not 'all')",
        ),
        ("duplm.py", "--plugin {tmp}/duplm.py: LM 'openai' is already registered (built in)"),
        (
            "badret.py",
            "--plugin {tmp}/badret.py: retriever 'my:index': not a usable name (not empty, without spaces, ':', ',' "
            "or '=')",
        ),
        ("duptrig.py", "--plugin {tmp}/duptrig.py: trigger 'min_prob' is already registered (built in)"),
        (
            "badtrig.py",
            "--plugin {tmp}/badtrig.py: trigger 'my trigger': not a usable name (not empty, without spaces, ':', "
            "',' or '=')",
        ),
    ],
)
def test_a_plugin_that_cannot_load_is_one_line(tmp_path, ref, message):
    for name, text in BAD_PLUGINS.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "folder.py").mkdir()
    ref = str(tmp_path / ref) if ref.endswith(".py") else ref
    r = _flarebench("score", str(tmp_path), "--plugin", ref, cwd=tmp_path)
    assert (r.returncode, r.stderr) == (2, f"flarebench: {message.format(tmp=tmp_path)}\n")
    assert _written(tmp_path) == {*BAD_PLUGINS, "folder.py"}  # nothing written


@pytest.mark.slow
@pytest.mark.parametrize("plugin", ["nodc.py", "dupreg.py"])
def test_pytest_bench_takes_a_plugin_that_cannot_load_as_a_usage_error(tmp_path, plugin):
    (tmp_path / plugin).write_text(BAD_PLUGINS[plugin])
    r = subprocess.run(  # --collect-only: were the plugin taken, nothing would run
        [sys.executable, "-m", "pytest", "bench", "-p", "no:cacheprovider", "--collect-only", "--plugin", plugin,
         "--strategy", "single_time"],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 4 and "INTERNALERROR" not in r.stdout + r.stderr
    assert r.stderr.startswith(f"ERROR: flarebench: --plugin {plugin}: strategy ")
    assert len(r.stderr.strip().splitlines()) == 1
    assert _written(tmp_path) == {plugin}


def test_a_plugins_strategy_runs_only_when_named(tmp_path, isolated_registry):
    plugins.load(str(_plugin_file(tmp_path, name="_named_only")))
    assert "_named_only" in names() and get("_named_only").name == "_named_only"
    assert "_named_only" not in expand(None) and "_named_only" not in expand(["all"])
    assert expand(["all", "_named_only"])[-1] == "_named_only"


def test_the_same_name_from_two_plugins_is_an_error_naming_both(tmp_path, isolated_registry):
    files = []
    for stem in ("first_plugin", "second_plugin"):
        files.append(tmp_path / f"{stem}.py")
        files[-1].write_text(
            "from dataclasses import dataclass\n"
            "from flarebench.strategies import Strategy, register\n"
            "@register('_twice')\n@dataclass\nclass Toy(Strategy):\n    def run(self, q, lm, r): ...\n"
        )
    plugins.load(str(files[0]))
    with pytest.raises(plugins.PluginError) as e:
        plugins.load(str(files[1]))
    assert str(e.value) == f"--plugin {files[1]}: strategy '_twice' is already registered (by plugin {files[0]})"


def _distribution(site: Path, dist: str, module: str, entry_points: str) -> None:
    """An installed distribution as pip leaves one: its module and a dist-info with entry points."""
    (site / f"{module}.py").write_text(PLUGIN.replace("{name}", f"_{module}_registered"), encoding="utf-8")
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


def _three_entry_points(module: str, prefix: str) -> str:
    """The entry points of a package giving PLUGIN's strategy, LM and retriever, named PREFIX_toy,
    PREFIX_echo and PREFIX_first."""
    return (
        f"[flarebench.strategies]\n{prefix}_toy = {module}:Toy\n[flarebench.lms]\n{prefix}_echo = {module}:EchoLM\n"
        f"[flarebench.retrievers]\n{prefix}_first = {module}:FirstDocs\n"
    )


def test_entry_points_are_imported_only_when_their_name_is_asked_for(tmp_path, monkeypatch, isolated_registry):
    _distribution(
        tmp_path, "team-pipeline", "team_pipeline", _three_entry_points("team_pipeline", "ep") + "[flarebench.lms]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "ep_toy" in names() and "team_pipeline" not in sys.modules  # listed, not imported
    assert "ep_toy" not in expand(["all"])
    assert get("ep_toy").__module__ == "team_pipeline"
    lm = make_lm("ep_echo:Rome")
    assert (lm.name, lm.generate(PROMPT, 4).text) == ("ep_echo:Rome", " So the answer is Rome.")
    assert make_retriever("ep_first", [DOC]).lookup("q", 3).passages[0].id == "d1"
    with pytest.raises(LMError, match=r"unknown LM spec 'nope:x'; known: .*ep_echo:ARG"):
        make_lm("nope:x")


def test_a_run_records_the_installed_code_of_its_entry_points(tmp_path, monkeypatch, isolated_registry):
    # Another version of the package must not resume the run: its code is in the configuration.
    import hashlib

    (tmp_path / "site").mkdir()
    _distribution(tmp_path / "site", "run-pipeline", "run_pipeline", _three_entry_points("run_pipeline", "ep_run"))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    run_dir = tmp_path / "run"
    argv = [
        "run",
        "--strategy",
        "ep_run_toy",
        "--lm",
        "ep_run_echo:Rome",
        "--retriever",
        "ep_run_first",
        "--limit",
        "1",
    ]
    code, out, err = run_cli(*argv, "--report-dir", str(run_dir))
    assert code == 0, err
    sha = hashlib.sha256((tmp_path / "site" / "run_pipeline.py").read_bytes()).hexdigest()
    recorded = json.loads((run_dir / "run.json").read_text())["config"]["plugins"]
    assert recorded == {f"run_pipeline:{attr} (run-pipeline 1.0)": sha for attr in ("Toy", "EchoLM", "FirstDocs")}
    # Only what the run uses: a run of a built-in strategy on those backends records the two.
    code, out, err = run_cli(*argv[:2], "single_time", *argv[3:], "--report-dir", str(tmp_path / "other"))
    assert code == 0, err
    recorded = json.loads((tmp_path / "other" / "run.json").read_text())["config"]["plugins"]
    assert sorted(recorded) == [
        "run_pipeline:EchoLM (run-pipeline 1.0)",
        "run_pipeline:FirstDocs (run-pipeline 1.0)",
    ]


def test_installed_entry_points_are_read_once_per_sys_path(tmp_path, monkeypatch, isolated_registry):
    # Rescoring a run whose plugin is not loaded asks for its unknown names once per spec and summary.
    reads = []
    real = plugins.metadata.entry_points
    monkeypatch.setattr(plugins.metadata, "entry_points", lambda **kw: reads.append(kw) or real(**kw))
    monkeypatch.syspath_prepend(str(tmp_path / "empty"))  # a path never read before
    for _ in range(3):
        with pytest.raises(SpecError, match="unknown strategy 'not_installed'"):
            get("not_installed")
    assert reads == [{"group": plugins.STRATEGIES}]
    # A folder of distributions added to the path is read: its entry points are found.
    _distribution(tmp_path, "late-pipeline", "late_pipeline", "[flarebench.strategies]\nlate = late_pipeline:Toy\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert get("late").__module__ == "late_pipeline" and len(reads) == 2


def test_two_packages_declaring_one_entry_point_is_an_error_naming_both(tmp_path, monkeypatch, isolated_registry):
    for dist, module in (("alpha-pipeline", "alpha_pipeline"), ("beta-pipeline", "beta_pipeline")):
        _distribution(tmp_path, dist, module, f"[flarebench.strategies]\nclash = {module}:Toy\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SpecError, match="'clash' is declared twice: by alpha-pipeline .* and beta-pipeline"):
        get("clash")


def test_an_entry_point_that_names_no_strategy_is_refused(tmp_path, monkeypatch, isolated_registry):
    _distribution(tmp_path, "odd-pipeline", "odd_pipeline", "[flarebench.strategies]\nodd = odd_pipeline:PLUGIN_NAME\n")
    (tmp_path / "odd_pipeline.py").write_text("PLUGIN_NAME = 'not a class'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SpecError, match="flarebench.strategies:odd names 'not a class', not a Strategy subclass"):
        get("odd")


# Two retrievers as a team might write them, leaving `name` at its default: only the spec tells them apart.
TWO_RETRIEVERS = """
from flarebench.strategies.backends import register_retriever
from flarebench.strategies.retriever import Retriever, as_passages


@register_retriever("first3")
class First(Retriever):
    def __init__(self, corpus):
        self.docs = as_passages(corpus)

    def _search(self, query, k):
        return self.docs[:k]


@register_retriever("last3")
class Last(Retriever):
    def __init__(self, corpus):
        self.docs = as_passages(corpus)

    def _search(self, query, k):
        return self.docs[-k:]
"""


@pytest.mark.slow
def test_two_plugin_retrievers_are_told_apart_by_their_spec_in_the_config_and_the_cache(tmp_path, isolated_registry):
    toy, retrievers = _plugin_file(tmp_path), tmp_path / "two_retrievers.py"
    retrievers.write_text(TWO_RETRIEVERS, encoding="utf-8")
    shared = ("--plugin", str(toy), "--plugin", str(retrievers), "--strategy", "plugin_toy", "--lm", "echo:Paris")
    runs = {}
    for spec in ("first3", "last3"):
        run_dir = tmp_path / f"run-{spec}"
        code, _, err = run_cli(
            "run", *shared, "--retriever", spec, "--limit", "1", "--cache", str(tmp_path / "cache"),
            "--report-dir", str(run_dir),
        )  # fmt: skip
        assert code == 0, err
        trace = json.loads((run_dir / "traces.jsonl").read_text())
        retrieval = trace["steps"][0]["retrievals"][0]
        runs[spec] = json.loads((run_dir / "run.json").read_text())["config"]["retriever"], retrieval
    assert runs["first3"][0] == {"name": "first3"} and runs["last3"][0] == {"name": "last3"}
    # The second run searched its own retriever, not the cache's entry for the first one's query.
    first, last = (runs[spec][1] for spec in ("first3", "last3"))
    assert not last["cached"] and first["doc_ids"] != last["doc_ids"]


# An LM whose replies break the LMCall contract as its `arg` says.
BAD_REPLIES = """
from flarebench.strategies.backends import register_lm
from flarebench.strategies.lm import LM
from flarebench.strategies.records import LMCall


@register_lm("bad_reply")
class BadReply(LM):
    def __init__(self, arg):
        self.arg = arg

    def _complete(self, request):
        text = None if self.arg == "no_text" else " So the answer is x."
        call = LMCall(request.purpose, 7, 7, 1, text, "stop", 0.0, [text], [0.0] if request.logprobs else None)
        if self.arg == "no_logprobs":
            call.logprobs = None
        return {"str": "hello", "none": None}.get(self.arg, call)
"""


@pytest.mark.parametrize(
    ("arg", "said"),
    [
        ("str", "_complete returned str, not an LMCall"),
        ("none", "_complete returned NoneType, not an LMCall"),
        ("no_text", "_complete returned an LMCall whose text is NoneType, not str"),
        ("no_logprobs", "asked for per-token logprobs, returned none"),
    ],
)
def test_an_lm_reply_that_breaks_the_lmcall_contract_is_an_lm_error_naming_it(tmp_path, isolated_registry, arg, said):
    (tmp_path / "bad_reply.py").write_text(BAD_REPLIES, encoding="utf-8")
    plugins.load(str(tmp_path / "bad_reply.py"))
    with pytest.raises(LMError, match=f"^LM bad_reply:{arg}: {re.escape(said)}$"):
        make_lm(f"bad_reply:{arg}").generate(PROMPT, 4, logprobs=True)


class _Found(Retriever):
    """Returns what ``found(docs, k)`` makes of its corpus, right or not."""

    name = "found"
    docs = [Passage(f"d{i}", "T", "x") for i in range(1, 6)]

    def __init__(self, found):
        self.found = found

    def _search(self, query, k):
        return self.found(self.docs, k)


class _OwnLookup(_Found):
    """Searches in a lookup of its own (as a reranker does), bypassing ``_search``."""

    def lookup(self, query, k):
        return Lookup(self.found(self.docs, k), 0.0)


@dataclasses.dataclass
class _Probe:
    id: str
    question: str


CONTRACT = "retriever found: a search returns a list of at most k Passage objects with distinct ids; "


@pytest.mark.parametrize("retriever", [_Found, _OwnLookup])
@pytest.mark.parametrize(
    ("found", "said"),
    [
        (lambda docs, k: docs[: k + 1], "returned 4 for k=3"),  # recall counted over more than k documents
        (lambda docs, k: docs[:1] * 2, "returned 'd1' twice"),
        (lambda docs, k: [vars(d) for d in docs[:k]], "returned a list holding dict"),
        (lambda docs, k: docs[0].id, "returned str"),
        (lambda docs, k: [Passage(1, "T", "x")], "returned a Passage whose id is int, not str"),
    ],
)
def test_a_search_returning_what_a_search_may_not_is_that_probes_error_naming_the_retriever(retriever, found, said):
    with pytest.raises(RetrieverError, match=f"^{re.escape(CONTRACT + said)}$"):
        retriever(found).search("q", 3)
    trace = run_probe("single_time", get("single_time")(), _Probe("p1", "q"), ScriptedLM(["x"]), retriever(found))
    assert trace.stop_reason == "error" and trace.error.startswith(f"RetrieverError: {CONTRACT}{said} (")
    assert [p.id for p in retriever(lambda docs, k: docs[:k]).search("q", 3)[0]] == ["d1", "d2", "d3"]


def test_a_lookup_of_its_own_that_returns_no_lookup_is_an_error_naming_the_retriever():
    class ListLookup(_Found):
        def lookup(self, query, k):
            return self.found(self.docs, k)

    with pytest.raises(RetrieverError, match="^retriever found: lookup returned list, not a Lookup$"):
        ListLookup(lambda docs, k: docs[:k]).search("q", 3)


# Backends whose construction or describe() goes wrong, each as a plugin author might write it.
BAD_BACKENDS = """
from pathlib import Path

from flarebench.strategies.backends import register_lm, register_retriever
from flarebench.strategies.lm import LM
from flarebench.strategies.retriever import Retriever


class Quiet(LM):
    def _complete(self, request):
        raise AssertionError("never called")


@register_lm("wants_url")
class WantsUrl(Quiet):
    def __init__(self, arg):
        raise ValueError(f"bad arg {arg!r}: expected a URL")


@register_lm("no_gpu")
class NoGpu(Quiet):
    def __init__(self, arg):
        raise RuntimeError("no GPU")


@register_lm("no_arg")
class NoArg(Quiet):
    def __init__(self):
        self.ready = True


@register_lm("path_lm")
class PathLM(Quiet):
    def describe(self):
        return {"name": self.name, "file": Path("model.bin")}


@register_lm("own_name")
class OwnName(Quiet):
    def describe(self):
        return {"name": "my-model"}


@register_retriever("needs_url")
class NeedsUrl(Retriever):
    def __init__(self, corpus, url):
        self.url = url

    def _search(self, query, k):
        return []


@register_retriever("path_index")
class PathIndex(Retriever):
    def __init__(self, corpus):
        self.index = Path("index")

    def _search(self, query, k):
        return []

    def describe(self):
        return {"name": self.name, "index": self.index}
"""


@pytest.mark.parametrize(
    ("flag", "given", "message"),
    [
        ("--lm", "wants_url:x", "--lm wants_url:x: WantsUrl: ValueError: bad arg 'x': expected a URL"),
        ("--lm", "no_gpu:x", "--lm no_gpu:x: NoGpu: RuntimeError: no GPU"),
        (
            "--lm",
            "no_arg:x",
            "--lm no_arg:x: NoArg: cannot be built as NoArg('x') for --lm NAME:ARG: too many positional arguments",
        ),
        (
            "--lm",
            "wants_url",
            "--lm wants_url: WantsUrl: cannot be built as WantsUrl() for --lm NAME without :ARG: "
            "missing a required argument: 'arg'",
        ),
        (
            "--lm",
            "path_lm",
            "--lm path_lm: PathLM: describe() cannot be written to run.json "
            "(Object of type PosixPath is not JSON serializable)",
        ),
        (
            "--lm",
            "own_name",
            "--lm own_name: OwnName: describe() must hold name 'own_name' (the spec, which tells its results "
            "apart), got 'my-model'",
        ),
        (
            "--retriever",
            "needs_url",
            "--retriever needs_url: NeedsUrl: cannot be built as NeedsUrl(corpus): missing a required argument: 'url'",
        ),
        (
            "--retriever",
            "path_index",
            "--retriever path_index: PathIndex: describe() cannot be written to run.json "
            "(Object of type PosixPath is not JSON serializable)",
        ),
    ],
)
def test_a_backend_that_cannot_be_built_is_one_line_naming_its_spec_and_class(
    tmp_path, isolated_registry, flag, given, message
):
    plugin = tmp_path / "bad_backends.py"
    plugin.write_text(BAD_BACKENDS, encoding="utf-8")
    plugins.load(str(plugin))
    with pytest.raises(LMError if flag == "--lm" else ValueError) as e:
        make_lm(given) if flag == "--lm" else make_retriever(given, [DOC])
    assert str(e.value) == message
    # The command stops before the run starts, in that one line.
    code, _, err = run_cli("run", "--plugin", str(plugin), flag, given, "--report-dir", str(tmp_path / "run"))
    assert (code, err) == (2, f"flarebench: {message}\n") and not (tmp_path / "run").exists()


def test_an_lm_spec_without_arg_builds_the_class_without_one(tmp_path, isolated_registry):
    plugin = tmp_path / "bad_backends.py"
    plugin.write_text(BAD_BACKENDS, encoding="utf-8")
    plugins.load(str(plugin))
    lm = make_lm("no_arg")
    assert lm.ready and lm.describe() == {"name": "no_arg"}


_STRATEGY = "from dataclasses import dataclass, field\nfrom flarebench.strategies import Strategy, register\n"

# Plugin strategies whose author got something wrong that flarebench can tell, each with the one line it says.
FAULTY_STRATEGIES = {
    "inherits.py": (
        _STRATEGY
        + "@register('s_nodc')\nclass S(Strategy):\n    theta: float = 0.5\n    def run(self, q, lm, r): ...\n",
        "s_nodc:theta=0.9",
        "--plugin {plugin}: strategy 's_nodc': S must be a dataclass itself (@dataclass under @register), else its "
        "fields are no parameters: theta",
    ),
    "listparam.py": (
        _STRATEGY + "@register('s_list')\n@dataclass\nclass S(Strategy):\n"
        "    words: list[str] = field(default_factory=list)\n    def run(self, q, lm, r): ...\n",
        "s_list:words=abc",
        "--plugin {plugin}: strategy 's_list': S.words: a spec cannot set a parameter of type list[str] (bool, int, "
        "float, str, a Literal of strings, or one of them | None)",
    ),
    "typechecking.py": (
        "from __future__ import annotations\nfrom typing import TYPE_CHECKING\n"
        + _STRATEGY
        + "if TYPE_CHECKING:\n    from team.modes import Mode\n"
        "@register('s_tc')\n@dataclass\nclass S(Strategy):\n    mode: Mode | None = None\n"
        "    def run(self, q, lm, r): ...\n",
        "s_tc",
        "--plugin {plugin}: strategy 's_tc': S.mode: its type 'Mode | None' cannot be resolved at run time "
        "(NameError: name 'Mode' is not defined); import what it names outside `if TYPE_CHECKING:`",
    ),
    "asserts.py": (
        _STRATEGY + "@register('s_assert')\n@dataclass\nclass S(Strategy):\n    theta: float = 0.5\n"
        "    def validate(self):\n        assert 0 <= self.theta <= 1, 'theta must be in [0, 1]'\n"
        "    def run(self, q, lm, r): ...\n",
        "s_assert:theta=2",
        "s_assert:theta=2: theta must be in [0, 1]",
    ),
    "typeerror.py": (
        _STRATEGY + "@register('s_typeerr')\n@dataclass\nclass S(Strategy):\n    theta: float = 0.5\n"
        "    def validate(self):\n        if self.theta > 1:\n            raise TypeError('theta must be <= 1')\n"
        "    def run(self, q, lm, r): ...\n",
        "s_typeerr:theta=2",
        "s_typeerr:theta=2: theta must be <= 1",
    ),
    "needs.py": (
        _STRATEGY + "@register('s_needs')\n@dataclass\nclass S(Strategy):\n"
        "    def needs(self):\n        return frozenset({'logprob'})\n    def run(self, q, lm, r): ...\n",
        "s_needs",
        "s_needs: S.needs() names unknown capability 'logprob'; known: logprobs, top_logprobs, logit_bias, tools, chat",
    ),
}


@pytest.mark.parametrize("plugin", FAULTY_STRATEGIES)
def test_a_plugin_strategy_its_author_got_wrong_stops_the_run_in_one_line(tmp_path, plugin):
    # Each was a traceback, or ran wrong: theta and words silently not (or mis-)set, needs() refused unnamed.
    text, spec, message = FAULTY_STRATEGIES[plugin]
    (tmp_path / plugin).write_text(text, encoding="utf-8")
    r = _flarebench(
        "run",
        "--plugin",
        plugin,
        "--strategy",
        spec,
        "--limit",
        "1",
        "--report-dir",
        str(tmp_path / "run"),
        cwd=tmp_path,
    )
    assert (r.returncode, r.stderr) == (2, f"flarebench: {message.format(plugin=plugin)}\n")
    assert _written(tmp_path) == {plugin}  # nothing written


@pytest.mark.slow
@pytest.mark.parametrize("plugin", ["typechecking.py", "asserts.py"])
def test_pytest_bench_takes_a_plugin_strategy_its_author_got_wrong_as_a_usage_error(tmp_path, plugin):
    text, spec, message = FAULTY_STRATEGIES[plugin]
    (tmp_path / plugin).write_text(text, encoding="utf-8")
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "bench", "-p", "no:cacheprovider", "--collect-only", "--plugin", plugin,
         "--strategy", spec],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 4 and "INTERNALERROR" not in r.stdout + r.stderr
    assert r.stderr.strip().splitlines() == [f"ERROR: flarebench: {message.format(plugin=plugin)}"]
    assert _written(tmp_path) == {plugin}
