"""Load the official files of public multi-hop QA sets as probe sets: HotpotQA, 2WikiMultihopQA,
ASQA and StrategyQA.

A file is first read with plain ``json`` and checked record by record, so that every problem is
one ``FILE:N: FIELD: message`` line, where N is the record's position (1-based) in a JSON array,
its line in a JSON-lines file, or the line of a JSON syntax error (field ``(json)``); problems
about the whole file use N = 0.  The line ends with the record's own id in brackets where it has
one.  A valid file's records are then loaded with the ``datasets`` library (offline, its cache under
flarebench's cache folder; as JSON lines without blank lines, in a file named by the sha256 of the
file they were read from, so that an edited file is never served from the cache) and converted into
a :class:`flarebench.probes.model.ProbeSet`.

How each format becomes a corpus and probes:

- ``hotpotqa`` (``hotpot_dev_distractor_v1.json``, ``hotpot_dev_fullwiki_v1.json``, train):
  every record's ``context`` paragraphs ``[title, [sentences]]`` are pooled into one corpus,
  deduplicated by title (the first occurrence wins; the document id is the title); the titles of
  ``supporting_facts`` ``[title, sentence index]`` are the gold documents.  A supporting title
  that no record's context holds (fullwiki's retrieved contexts can miss them) is left out of
  ``gold_doc_ids`` and listed in ``metadata.gold_titles_not_in_corpus``.  Answers "yes"/"no" make
  a ``yes_no`` probe, any other answer a ``single`` one.  The Hugging Face layout
  (``context: {title: [...], sentences: [[...]]}``, ``supporting_facts: {title, sent_id}``) is
  read as well.
- ``2wiki`` (2WikiMultihopQA ``train.json``/``dev.json``): the same as HotpotQA, plus ``type``
  and ``evidences`` (subject, relation, object triples) kept in the metadata.
- ``asqa`` (``ASQA.json``: ``{"train": {sample_id: sample}, "dev": {...}}``; also one split's
  ``{sample_id: sample}``, or a list or JSON lines of samples): a ``long`` probe whose question is
  ``ambiguous_question``.  Each of ``qa_pairs`` (the question's disambiguations) that has a short
  answer is one required fact: id ``qa<N>`` (N its position in ``qa_pairs``, from 1), the fact
  "<disambiguated question> <its first short answer>.", its aliases the pair's ``short_answers``
  (deduplicated case-insensitively), its documents the sample's passages titled with the pair's
  ``wikipage`` (none when it has none, or none of them is in the corpus), no wrong values.  So
  ``fact_recall`` is ASQA's STR-EM: the share of the pairs one of whose short answers the long
  answer states (here as whole words, normalised as em normalises; a pair without a short answer
  is no fact).  The probe's ``answers`` are empty; the per-pair answers and the long answers are
  kept in the metadata.  The file carries no retrieval corpus, so the corpus is built from what
  it does carry: every ``annotations[].knowledge[].content`` passage and every
  ``qa_pairs[].context`` paragraph (except "No context provided"), titled with its ``wikipage``
  and deduplicated by (title, text); a sample's own passages are its gold documents.
- ``strategyqa`` (``strategyqa_train.json``: qid, term, description, question, answer (bool),
  facts, decomposition, evidence): yes/no probes.  The file carries no paragraphs (``evidence``
  names paragraph ids of a separate file), so the corpus is every record's ``facts``, one
  document per fact sentence titled with the record's ``term``, deduplicated by text; a record's
  facts are its gold documents.

Detection by shape (``auto``) looks at the first record's fields: ``ambiguous_question`` or
``qa_pairs`` is ASQA; ``qid``, ``facts`` or ``decomposition`` is StrategyQA; ``context`` with
``evidences`` (or a 2Wiki question ``type``) is 2WikiMultihopQA; ``context`` or
``supporting_facts`` is HotpotQA.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .json_errors import JSON_ERRORS, invalid_json
from .model import Document, Probe, ProbeSet, RequiredFact

FILE_FORMATS = ("hotpotqa", "2wiki", "asqa", "strategyqa")
FORMAT_NAMES = {
    "hotpotqa": "HotpotQA",
    "2wiki": "2WikiMultihopQA",
    "asqa": "ASQA",
    "strategyqa": "StrategyQA",
}
MAX_PROBLEMS = 50  # per file; the rest are counted in one last line
_2WIKI_TYPES = {"compositional", "inference", "comparison", "bridge_comparison"}
_ASQA_NO_CONTEXT = "no context provided"
MISSING = object()  # a field that is absent, as opposed to present and null


class FormatError(Exception):
    """A file that cannot be loaded; ``problems`` holds one ``FILE:N: FIELD: message`` line each."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass
