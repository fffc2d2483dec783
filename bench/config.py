"""The run configuration: what determines a run's answers, its fingerprint for regression gates,
and how two of them are compared. The session (resume or refuse a run folder) and the gate (refuse
a baseline of another configuration) both use this module, and neither imports the other."""

from __future__ import annotations

import hashlib
import shlex
import sys
from pathlib import Path
from typing import Any

from flarebench.bench import version
from flarebench.strategies.http_client import redact_urls


def run_config(
    probe_set,
    probe_source: str,
    lm,
    retriever,
    strategies: dict[str, Any],
    record_topk: int | None = None,
    plugins: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Everything that determines the answers: compared on resume, hashed into the folder name.

    ``record_topk`` (``--record-topk K``) changes no answer but what the drafts record and what
    they cost: it is recorded only when given, so that the configuration of every run without it
    (its folder name, resumes, baselines) stays what it was. So are ``plugins`` (``--plugin`` ref
    -> the sha256 of its code, for each plugin that registers a strategy, an LM, a retriever or a
    trigger): a run is not resumed by edited plugin code, whose answers would mix with the earlier
    code's. A plugin of scorers only is left out: it changes no answer, and a scorer fixed after it
    stopped a run lets that run resume. The gate's fingerprint leaves them out: a team's plugin is the system
    its gate watches, whose changes are what it measures."""
    prompts = sorted({p for s in strategies.values() for p in s.static_prompts()})
    config = {
        "probes": {"name": probe_set.name, "source": probe_source, "format": probe_set.format, "hash": probe_set.hash},
        "lm": lm.describe(),
        "retriever": retriever.describe(),
        "prompt_sha256": hashlib.sha256("\0".join(prompts).encode()).hexdigest(),
        "strategies": {spec: s.params() for spec, s in strategies.items()},
        # The code that makes requests: its version and, per spec, every template, stop sequence,
        # look-ahead and fixed text it sends (a resume across either is refused). After the
        # parameters, so that a changed parameter is the difference a refusal names first.
        "flarebench": version(),
        "requests_sha256": {spec: s.request_sha256() for spec, s in strategies.items()},
    }
    if probe_set.chunking is not None:  # a set built from a folder of documents: how it was split
        config["probes"]["chunking"] = probe_set.chunking
    if record_topk is not None:
        config["record_topk"] = record_topk
    if plugins:
        config["plugins"] = plugins
    return config


#: Top-level fields of :func:`run_config` that follow from others: the run-wide prompt hash follows
#: from which strategies ran together, so :func:`first_difference` names it only when they agree.
DERIVED = ("prompt_sha256",)


def first_difference(old: Any, new: Any, path: str = "") -> str | None:
    """The first field (dotted path) where two configurations differ, or None when they are equal;
    the :data:`DERIVED` fields are compared last, so that a refusal names the cause."""
    if isinstance(old, dict) and isinstance(new, dict):
        if path == "strategies" and old.keys() != new.keys():
            # Which specs ran and which are asked, by name: their parameter sets would fill the line.
            return f"strategies (was {', '.join(old)}; now {', '.join(new)})"
        keys = list(old) + [k for k in new if k not in old]
        if not path:
            keys = [k for k in keys if k not in DERIVED] + [k for k in keys if k in DERIVED]
        for key in keys:
            where = f"{path}.{key}" if path else str(key)
            if key not in new or key not in old:
                was, now = old.get(key, "<absent>"), new.get(key, "<absent>")
                return f"{where} (was {_brief(was)}, now {_brief(now)})"
            diff = first_difference(old[key], new[key], where)
            if diff:
                return diff
        return None
    return None if old == new else f"{path} (was {_brief(old)}, now {_brief(new)})"


#: What a difference in a field no user sets means, said after it by a refusal: keyed by the
#: field's path up to its first dot.
_MEANING = {
    "flarebench": "another flarebench version, whose changes to answers and scores CHANGES.md lists",
    "requests_sha256": "what flarebench sends for that strategy (its prompts, stop sequences, fixed text or "
    "how it forms its queries) changed",
    "prompts_sha256": "that strategy's static prompts changed",
    "prompt_sha256": "the static prompts changed",
}


def meaning(diff: str) -> str:
    """What the difference :func:`first_difference` named means when the user set none of it (another
    version of flarebench, its request shape); "" for a field the user sets."""
    return _MEANING.get(diff.split(" ", 1)[0].split(".", 1)[0], "")


#: The longest value a refusal quotes whole (a strategy's parameters would fill the line).
BRIEF_CHARS = 80


def _brief(value: Any) -> str:
    """``repr(value)``, cut at :data:`BRIEF_CHARS` (a dict's closing brace kept)."""
    text = repr(value)
    if len(text) <= BRIEF_CHARS:
        return text
    end = " ...}" if isinstance(value, dict) else " ..."
    return text[: BRIEF_CHARS - len(end)] + end


def fingerprint(config: dict[str, Any], strategies: dict[str, Any], n_probes: int) -> dict[str, Any]:
    """What must match for two runs' metrics to be comparable, from a run's :func:`run_config`.

    The probe set (by name and content hash; its path is left out, it differs between machines, and
    so is the chunking of a set built from documents, which its content hash already covers)
    and how many of its probes ran, the LM, the retriever, the flarebench version, and per spec its
    parameters, the hash of its static prompts (the run-wide prompt hash depends on which specs ran
    together) and the hash of everything else that shapes its requests; ``record_topk`` when the
    run had it.
    """
    # The chunking is left out as the path is: the content hash already tells the chunks apart.
    probes = {k: v for k, v in config["probes"].items() if k not in ("source", "chunking")}
    fp = {
        "probes": {**probes, "limit": n_probes},
        "lm": config["lm"],
        "retriever": config["retriever"],
        "strategies": dict(config["strategies"]),
        "flarebench": config["flarebench"],
        "requests_sha256": dict(config["requests_sha256"]),
        "prompts_sha256": {
            spec: hashlib.sha256("\0".join(sorted(s.static_prompts())).encode()).hexdigest()
            for spec, s in strategies.items()
        },
    }
    if "record_topk" in config:  # only when given: other fingerprints (and baselines) are unchanged
        fp["record_topk"] = config["record_topk"]
    return fp


#: Fingerprint parts keyed by strategy spec: a gate compares only the specs it checks.
_PER_SPEC = ("strategies", "prompts_sha256", "requests_sha256")


def _view(fp: dict[str, Any], specs: list[str], against: dict[str, str] | None = None) -> dict[str, Any]:
    """The parts of ``fp`` that bear on ``specs``; ``against`` reads a spec's parts under another
    spec's name (a changed spec gated against the baseline's spec of the same strategy)."""
    absent = "<absent>"
    against = against or {}
    out = {k: v for k, v in fp.items() if k not in _PER_SPEC}
    for key in _PER_SPEC:
        part = fp.get(key) if isinstance(fp.get(key), dict) else {}
        out[key] = {spec: part.get(against.get(spec, spec), absent) for spec in specs}
    return out


def config_difference(
    baseline: dict[str, Any], run: dict[str, Any], specs: list[str], against: dict[str, str] | None = None
) -> str | None:
    """The first field where a run's fingerprint differs from a baseline's, looking only at the
    given specs among the strategies; None when they match. ``against`` maps a run's spec to the
    baseline's spec it is compared with, where the two differ."""
    return first_difference(_view(baseline, specs, against), _view(run, specs))


def command_line(argv: list[str] | None = None) -> str:
    """The command that made a run, as its user typed it: the program's name, not the path of the
    interpreter or virtual environment it ran from (``flarebench compare ...``, ``pytest bench ...``,
    ``python -m flarebench run ...``). Recorded in run.json and baselines, shown in report.html, so
    the keys in its URLs are redacted (``--retriever http:URL?api_key=...``)."""
    argv = list(sys.argv if argv is None else argv) or [""]
    program = Path(argv[0])
    name = f"python -m {program.parent.name}" if program.name == "__main__.py" else program.name
    return " ".join([name, *(shlex.quote(redact_urls(a)) for a in argv[1:])])
