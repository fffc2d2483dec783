"""Plugins: strategies, LMs and retrievers from outside flarebench.

An installed package declares them as entry points, loaded only when their name is asked for:

- ``flarebench.strategies``: NAME = a Strategy subclass (``--strategy NAME``);
- ``flarebench.lms``: NAME = an LM subclass built as ``cls(ARG)`` (``--lm NAME:ARG``) or ``cls()`` (``--lm NAME``);
- ``flarebench.retrievers``: NAME = a Retriever subclass built as ``cls(corpus)`` (``--retriever NAME``).

``--plugin MODULE|FILE.py`` imports a module for one run instead, whose ``@register``,
``@register_lm`` and ``@register_retriever`` decorators add what it holds. A name registered from two
places is an error naming both.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import importlib
import importlib.util
import re
import sys
from collections.abc import Iterable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

STRATEGIES = "flarebench.strategies"
LMS = "flarebench.lms"
RETRIEVERS = "flarebench.retrievers"

#: The plugin being imported, so that what it registers is recorded as coming from it.
_loading: contextvars.ContextVar[str | None] = contextvars.ContextVar("flarebench_plugin", default=None)
#: --plugin references already imported (a second load of the same one is a no-op).
_loaded: set[str] = set()
#: Those of them that registered a strategy, an LM, a retriever or a trigger: code that shapes the
#: answers, so part of a run's configuration. A plugin of scorers only changes no answer.
_answering: set[str] = set()


class PluginError(ValueError):
    """A plugin cannot be loaded, or registers a name something else registered."""


#: A name a spec can spell: specs split at ``:``, ``,`` and ``=`` and strip spaces.
_NAME = re.compile(r"[^\s:,=]+")


def check_name(kind: str, name: Any, reserved: tuple[str, ...] = ()) -> None:
    """Refuse (PluginError, one line) a ``kind`` name a spec cannot spell, or one of ``reserved``."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name in reserved:
        rule = "not empty, without spaces, ':', ',' or '='" + "".join(f"; not {r!r}" for r in reserved)
        raise PluginError(f"{kind} {name!r}: not a usable name ({rule})")


def add(table: dict[str, Any], origins: dict[str, str], kind: str, name: str, obj: Any) -> None:
    """Register ``obj`` as the ``kind`` called ``name`` in ``table``, recording where it came from;
    a name taken already is an error naming who took it (``load`` adds the plugin that asked)."""
    if obj.__module__.startswith("flarebench."):
        where = "built in"
    elif source := _loading.get():
        where = f"by plugin {source}"
        _answering.add(_key(source))
    else:
        where = f"by {obj.__module__}.{obj.__qualname__}"
    if name in table and table[name] is not obj:
        raise PluginError(f"{kind} {name!r} is already registered ({origins[name]})")
    table[name], origins[name] = obj, where


@contextlib.contextmanager
def _from(source: str) -> Iterator[None]:
    token = _loading.set(source)
    try:
        yield
    finally:
        _loading.reset(token)


def load(ref: str) -> None:
    """Import the plugin ``ref`` (``--plugin``): a module name, or a path ending in ``.py``. Any
    failure, a name it cannot register included, is one PluginError line naming it. A file is
    imported once however its path is spelled (``p/mine.py`` in the config file, ``./p/mine.py`` on
    the command line)."""
    key = _key(ref)
    if key in _loaded:
        return
    try:
        with _from(ref):
            if ref.endswith(".py"):
                _import_file(Path(ref))
            else:
                importlib.import_module(ref)
    except ModuleNotFoundError as e:
        raise PluginError(f"--plugin {ref}: no module named {e.name!r}") from None
    except (Exception, SystemExit) as e:  # the plugin's own import failed: one line, naming it
        raise PluginError(f"--plugin {ref}: {_failure(e)}") from None
    _loaded.add(key)


def _key(ref: str) -> str:
    """One key per plugin however its path is spelled: a file by its resolved path, a module by name."""
    return str(Path(ref).resolve()) if ref.endswith(".py") else ref