class Record:
    """One record of a file: its number for messages (see the module doc), key and object."""

    n: int
    obj: dict
    key: str | None = None  # ASQA's sample id, the key of the sample in ASQA.json
    split: str | None = None  # ASQA.json's split ("train", "dev") holding the sample


def _type_name(value) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", int: "number", float: "number"}.get(
        type(value), "null" if value is None else type(value).__name__
    )


class _Problems:
    """Collects problem lines for one file, capped at MAX_PROBLEMS."""

    def __init__(self, path: str):
        self.path = path
        self.lines: list[str] = []
        self.more = 0

    def add(self, n: int, field: str, msg: str, rid: str | None = None) -> None:
        if len(self.lines) >= MAX_PROBLEMS:
            self.more += 1
            return
        where = f" [{rid}]" if rid else ""
        self.lines.append(f"{self.path}:{n}: {field}: {msg}{where}")

    def file(self, msg: str, field: str = "(file)") -> None:
        self.add(0, field, msg)

    def result(self) -> list[str]:
        extra = [f"{self.path}:0: (file): {self.more} more problems not shown"] if self.more else []
        return self.lines + extra

    def __bool__(self) -> bool:
        return bool(self.lines)


# --- reading the file -------------------------------------------------------------------------


def _looks_like_record(obj: dict) -> bool:
    return any(k in obj for k in ("question", "ambiguous_question", "qid", "_id"))


def _is_asqa_sample(value) -> bool:
    return isinstance(value, dict) and ("ambiguous_question" in value or "qa_pairs" in value)


