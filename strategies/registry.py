"""The strategy registry: ``@register("name")`` on a Strategy class, lookup by name or spec.

A spec is ``name`` or ``name:key=value,key=value`` (e.g. ``flare_direct:theta=0.6,k=5``).
"""

from __future__ import annotations

import dataclasses
import importlib
import types
import typing
from collections.abc import Callable
from typing import Any, Literal

from flarebench.strategies.base import Strategy

_REGISTRY: dict[str, type[Strategy]] = {}


class SpecError(ValueError):
    """A strategy spec names an unknown strategy or gives a bad parameter."""


def register(name: str) -> Callable[[type[Strategy]], type[Strategy]]:
    """Class decorator: make a Strategy available under ``name``."""

    def deco(cls: type[Strategy]) -> type[Strategy]:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"strategy {name!r} is registered twice")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return deco


def names() -> list[str]:
    """Registered strategy names, in registration order."""
    _load_builtin()
    return list(_REGISTRY)


def get(name: str) -> type[Strategy]:
    """The Strategy class registered under ``name``; a clear error listing known names otherwise."""
    _load_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise SpecError(f"unknown strategy {name!r}; known: {', '.join(_REGISTRY)}") from None


def parse_spec(spec: str, defaults: dict[str, Any] | None = None) -> Strategy:
    """Build a configured strategy from ``name`` or ``name:key=value,...``; parameters are
    converted to the field's type and validated. ``defaults`` (e.g. a long probe set's
    answer form) apply to the parameters the spec does not set."""
    name, _, rest = spec.strip().partition(":")
    cls = get(name.strip())
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not eq:
            raise SpecError(f"{spec}: expected key=value, got {item!r}")
        if key not in fields:
            raise SpecError(f"{spec}: {name} has no parameter {key!r}; parameters: {', '.join(fields)}")
        if key in kwargs:
            raise SpecError(f"{spec}: parameter {key!r} given twice")
        kwargs[key] = _convert(spec, key, raw.strip(), hints[key])
    kwargs = {**{k: v for k, v in (defaults or {}).items() if k in fields}, **kwargs}
    try:
        return cls(**kwargs)
    except ValueError as e:
        raise SpecError(f"{spec}: {e}") from None


def expand(specs: list[str] | None) -> list[str]:
    """No specs means every registered strategy; ``all`` expands to every registered name."""
    if not specs:
        return names()
    out: list[str] = []
    for s in specs:
        for name in names() if s.strip() == "all" else [s.strip()]:
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
        return typ(raw)
    except ValueError:
        raise SpecError(f"{spec}: {key} must be {typ.__name__}, got {raw!r}") from None


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
)


def _load_builtin() -> None:
    # Importing the modules runs their @register decorators, in BUILTIN's order.
    for module in BUILTIN:
        importlib.import_module(f"{__package__}.{module}")
