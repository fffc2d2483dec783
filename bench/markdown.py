"""Text in summary.md and adoption.md: as a cell of a Markdown table, where a strategy or probe label
may hold a ``|`` (a plugin's name, a parameter's value) that would otherwise end the cell and shift
every value after it one column along; and as prose, where HTML markup would be rendered."""

from __future__ import annotations

import html
from typing import Any


def cell(value: Any) -> Any:
    """``value`` with each ``|`` escaped when it is text; any other value as it is."""
    return value.replace("|", "\\|") if isinstance(value, str) else value


def text(value: str) -> str:
    """Text of the user's (a run folder's name) in Markdown prose: its HTML markup shown as written,
    not rendered (a CI job summary renders HTML in Markdown)."""
    return html.escape(value, quote=False)
