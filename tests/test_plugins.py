"""Plugins: strategies, LMs and retrievers from a --plugin file or an installed entry point."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flarebench.probes.model import Document
from flarebench.strategies import expand, get, names, plugins
from flarebench.strategies.backends import make_lm, make_retriever
from flarebench.strategies.lm import LMError, Prompt
from flarebench.strategies.registry import SpecError

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
            "--plugin {tmp}/nodc.py: strategy 'mine': X must be a dataclass (its fields are the strategy's parameters)",
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
    assert r.stderr.startswith(f"ERROR: --plugin {plugin}: strategy ")
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


def test_entry_points_are_imported_only_when_their_name_is_asked_for(tmp_path, monkeypatch, isolated_registry):
    _distribution(
        tmp_path,
        "team-pipeline",
        "team_pipeline",
        """
        [flarebench.strategies]
        ep_toy = team_pipeline:Toy
        [flarebench.lms]
        ep_echo = team_pipeline:EchoLM
        [flarebench.retrievers]
        ep_first = team_pipeline:FirstDocs
        [flarebench.lms]
        """,
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
