"""A project's config file (flarebench.toml or [tool.flarebench]): found upwards, checked, applied
under the command line by both the CLI and the pytest plugin, and recorded in run.json."""

from __future__ import annotations

import json

import pytest

from flarebench.bench import settings
from flarebench.bench.settings import Settings, SettingsError, find, load, resolve
from tests.scripted import run_cli

pytest_plugins = ["pytester"]


def _write(folder, name, text):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder / name


def test_the_nearest_file_applies_and_a_pyproject_needs_its_table(tmp_path):
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find(deep) is None
    _write(tmp_path / "a", "pyproject.toml", "[project]\nname = 'x'\n")  # no [tool.flarebench]: skipped
    top = _write(tmp_path, "pyproject.toml", "[tool.flarebench]\nlimit = 2\n")
    assert find(deep) == top
    near = _write(tmp_path / "a", "flarebench.toml", "limit = 3\n")
    assert find(deep) == near
    assert load(deep) == Settings(near, {"limit": 3})
    near.unlink()
    near.mkdir()  # a folder of the file's name would be passed by unsaid, the file above applying
    with pytest.raises(SettingsError, match=f"^{near}: is a folder, not a config file; remove or rename it$"):
        load(deep)


def test_values_are_typed_and_paths_are_relative_to_the_file(tmp_path):
    (tmp_path / "bench" / "probes").mkdir(parents=True)
    path = _write(
        tmp_path,
        "flarebench.toml",
        'probes = "bench/probes"\nstrategy = "flare_direct"\ntolerance = ["em=0.1"]\nreport-dir = "runs/latest"\n'
        "lm-timeout = 30\noverwrite = true\ncache = true\nretriever = 'bm25s'\n",
    )
    assert load(tmp_path / "bench").values == {
        "probes": str(tmp_path / "bench" / "probes"),
        "strategy": ["flare_direct"],
        "tolerance": ["em=0.1"],
        "report_dir": str(tmp_path / "runs" / "latest"),
        "lm_timeout": 30,
        "overwrite": True,
        "cache": "default",
        "retriever": "bm25s",
    }
    # A plugin file is beside the file too, so the file works from any subfolder; a module is a name.
    path.write_text('plugin = ["bench/mine.py", "team.plugins"]\n')
    assert load(tmp_path / "bench").values == {"plugin": [str(tmp_path / "bench" / "mine.py"), "team.plugins"]}
    # A shipped set's name means that set, as on the command line, even beside a folder of that name;
    # ./nq is the folder.
    path.write_text('probes = "nq"\n')
    assert load(tmp_path).values == {"probes": "nq"}
    (tmp_path / "nq").mkdir()
    assert load(tmp_path).values == {"probes": "nq"}
    path.write_text('probes = "./nq"\n')
    assert load(tmp_path).values == {"probes": str(tmp_path / "nq")}


@pytest.mark.parametrize(
    "text, problem",
    [
        ("limit = 2\nlm-base-urll = 'http://x'\n", ":2: lm-base-urll: unknown key; did you mean 'lm-base-url'?"),
        ("budget = 'retrieval_rate<=0.3'\n", ":1: budget: unknown key; the file sets the options every run command"),
        ("limit = '2'\n", ":1: limit: expected int, got '2'"),
        ("limit = true\n", ":1: limit: expected int, got True"),
        ("overwrite = 1\n", ":1: overwrite: expected true or false, got 1"),
        ("strategy = [1]\n", ":1: strategy: expected a string or a list of strings, got [1]"),
        ("limit = \n", ": not valid TOML: "),
        ("limit = 2\nstrategy = ''\n", ":2: strategy: must not be empty"),
        ("probes = ''\n", ":1: probes: must not be empty"),
        ("limit = 2\n[section]\nx = 1\n", ":2: section: unknown key"),
        ("limit = 2\n[tool.flarebench]\nlimit = 3\n", ":2: tool: unknown key"),  # a pyproject table pasted here
        ("cache = 3\n", ":1: cache: expected str (a folder), true or false, got 3"),
    ],
)
def test_a_bad_file_is_one_line_naming_file_line_and_key(tmp_path, text, problem):
    path = _write(tmp_path, "flarebench.toml", text)
    with pytest.raises(SettingsError) as e:
        load(tmp_path)
    assert str(e.value).startswith(f"{path}{problem}") and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "text, problem",
    [
        ("[tool]\nflarebench.probes = 5\n", ":2: probes: expected str, got 5"),
        ("[ tool.flarebench ]\nlimit = 'x'\n", ":2: limit: expected int, got 'x'"),
        ("[tool.\"flarebench\"]\nlimit = 'x'\n", ":2: limit: expected int, got 'x'"),
        ("tool = {flarebench = {limit = 'x'}}\n", ":1: limit: expected int, got 'x'"),
        ("[tool]\nflarebench = 5\n", ": [tool.flarebench] must be a table"),
        ("[tool.flarebench.sub]\nx = 1\n", ":1: sub: unknown key"),
        ("[project]\nname = = 1\n[tool.flarebench]\nlimit = 2\n", ": not valid TOML: "),
        # Another tool's key of the same name above the table is not the line named.
        ("[tool.other]\nlimit = 5\n\n[tool.flarebench]\nlimit = 'x'\n", ":5: limit: expected int, got 'x'"),
    ],
)
def test_every_toml_spelling_of_the_pyproject_table_is_read(tmp_path, text, problem):
    # Each spelling is the table (never skipped for a file further up), so its mistakes are said.
    _write(tmp_path, "flarebench.toml", "limit = 3\n")
    path = _write(tmp_path / "sub", "pyproject.toml", text)
    with pytest.raises(SettingsError) as e:
        load(tmp_path / "sub")
    assert str(e.value).startswith(f"{path}{problem}") and "\n" not in str(e.value)


