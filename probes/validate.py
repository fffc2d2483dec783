"""Validate a probe folder (corpus.jsonl, probes.jsonl, optional README.md and build.json).

Files are read with plain ``json``, one line at a time, so that every problem names its file,
line and field: ``FILE:LINE: FIELD: message``.  Problems about a whole file use line 0 and the
field ``(file)``; a line that is not JSON uses ``(json)``.
"""

from __future__ import annotations

import difflib
import json
import os
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from flarebench.bench.answers import normalize_answer, normalize_value
from flarebench.probes.json_errors import JSON_ERRORS, invalid_json, strict_loads

from .model import ANSWER_TYPES, find_licence

CORPUS_FILE = "corpus.jsonl"
PROBES_FILE = "probes.jsonl"
README_FILE = "README.md"
#: How a set built from a folder of documents was made (``python -m flarebench.probes corpus``).
BUILD_FILE = "build.json"

_CORPUS_FIELDS = ("id", "title", "text")
_PROBE_FIELDS = ("id", "question", "answers", "answer_type", "gold_doc_ids", "metadata", "required_facts")
_FACT_FIELDS = ("id", "fact", "answers", "doc_ids", "wrong_values")


@dataclass
class Checked:
    """Everything one pass over a folder found: problems, parsed rows and raw bytes."""

    problems: list[str] = field(default_factory=list)
    corpus: list[dict] = field(default_factory=list)
    probes: list[dict] = field(default_factory=list)
    corpus_bytes: bytes = b""
    probes_bytes: bytes = b""
    readme: str | None = None
    chunking: dict | None = None  # build.json's "chunking", when the folder has one


def _type_name(value) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def _nonempty_str(value) -> str | None:
    if not isinstance(value, str):
        return f"expected a string, got {_type_name(value)}"
    if not _visible(value):
        return "must not be empty"
    return None


#: Characters that show nothing though Unicode files them as marks or letters (its
#: Default_Ignorable_Code_Point ones outside category Cf: Hangul fillers, the combining grapheme
#: joiner, variation selectors), and the braille blank.
_BLANK = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0") | {chr(c) for c in range(0xFE00, 0xFE10)}


def _visible(text: str) -> str:
    """``text`` without white space and invisible characters (a zero-width space, a BOM, a Hangul
    filler): a question of those alone is as empty as one of spaces."""
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf" and ch not in _BLANK).strip()


def _lone_surrogates(value, field: str = "") -> Iterator[str]:
    """The fields of a parsed JSON value holding a lone surrogate (``"\\ud800"``: half of an emoji
    cut in two), which no UTF-8 file can hold, so the run could write no trace or report of it."""
    if isinstance(value, str):
        if any("\ud800" <= ch <= "\udfff" for ch in value):
            yield field or "(value)"
    elif isinstance(value, dict):
        for key, item in value.items():
            name = f"{field}.{key}" if field else key
            yield from _lone_surrogates(key, name)
            yield from _lone_surrogates(item, name)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _lone_surrogates(item, f"{field}[{i}]")


def printable(line: str) -> str:
    """``line`` with control and format characters written as escapes (``\\x1b``, ``\\u202e``): an id
    holding one, quoted in a problem line, must not clear the user's terminal or reorder its text."""
    return "".join(ch if ch == "\t" or unicodedata.category(ch) not in ("Cc", "Cf") else ascii(ch)[1:-1] for ch in line)


def read_jsonl(path: str, data: bytes, problems: list[str]) -> list[tuple[int, dict]]:
    """Parse JSON-lines bytes into (line number, object) pairs; blank lines are skipped."""
    rows = []
    for n, raw in enumerate(data.split(b"\n"), 1):
        try:
            text = raw.decode("utf-8-sig" if n == 1 else "utf-8")
        except UnicodeDecodeError as e:
            problems.append(f"{path}:{n}: (encoding): not UTF-8 ({e.reason} at byte {e.start})")
            continue
        if not text.strip():
            continue
        try:
            obj = strict_loads(text)
        except JSON_ERRORS as e:
            problems.append(f"{path}:{n}: (json): {invalid_json(e)}")
            continue
        if not isinstance(obj, dict):
            problems.append(f"{path}:{n}: (json): expected a JSON object, got {_type_name(obj)}")
            continue
        if halves := list(_lone_surrogates(obj)):
            problems += [f"{path}:{n}: {f}: holds a lone surrogate (half of a character cut in two)" for f in halves]
            continue
        rows.append((n, obj))
    return rows


