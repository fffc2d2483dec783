"""`flarebench init` and `pytest bench` in a repository that is not flarebench's (collection only:
the installed-wheel step of .ci/run runs the bench itself in such a folder)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from flarebench.bench.scaffold import TEMPLATES, init
from flarebench.bench.settings import load
from tests.scripted import run_cli


def _collect(folder, *args):
    r = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return r.returncode, [line for line in r.stdout.splitlines() if "::" in line], r.stdout + r.stderr


def test_init_writes_every_template_and_overwrites_nothing(tmp_path):
    repo = tmp_path / "repo"
    (repo / "bench").mkdir(parents=True)
    (repo / "bench" / "README.md").write_text("ours\n")
    done = init(repo)
    templates = {str(p.relative_to(TEMPLATES)).removesuffix(".in") for p in TEMPLATES.rglob("*") if p.is_file()}
    assert {str(p.relative_to(repo)) for p in done.created} == templates - {"bench/README.md"}
    assert done.kept == [repo / "bench" / "README.md"] and (repo / "bench" / "README.md").read_text() == "ours\n"
    # A second init creates nothing and keeps everything.
    again = init(repo)
    assert again.created == [] and len(again.kept) == len(templates)
    # The probe set is valid and the config file points at it.
    assert load(repo).values["probes"] == str(repo / "bench" / "probes")
    from flarebench.probes.validate import check_folder

    assert check_folder(repo / "bench" / "probes", require_readme=True).problems == []
    # The CI jobs install this version of flarebench, and the versions a baseline records.
    from importlib import metadata

    job = (repo / "bench" / "ci" / "github-actions.yml").read_text()
    assert "@FLAREBENCH" not in job
    assert f" bm25s=={metadata.version('bm25s')} llama-cpp-python=={metadata.version('llama-cpp-python')}\n" in job


def test_init_over_a_broken_probe_set_of_the_teams_own_says_what_to_mend(tmp_path):
    (tmp_path / "bench" / "probes").mkdir(parents=True)
    (tmp_path / "bench" / "probes" / "probes.jsonl").write_text('{"id": "p1", "question": "q"}\n')
    (todo,) = init(tmp_path).todo
    assert todo.startswith(f"{tmp_path / 'bench' / 'probes'}/") and "mend the probe set kept in" in todo
    # None of the example set's files is mixed into it (its corpus.jsonl would not hold the team's ids).
    assert sorted(p.name for p in (tmp_path / "bench" / "probes").iterdir()) == ["probes.jsonl"]
    assert init(tmp_path / "fresh").todo == []  # the example set init writes is whole


def test_init_keeps_a_pyprojects_table_instead_of_adding_a_config_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.flarebench]\nprobes = "nq"\n')
    done = init(tmp_path)
    assert not (tmp_path / "flarebench.toml").exists() and tmp_path / "pyproject.toml" in done.kept
    # The table is read instead of flarebench.toml: init says what it lacks to run the example set.
    (todo,) = done.todo
    assert "holds [tool.flarebench], which flarebench reads instead of flarebench.toml" in todo
    assert todo.endswith('strategy = ["no_retrieval", "single_time", "flare_direct"]; retriever = "bm25s"')
    assert "probes =" not in todo  # the table sets it already


def test_init_says_what_to_run_next_from_where_the_user_is(tmp_path, monkeypatch):
    code, out, _ = run_cli("init", str(tmp_path / "repo"))
    assert code == 0 and f"next: cd {tmp_path / 'repo'} && pytest bench --limit 1" in out
    monkeypatch.chdir(tmp_path / "repo")
    code, out, _ = run_cli("init", ".")
    assert code == 0 and "next: pytest bench --limit 1" in out  # no "cd ." in the folder itself
    assert "(then edit bench/probes and flarebench.toml;" in out


def test_init_next_names_the_pyproject_table_it_did_not_replace(tmp_path):
    # No flarebench.toml is written beside a [tool.flarebench] table: the hint names the table.
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.flarebench]\nlimit = 2\n')
    code, out, _ = run_cli("init", str(tmp_path))
    assert code == 0 and not (tmp_path / "flarebench.toml").exists()
    (next_line,) = [line for line in out.splitlines() if line.startswith("next: ")]
    assert "(then edit bench/probes and pyproject.toml [tool.flarebench];" in next_line


def test_init_into_a_file_is_one_line(tmp_path):
    (tmp_path / "f").write_text("")
    code, out, err = run_cli("init", str(tmp_path / "f"))
    assert code == 2 and err == f"flarebench: flarebench init {tmp_path / 'f'}: is a file, not a folder\n"


def _tree(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize(
    ("in_the_way", "problem"),
    [
        ("bench", "bench/README.md: cannot be created: {repo}/bench is a file, not a folder"),
        ("bench/probes", "bench/probes/README.md: cannot be created: {repo}/bench/probes is a file, not a folder"),
        ("flarebench.toml", "flarebench.toml: is a folder, not a file"),
    ],
)
def test_init_with_a_path_in_the_way_writes_nothing_and_is_one_line(tmp_path, in_the_way, problem):
    repo = tmp_path / "repo"
    path = repo / in_the_way
    path.parent.mkdir(parents=True)
    if in_the_way == "flarebench.toml":  # a folder where a file goes
        path.mkdir()
    else:  # a file where a folder goes
        path.write_text("x\n")
    before = _tree(repo)
    code, out, err = run_cli("init", str(repo))
    assert (code, out) == (2, "")
    assert err == f"flarebench: flarebench init {repo}/{problem.format(repo=repo)}\n"
    assert _tree(repo) == before


def test_init_that_fails_while_writing_takes_back_what_it_wrote(tmp_path):
    repo = tmp_path / "repo"
    (repo / "bench" / "ci").mkdir(parents=True)
    # A link to nowhere: no check before writing sees it, and the file cannot be created there.
    (repo / "bench" / "ci" / "gitlab-ci.yml").symlink_to(tmp_path / "nowhere")
    before = _tree(repo)
    code, out, err = run_cli("init", str(repo))
    assert (code, out) == (2, "")
    assert err == f"flarebench: flarebench init {repo}: cannot write {repo}/bench/ci/gitlab-ci.yml (File exists)\n"
    assert _tree(repo) == before


@pytest.mark.slow
def test_pytest_bench_collects_the_installed_bench_or_the_repositorys_own(tmp_path):
    # A folder with packages named like flarebench's parts: they shadow nothing.
    for name in ("probes", "strategies"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("raise ImportError('the team package was imported')\n")
    code, items, out = _collect(tmp_path, "bench", "--strategy", "no_retrieval", "--strategy", "ircot")
    assert code == 0, out
    # flarebench's own bench (outside this folder, so pytest names it by its file alone).
    assert items == ["test_bench.py::test_strategy[no_retrieval]", "test_bench.py::test_strategy[ircot]"]
    # After init, the repository's own bench/ (its probes, its config) is the one collected.
    init(tmp_path)
    code, items, out = _collect(tmp_path, "bench")
    assert code == 0, out
    assert items == [
        f"bench/test_flarebench.py::test_strategy[{spec}]" for spec in ("no_retrieval", "single_time", "flare_direct")
    ]
