"""Text as a cell of a Markdown table (summary.md, adoption.md): a strategy or probe label may hold
a ``|`` (a plugin's name, a parameter's value), which would otherwise end the cell and shift every
value after it one column along."""

from __future__ import annotations

from typing import Any


def cell(value: Any) -> Any:
    """``value`` with each ``|`` escaped when it is text; any other value as it is."""
    return value.replace("|", "\\|") if isinstance(value, str) else value
