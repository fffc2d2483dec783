"""A JSON text a probe file holds that cannot be read, said as one of the file's problems: a syntax
error by its column, and what json refuses beyond syntax (an integer of more than 4,300 digits,
nesting deeper than the interpreter's recursion limit) in words, never as a traceback."""

from __future__ import annotations

import json

#: What ``json.loads`` raises on a text it cannot read (JSONDecodeError is a ValueError).
JSON_ERRORS = (ValueError, RecursionError)


def invalid_json(e: Exception) -> str:
    """The problem ``e`` (one of :data:`JSON_ERRORS`) in words: ``invalid JSON: ...``."""
    if isinstance(e, json.JSONDecodeError):
        return f"invalid JSON: {e.msg} (column {e.colno})"
    if isinstance(e, RecursionError):
        return "invalid JSON: nested too deeply to read"
    return f"invalid JSON: {str(e).partition(':')[0]}"  # not the interpreter's advice after the colon
