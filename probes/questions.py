"""Read the questions of ``python -m flarebench.probes corpus``: a JSON-lines or CSV file with
``question``, ``answer`` (one string) or ``answers`` (a list), an optional ``id`` and an optional
``gold`` (the sources that support the answer: file paths relative to the folder, or chunk ids)
and an optional ``metadata`` object of plain values (``flarebench score --by FIELD`` breaks results
down by one; a CSV column ``metadata.FIELD`` is that field).
A long question (JSON lines only) has ``"answer_type": "long"`` and, instead of answers, the
``required_facts`` of a long probe, whose ``doc_ids`` name sources as ``gold`` does.

JSON lines are read with plain ``json`` and CSV with the ``csv`` module, a record at a time, so that
every problem is one ``FILE:LINE: FIELD: message`` line. In CSV, ``answers`` and ``gold`` hold
several values separated by ``|``; an empty cell is an absent field.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from flarebench.probes.validate import (
    check_facts,
    check_one_form,
    check_scorable,
    did_you_mean,
    read_jsonl,
    unknown_fields,
)

#: The names a folder's own question file may have, looked for in this order.
DEFAULT_NAMES = ("questions.jsonl", "questions.csv")
FIELDS = ("id", "question", "answer", "answers", "gold", "answer_type", "required_facts", "metadata")
_METADATA_COLUMN = "metadata."
LONG = "long"
#: Why a long question in a CSV file is refused (its required facts are objects, which CSV cannot hold).
_LONG_IN_CSV = "long questions (required_facts) are written as JSON lines (.jsonl)"
_SEPARATOR = "|"


class QuestionError(Exception):
    """Questions that cannot be used; ``problems`` holds one ``FILE:LINE: FIELD: message`` line each,
    ``questions`` those of the file that are fine (so that what else is checked of them, their gold
    sources against the documents, is said in the same round)."""

    def __init__(self, problems: list[str], questions: list[Question] | None = None):
        super().__init__("\n".join(problems))
        self.problems = problems
        self.questions = questions or []


@dataclass
class Question:
    """One question: its line in the file, id, text, accepted answers and gold sources as written;
    a long question's required facts (their ``doc_ids`` still sources as written) instead of answers."""

    line: int
    id: str
    question: str
    answers: list[str]
    gold: list[str] = field(default_factory=list)
    required_facts: list[dict] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)

    @property
    def long(self) -> bool:
        return bool(self.required_facts)


def _csv(text: str, where: str, problems: list[str]) -> list[tuple[int, dict]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    rows = []
    try:
        header = reader.fieldnames or []
        twice = [c for i, c in enumerate(header) if c in header[:i]]
        if twice:  # each row would keep the last column's cell, the others' unseen
            problems.append(f"{where}:1: {twice[0]}: a column given twice in the header")
            return []
        # An unknown column is the header's mistake: said once, on its line, not on every row.
        unknown = [c for c in header if c not in FIELDS and not c.startswith(_METADATA_COLUMN)]
        for column in unknown:
            hint = did_you_mean(column, FIELDS, 0.75, f" (allowed: {', '.join(FIELDS)}, metadata.FIELD)")
            problems.append(f"{where}:1: {column}: unknown column{hint}")
        if header and "answer_type" not in header and not {"answer", "answers"} & set(header):
            # So is a header without an answer column (one renamed "Answer"): not one line per row.
            problems.append(f"{where}:1: (csv): the header has no 'answer' or 'answers' column")
            return []
        for row in reader:
            if None in row:  # more cells than the header names
                problems.append(f"{where}:{reader.line_num}: (csv): more cells than the header has columns")
                continue
            obj = {
                k: v.strip()
                for k, v in row.items()
                if k is not None and k not in unknown and v is not None and v.strip()
            }
            for key in ("answers", "gold"):
                if key in obj:
                    obj[key] = [part.strip() for part in obj[key].split(_SEPARATOR) if part.strip()]
            meta = {k.removeprefix(_METADATA_COLUMN): obj.pop(k) for k in list(obj) if k.startswith(_METADATA_COLUMN)}
            if meta:
                obj["metadata"] = meta
            rows.append((reader.line_num, obj))
    except csv.Error as e:
        problems.append(f"{where}:{reader.line_num}: (csv): {e}")
    if reader.fieldnames is not None and "question" not in reader.fieldnames:
        problems.append(f"{where}:1: (csv): the header has no 'question' column")
    if reader.fieldnames is not None and "metadata" in reader.fieldnames:
        problems.append(f"{where}:1: (csv): a metadata field is a column of its own: metadata.FIELD (metadata.team)")
    if reader.fieldnames is not None and "required_facts" in reader.fieldnames:
        problems.append(f"{where}:1: (csv): {_LONG_IN_CSV}")
        return []
    return rows


def _strings(value, where: str, key: str, problems: list[str]) -> list[str] | None:
    """A string or a list of non-empty strings, as a list; None after reporting a problem."""
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) and v.strip() for v in values):
        problems.append(f"{where}: {key}: expected a non-empty string or a list of them")
        return None
    return [v.strip() for v in values]


