"""A project's defaults for the run options: ``flarebench.toml``, or ``[tool.flarebench]`` in
``pyproject.toml``, found from the current folder upwards (the nearest wins, ``flarebench.toml``
before ``pyproject.toml`` in the same folder).

Keys are the long option names without ``--`` (``probes``, ``lm-base-url``, ``strategy``,
``tolerance``, ``gate``, ``report-dir``, ``cache`` ...), with TOML values of the option's type: a
list of strings (or one string) for the repeatable ``strategy`` and ``tolerance``, ``true``/``false``
for switches, and ``cache = true`` for the default cache folder (``false``: none). Relative paths are relative to the
file's folder, so the same file works from any subfolder. A value given on the command line wins
over the file, which wins over the built-in default; run.json records where each value came from.
"""

from __future__ import annotations

import difflib
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flarebench.bench.lines import line_of
from flarebench.bench.options import RUN_OPTIONS, Option, is_blank
from flarebench.probes.load import is_shipped_name

CONFIG_FILE = "flarebench.toml"
PYPROJECT = "pyproject.toml"

#: Options whose value is a path: read relative to the config file's folder.
_PATH_OPTIONS = {"report_dir", "save_baseline", "gate", "prices", "cache"}
#: The value sources run.json names besides a config file's path.
COMMAND_LINE, DEFAULT = "command line", "default"


def was_given(sources: dict[str, str] | None, dest: str) -> bool:
    """Whether the run option ``dest`` was given (on the command line or in a config file) rather
    than left at its default, by the value sources :func:`resolve` returns."""
    return (sources or {}).get(dest, DEFAULT) != DEFAULT


class SettingsError(Exception):
    """A config file that cannot be used: one line naming the file, the line when known, and the key."""


@dataclass(frozen=True)
class Settings:
    """The run-option defaults a config file sets (by option dest), and the file they came from."""

    path: Path | None = None
    values: dict[str, Any] = field(default_factory=dict)


def find(start: Path) -> Path | None:
    """The config file that applies in ``start``: the nearest folder upwards holding a
    ``flarebench.toml`` or a ``pyproject.toml`` with a ``[tool.flarebench]`` table."""
    for folder in [start, *start.parents]:
        if (folder / CONFIG_FILE).is_dir():  # meant as the file, never read: said, not passed by
            raise SettingsError(f"{folder / CONFIG_FILE}: is a folder, not a config file; remove or rename it")
        if (folder / CONFIG_FILE).is_file():
            if has_table(folder / PYPROJECT):  # documented, but a table edited in vain would go unsaid
                print(
                    f"flarebench: note: {folder / PYPROJECT} [tool.flarebench] is not read: {CONFIG_FILE} beside it is",
                    file=sys.stderr,
                )
            return folder / CONFIG_FILE
        if has_table(folder / PYPROJECT):
            return folder / PYPROJECT
    return None


def has_table(pyproject: Path) -> bool:
    """True when ``pyproject`` is a file holding a ``tool.flarebench`` key, however TOML spells it
    (``[tool.flarebench]``, ``[ tool."flarebench" ]``, dotted keys under ``[tool]``, an inline
    table), or a file that is not valid TOML but names flarebench (:func:`load` then says why)."""
    if not pyproject.is_file():
        return False
    text = _text(pyproject)
    try:
        tool = tomllib.loads(text).get("tool")
    except tomllib.TOMLDecodeError:
        return "flarebench" in text
    return isinstance(tool, dict) and "flarebench" in tool