def read_records(path: str, data: bytes, problems: _Problems) -> tuple[str, list[Record]]:
    """Parse a file into records.  Returns (layout, records); layout is "array", "jsonl",
    "asqa-splits" or "asqa-samples" (the last two are ASQA's objects keyed by sample id)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        problems.add(0, "(encoding)", f"not UTF-8 ({e.reason} at byte {e.start})")
        return "array", []
    if not text.strip():
        problems.file("empty file")
        return "array", []
    try:
        top = json.loads(text)
    except JSON_ERRORS as whole:
        lines = text.split("\n")
        first = next((i for i, line in enumerate(lines) if line.strip()), 0)
        try:
            first_obj = json.loads(lines[first])
        except JSON_ERRORS:
            first_obj = None
        if not isinstance(first_obj, dict):  # not JSON lines either: report the JSON error
            problems.add(getattr(whole, "lineno", first + 1), "(json)", invalid_json(whole))
            return "array", []
        return "jsonl", _read_jsonl(lines, problems)
    if isinstance(top, list):
        records = []
        for i, obj in enumerate(top, 1):
            if isinstance(obj, dict):
                records.append(Record(i, obj))
            else:
                problems.add(i, "(json)", f"expected a JSON object for each record, got {_type_name(obj)}")
        return "array", records
    if isinstance(top, dict):
        if top and all(_is_asqa_sample(v) for v in top.values()):
            return "asqa-samples", [Record(i, v, key=k) for i, (k, v) in enumerate(top.items(), 1)]
        if top and all(isinstance(v, dict) and v and all(_is_asqa_sample(s) for s in v.values()) for v in top.values()):
            records, i = [], 0
            for split, samples in top.items():
                for k, v in samples.items():
                    i += 1
                    records.append(Record(i, v, key=k, split=split))
            return "asqa-splits", records
        if _looks_like_record(top):  # a JSON-lines file of one record
            return "jsonl", [Record(1, top)]
        problems.file(
            "expected a JSON list of records, JSON lines, or ASQA's {split: {sample_id: sample}}; "
            f"got an object with keys {', '.join(list(top)[:5])}",
            "(json)",
        )
        return "array", []
    problems.file(f"expected a JSON list of records, got {_type_name(top)}", "(json)")
    return "array", []


def _read_jsonl(lines: list[str], problems: _Problems) -> list[Record]:
    records = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except JSON_ERRORS as e:
            problems.add(n, "(json)", invalid_json(e))
            continue
        if isinstance(obj, dict):
            records.append(Record(n, obj))
        else:
            problems.add(n, "(json)", f"expected a JSON object, got {_type_name(obj)}")
    return records


def detect(records: list[Record]) -> str | None:
    """The format of a file's records by the first record's fields, or None when unknown."""
    if not records:
        return None
    keys = set(records[0].obj)
    if keys & {"ambiguous_question", "qa_pairs"}:
        return "asqa"
    if keys & {"qid", "facts", "decomposition"}:
        return "strategyqa"
    if "context" in keys or "supporting_facts" in keys:
        if "evidences" in keys or records[0].obj.get("type") in _2WIKI_TYPES - {"comparison"}:
            return "2wiki"
        return "hotpotqa"
    return None


# --- checking records ---------------------------------------------------------------------------


class _Check:
    """Field checks of one record; every failed check adds one problem line."""

    def __init__(self, rec: Record, problems: _Problems, rid: str | None):
        self.rec, self.problems, self.rid = rec, problems, rid

    def bad(self, field: str, msg: str) -> None:
        self.problems.add(self.rec.n, field, msg, self.rid)

    def _present(self, field: str, value, required: bool) -> bool:
        """Whether there is a value to check; a missing required one is reported."""
        if value is MISSING or (value is None and not required):
            if required:
                self.bad(field, "missing required field")
            return False
        return True

    def string(self, field: str, value, *, required: bool = True, nonempty: bool = True) -> bool:
        if not self._present(field, value, required):
            return False
        if not isinstance(value, str):
            self.bad(field, f"expected a string, got {_type_name(value)}")
            return False
        if nonempty and not value.strip():
            self.bad(field, "must not be empty")
            return False
        return True

    def str_list(self, field: str, value, *, required: bool = True) -> bool:
        if not self._present(field, value, required):
            return False
        if not isinstance(value, list):
            self.bad(field, f"expected a list of strings, got {_type_name(value)}")
            return False
        ok = True
        for i, item in enumerate(value):
            if not isinstance(item, str):
                self.bad(f"{field}[{i}]", f"expected a string, got {_type_name(item)}")
                ok = False
        return ok

    def obj_list(self, field: str, value, *, required: bool = True) -> list[tuple[str, dict]]:
        """Check a list of objects; returns (field path, object) for each good item."""
        if not self._present(field, value, required):
            return []
        if not isinstance(value, list):
            self.bad(field, f"expected a list of objects, got {_type_name(value)}")
            return []
        out = []
        for i, item in enumerate(value):
            if isinstance(item, dict):
                out.append((f"{field}[{i}]", item))
            else:
                self.bad(f"{field}[{i}]", f"expected an object, got {_type_name(item)}")
        return out


def _record_id(obj: dict, *keys: str) -> tuple[str | None, object]:
    """(field, value) of the first id field present, else (None, MISSING)."""
    for k in keys:
        if k in obj:
            return k, obj[k]
    return None, MISSING


def _pairs(c: _Check, field: str, value, names: tuple[str, str], kinds: tuple[type, type]):
    """Read [[a, b], ...] or the Hugging Face layout {names[0]: [a...], names[1]: [b...]}.

    Returns the list of (a, b) pairs, or None after reporting a problem."""
    a_name, b_name = names
    what = f"[{a_name}, {b_name}] pairs"
    if isinstance(value, dict) and a_name in value:
        col_a, col_b = value.get(a_name), value.get(b_name)
        if not isinstance(col_a, list) or not isinstance(col_b, list) or len(col_a) != len(col_b):
            c.bad(field, f"expected lists '{a_name}' and '{b_name}' of equal length")
            return None
        value = [list(p) for p in zip(col_a, col_b)]
    if not isinstance(value, list):
        c.bad(field, f"expected a list of {what}, got {_type_name(value)}")
        return None
    out = []
    for i, item in enumerate(value):
        ok = isinstance(item, (list, tuple)) and len(item) == 2
        ok = ok and isinstance(item[0], kinds[0]) and isinstance(item[1], kinds[1]) and not isinstance(item[1], bool)
        if not ok:
            c.bad(f"{field}[{i}]", f"expected [{a_name}, {b_name}], got {json.dumps(item)[:80]}")
            return None
        out.append((item[0], item[1]))
    return out


def _context(c: _Check, value) -> list[tuple[str, list[str]]] | None:
    pairs = _pairs(c, "context", value, ("title", "sentences"), (str, list))
    if pairs is None:
        return None
    for i, (title, sentences) in enumerate(pairs):
        if not title.strip():
            c.bad(f"context[{i}]", "empty title")
            return None
        if not all(isinstance(s, str) for s in sentences):
            c.bad(f"context[{i}]", "expected a list of sentence strings")
            return None
    return pairs


def _check_hotpot(rec: Record, problems: _Problems, fmt: str) -> None:
    o = rec.obj
    field, rid = _record_id(o, "_id", "id")
    c = _Check(rec, problems, rid if isinstance(rid, str) else None)
    c.string(field or "_id", rid)
    c.string("question", o.get("question", MISSING))
    if "answer" not in o:
        c.bad("answer", "missing required field (a split without answers cannot be scored)")
    else:
        c.string("answer", o["answer"])
    if "context" not in o:
        c.bad("context", "missing required field")
    else:
        _context(c, o["context"])
    if "supporting_facts" not in o:
        c.bad("supporting_facts", "missing required field")
    else:
        _pairs(c, "supporting_facts", o["supporting_facts"], ("title", "sent_id"), (str, int))
    for key in ("type", "level"):
        c.string(key, o.get(key), required=False)
    if fmt == "2wiki" and o.get("evidences") is not None and not isinstance(o["evidences"], list):
        c.bad("evidences", f"expected a list of [subject, relation, object], got {_type_name(o['evidences'])}")


def _check_strategyqa(rec: Record, problems: _Problems, fmt: str) -> None:
    o = rec.obj
    rid = o.get("qid", MISSING)
    c = _Check(rec, problems, rid if isinstance(rid, str) else None)
    c.string("qid", rid)
    c.string("question", o.get("question", MISSING))
    if "answer" not in o:
        c.bad("answer", "missing required field (a split without answers cannot be scored)")
    elif not isinstance(o["answer"], bool):
        c.bad("answer", f"expected true or false, got {_type_name(o['answer'])} {json.dumps(o['answer'])[:40]}")
    c.str_list("facts", o.get("facts", MISSING))
    c.string("term", o.get("term"), required=False, nonempty=False)
    c.string("description", o.get("description"), required=False, nonempty=False)
    c.str_list("decomposition", o.get("decomposition"), required=False)
    if o.get("evidence") is not None and not isinstance(o["evidence"], list):
        c.bad("evidence", f"expected a list, got {_type_name(o['evidence'])}")


def _asqa_id(rec: Record):
    """The sample id: the key in ASQA's own layout, else the sample_id field (string or number)."""
    if rec.key is not None:
        return rec.key
    value = rec.obj.get("sample_id", MISSING)
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _wikipages(value) -> list:
    """ASQA's wikipages: an object {"0": {title, url}, ...} in ASQA.json, a list elsewhere."""
    return list(value.values()) if isinstance(value, dict) else value


