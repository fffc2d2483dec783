"""``flarebench init [DIR]``: what a repository needs to run flarebench's bench on its own probes.

The files come from ``templates/init`` (one file each, as they will be written): ``bench/`` with a
test module that hands collection to flarebench, an example probe set with a README, two CI jobs
to copy (GitHub Actions, GitLab CI), and ``flarebench.toml`` with the run options' defaults.
Nothing that exists is overwritten: an existing file is kept and named. Every path is checked
before the first is written, and a write that fails all the same takes back what this init wrote,
so a failed init leaves the folder as it was.
"""

from __future__ import annotations

import contextlib
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from flarebench.bench import version
from flarebench.bench.paths import PathError, check_folder, check_output_file
from flarebench.bench.settings import CONFIG_FILE, PYPROJECT, has_table

TEMPLATES = Path(__file__).resolve().parent / "templates" / "init"
#: Template files that would be collected or linted where they lie carry this suffix, dropped on copy.
_SUFFIX = ".in"


@dataclass
class Scaffold:
    """What ``init`` did: the files it created, those it kept because they existed, what the
    user must still do by hand (``todo``: lines to print), and where the run options' defaults are
    edited (``settings``, relative to the target)."""

    created: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)
    todo: list[str] = field(default_factory=list)
    settings: str = CONFIG_FILE


def _missing_settings(pyproject: Path) -> list[str]:
    """The settings of the template flarebench.toml (its ``key = value`` lines) that the
    ``[tool.flarebench]`` table of ``pyproject`` does not set: without them the bench would not run
    the example probe set."""
    try:
        table = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["flarebench"]
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError, TypeError):
        table = {}
    lines = (TEMPLATES / CONFIG_FILE).read_text(encoding="utf-8").splitlines()
    settings = [line for line in lines if line and not line.startswith(("#", "[", " "))]
    return [line for line in settings if line.split("=")[0].strip() not in table]


#: The packages whose versions a run's configuration records (the retriever's and the LM's
#: describe()): a CI job that installed a newer one than its baseline's would be refused as another
#: configuration on every pull request after their release, so the jobs pin them.
RECORDED = ("bm25s", "llama-cpp-python")


def _requirement() -> str:
    """The pip requirements the CI jobs install: this version of flarebench, when it is known, and
    the versions installed here of the packages a baseline records."""
    from importlib import metadata

    v = version()
    pins = ["flarebench" if v == "unknown" else f"flarebench=={v}"]
    for name in RECORDED:
        try:
            pins.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return " ".join(pins)


def init(target: Path) -> Scaffold:
    """Write the template files under ``target`` (created if needed), keeping any that exist. A
    ``pyproject.toml`` there with a ``[tool.flarebench]`` table already holds the defaults, so no
    ``flarebench.toml`` is added beside it. :class:`PathError` names the first path in the way (a
    file where a folder goes, a folder where a file goes, a place that cannot be written), and
    nothing is written then."""
    flag = "flarebench init"
    check_folder(flag, target)
    done = Scaffold()
    pyproject = target / PYPROJECT
    defaults_in_pyproject = has_table(pyproject)
    todo: list[tuple[Path, Path]] = []  # (template, destination) of the files to write
    # A probe set is one whole: a folder of the team's own gets none of the example's files mixed in.
    probes = target / "bench" / "probes"
    own_set = probes.is_dir() and any(probes.iterdir())
    for source in sorted(p for p in TEMPLATES.rglob("*") if p.is_file()):
        dest = target / str(source.relative_to(TEMPLATES)).removesuffix(_SUFFIX)
        if own_set and probes in dest.parents:
            if dest.is_file():
                done.kept.append(dest)
        elif dest.name == CONFIG_FILE and defaults_in_pyproject:
            done.kept.append(pyproject)
            done.settings = f"{PYPROJECT} [tool.flarebench]"
            if missing := _missing_settings(pyproject):
                done.todo.append(
                    f"{pyproject} holds [tool.flarebench], which flarebench reads instead of {CONFIG_FILE}; "
                    f"add to it what the example needs: {'; '.join(missing)}"
                )
        elif dest.is_file():
            done.kept.append(dest)
        else:
            check_output_file(flag, dest)
            todo.append((source, dest))
    made: list[Path] = []  # the folders and files this init made, newest last
    try:
        for source, dest in todo:
            text = source.read_text(encoding="utf-8")
            text = text.replace("@FLAREBENCH_VERSION@", version()).replace("@FLAREBENCH_REQUIREMENT@", _requirement())
            made += reversed([p for p in (dest.parent, *dest.parent.parents) if not p.exists()])
            dest.parent.mkdir(parents=True, exist_ok=True)
            with dest.open("x", encoding="utf-8") as f:  # "x": never replace a file made meanwhile
                made.append(dest)
                f.write(text)
            done.created.append(dest)
    except OSError as e:
        for path in reversed(made):
            with contextlib.suppress(OSError):
                if path.is_dir():
                    path.rmdir()
                else:
                    path.unlink()
        raise PathError(f"{flag} {target}: cannot write {e.filename or dest} ({e.strerror or e})") from None
    if own_set:  # the bench runs on it: said now if it cannot
        from flarebench.probes.validate import validate

        if problems := validate(probes):
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            done.todo.append(
                f"{problems[0]}{more}: mend the probe set kept in {probes} before the bench runs on it "
                f"(python -m flarebench.probes validate {shlex.quote(str(probes))} lists its problems)"
            )
    return done
