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
import inspect
import math
import re
import sys
import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, Literal

import flarebench.strategies.plugins as plugins
from flarebench.strategies.base import GIVEN, Strategy
from flarebench.strategies.capabilities import CAPABILITIES
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
    subclass of Strategy (itself a dataclass when it declares fields), each parameter of a type a
    spec can set and resolvable at run time, and the name one a spec can spell that nothing has
    taken, a built-in included: :class:`~flarebench.strategies.plugins.PluginError` otherwise,
    when the class is defined, so every command that loads a plugin says it the same way."""

    def deco(cls: type[Strategy]) -> type[Strategy]:
        plugins.check_name("strategy", name, reserved=("all",))  # "all" expands to the built-ins
        # A subclass of Strategy (a dataclass) is a dataclass too: whether it declares its own fields
        # as one is checked next.
        if not (isinstance(cls, type) and issubclass(cls, Strategy)):
            raise plugins.PluginError(f"strategy {name!r}: {cls.__qualname__} must be a subclass of Strategy")
        if undeclared := _undeclared_fields(cls):
            raise plugins.PluginError(
                f"strategy {name!r}: {cls.__qualname__} must be a dataclass itself (@dataclass under @register), "
                f"else its fields are no parameters: {', '.join(undeclared)}"
            )
        try:
            _param_types(cls)
        except plugins.PluginError as e:
            raise plugins.PluginError(f"strategy {name!r}: {e}") from None
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
        close = difflib.get_close_matches(name, names(), n=1, cutoff=0.75)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise SpecError(
            f"unknown strategy {name!r}; {hint}known: {', '.join(names())} "
            "(a plugin's strategy needs --plugin MODULE|FILE.py, or its package installed)"
        ) from None


#: An annotation naming ClassVar, written as a string (``from __future__ import annotations``).
_CLASSVAR = re.compile(r"(typing\.)?ClassVar\b")


def _undeclared_fields(cls: type) -> list[str]:
    """The attributes ``cls`` annotates that are no dataclass field because ``cls`` is no dataclass
    itself, only a subclass of one (``dataclasses.is_dataclass`` is true of it all the same)."""
    if "__dataclass_fields__" in cls.__dict__:
        return []
    return [n for n, a in inspect.get_annotations(cls).items() if not _is_classvar(a)]


def _is_classvar(annotation: Any) -> bool:
    """Whether an annotation declares a ClassVar (no field, dataclass or not)."""
    if isinstance(annotation, str):
        return bool(_CLASSVAR.match(annotation))
    return annotation is ClassVar or typing.get_origin(annotation) is ClassVar


@functools.cache  # per class object: a class registered again under the same name is another key
def _param_types(cls: type) -> dict[str, Any]:
    """The type of each parameter (init field) of ``cls``, resolved; a PluginError naming the class
    and the field when one cannot be resolved or is no type a spec can set (:func:`_convert`).
    Cached: resolving evaluates string annotations again, and bounds ask for each spec in every summary."""
    out = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        where = f"{cls.__qualname__}.{f.name}"
        try:
            # One field at a time, in the namespaces of the class that declares it, as get_type_hints
            # does for a class (module first): a name imported only under TYPE_CHECKING is then
            # pinned to its field, and an annotation that is no parameter's never matters.
            owner = next(c for c in cls.__mro__ if f.name in inspect.get_annotations(c))
            holder = types.SimpleNamespace(__annotations__={f.name: f.type})
            typ = typing.get_type_hints(holder, dict(vars(owner)), vars(sys.modules[owner.__module__]))[f.name]
        except Exception as e:  # whatever it is, the annotation cannot be evaluated
            hint = "; import what it names outside `if TYPE_CHECKING:`" if isinstance(e, NameError) else ""
            raise plugins.PluginError(
                f"{where}: its type {_shown(f.type)} cannot be resolved at run time ({type(e).__name__}: {e}){hint}"
            ) from None
        if _spec_type(typ) is None:
            raise plugins.PluginError(
                f"{where}: a spec cannot set a parameter of type {_shown(typ)} "
                "(bool, int, float, str, a Literal of strings, or one of them | None)"
            )
        out[f.name] = typ
    return out


def _shown(typ: Any) -> str:
    """A type as its annotation spells it: ``int``, ``list[str]``, ``'Mode | None'`` (a string one)."""
    if isinstance(typ, type) and typing.get_origin(typ) is None:
        return typ.__qualname__
    return repr(typ)


def parse_spec(spec: str, defaults: dict[str, Any] | None = None) -> Strategy:
    """Build a configured strategy from ``name`` or ``name:key=value,...``; parameters are
    converted to the field's type and validated. ``defaults`` (e.g. a long probe set's
    answer form) apply to the parameters the spec does not set."""
    name, _, rest = spec.strip().partition(":")
    cls = get(name.strip())
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = _param_types(cls)
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
    given = GIVEN.set(frozenset(kwargs))  # the spec's own parameters, not the probe set's defaults
    kwargs = {**{k: v for k, v in (defaults or {}).items() if k in fields}, **kwargs}
    try:
        strategy = cls(**kwargs)
    # validate() is to raise ValueError; a plugin's may assert, or raise TypeError (as a parameter
    # the spec must set and does not): the same one line.
    except (ValueError, TypeError, AssertionError) as e:
        raise SpecError(f"{spec}: {str(e) or f'{cls.__qualname__} refused it ({type(e).__name__})'}") from None
    except Exception as e:  # noqa: BLE001 (a plugin's validate() raising anything else: its bug, said in one line)
        raise SpecError(f"{spec}: {cls.__qualname__}() raised {type(e).__name__}: {e}") from None
    finally:
        GIVEN.reset(given)
    _check_needs(spec, strategy)
    _check_shape(spec, strategy)
    return strategy


def _check_shape(spec: str, strategy: Strategy) -> None:
    """Refuse, in one line, a strategy whose prompts or request shape cannot be recorded in the run's
    configuration (a plugin's method that raises, or a shape that is not JSON)."""
    for method in ("static_prompts", "request_sha256"):
        try:
            getattr(strategy, method)()
        except Exception as e:  # noqa: BLE001 (a plugin's bug, found before any model loads)
            name = "request_shape" if method == "request_sha256" else method
            raise SpecError(f"{spec}: {type(strategy).__qualname__}.{name}() raised {type(e).__name__}: {e}") from None


def _check_needs(spec: str, strategy: Strategy) -> None:
    """Refuse a strategy whose ``needs()`` is no set of capability names: the run compares it with
    what the LM offers, and a misspelt name would be refused as a capability nobody offers, unnamed."""
    where = f"{spec}: {type(strategy).__qualname__}.needs()"
    try:
        needs = strategy.needs()
    except Exception as e:  # noqa: BLE001 (a plugin's bug, found before any model loads)
        raise SpecError(f"{where} raised {type(e).__name__}: {e}") from None
    known = f"known: {', '.join(CAPABILITIES)}"
    if not isinstance(needs, (set, frozenset)):
        raise SpecError(f"{where} must return a set of capability names, got {needs!r}; {known}")
    if unknown := sorted(map(repr, needs - CAPABILITIES.keys())):
        raise SpecError(f"{where} names unknown capability {', '.join(unknown)}; {known}")


def expand(specs: list[str] | None) -> list[str]:
    """No specs means every built-in strategy; ``all`` expands to them too (a plugin's strategies
    run only when named)."""
    if not specs:
        return list(BUILTIN)
    out: list[str] = []
    for s in specs:
        for name in BUILTIN if s.strip() == "all" else [canonical(s)]:
            if name not in out:
                out.append(name)
    return out


def refuse_twins(specs: list[str]) -> None:
    """Refuse (SpecError) two specs of one configuration, the same strategy with the same parameters
    however spelt (``single_time`` and ``single_time:k=3``): they would run twice, as two rows."""
    built: dict[str, Strategy] = {}
    for spec in specs:
        strategy = parse_spec(spec)
        if twin := next((other for other, made in built.items() if made == strategy), None):
            raise SpecError(f"{spec} is {twin} again (the same strategy and parameters): give it once")
        built[spec] = strategy


def canonical(spec: str) -> str:
    """``spec`` as it labels a row: spaces around names, keys and values, empty parameters and a
    trailing ``:`` dropped, so ``flare_direct:`` and ``flare_direct`` are one strategy, not two rows."""
    name, _, rest = spec.strip().partition(":")
    items = [p.strip() for p in rest.split(",") if p.strip()]
    params = [f"{k.strip()}={v.strip()}" if eq else k for k, eq, v in (p.partition("=") for p in items)]
    return ":".join([name.strip(), ",".join(params)]) if params else name.strip()


def with_param(spec: str, key: str, value: str) -> str:
    """``spec`` with one more parameter ``key=value`` (a sweep point); refused when ``spec``
    already sets ``key``, since the sweep would silently override it."""
    name, _, rest = canonical(spec).partition(":")
    given = rest.split(",") if rest else []
    if any(p.partition("=")[0] == key for p in given):
        raise SpecError(f"{spec}: sets {key!r} already; the sweep sets it")
    return f"{name}:{','.join([*given, f'{key}={value}'])}"


def _convert(spec: str, key: str, raw: str, typ: Any) -> Any:
    """Turn the text of a parameter into its declared type (one :func:`_spec_type` accepts)."""
    typ, optional = _spec_type(typ)
    if optional and raw.lower() in ("none", "null", ""):
        return None
    if typing.get_origin(typ) is Literal:
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


def _spec_type(typ: Any) -> tuple[Any, bool] | None:
    """What :func:`_convert` reads a parameter of type ``typ`` as: the type (bool, int, float, str
    or a Literal of strings) and whether ``none`` is None (``X | None``); None when it cannot."""
    args = typing.get_args(typ)
    optional = typing.get_origin(typ) in (typing.Union, types.UnionType) and type(None) in args
    if optional:
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:  # int | str: which would "3" be?
            return None
        typ = inner[0]
    if typing.get_origin(typ) is Literal:  # a spec's value is text: Literal[1] could never match it
        return (typ, optional) if all(isinstance(c, str) for c in typing.get_args(typ)) else None
    return (typ, optional) if typ in (bool, int, float, str) else None


#: The built-in strategies, in the order `all` runs them and reports list them: simplest first, a new
#: one after those it builds on (tests/test_registry.py checks what can be). Each is also the module
#: that registers it (imported in this order).
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
