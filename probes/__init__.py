"""Probe sets for flarebench: data classes, loader and validator.

A probe folder holds ``corpus.jsonl`` ({id, title, text}), ``probes.jsonl`` ({id, question,
answers, answer_type, gold_doc_ids, metadata}, and required_facts for long probes) and, for shipped
sets, ``README.md`` (source, ``Licence: ...`` line, how it was made).  The official JSON files of
HotpotQA, 2WikiMultihopQA, ASQA and StrategyQA load as probe sets too (``flarebench.probes.formats``).
``python -m flarebench.probes list|validate PATH`` is the CLI; ``python -m flarebench.probes corpus DIR
--out SET`` builds a set from a folder of documents (``flarebench.probes.corpus``, the corpus extra).
"""

from .load import DEFAULT_PROBE_SET, PROBE_FORMATS, SHIPPED_DIR, ProbeError, load_probe_set, shipped_names
from .model import ANSWER_TYPES, Document, Probe, ProbeSet, RequiredFact
from .validate import validate

__all__ = [
    "ANSWER_TYPES",
    "DEFAULT_PROBE_SET",
    "PROBE_FORMATS",
    "SHIPPED_DIR",
    "Document",
    "Probe",
    "ProbeError",
    "ProbeSet",
    "RequiredFact",
    "load_probe_set",
    "shipped_names",
    "validate",
]
