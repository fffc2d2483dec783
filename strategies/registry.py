"""The strategy registry: ``@register("name")`` on a Strategy class, lookup by name or spec.

A spec is ``name`` or ``name:key=value,key=value`` (e.g. ``flare_direct:theta=0.6,k=5``). The
spec is split at its first ``:``, its parameters at ``,`` and each at its first ``=``, so a value
may hold ``:`` and ``=`` but no ``,`` (``http:url=http://127.0.0.1:8000/answer?v=2``). Besides
the built-ins, a name may come from a plugin (:mod:`flarebench.strategies.plugins`): an installed
entry point, imported when its name is first asked for, or a ``--plugin`` module.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import math
import types
import typing
from collections.abc import Callable
from typing import Any, Literal

import flarebench.strategies.plugins as plugins
from flarebench.strategies.base import Strategy
from flarebench.strategies.http_client import redact_urls

_REGISTRY: dict[str, type[Strategy]] = {}
_ORIGINS: dict[str, str] = {}  # name -> where it was registered from, for the "already registered" error


class SpecError(ValueError):
    """A strategy spec names an unknown strategy or gives a bad parameter. The message quotes the
    spec with its URLs redacted (``http:url=...``): a key in one must not reach a terminal or a log."""

    def __init__(self, message: str):
        super().__init__(redact_urls(message))


def register(name: str) -> Callable[[type[Strategy]], type[Strategy]]:
    """Class decorator: make a Strategy available under ``name``. The class must be a dataclass
    subclass of Strategy, and the name one a spec can spell that nothing has taken, a built-in
    included: :class:`~flarebench.strategies.plugins.PluginError` otherwise, when the class is
    defined, so every command that loads a plugin says it the same way."""

    def deco(cls: type[Strategy]) -> type[Strategy]:
        plugins.check_name("strategy", name, reserved=("all",))  # "all" expands to the built-ins
        if not dataclasses.is_dataclass(cls):
            raise plugins.PluginError(
                f"strategy {name!r}: {cls.__qualname__} must be a dataclass (its fields are the strategy's parameters)"
            )
        if not (isinstance(cls, type) and issubclass(cls, Strategy)):
            raise plugins.PluginError(f"strategy {name!r}: {cls.__qualname__} must be a subclass of Strategy")
        if not cls.__module__.startswith(f"{__package__}."):
            _load_builtin()  # first, so that a plugin taking a built-in's name is refused whatever the command
        plugins.add(_REGISTRY, _ORIGINS, "strategy", name, cls)
        cls.name = name
        return cls

    return deco


def names() -> list[str]:
    """Every strategy name known: the built-in ones in `all`'s order, the others registered in
    registration order, then the installed plugins' entry points not imported yet."""
    _load_builtin()
    # In BUILTIN's order even when a module was imported before the registry loaded them all (the
    # answer scorers import flare_instruct's search-call pattern).
    registered = [*(n for n in BUILTIN if n in _REGISTRY), *(n for n in _REGISTRY if n not in BUILTIN)]
    return [*registered, *(n for n in plugins.entry_point_names(plugins.STRATEGIES) if n not in _REGISTRY)]


def get(name: str) -> type[Strategy]:
    """The Strategy class registered under ``name``, importing an installed plugin's entry point of
    that name if need be; a clear error listing the known names otherwise."""
    _load_builtin()
    if name not in _REGISTRY:
        try:
            found = plugins.entry_point(plugins.STRATEGIES, name)
            if isinstance(found, type) and issubclass(found, Strategy) and name not in _REGISTRY:
                register(name)(found)
        except plugins.PluginError as e:
            raise SpecError(str(e)) from None
        if name not in _REGISTRY and found is not None:
            raise SpecError(f"entry point {plugins.STRATEGIES}:{name} names {found!r}, not a Strategy subclass")
    try:
        return _REGISTRY[name]
    except KeyError:
        raise SpecError(
            f"unknown strategy {name!r}; known: {', '.join(names())} "
            "(a plugin's strategy needs --plugin MODULE|FILE.py, or its package installed)"
        ) from None