def test_a_pyproject_table_beside_a_flarebench_toml_is_said_not_read(tmp_path, capsys):
    _write(tmp_path, "flarebench.toml", "limit = 1\n")
    _write(tmp_path, "pyproject.toml", "[tool.flarebench]\nlimit = 2\n")
    assert load(tmp_path).values == {"limit": 1}
    assert capsys.readouterr().err == (
        f"flarebench: note: {tmp_path / 'pyproject.toml'} [tool.flarebench] is not read: flarebench.toml beside it is\n"
    )


def test_cache_false_is_no_cache(tmp_path):
    _write(tmp_path, "flarebench.toml", "cache = false\n")
    assert load(tmp_path).values == {"cache": None}


def test_the_command_line_wins_over_the_file_which_wins_over_the_default(tmp_path):
    found = Settings(tmp_path / "flarebench.toml", {"limit": 3, "probes": "nq", "strategy": ["ircot"]})
    values, sources = resolve({"limit": 5, "strategy": None, "probes": None}, found)
    assert (values["limit"], values["probes"], values["strategy"], values["lm"]) == (
        5,
        "nq",
        ["ircot"],
        "llamacpp:smollm2",
    )
    assert sources["limit"] == settings.COMMAND_LINE and sources["probes"] == str(found.path)
    assert sources["lm"] == settings.DEFAULT and "gate" not in sources  # unset options are not listed
    # A command's own default sits under the file's.
    values, _ = resolve({}, Settings(), {"reference": None})
    assert values["reference"] is None and values["overwrite"] is False


def test_no_name_sets_an_option_the_file_sets_back_to_its_default(tmp_path, monkeypatch, scripted_lm):
    # A team's file gates every run: without --no-gate no run could remake its baseline or resume.
    _write(tmp_path, "flarebench.toml", 'strategy = "no_retrieval"\nlimit = 3\ngate = "gone.json"\ncache = true\n')
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("run", "--limit", "2", "--report-dir", "r")
    assert code == 2 and "gone.json: not found" in err
    code, out, err = run_cli("run", "--no-limit", "--no-gate", "--no-cache", "--report-dir", "r", "--no-overwrite")
    assert code == 0, err
    info = json.loads((tmp_path / "r" / "run.json").read_text())
    assert info["probes_run"] == 50 and "gate" not in info["option_sources"] and "cache" not in info["option_sources"]
    code, out, err = run_cli("run", "--gate", "x.json", "--no-gate")
    assert code == 2 and err == "flarebench: --gate and --no-gate given together; give one\n"
    with pytest.raises(SettingsError, match="^--strategy and --no-strategy given together"):  # pytest bench
        resolve({"strategy": ["ircot"], "no_strategy": True}, Settings())
    values, sources = resolve({"no_strategy": True}, Settings(tmp_path / "f.toml", {"strategy": ["ircot"]}))
    assert values["strategy"] is None and "strategy" not in sources


@pytest.mark.parametrize("flag", ["--cache", "--probes", "--report-dir", "--prices", "--gate", "--save-baseline"])
def test_an_empty_path_on_the_command_line_is_refused_as_in_the_file(tmp_path, monkeypatch, flag, scripted_lm):
    # '' meant no value (--cache '' ran without a cache) or the current folder (--probes ''), silently.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        run_cli("run", "--strategy", "single_time", "--limit", "1", flag, "")
    assert e.value.code == 2 and list(tmp_path.iterdir()) == []  # refused before any run folder (tests/test_usage.py)
    dest = flag[2:].replace("-", "_")
    with pytest.raises(SettingsError, match=f"^{flag}: must not be empty$"):  # pytest bench: a usage error
        resolve({dest: ""}, Settings())


