"""The package's import graph: no module imports, at any depth and from any function, a module that
imports it back, every module imports on its own (no import order hides a cycle), and every import
of flarebench's own code goes through the ``flarebench`` namespace."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The repository's top-level folders that install as flarebench.<folder> (pyproject.toml).
PACKAGES = ("bench", "strategies", "probes")


def _modules() -> dict[str, Path]:
    out = {
        "flarebench": ROOT / "flarebench" / "__init__.py",
        "flarebench.__main__": ROOT / "flarebench" / "__main__.py",
    }
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            out[f"flarebench.{name}"] = path
    return out


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``path`` imports, wherever the import statement stands."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        found.update(n for n in names if n in modules)
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path of module names, or None (depth-first search, three colours)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module] - {module}):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_the_import_graph_has_no_cycle():
    modules = _modules()
    graph = {name: _imports(path, modules) for name, path in modules.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))
    # The check itself finds a cycle where there is one.
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


@pytest.mark.slow
def test_no_code_imports_a_top_level_bench_strategies_or_probes():
    # Installed, those names are a team's own packages (or nothing): ours are flarebench.*.
    files = [*_modules().values(), *sorted((ROOT / "tests").rglob("*.py"))]
    bare = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            bare += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in PACKAGES]
    assert bare == []


#: Run in one fresh interpreter: imports each module with no flarebench module loaded before it
#: (third-party ones stay loaded, which cannot hide an order dependence among ours), one line each.
_IMPORT_EACH = """
import importlib, sys, traceback
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "flarebench" or m.startswith("flarebench.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except BaseException:
        print(name, traceback.format_exc().strip().splitlines()[-1])
"""


@pytest.mark.slow
def test_every_module_imports_on_its_own():
    names = [n for n in _modules() if not n.endswith(("__main__", "test_bench"))]
    r = subprocess.run([sys.executable, "-c", _IMPORT_EACH, *names], cwd=ROOT, capture_output=True, text=True)
    assert (r.returncode, r.stdout) == (0, ""), r.stderr
    # The check itself fails a module that needs another imported first.
    r = subprocess.run([sys.executable, "-c", _IMPORT_EACH, "flarebench.nonexistent"], capture_output=True, text=True)
    assert r.stdout.startswith("flarebench.nonexistent ModuleNotFoundError")


def test_every_folder_that_ships_files_is_a_listed_package():
    # setuptools prints a screen of warnings per unlisted folder on every install from source
    import tomllib

    setup = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    folders = {f"flarebench.{p}": ROOT / p for p in PACKAGES}
    shipped = {
        f.parent
        for package, patterns in setup["package-data"].items()
        for pattern in patterns
        for f in folders[package].glob(pattern)
        if f.is_file()
    }
    as_packages = {"flarebench." + ".".join(d.relative_to(ROOT).parts) for d in shipped}
    assert sorted(as_packages - set(setup["packages"])) == []
    assert "flarebench.probes.engdocs" in as_packages and "flarebench.bench.templates.init.bench.ci" in as_packages