@functools.cache  # per class object: a class registered again under the same name is another key
def _type_hints(cls: type) -> dict[str, Any]:
    # get_type_hints evaluates every string annotation again; bounds ask for each spec in every summary.
    return typing.get_type_hints(cls)


def parse_spec(spec: str, defaults: dict[str, Any] | None = None) -> Strategy:
    """Build a configured strategy from ``name`` or ``name:key=value,...``; parameters are
    converted to the field's type and validated. ``defaults`` (e.g. a long probe set's
    answer form) apply to the parameters the spec does not set."""
    name, _, rest = spec.strip().partition(":")
    cls = get(name.strip())
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = _type_hints(cls)
    kwargs: dict[str, Any] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not eq:
            raise SpecError(f"{spec}: expected key=value, got {item!r}")
        if key not in fields:
            close = difflib.get_close_matches(key, fields, n=1, cutoff=0.75)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise SpecError(f"{spec}: {name} has no parameter {key!r}; {hint}parameters: {', '.join(fields)}")
        if key in kwargs:
            raise SpecError(f"{spec}: parameter {key!r} given twice")
        kwargs[key] = _convert(spec, key, raw.strip(), hints[key])
    kwargs = {**{k: v for k, v in (defaults or {}).items() if k in fields}, **kwargs}
    try:
        return cls(**kwargs)
    except ValueError as e:
        raise SpecError(f"{spec}: {e}") from None


def expand(specs: list[str] | None) -> list[str]:
    """No specs means every built-in strategy; ``all`` expands to them too (a plugin's strategies
    run only when named)."""
    if not specs:
        return list(BUILTIN)
    out: list[str] = []
    for s in specs:
        for name in BUILTIN if s.strip() == "all" else [s.strip()]:
            if name not in out:
                out.append(name)
    return out


def with_param(spec: str, key: str, value: str) -> str:
    """``spec`` with one more parameter ``key=value`` (a sweep point); refused when ``spec``
    already sets ``key``, since the sweep would silently override it."""
    name, _, rest = spec.strip().partition(":")
    given = [p.strip() for p in rest.split(",") if p.strip()]
    if any(p.partition("=")[0].strip() == key for p in given):
        raise SpecError(f"{spec}: sets {key!r} already; the sweep sets it")
    return f"{name}:{','.join([*given, f'{key}={value}'])}"


def _convert(spec: str, key: str, raw: str, typ: Any) -> Any:
    """Turn the text of a parameter into its declared type (int, float, bool, str, Literal, Optional)."""
    origin = typing.get_origin(typ)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(typ) if a is not type(None)]
        if raw.lower() in ("none", "null", ""):
            return None
        typ = args[0]
        origin = typing.get_origin(typ)
    if origin is Literal:
        choices = typing.get_args(typ)
        if raw not in choices:
            raise SpecError(f"{spec}: {key} must be one of {', '.join(map(str, choices))}, got {raw!r}")
        return raw
    try:
        if typ is bool:
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
        value = typ(raw)
    except ValueError:
        raise SpecError(f"{spec}: {key} must be {typ.__name__}, got {raw!r}") from None
    # inf and nan (1e309 too) slip through checks such as `x < 0`, and json writes them as
    # Infinity and NaN, which strict JSON readers refuse in run.json and traces.jsonl.
    if typ is float and not math.isfinite(value):
        raise SpecError(f"{spec}: {key} must be a finite number, got {raw!r}")
    return value


#: The built-in strategies, in the order `all` runs them (simplest first).
BUILTIN = (
    "no_retrieval",
    "single_time",
    "fixed_interval",
    "ircot",
    "self_ask",
    "flare_direct",
    "flare_instruct",
    "adaptive",
    "tool_search",
)
#: The modules of the built-in strategies outside `all`: ``http`` (a deployed pipeline; it needs a url).
BUILTIN_OUTSIDE_ALL = ("http_service",)


def _load_builtin() -> None:
    # Importing the modules runs their @register decorators.
    for module in (*BUILTIN, *BUILTIN_OUTSIDE_ALL):
        importlib.import_module(f"{__package__}.{module}")