def _check_asqa(rec: Record, problems: _Problems, fmt: str) -> None:
    o = rec.obj
    rid = _asqa_id(rec)
    shown = f"{rec.split}/{rid}" if rec.split and isinstance(rid, str) else rid
    c = _Check(rec, problems, shown if isinstance(shown, str) else None)
    if rec.key is None:
        c.string("sample_id", rid)
    c.string("ambiguous_question", o.get("ambiguous_question", MISSING))
    pairs = c.obj_list("qa_pairs", o.get("qa_pairs", MISSING))
    if isinstance(o.get("qa_pairs"), list) and not o["qa_pairs"]:
        c.bad("qa_pairs", "must not be empty")
    answers, lists_ok = 0, True
    for where, pair in pairs:
        if c.str_list(f"{where}.short_answers", pair.get("short_answers", MISSING)):
            answers += sum(1 for a in pair["short_answers"] if a.strip())
        else:
            lists_ok = False
        c.string(f"{where}.question", pair.get("question"), required=False)
        c.string(f"{where}.context", pair.get("context"), required=False, nonempty=False)
        c.string(f"{where}.wikipage", pair.get("wikipage"), required=False, nonempty=False)
    if pairs and lists_ok and not answers:
        c.bad("qa_pairs", "no short answer in any pair")
    for where, ann in c.obj_list("annotations", o.get("annotations"), required=False):
        c.string(f"{where}.long_answer", ann.get("long_answer"), required=False, nonempty=False)
        for kwhere, k in c.obj_list(f"{where}.knowledge", ann.get("knowledge"), required=False):
            c.string(f"{kwhere}.content", k.get("content"), required=False, nonempty=False)
            c.string(f"{kwhere}.wikipage", k.get("wikipage"), required=False, nonempty=False)
    for where, page in c.obj_list("wikipages", _wikipages(o.get("wikipages")), required=False):
        c.string(f"{where}.title", page.get("title"), required=False, nonempty=False)