def _question(n: int, obj: dict, path: str, problems: list[str]) -> Question | None:
    where = f"{path}:{n}"
    before = len(problems)
    unknown_fields(path, n, obj, FIELDS, problems)
    text = obj.get("question")
    if not isinstance(text, str) or not text.strip():
        problems.append(f"{where}: question: missing or empty")
    kind = obj.get("answer_type", "single")
    in_csv = path.lower().endswith(".csv")  # its advice is in CSV's own terms
    if kind == LONG and in_csv:
        problems.append(f"{where}: answer_type: {_LONG_IN_CSV}")
        return None
    if kind not in ("single", LONG):
        problems.append(f"{where}: answer_type: expected 'long' (or leave it out for a short question), got {kind!r}")
        return None  # which answer fields it needs is not known
    if kind == LONG or "required_facts" in obj:
        return _long_question(n, obj, path, problems, before)
    if "answer" in obj and "answers" in obj:
        problems.append(f"{where}: answers: give answer or answers, not both")
    elif "answer" not in obj and "answers" not in obj:
        several = "an answers column, values separated by |" if in_csv else "answers as a list"
        problems.append(f"{where}: answer: missing (give answer, or {several})")
    key = "answers" if "answers" in obj else "answer"
    answers = _strings(obj[key], where, key, problems) if key in obj else None
    if answers == []:  # an empty list of strings: a probe no answer can match
        problems.append(f"{where}: {key}: must not be empty")
    elif answers:  # named as the file names it: "answer" (one string) or "answers[i]"
        check_scorable(path, n, key, answers, problems, indexed=not isinstance(obj[key], str))
    gold, qid = _gold_and_id(n, obj, where, problems)
    metadata = _metadata(obj, where, problems)
    if len(problems) > before:
        return None
    return Question(n, qid, text.strip(), answers, gold, metadata=metadata)


def _metadata(obj: dict, where: str, problems: list[str]) -> dict:
    """The question's metadata: an object of strings, numbers and true/false (a breakdown groups by
    each value, which a list or an object would not name)."""
    value = obj.get("metadata", {})
    if not isinstance(value, dict):
        problems.append(f'{where}: metadata: expected an object of fields, e.g. {{"team": "payments"}}')
        return {}
    for key, v in value.items():
        if not key.strip():
            problems.append(f"{where}: metadata: a field name must not be empty")
        elif not isinstance(v, str | int | float | bool) or (isinstance(v, str) and not v.strip()):
            problems.append(f"{where}: metadata.{key}: expected a non-empty string, a number or true/false")
    return value


def _gold_and_id(n: int, obj: dict, where: str, problems: list[str]) -> tuple[list[str], str]:
    gold = _strings(obj["gold"], where, "gold", problems) if "gold" in obj else []
    qid = obj.get("id", f"q{n}")
    if not isinstance(qid, str | int) or isinstance(qid, bool) or not str(qid).strip():
        problems.append(f"{where}: id: expected a non-empty string")
    return gold or [], str(qid).strip()


def _long_question(n: int, obj: dict, path: str, problems: list[str], before: int) -> Question | None:
    """A long question: ``"answer_type": "long"`` and the required facts of a long probe (checked as
    the probe validator checks them, a fact's ``doc_ids`` being sources), no answers."""
    where = f"{path}:{n}"
    if obj.get("answer_type") != LONG:
        problems.append(f'{where}: required_facts: only a long question has them: add "answer_type": "long"')
    for key in ("answer", "answers"):
        if key in obj:
            problems.append(f"{where}: {key}: a long question's answers are its required_facts' answers; leave it out")
    check_facts(path, n, obj, None, problems)
    gold, qid = _gold_and_id(n, obj, where, problems)
    metadata = _metadata(obj, where, problems)
    if len(problems) > before:
        return None
    return Question(n, qid, obj["question"].strip(), [], gold, obj["required_facts"], metadata)


def read_questions(path: Path) -> list[Question]:
    """The questions of a ``.jsonl`` or ``.csv`` file; QuestionError with every problem found.

    A question without an id gets ``q<LINE>``, its line in the file. Ids must be unique."""
    name = str(path)
    try:
        data = path.read_bytes()
        text = data.decode("utf-8-sig")
    except OSError as e:
        raise QuestionError([f"{name}:0: (file): cannot read ({e.strerror or e})"]) from None
    except UnicodeDecodeError as e:
        # The line and the byte within it, as validate says of probes.jsonl (after a BOM, on line 1).
        bom = 3 if data.startswith(b"\xef\xbb\xbf") else 0
        start = e.start + bom
        line = data.count(b"\n", 0, start) + 1
        column = start - (data.rfind(b"\n", 0, start) + 1) - (bom if line == 1 else 0)
        raise QuestionError([f"{name}:{line}: (encoding): not UTF-8 ({e.reason} at byte {column})"]) from None
    problems: list[str] = []
    if path.suffix.lower() == ".csv":
        rows = _csv(text, name, problems)
    elif path.suffix.lower() == ".jsonl":
        rows = read_jsonl(name, text.encode(), problems)
        check_one_form(name, rows, problems)
    else:
        raise QuestionError([f"{name}:0: (file): a question file is .jsonl or .csv"])
    questions, first = [], {}
    for n, obj in rows:
        q = _question(n, obj, name, problems)
        if q is None:
            continue
        if q.id in first:
            given = "id" in obj  # a question without one gets q<LINE>, which another may have taken
            which = f"duplicate id '{q.id}'" if given else f"its default id '{q.id}' (q and its line) is taken"
            problems.append(f"{name}:{n}: id: {which} (first on line {first[q.id]})")
            continue
        first[q.id] = n
        questions.append(q)
    if not rows and not problems:
        problems.append(f"{name}:0: (file): no questions")
    if problems:
        raise QuestionError(problems, questions)
    return questions
