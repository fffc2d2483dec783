"""Find and load probe sets: the shipped ones by name, users' folders by path, and the official
files of HotpotQA, 2WikiMultihopQA, ASQA and StrategyQA by path (see flarebench.probes.formats)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from .model import Document, Probe, ProbeSet, RequiredFact
from .validate import PROBES_FILE, check_folder

DEFAULT_PROBE_SET = "phantomwiki"
SHIPPED_DIR = Path(__file__).resolve().parent
# "auto": a folder is a flarebench probe folder, a file is detected by its shape.
PROBE_FORMATS = ("auto", "flarebench", "hotpotqa", "2wiki", "asqa", "strategyqa")


class ProbeError(Exception):
    """A probe set that cannot be found or is invalid.

    The message is one line for a set that was not found, else one ``FILE:LINE: FIELD: problem``
    line per problem.
    """


def shipped_names() -> list[str]:
    """Names of the probe sets shipped in this package (sub-folders holding a probes.jsonl)."""
    return sorted(d.name for d in SHIPPED_DIR.iterdir() if d.is_dir() and (d / PROBES_FILE).is_file())


def is_shipped_name(text: str) -> bool:
    """Whether ``text`` names a shipped set. A bare shipped name wins over a same-named folder in the
    working directory (a command means the same everywhere); ``./name`` is the folder."""
    looks_like_path = os.sep in text or (os.altsep or os.sep) in text or text.startswith((".", "~"))
    return not looks_like_path and text in shipped_names()


def shadowed(text: str, base: Path = Path()) -> Path | None:
    """The file or folder in ``base`` that the shipped set named ``text`` hides, else None."""
    return base / text if is_shipped_name(text) and (base / text).exists() else None


def resolve(name_or_path: str) -> tuple[str, Path]:
    """Return (set name, path) for a shipped name (:func:`is_shipped_name`), a folder or a file;
    ProbeError if none. A file's set name is its name without the extension."""
    text = os.fspath(name_or_path)
    if is_shipped_name(text):
        return text, SHIPPED_DIR / text
    folder = Path(text).expanduser()
    if folder.is_dir():
        return folder.resolve().name, folder.resolve()
    if folder.is_file():
        return folder.stem, folder.resolve()
    names = ", ".join(shipped_names()) or "(none)"
    raise ProbeError(f"no probe set named or at '{text}'; shipped probe sets: {names}")


def check_format(fmt: str) -> None:
    """ProbeError unless fmt is one of PROBE_FORMATS."""
    if fmt not in PROBE_FORMATS:
        raise ProbeError(f"unknown probe format '{fmt}'; one of: {', '.join(PROBE_FORMATS)}")


def _probe(p: dict) -> Probe:
    """A checked probes.jsonl row as a Probe. A long probe's answers may be left out (then []), and
    its gold_doc_ids, when left out, are the union of its facts' doc_ids in order."""
    facts = [
        RequiredFact(
            id=f["id"],
            fact=f["fact"],
            answers=list(f["answers"]),
            doc_ids=list(f.get("doc_ids", [])),
            wrong_values=list(f.get("wrong_values", [])),
        )
        for f in p.get("required_facts", [])
    ]
    gold = p.get("gold_doc_ids")
    if gold is None:
        gold = list(dict.fromkeys(d for f in facts for d in f.doc_ids))
    return Probe(
        id=p["id"],
        question=p["question"],
        answers=list(p.get("answers", [])),
        answer_type=p.get("answer_type", "single"),
        gold_doc_ids=list(gold),
        metadata=dict(p.get("metadata", {})),
        required_facts=facts,
    )


def load_probe_set(name_or_path: str, fmt: str = "auto") -> ProbeSet:
    """Load and validate a probe set given a shipped name (e.g. "phantomwiki"), a folder path,
    or the path of an official HotpotQA, 2WikiMultihopQA, ASQA or StrategyQA file.

    fmt: "auto" (a folder is read as a flarebench probe folder, a file's format is detected by
    its shape), "flarebench", or one of flarebench.probes.formats.FILE_FORMATS to force a file's format.
    Raises ProbeError when it is not found or not valid.  README.md is optional here.
    """
    check_format(fmt)
    name, folder = resolve(name_or_path)
    if folder.is_file():
        if fmt == "flarebench":
            raise ProbeError(
                f"{name_or_path}:0: (file): a flarebench probe set is a folder holding corpus.jsonl and "
                "probes.jsonl, not a file"
            )
        from .formats import FormatError, load_file  # imports `datasets` only when a file is loaded

        try:
            return load_file(os.path.expanduser(os.fspath(name_or_path)), fmt)
        except FormatError as e:
            raise ProbeError(str(e)) from None
    if fmt not in ("auto", "flarebench"):
        raise ProbeError(f"{name_or_path}:0: (folder): format '{fmt}' reads one JSON file, and this is a folder")
    checked = check_folder(folder)
    if checked.problems:
        raise ProbeError("\n".join(checked.problems))
    corpus = [Document(id=d["id"], title=d["title"], text=d["text"]) for d in checked.corpus]
    probes = [_probe(p) for p in checked.probes]
    return ProbeSet(
        name=name,
        path=folder,
        corpus=corpus,
        probes=probes,
        readme=checked.readme,
        corpus_hash=hashlib.sha256(checked.corpus_bytes).hexdigest(),
        probes_hash=hashlib.sha256(checked.probes_bytes).hexdigest(),
        chunking=checked.chunking,
    )