_CHECKS: dict[str, Callable[[Record, _Problems, str], None]] = {
    "hotpotqa": _check_hotpot,
    "2wiki": _check_hotpot,
    "asqa": _check_asqa,
    "strategyqa": _check_strategyqa,
}


def _ids(rec: Record, fmt: str) -> tuple[str, object]:
    """(field, value) of the field that becomes the probe id."""
    if fmt == "asqa":
        return "sample_id", _asqa_id(rec)
    if fmt == "strategyqa":
        return "qid", rec.obj.get("qid")
    field, value = _record_id(rec.obj, "_id", "id")
    return field or "_id", value


def check_records(path: str, layout: str, records: list[Record], fmt: str, problems: _Problems) -> None:
    """Check every record against fmt's fields, and that probe ids are unique."""
    if layout.startswith("asqa") and fmt != "asqa":
        problems.file(f"an object keyed by sample id is ASQA's layout, not {FORMAT_NAMES[fmt]}'s", "(format)")
        return
    check = _CHECKS[fmt]
    first: dict[str, int] = {}
    for rec in records:
        check(rec, problems, fmt)
        field, value = _ids(rec, fmt)
        if isinstance(value, str) and value.strip():
            if value in first:
                problems.add(rec.n, field, f"duplicate id '{value}' (first in record {first[value]})")
            else:
                first[value] = rec.n


# --- converting -----------------------------------------------------------------------------------


def _join(sentences: list[str]) -> str:
    return " ".join(s.strip() for s in sentences if s.strip())


def _as_pairs(value, a: str, b: str) -> list[tuple]:
    if isinstance(value, dict):
        return list(zip(value.get(a) or [], value.get(b) or []))
    return [(item[0], item[1]) for item in value or []]


def _answer(text: str) -> tuple[list[str], str]:
    low = text.strip().lower()
    if low in ("yes", "no"):
        return [low], "yes_no"
    return [text.strip()], "single"


def convert_hotpot(rows: list[dict], fmt: str) -> tuple[list[Document], list[Probe]]:
    docs: dict[str, Document] = {}
    for row in rows:
        for title, sentences in _as_pairs(row["context"], "title", "sentences"):
            if title not in docs:
                docs[title] = Document(id=title, title=title, text=_join(sentences))
    probes = []
    for row in rows:
        facts = [[t, int(i)] for t, i in _as_pairs(row["supporting_facts"], "title", "sent_id")]
        titles = list(dict.fromkeys(t for t, _ in facts))
        answers, kind = _answer(row["answer"])
        pid = row.get("_id") if row.get("_id") is not None else row.get("id")
        meta = {"source_format": fmt, "source_id": pid, "hops": len(titles), "supporting_facts": facts}
        for key in ("type", "level"):
            if row.get(key) is not None:
                meta[key] = row[key]
        if fmt == "2wiki" and row.get("evidences") is not None:
            meta["evidences"] = row["evidences"]
        missing = [t for t in titles if t not in docs]
        if missing:
            meta["gold_titles_not_in_corpus"] = missing
        probes.append(
            Probe(
                id=pid,
                question=row["question"].strip(),
                answers=answers,
                answer_type=kind,
                gold_doc_ids=[t for t in titles if t in docs],
                metadata=meta,
            )
        )
    return list(docs.values()), probes


def convert_strategyqa(rows: list[dict], fmt: str) -> tuple[list[Document], list[Probe]]:
    docs: dict[str, Document] = {}  # keyed by fact text
    probes = []
    for row in rows:
        gold = []
        for i, fact in enumerate(row["facts"], 1):
            text = fact.strip()
            if not text:
                continue
            if text not in docs:
                docs[text] = Document(id=f"{row['qid']}-fact{i}", title=(row.get("term") or "").strip(), text=text)
            if docs[text].id not in gold:
                gold.append(docs[text].id)
        meta = {"source_format": fmt, "source_id": row["qid"]}
        for key in ("term", "description"):
            if row.get(key):
                meta[key] = row[key]
        if row.get("decomposition"):
            meta["decomposition"] = row["decomposition"]
            meta["hops"] = len(row["decomposition"])
        probes.append(
            Probe(
                id=row["qid"],
                question=row["question"].strip(),
                answers=["yes" if row["answer"] else "no"],
                answer_type="yes_no",
                gold_doc_ids=gold,
                metadata=meta,
            )
        )
    return list(docs.values()), probes