def load(start: Path | None = None) -> Settings:
    """The settings that apply in ``start`` (default: the current folder); empty when no file does."""
    path = find((start or Path.cwd()).resolve())
    if path is None:
        return Settings()
    text = _text(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SettingsError(f"{path}: not valid TOML: {e}") from None
    table = data.get("tool", {}).get("flarebench", {}) if path.name == PYPROJECT else data
    if not isinstance(table, dict):
        raise SettingsError(f"{path}: [tool.flarebench] must be a table")
    by_key = {opt.flag.removeprefix("--"): opt for opt in RUN_OPTIONS}
    values = {}
    for key, raw in table.items():
        where = f"{path}:{_line(path, text, key)}: {key}"
        opt = by_key.get(key)
        if opt is None:
            # Only a near spelling is suggested: a command's own option (compare's budget) is not a
            # typo of a run option that happens to share letters (judge).
            close = difflib.get_close_matches(key, by_key, n=1, cutoff=0.8)
            hint = (
                f"did you mean '{close[0]}'?"
                if close
                else f"the file sets the options every run command takes: {', '.join(by_key)}; "
                "a command's own options (compare --budget) go on its command line"
            )
            raise SettingsError(f"{where}: unknown key; {hint}")
        values[opt.dest] = _value(opt, raw, path.parent, where)
    return Settings(path, values)


def resolve(
    given: dict[str, Any], settings: Settings, defaults: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """Every run option's value (by dest) and where it came from: the command line (``given``, where
    None means not given), else the config file (unless ``given`` holds the option's ``--no-NAME``),
    else ``defaults`` (a command's own), else the option's default. Sources name only the options
    that hold a value. An empty value on the command line raises SettingsError, as in the file (an
    empty path meant the current folder, or no value at all, silently), and so does an option given
    beside its ``--no-NAME``."""
    values, sources = {}, {}
    for opt in RUN_OPTIONS:
        negated = given.get(opt.negated_dest)
        if given.get(opt.dest) is not None:
            if negated:
                raise SettingsError(f"{opt.flag} and {opt.negation} given together; give one")
            _refuse_empty(given[opt.dest], opt.flag)
            values[opt.dest], source = given[opt.dest], COMMAND_LINE
        elif opt.dest in settings.values and not negated:
            values[opt.dest], source = settings.values[opt.dest], str(settings.path)
        else:
            values[opt.dest] = (defaults or {}).get(opt.dest, False if opt.is_switch else opt.default)
            source = DEFAULT
        if values[opt.dest] is not None and values[opt.dest] is not False:  # a 0 was given: listed
            sources[opt.dest] = source
    return values, sources


def _refuse_empty(raw: Any, where: str) -> None:
    """SettingsError when ``raw`` is empty (or blank) text, or a list holding one."""
    if is_blank(raw) or (isinstance(raw, list) and any(is_blank(r) for r in raw)):
        raise SettingsError(f"{where}: must not be empty")


def _value(opt: Option, raw: Any, base: Path, where: str) -> Any:
    """A TOML value checked against its option's type, paths made absolute against ``base``."""
    if opt.is_switch:
        if not isinstance(raw, bool):
            raise SettingsError(f"{where}: expected true or false, got {raw!r}")
        return raw
    if opt.dest == "cache" and isinstance(raw, bool):
        return opt.const if raw else None  # true: the default folder; false: no cache
    _refuse_empty(raw, where)
    if opt.repeatable:
        items = [raw] if isinstance(raw, str) else raw
        if not isinstance(items, list) or not items or not all(isinstance(i, str) for i in items):
            raise SettingsError(f"{where}: expected a string or a list of strings, got {raw!r}")
        if opt.dest == "plugin":  # a plugin file beside the file, as every path; a module name as it is
            return [str(base / i) if i.endswith(".py") else i for i in items]
        return items
    want = (int, float) if opt.type is float else opt.type
    if not isinstance(raw, want) or isinstance(raw, bool):
        also = " (a folder), true or false" if opt.dest == "cache" else ""
        raise SettingsError(f"{where}: expected {opt.type.__name__}{also}, got {raw!r}")
    if opt.dest in _PATH_OPTIONS:
        return str(base / raw)
    if opt.dest == "probes" and (base / raw).exists() and not is_shipped_name(raw):
        return str(base / raw)  # a folder beside the file; a shipped set's name means it, as on the command line
    return opt.type(raw)


def locate(message: str, sources: dict[str, str], option: str | None = None) -> str:
    """``message`` about an option (the flag it opens with, ``--limit must be >= 1, got -3``, else
    ``option``) prefixed with the config file, line and key the value came from, when it came from one."""
    opening = re.match(r"--[a-z][a-z0-9-]*", message)
    flag = opening.group() if opening else option
    opt = next((o for o in RUN_OPTIONS if o.flag == flag), None)
    source = sources.get(opt.dest) if opt else None
    if source is None or source in (COMMAND_LINE, DEFAULT):
        return message
    path, key = Path(source), flag.removeprefix("--")
    return f"{path}:{_line(path, _text(path), key)}: {key}: {message}"


def _line(path: Path, text: str, key: str) -> int | str:
    """The line of ``key`` in a config file; in a pyproject.toml, the one under ``[tool.flarebench]``
    (coverage has a ``concurrency`` too), else its dotted spelling anywhere (``flarebench.limit =``)."""
    if path.name == PYPROJECT:
        table, under = line_of(text, "flarebench"), line_of(text, "flarebench", key)
        if under != table:
            return under
    return line_of(text, key)


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")  # an editor's byte-order mark is no TOML statement
    except (OSError, UnicodeDecodeError) as e:
        raise SettingsError(f"{path}: cannot be read ({e})") from None
