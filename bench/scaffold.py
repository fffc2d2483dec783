"""``flarebench init [DIR]``: what a repository needs to run flarebench's bench on its own probes.

The files come from ``templates/init`` (one file each, as they will be written): ``bench/`` with a
test module that hands collection to flarebench, an example probe set with a README, two CI jobs
to copy (GitHub Actions, GitLab CI), and ``flarebench.toml`` with the run options' defaults.
Nothing that exists is overwritten: an existing file is kept and named.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from flarebench.bench import version
from flarebench.bench.paths import check_folder
from flarebench.bench.settings import CONFIG_FILE, PYPROJECT, has_table

TEMPLATES = Path(__file__).resolve().parent / "templates" / "init"
#: Template files that would be collected or linted where they lie carry this suffix, dropped on copy.
_SUFFIX = ".in"


@dataclass
class Scaffold:
    """What ``init`` did: the files it created, and those it kept because they existed."""

    created: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)


def _requirement() -> str:
    """The pip requirement the CI jobs install: this version, when it is known."""
    v = version()
    return "flarebench" if v == "unknown" else f"flarebench=={v}"


def init(target: Path) -> Scaffold:
    """Write the template files under ``target`` (created if needed), keeping any that exist. A
    ``pyproject.toml`` there with a ``[tool.flarebench]`` table already holds the defaults, so no
    ``flarebench.toml`` is added beside it."""
    check_folder("flarebench init", target)
    done = Scaffold()
    pyproject = target / PYPROJECT
    defaults_in_pyproject = has_table(pyproject)
    for source in sorted(p for p in TEMPLATES.rglob("*") if p.is_file()):
        dest = target / str(source.relative_to(TEMPLATES)).removesuffix(_SUFFIX)
        if dest.name == CONFIG_FILE and defaults_in_pyproject:
            done.kept.append(pyproject)
            continue
        if dest.exists():
            done.kept.append(dest)
            continue
        text = source.read_text(encoding="utf-8")
        text = text.replace("@FLAREBENCH_VERSION@", version()).replace("@FLAREBENCH_REQUIREMENT@", _requirement())
        dest.parent.mkdir(parents=True, exist_ok=True)
        with dest.open("x", encoding="utf-8") as f:  # "x": never replace a file made meanwhile
            f.write(text)
        done.created.append(dest)
    return done