def _asqa_doc_id(title: str, text: str) -> str:
    return "asqa-" + hashlib.sha256(f"{title}\n{text}".encode()).hexdigest()[:12]


def convert_asqa(rows: list[dict], fmt: str) -> tuple[list[Document], list[Probe]]:
    docs: dict[str, Document] = {}
    probes = []

    def add(title, text, gold: list[str]) -> None:
        title, text = (title or "").strip(), (text or "").strip()
        if not text or text.lower().rstrip(".") == _ASQA_NO_CONTEXT:
            return
        doc_id = _asqa_doc_id(title, text)
        docs.setdefault(doc_id, Document(id=doc_id, title=title, text=text))
        if doc_id not in gold:
            gold.append(doc_id)

    for row in rows:
        gold: list[str] = []
        pairs = []
        for pair in row["qa_pairs"]:
            short = [a.strip() for a in pair.get("short_answers") or [] if a.strip()]
            pairs.append({"question": pair.get("question"), "short_answers": short})
            add(pair.get("wikipage"), pair.get("context"), gold)
        long_answers = []
        for ann in row.get("annotations") or []:
            if ann.get("long_answer"):
                long_answers.append(ann["long_answer"])
            for k in ann.get("knowledge") or []:
                add(k.get("wikipage"), k.get("content"), gold)
        question = row["ambiguous_question"].strip()
        facts = []
        for i, (pair, kept) in enumerate(zip(row["qa_pairs"], pairs, strict=True), 1):
            aliases: dict[str, str] = {}  # casefolded -> first spelling
            for a in kept["short_answers"]:
                aliases.setdefault(a.casefold(), a)
            if not aliases:
                continue  # no answer to look for: not a fact (ASQA's STR-EM would count it missed)
            asked = (pair.get("question") or "").strip() or question
            page = (pair.get("wikipage") or "").strip()
            facts.append(
                RequiredFact(
                    id=f"qa{i}",
                    fact=f"{asked} {kept['short_answers'][0].rstrip('.')}.",
                    answers=list(aliases.values()),
                    doc_ids=[d for d in gold if page and docs[d].title == page],
                )
            )
        key = row.get("_key") or str(row["sample_id"])
        meta = {"source_format": fmt, "source_id": key, "qa_pairs": pairs}
        if row.get("_split"):
            meta["split"] = row["_split"]
        if long_answers:
            meta["long_answers"] = long_answers
        pages = [p.get("title") for p in _wikipages(row.get("wikipages")) or [] if p and p.get("title")]
        if pages:
            meta["wikipages"] = pages
        probes.append(
            Probe(
                id=key,
                question=question,
                answers=[],
                answer_type="long",
                gold_doc_ids=gold,
                metadata=meta,
                required_facts=facts,
            )
        )
    return list(docs.values()), probes


_CONVERT = {
    "hotpotqa": convert_hotpot,
    "2wiki": convert_hotpot,
    "asqa": convert_asqa,
    "strategyqa": convert_strategyqa,
}

_NO_CORPUS = {
    "hotpotqa": "no record has context paragraphs",
    "2wiki": "no record has context paragraphs",
    "asqa": "no record has knowledge passages or qa_pairs contexts to build a corpus from",
    "strategyqa": "no record has facts to build a corpus from (StrategyQA's test split has none)",
}


# --- loading through `datasets` ---------------------------------------------------------------------


def datasets_cache_dir() -> Path:
    """Where ``datasets`` keeps its Arrow copies of loaded files: ``<cache_root>/datasets``."""
    from flarebench.strategies.retriever import cache_root

    return cache_root() / "datasets"


def _rows_file(records: list[Record], digest: str) -> Path:
    """The validated records as JSON lines, in a file named by the sha256 of the file they were read
    from: what ``datasets`` loads."""
    from flarebench.bench.report import write_atomic

    # datasets' JSON reader stops on a blank line, which JSON lines allow; and it keys its cache by a
    # file's path and modification time, which can survive an edit (cp -p, rsync -a): a path that
    # names the content is never served another content's rows.
    path = datasets_cache_dir() / "rows" / f"{digest}.jsonl"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, "".join(json.dumps(r.obj) + "\n" for r in records))
    return path