def shapes_answers(ref: str) -> bool:
    """Whether the loaded plugin ``ref`` registered a strategy, an LM, a retriever or a trigger (its
    code is then part of a run's configuration); False for one of scorers only, which changes no
    answer: edited to fix a scorer, its run still resumes."""
    return _key(ref) in _answering


def recorded(ref: str) -> str:
    """``ref`` as run.json records it, so that it loads again from any folder: a file by its
    absolute path, a module by its name."""
    return str(Path(ref).resolve()) if ref.endswith(".py") else ref


def digest(ref: str) -> str | None:
    """The sha256 of a loaded plugin's code: the file of ``ref`` (``FILE.py``, or a module's own
    file); None when it has none to read (a namespace package)."""
    path = Path(ref) if ref.endswith(".py") else Path(getattr(sys.modules.get(ref), "__file__", None) or "")
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    except OSError:
        return None


def _failure(e: BaseException) -> str:
    """What went wrong while a plugin was imported, in words."""
    if isinstance(e, PluginError):  # said by flarebench already (a name it cannot register)
        return str(e)
    if isinstance(e, SystemExit):  # its exit status would pass for one of flarebench's own
        return f"exited while being imported (SystemExit {e.code})"
    return f"{type(e).__name__}: {e}"


def load_all(refs: Iterable[str] | None) -> None:
    """Import every ``--plugin`` reference, in order."""
    for ref in refs or ():
        load(ref)


def _import_file(path: Path) -> None:
    if not path.is_file():
        raise PluginError("is a folder, not a file" if path.is_dir() else "no such file")
    name = f"flarebench_plugin_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)


def entry_point(group: str, name: str) -> Any | None:
    """The object the installed entry point ``name`` of ``group`` names, imported now; None when no
    installed package declares it. Two packages declaring it is an error naming both."""
    found = [ep for ep in _declared(group) if ep.name == name]
    if not found:
        return None
    if len(found) > 1:
        dists = " and ".join(sorted(f"{ep.dist.name if ep.dist else '?'} ({ep.value})" for ep in found))
        raise PluginError(f"{group} entry point {name!r} is declared twice: by {dists}")
    ep = found[0]
    try:
        with _from(f"{ep.dist.name if ep.dist else ep.value}, entry point {name}"):
            loaded = ep.load()
    except (Exception, SystemExit) as e:  # the plugin's own import failed: one line, naming it
        raise PluginError(f"{group} entry point {name} = {ep.value}: {_failure(e)}") from None
    _IMPORTED[(group, name)] = (f"{ep.value} ({ep.dist.name} {ep.dist.version})" if ep.dist else ep.value, ep.module)
    return loaded


#: Each installed entry point imported so far: (group, name) -> ("MODULE:ATTR (DIST VERSION)", MODULE).
_IMPORTED: dict[tuple[str, str], tuple[str, str]] = {}


def installed_code(used: Iterable[tuple[str, str]]) -> dict[str, str | None]:
    """Of the (group, name) pairs a run uses, those an installed package's entry point gave:
    "MODULE:ATTR (DIST VERSION)" -> the sha256 of the module's file. Recorded beside the --plugin
    digests, so that a run is not resumed by another version of the package's code."""
    return {label: digest(module) for key in used if key in _IMPORTED for label, module in [_IMPORTED[key]]}


def entry_point_names(group: str) -> list[str]:
    """The names installed packages declare in ``group``, without importing them."""
    return sorted({ep.name for ep in _declared(group)})


def _declared(group: str) -> tuple[metadata.EntryPoint, ...]:
    """The entry points of ``group`` the installed distributions declare. Reading them walks every
    distribution on the path (about 10 ms), and rescoring a run whose plugin is not loaded asks for
    its unknown names once per spec and summary: read once per ``sys.path``, whose new folders (a
    test's, a user's) are read when they appear."""
    return _declared_on(group, tuple(sys.path))


@functools.lru_cache(maxsize=16)
def _declared_on(group: str, path: tuple[str, ...]) -> tuple[metadata.EntryPoint, ...]:
    # ``path`` is the cache key only: entry_points() reads sys.path itself.
    return tuple(metadata.entry_points(group=group))