def test_the_cli_refuses_a_bad_file_in_one_line_before_loading(tmp_path, monkeypatch):
    path = _write(tmp_path, "flarebench.toml", "retreiver = 'bm25s'\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("run", "--limit", "1")
    assert code == 2 and err == f"flarebench: {path}:1: retreiver: unknown key; did you mean 'retriever'?\n"


@pytest.mark.parametrize(
    "text, problem",
    [
        ("strategy = 'no_retrieval'\nlimit = -3\n", ":2: limit: --limit must be >= 1, got -3"),
        ("strategy = 'no_retrieval'\nconcurrency = 0\n", ":2: concurrency: --concurrency must be >= 1, got 0"),
    ],
)
def test_a_bad_value_from_the_file_names_the_file_line_and_key(tmp_path, monkeypatch, text, problem):
    path = _write(tmp_path, "flarebench.toml", text)
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("run")
    assert code == 2 and err == f"flarebench: {path}{problem}\n"
    # The same value on the command line is the command line's, as it was.
    key = problem.split(":")[2].strip()
    code, out, err = run_cli("run", f"--{key}", problem.rsplit(" ", 1)[1])
    assert code == 2 and err.startswith(f"flarebench: --{key} must be >= 1")


@pytest.mark.parametrize(
    "line, opening",
    [
        ("probes = 'nosuch'", "probes: no probe set named or at 'nosuch'"),
        ("strategy = ['nosuch']", "strategy: unknown strategy 'nosuch'"),
        ("retriever = 'nosuch'", "retriever: unknown retriever spec 'nosuch'"),
        ("lm = 'nosuch:x'", "lm: unknown LM spec 'nosuch:x'"),
        ("judge = 'bad'", "judge: unknown judge spec 'bad'"),
        ("plugin = ['nosuchmod']", "plugin: --plugin nosuchmod: no module named 'nosuchmod'"),
        ("probes-format = 'yaml'", "probes-format: unknown probe format 'yaml'"),
    ],
)
def test_a_value_whose_message_does_not_open_with_its_flag_is_named_too(tmp_path, monkeypatch, line, opening):
    path = _write(tmp_path, "flarebench.toml", f"limit = 1\n{line}\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("run")
    assert code == 2 and err.startswith(f"flarebench: {path}:2: {opening}"), err
    assert not (tmp_path / "runs").exists()


def test_a_file_an_editor_saved_with_a_byte_order_mark_is_read(tmp_path):
    (tmp_path / "flarebench.toml").write_bytes(b"\xef\xbb\xbflimit = 3\n")
    assert load(tmp_path).values == {"limit": 3}


def test_a_cli_run_takes_the_file_and_records_where_values_came_from(tmp_path, monkeypatch, scripted_lm):
    _write(tmp_path, "flarebench.toml", 'strategy = ["no_retrieval"]\nlimit = 3\nreport-dir = "runs/x"\n')
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("run", "--limit", "2")
    assert code == 0, err
    info = json.loads((tmp_path / "runs" / "x" / "run.json").read_text())
    assert info["probes_run"] == 2 and list(info["config"]["strategies"]) == ["no_retrieval"]
    src = info["option_sources"]
    assert src["limit"] == "command line" and src["strategy"] == src["report_dir"] == str(tmp_path / "flarebench.toml")
    assert src["probes"] == "default"


@pytest.mark.slow
def test_pytest_refuses_a_bad_file_as_a_usage_error(pytester):
    pytester.makefile(".toml", flarebench="limit = 1\nstrategyy = 'all'\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "flarebench.toml:2: strategyy: unknown key; did you mean 'strategy'?" in result.stderr.str()


def test_a_plugin_file_named_twice_in_other_spellings_is_imported_once(tmp_path, monkeypatch):
    # One in flarebench.toml, one on the command line: the second import would register its names again.
    from flarebench.strategies import plugins

    monkeypatch.setattr(plugins, "_loaded", set())
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "mine.py").write_text("with open('imports', 'a') as f:\n    f.write('x')\n")
    plugins.load_all(["p/mine.py", "./p/mine.py", str(tmp_path / "p" / "mine.py")])
    assert (tmp_path / "imports").read_text() == "x"