def _load_rows(layout: str, records: list[Record], digest: str) -> list[dict]:
    """Load the validated records with ``datasets``, offline, and return its rows as dicts."""
    # Never fetch anything: flarebench reads local files only.
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ["HF_HUB_OFFLINE"] = "1"
    import datasets
    from datasets.utils import logging as ds_logging

    datasets.config.HF_DATASETS_OFFLINE = True  # in case it was imported before the variables were set
    bars_were_on = datasets.is_progress_bar_enabled()
    verbosity = ds_logging.get_verbosity()
    datasets.disable_progress_bars()
    ds_logging.set_verbosity_error()
    try:
        if layout.startswith("asqa"):
            # ASQA's file is an object keyed by sample id, not a list of rows: load its samples.
            # wikipages become a list, as in the other layouts.
            samples = [
                {**r.obj, "wikipages": _wikipages(r.obj.get("wikipages")), "_key": r.key, "_split": r.split}
                for r in records
            ]
            ds = datasets.Dataset.from_list(samples, on_mixed_types="use_json")
            return ds.to_list()
        rows_file = _rows_file(records, digest)
        ds = datasets.load_dataset(
            "json", data_files=str(rows_file), split="train", cache_dir=str(datasets_cache_dir())
        )
        return ds.to_list()
    finally:
        if bars_were_on:
            datasets.enable_progress_bars()
        ds_logging.set_verbosity(verbosity)


def load_file(path, fmt: str = "auto") -> ProbeSet:
    """Load an official HotpotQA, 2WikiMultihopQA, ASQA or StrategyQA file as a probe set.

    fmt is "auto" (detect by shape) or one of FILE_FORMATS.  Raises FormatError with one
    ``FILE:N: FIELD: message`` line per problem.
    """
    file = Path(path)
    name = os.fspath(path)
    problems = _Problems(name)
    try:
        data = file.read_bytes()
    except OSError as e:
        raise FormatError([f"{name}:0: (file): cannot read ({e.strerror or e})"]) from None
    layout, records = read_records(name, data, problems)
    if problems:
        raise FormatError(problems.result())
    if not records:
        raise FormatError([f"{name}:0: (file): no records"])
    if fmt == "auto":
        fmt = detect(records) or ""
        if not fmt:
            keys = ", ".join(sorted(records[0].obj)[:8]) if records else "none"
            flarebench = records and {"question", "answers"} <= set(records[0].obj)
            hint = (
                "; this looks like a flarebench probes.jsonl: pass the folder that holds it and corpus.jsonl"
                if flarebench
                else "; give the format with --probes-format"
            )
            raise FormatError(
                [
                    f"{name}:{records[0].n if records else 0}: (format): cannot tell the format from the fields "
                    f"({keys}); expected HotpotQA, 2WikiMultihopQA, ASQA or StrategyQA{hint}"
                ]
            )
    elif fmt not in FILE_FORMATS:
        raise FormatError([f"{name}:0: (format): unknown file format '{fmt}'; one of {', '.join(FILE_FORMATS)}"])
    check_records(name, layout, records, fmt, problems)
    if problems:
        raise FormatError(problems.result())
    digest = hashlib.sha256(data).hexdigest()
    try:
        rows = _load_rows(layout, records, digest)
    except Exception as e:  # datasets raises many kinds; the user needs one line, not a traceback
        msg = " ".join(str(e).split())[:300]
        raise FormatError([f"{name}:0: (datasets): could not load the file: {type(e).__name__}: {msg}"]) from None
    if len(rows) != len(records):
        raise FormatError([f"{name}:0: (datasets): loaded {len(rows)} records, but the file holds {len(records)}"])
    corpus, probes = _CONVERT[fmt](rows, fmt)
    if not corpus:
        raise FormatError([f"{name}:0: (file): {_NO_CORPUS[fmt]}"])
    return ProbeSet(
        name=file.stem,
        path=file.resolve(),
        corpus=corpus,
        probes=probes,
        readme=None,
        corpus_hash=digest,
        probes_hash=digest,
        format=fmt,
    )


def check_file(path, fmt: str = "auto") -> tuple[ProbeSet | None, list[str]]:
    """Load a file as :func:`load_file` does; returns (probe set, []) or (None, problem lines)."""
    try:
        return load_file(path, fmt), []
    except FormatError as e:
        return None, e.problems
