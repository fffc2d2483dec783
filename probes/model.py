"""Data classes for a probe set: documents, probes (questions with gold answers), the set."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

ANSWER_TYPES = ("single", "set", "yes_no", "long")

# "Licence: MIT", also "License:", "- **Licence**: ...", case-insensitive.
_LICENCE = re.compile(r"^\s*(?:[-*]\s*)?\**licen[cs]e\**\s*:\s*\**\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)


def find_licence(readme: str | None) -> str | None:
    """The text after the first ``Licence:`` (or ``License:``) line of a README, or None."""
    m = _LICENCE.search(readme or "")
    return (m.group(1).rstrip("*").strip() or None) if m else None


@dataclass
class Document:
    """One retrievable document of a corpus."""

    id: str
    title: str
    text: str


@dataclass
class RequiredFact:
    """One fact a long answer must state.

    fact: the fact as a sentence. answers: aliases of its key value (a version, a count, a name, a
    date); stating any one counts. doc_ids: the corpus documents supporting it. wrong_values:
    plausible wrong values (an older release's tag, the staging value asked about production, a
    relative's name); stating one is a wrong answer, whether or not an alias is stated too.
    """

    id: str
    fact: str
    answers: list[str]
    doc_ids: list[str] = field(default_factory=list)
    wrong_values: list[str] = field(default_factory=list)


@dataclass
class Probe:
    """One question with its gold answers.

    answer_type: ``single`` (answers are aliases, any one counts), ``set`` (all answers together
    are the answer), ``yes_no`` (answers is ``["yes"]`` or ``["no"]``) or ``long`` (a
    multi-sentence answer: answers is empty, and the gold is required_facts).
    gold_doc_ids: ids of the corpus documents that support the answer (may be empty); for a long
    probe that does not give them, the union of its facts' doc_ids, in order.
    required_facts: a long probe's facts (empty for the other types).
    """

    id: str
    question: str
    answers: list[str]
    answer_type: str = "single"
    gold_doc_ids: list[str] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)
    required_facts: list[RequiredFact] = field(default_factory=list)


@dataclass
class ProbeSet:
    """A loaded, validated probe folder.

    corpus_hash and probes_hash are sha256 hex digests of the raw bytes of corpus.jsonl and
    probes.jsonl, so a report can tell exactly which data it ran on.  A set loaded from one
    official file (``format`` hotpotqa, 2wiki, asqa or strategyqa; see flarebench.probes.formats) has both
    hashes equal to the sha256 of that file's bytes, path the file and readme None.  chunking is how a
    set built from a folder of documents split them (its build.json; ``python -m flarebench.probes
    corpus``), else None.
    """

    name: str
    path: Path
    corpus: list[Document]
    probes: list[Probe]
    readme: str | None
    corpus_hash: str
    probes_hash: str
    format: str = "flarebench"
    chunking: dict | None = None

    @property
    def hash(self) -> str:
        """Content hash of both files: sha256 hex of corpus_hash + probes_hash."""
        return hashlib.sha256((self.corpus_hash + self.probes_hash).encode("ascii")).hexdigest()

    @property
    def answer_form(self) -> str:
        """``long`` when the set's probes ask for long answers (a set does not mix them), else ``short``:
        the prompt form its strategies use."""
        return "long" if self.probes and all(p.answer_type == "long" for p in self.probes) else "short"

    @property
    def licence(self) -> str | None:
        """The licence named by a ``Licence: ...`` line of the README, or None."""
        return find_licence(self.readme)

    @property
    def docs_by_id(self) -> dict[str, Document]:
        """The corpus as a dict keyed by document id."""
        return {d.id: d for d in self.corpus}
