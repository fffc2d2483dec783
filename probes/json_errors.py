"""A JSON text a probe file holds that cannot be read, said as one of the file's problems: a syntax
error by its column, and what json refuses beyond syntax (an integer of more than 4,300 digits,
nesting deeper than the interpreter's recursion limit) in words, never as a traceback; and, for the
files a person writes by hand (:func:`strict_loads`), a key given twice or a NaN."""

from __future__ import annotations

import json
from typing import Any

#: What ``json.loads`` raises on a text it cannot read (JSONDecodeError is a ValueError).
JSON_ERRORS = (ValueError, RecursionError)


def invalid_json(e: Exception) -> str:
    """The problem ``e`` (one of :data:`JSON_ERRORS`) in words: ``invalid JSON: ...``."""
    if isinstance(e, json.JSONDecodeError):
        return f"invalid JSON: {e.msg} (column {e.colno})"
    if isinstance(e, RecursionError):
        return "invalid JSON: nested too deeply to read"
    return f"invalid JSON: {str(e).partition(':')[0]}"  # not the interpreter's advice after the colon


def _once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) < len(pairs):
        twice = next(k for i, (k, _) in enumerate(pairs) if k in dict(pairs[:i]))
        raise ValueError(f"key {twice!r} given twice in one object")
    return obj


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is no JSON number (null says a value is missing)")


def strict_loads(text: str) -> Any:
    """``json.loads`` that refuses what it would take silently from a hand-edited file: a key given
    twice in one object (the last would win unseen: a probe's id, a tolerance loosening a gate) and
    NaN or Infinity (no JSON, and counted as no value at all downstream). ValueError says which."""
    return json.loads(text, object_pairs_hook=_once_each, parse_constant=_no_constant)