def did_you_mean(word: str, choices: Iterable[str], cutoff: float = 0.6, otherwise: str = "") -> str:
    """``; did you mean 'CHOICE'?`` for the choice closest to ``word`` (difflib, at least
    ``cutoff`` alike), else ``otherwise``: the end of a problem line."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=cutoff)
    return f"; did you mean '{close[0]}'?" if close else otherwise


def unknown_fields(
    path: str, n: int, obj: dict, allowed: tuple[str, ...], problems: list[str], prefix: str = ""
) -> None:
    """A problem line per key of ``obj`` not in ``allowed``: a typo ("anwser") would otherwise
    silently drop data."""
    for key in obj:
        if key not in allowed:
            hint = did_you_mean(key, allowed, 0.75, f" (allowed: {', '.join(allowed)})")
            problems.append(f"{path}:{n}: {prefix}{key}: unknown field{hint}")


def _check_ids(path: str, rows: list[tuple[int, dict]], problems: list[str]) -> None:
    first: dict[str, int] = {}
    for n, obj in rows:
        i = obj.get("id")
        if isinstance(i, str) and i.strip():
            if i in first:
                problems.append(f"{path}:{n}: id: duplicate id '{i}' (first on line {first[i]})")
            else:
                first[i] = n


def check_one_form(path: str, rows: list[tuple[int, dict]], problems: list[str]) -> None:
    """A set's probes are all long or none is: the set chooses the prompt form its strategies use.
    A probe whose answer_type is none of them is left out: its own line says so."""
    rows = [(n, obj) for n, obj in rows if obj.get("answer_type", "single") in ANSWER_TYPES]
    first = next(((n, obj.get("answer_type") == "long") for n, obj in rows), None)
    for n, obj in rows:
        if first and (obj.get("answer_type") == "long") != first[1]:
            kinds = ("long", "short") if first[1] else ("short", "long")
            problems.append(
                f"{path}:{n}: answer_type: a {kinds[1]} probe in a set of {kinds[0]} probes (line {first[0]}); "
                "a set is all long or all short, since it chooses the prompt form: split it in two"
            )
            return


def check_corpus(path: str, rows: list[tuple[int, dict]], problems: list[str]) -> None:
    """Problem lines for a corpus file's rows (``(line, object)`` pairs of :func:`read_jsonl`): an
    unknown field, or one of ``id``, ``title``, ``text`` missing."""
    for n, doc in rows:
        unknown_fields(path, n, doc, _CORPUS_FIELDS, problems)
        for key in _CORPUS_FIELDS:
            if key not in doc:
                problems.append(f"{path}:{n}: {key}: missing required field")
            elif key == "id" and (msg := _nonempty_str(doc[key])):
                problems.append(f"{path}:{n}: id: {msg}")
            elif not isinstance(doc[key], str):
                problems.append(f"{path}:{n}: {key}: expected a string, got {_type_name(doc[key])}")
    _check_ids(path, rows, problems)


def _check_str_list(path: str, n: int, key: str, value, problems: list[str], nonempty: bool) -> bool:
    """Check a list of non-empty strings; return True when it is one."""
    if not isinstance(value, list):
        problems.append(f"{path}:{n}: {key}: expected a list of strings, got {_type_name(value)}")
        return False
    if nonempty and not value:
        problems.append(f"{path}:{n}: {key}: must not be empty")
        return False
    ok = True
    for i, item in enumerate(value):
        if msg := _nonempty_str(item):
            problems.append(f"{path}:{n}: {key}[{i}]: {msg}")
            ok = False
    return ok


def check_scorable(path: str, n: int, key: str, answers: list[str], problems: list[str], indexed: bool = True) -> None:
    """A problem line per answer of a short probe that normalises to nothing (articles and
    punctuation only, such as "A", "the" or "..."): answers are compared normalised
    (flarebench.bench.answers.normalize_answer), so no answer could ever match it. ``indexed``:
    the field is a list (``answers[1]``), else one string (a question file's ``answer``)."""
    for i, answer in enumerate(answers):
        if not normalize_answer(answer):
            field = f"{key}[{i}]" if indexed else key
            problems.append(
                f"{path}:{n}: {field}: '{answer}' normalises to nothing (scoring drops articles and punctuation): "
                "it can never be matched"
            )


def _check_doc_ids(
    path: str, n: int, key: str, value, doc_ids: set[str] | None, problems: list[str], nonempty: bool
) -> bool:
    """Check a list of document ids: strings, no repeats, each in the corpus (when it was read)."""
    if not _check_str_list(path, n, key, value, problems, nonempty):
        return False
    seen = set()
    for i, doc_id in enumerate(value):
        if doc_id in seen:
            problems.append(f"{path}:{n}: {key}[{i}]: duplicate '{doc_id}'")
        elif doc_ids is not None and doc_id not in doc_ids:
            hint = did_you_mean(doc_id, doc_ids)
            problems.append(f"{path}:{n}: {key}[{i}]: '{doc_id}' is not a document id in {CORPUS_FILE}{hint}")
        seen.add(doc_id)
    return True


def _check_required(path: str, n: int, obj: dict, keys: tuple[str, ...], problems: list[str], prefix="") -> None:
    """Each of ``keys`` is present; ``id`` and the other string fields among them are non-empty strings."""
    at = f"{path}:{n}: {prefix}"
    problems += [f"{at}{key}: missing required field" for key in keys if key not in obj]
    texts = [key for key in ("id", "question", "fact") if key in keys and key in obj]
    problems += [f"{at}{key}: {msg}" for key in texts if (msg := _nonempty_str(obj[key]))]


def _check_fact(
    path: str, n: int, where: str, fact: dict, doc_ids: set[str] | None, gold: set[str] | None, problems: list[str]
) -> None:
    """One required fact (its id's uniqueness is checked by the caller)."""
    unknown_fields(path, n, fact, _FACT_FIELDS, problems, prefix=f"{where}.")
    _check_required(path, n, fact, ("id", "fact", "answers", "doc_ids"), problems, prefix=f"{where}.")
    aliases_ok = "answers" in fact and _check_str_list(path, n, f"{where}.answers", fact["answers"], problems, True)
    if "doc_ids" in fact and _check_doc_ids(path, n, f"{where}.doc_ids", fact["doc_ids"], doc_ids, problems, True):
        for j, doc_id in enumerate(fact["doc_ids"]):
            if gold is not None and doc_id not in gold:
                problems.append(f"{path}:{n}: {where}.doc_ids[{j}]: '{doc_id}' is not in the probe's gold_doc_ids")
    wrong = fact.get("wrong_values", [])
    wrong_ok = _check_str_list(path, n, f"{where}.wrong_values", wrong, problems, False)
    for key, values in (
        ("answers", fact.get("answers") if aliases_ok else []),
        ("wrong_values", wrong if wrong_ok else []),
    ):
        for j, value in enumerate(values):  # a value is matched normalised, as scoring reads it
            if not normalize_value(value):
                problems.append(
                    f"{path}:{n}: {where}.{key}[{j}]: '{value}' normalises to nothing (scoring drops articles and "
                    "punctuation): it can never be matched"
                )
    if wrong_ok and aliases_ok:
        aliases = {a.strip().lower() for a in fact["answers"]}
        for j, value in enumerate(wrong):
            if value.strip().lower() in aliases:
                problems.append(f"{path}:{n}: {where}.wrong_values[{j}]: '{value}' is also an alias in answers")


def check_facts(path: str, n: int, probe: dict, doc_ids: set[str] | None, problems: list[str]) -> None:
    """A long probe's required_facts: a non-empty list of {id, fact, answers, doc_ids, wrong_values?},
    ids unique within the probe, every doc id in the corpus and, when the probe gives gold_doc_ids,
    among them; no wrong value that is also an alias of its fact."""
    facts = probe.get("required_facts")
    if facts is None:
        problems.append(f"{path}:{n}: required_facts: missing required field (a long probe's gold is its facts)")
        return
    if not isinstance(facts, list):
        problems.append(f"{path}:{n}: required_facts: expected a list of objects, got {_type_name(facts)}")
        return
    if not facts:
        problems.append(f"{path}:{n}: required_facts: must not be empty")
    gold = probe.get("gold_doc_ids")
    gold = set(gold) if isinstance(gold, list) and all(isinstance(d, str) for d in gold) else None
    first: dict[str, int] = {}
    for i, fact in enumerate(facts):
        where = f"required_facts[{i}]"
        if not isinstance(fact, dict):
            problems.append(f"{path}:{n}: {where}: expected an object, got {_type_name(fact)}")
            continue
        _check_fact(path, n, where, fact, doc_ids, gold, problems)
        fid = fact.get("id")
        if isinstance(fid, str) and fid.strip() and fid in first:
            problems.append(
                f"{path}:{n}: {where}.id: duplicate fact id '{fid}' (first at required_facts[{first[fid]}])"
            )
        elif isinstance(fid, str) and fid.strip():
            first[fid] = i
    _check_wrong_values_across_facts(path, n, facts, problems)


def _check_wrong_values_across_facts(path: str, n: int, facts: list, problems: list[str]) -> None:
    """No fact's wrong value is another fact's alias: a complete answer states every alias, so it
    would always count as stating a wrong value."""

    def strings(fact, key) -> list[str]:
        values = fact.get(key) if isinstance(fact, dict) else None
        return [v for v in values if isinstance(v, str)] if isinstance(values, list) else []

    aliases = {a.strip().lower(): k for k, fact in enumerate(facts) for a in strings(fact, "answers")}
    for i, fact in enumerate(facts):
        for j, value in enumerate(strings(fact, "wrong_values")):
            k = aliases.get(value.strip().lower())
            if k is not None and k != i:
                other = facts[k].get("id")
                problems.append(
                    f"{path}:{n}: required_facts[{i}].wrong_values[{j}]: '{value}' is an answer of fact "
                    f"'{other}' (required_facts[{k}]): a complete answer states it, and would count as wrong"
                )


def _check_probe(path: str, n: int, probe: dict, doc_ids: set[str] | None, problems: list[str]) -> None:
    unknown_fields(path, n, probe, _PROBE_FIELDS, problems)
    kind = probe.get("answer_type", "single")
    if kind not in ANSWER_TYPES:
        # Which answer fields it needs depends on the type: they are checked once it is fixed.
        hint = did_you_mean(str(kind).lower(), ANSWER_TYPES)
        problems.append(
            f"{path}:{n}: answer_type: must be one of {', '.join(ANSWER_TYPES)}, got {json.dumps(kind)}{hint}"
        )
        _check_required(path, n, probe, ("id", "question"), problems)
        _check_doc_ids(path, n, "gold_doc_ids", probe.get("gold_doc_ids", []), doc_ids, problems, False)
        return
    long = kind == "long"
    # A long probe's gold is its required_facts: its answers may be left out, and must then be empty.
    _check_required(path, n, probe, ("id", "question") if long else ("id", "question", "answers"), problems)
    if long:
        answers_ok = "answers" in probe and _check_str_list(path, n, "answers", probe["answers"], problems, False)
        if answers_ok and probe["answers"]:
            problems.append(
                f"{path}:{n}: answers: a long probe's answers are its required_facts' answers; leave answers out or []"
            )
    else:
        answers_ok = "answers" in probe and _check_str_list(path, n, "answers", probe["answers"], problems, True)
        if answers_ok:
            check_scorable(path, n, "answers", probe["answers"], problems)
    if kind == "yes_no" and answers_ok and probe["answers"] not in (["yes"], ["no"]):
        got = json.dumps(probe["answers"])
        problems.append(f'{path}:{n}: answers: a yes_no probe needs ["yes"] or ["no"], got {got}')
    _check_doc_ids(path, n, "gold_doc_ids", probe.get("gold_doc_ids", []), doc_ids, problems, False)
    if long:
        check_facts(path, n, probe, doc_ids, problems)
    elif "required_facts" in probe:
        problems.append(
            f"{path}:{n}: required_facts: only a long probe has required facts (answer_type is {json.dumps(kind)})"
        )
    if "metadata" in probe and not isinstance(probe["metadata"], dict):
        problems.append(f"{path}:{n}: metadata: expected an object, got {_type_name(probe['metadata'])}")


def _read_file(path: str, problems: list[str]) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        problems.append(f"{path}:0: (file): not found")
    except OSError as e:
        problems.append(f"{path}:0: (file): cannot read ({e.strerror or e})")
    return None


def by_line(path: str, problems: list[str]) -> list[str]:
    """The problem lines about ``path`` in file order (duplicate-id checks run after the per-line
    ones; the sort is stable)."""
    return sorted(problems, key=lambda p: int(p[len(path) + 1 :].split(":", 1)[0]))


def _check_build(path: str, out: Checked) -> None:
    """build.json, when present: a JSON object; its "chunking", if any, an object."""
    if not os.path.isfile(path) or (data := _read_file(path, out.problems)) is None:
        return
    try:
        build = json.loads(data)
    except UnicodeDecodeError as e:  # a ValueError too: said first
        out.problems.append(f"{path}:0: (encoding): not UTF-8 ({e.reason} at byte {e.start})")
        return
    except JSON_ERRORS as e:
        out.problems.append(f"{path}:{getattr(e, 'lineno', 0)}: (json): {invalid_json(e)}")
        return
    if not isinstance(build, dict):
        out.problems.append(f"{path}:0: (json): expected a JSON object, got {_type_name(build)}")
    elif not isinstance(build.get("chunking", {}), dict):
        out.problems.append(f"{path}:0: chunking: expected an object, got {_type_name(build['chunking'])}")
    else:
        out.chunking = build.get("chunking")


def check_folder(path, *, require_readme: bool = False) -> Checked:
    """Read and check a probe folder in one pass; used by validate() and load_probe_set()."""
    base = os.fspath(path)
    out = Checked()
    if not os.path.isdir(base):
        out.problems.append(f"{base}:0: (folder): {'not a folder' if os.path.exists(base) else 'not found'}")
        return out
    corpus_path, probes_path = os.path.join(base, CORPUS_FILE), os.path.join(base, PROBES_FILE)
    doc_ids = None  # unknown when the corpus is missing: then gold ids are not checked
    data = _read_file(corpus_path, out.problems)
    if data is not None:
        out.corpus_bytes = data
        found: list[str] = []
        rows = read_jsonl(corpus_path, data, found)
        if not rows and not found:  # empty, or blank lines (a byte-order mark alone) only
            found.append(f"{corpus_path}:0: (file): no documents")
        check_corpus(corpus_path, rows, found)
        out.problems += by_line(corpus_path, found)
        out.corpus = [obj for _, obj in rows]
        doc_ids = {d["id"] for d in out.corpus if isinstance(d.get("id"), str)}
    data = _read_file(probes_path, out.problems)
    if data is not None:
        out.probes_bytes = data
        found = []
        rows = read_jsonl(probes_path, data, found)
        if not rows and not found:  # empty, or blank lines (a byte-order mark alone) only
            found.append(f"{probes_path}:0: (file): no probes")
        for n, probe in rows:
            _check_probe(probes_path, n, probe, doc_ids, found)
        _check_ids(probes_path, rows, found)
        check_one_form(probes_path, rows, found)
        out.problems += by_line(probes_path, found)
        out.probes = [obj for _, obj in rows]
    _check_build(os.path.join(base, BUILD_FILE), out)
    readme_path = os.path.join(base, README_FILE)
    if os.path.isfile(readme_path):
        with open(readme_path, encoding="utf-8", errors="replace") as f:
            out.readme = f.read()
        if require_readme and find_licence(out.readme) is None:
            out.problems.append(f"{readme_path}:0: (file): no 'Licence: ...' line")
    elif require_readme:
        why = "a shipped probe set needs source, licence, how made"
        found_as = "is a folder, not a file" if os.path.isdir(readme_path) else "not found"
        out.problems.append(f"{readme_path}:0: (file): {found_as} ({why})")
    out.problems = [printable(line) for line in out.problems]
    return out


def validate(path, *, require_readme: bool = False) -> list[str]:
    """Return one ``FILE:LINE: FIELD: message`` line per problem of the probe folder at path.

    An empty list means the folder is valid.  README.md is optional unless require_readme.
    """
    return check_folder(path, require_readme=require_readme).problems
